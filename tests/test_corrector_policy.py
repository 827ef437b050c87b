"""The fit's policies as pure functions: the plan table, the blend tests, the collapse check, the report."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lsnpc.corrector import blend
from lsnpc.corrector.plan import FitPlan, holdout_size, make_plan
from lsnpc.corrector.report import Decision, FitReport

PLAN = dict(n_rows=500, n_val=0, n_val_positives=0, labels=False, selection="auto", guard=True,
            threshold_given=False, min_val_rows=20, holdout_fraction=0.1)


@pytest.mark.parametrize(("given", "expected"), [
    (dict(n_val=25, n_val_positives=30), ("validation", "val_f1", "validation test", "tuned on validation", 0, False)),
    (dict(n_val=25, n_val_positives=30, labels=True),
     ("validation", "val_f1", "validation test", "tuned on validation", 0, False)),
    (dict(labels=True), ("noisy labels", "noisy_f1", "noisy-label test", "tuned on held-out noisy labels", 50, False)),
    (dict(labels=True, n_rows=150), ("noisy labels", "noisy_f1", "noisy-label test", "label count", 15, False)),
    (dict(), ("none", "noisy_elbo", "prior", "label count", 50, False)),
    (dict(n_val=15, n_val_positives=9), ("none", "noisy_elbo", "prior", "label count", 50, True)),
    (dict(n_val=15, n_val_positives=9, labels=True),
     ("noisy labels", "noisy_f1", "noisy-label test", "tuned on held-out noisy labels", 50, True)),
    (dict(n_val=15, n_val_positives=9, selection="val_f1"), ("none", "val_f1", "prior", "label count", 0, False)),
    (dict(guard=False, threshold_given=True), ("none", "noisy_elbo", "off", "given", 50, False)),
    (dict(n_rows=3), ("none", "last", "prior", "label count", 0, False)),
    (dict(unlabelled=True), ("none", "noisy_elbo", "prior", "label count on unlabelled rows", 50, False)),
    (dict(labels=True, unlabelled=True),
     ("noisy labels", "noisy_f1", "noisy-label test", "label count on unlabelled rows", 50, False)),
    (dict(n_val=25, n_val_positives=30, unlabelled=True),
     ("validation", "val_f1", "validation test", "tuned on validation", 0, False)),
    (dict(unlabelled=True, threshold_given=True), ("none", "noisy_elbo", "prior", "given", 50, False)),
])
def test_the_plan_table(given: dict, expected: tuple) -> None:
    plan = make_plan(**{**PLAN, **given})
    assert (plan.evidence, plan.selection, plan.blend, plan.threshold, plan.n_holdout, plan.val_trained_on) == expected
    assert plan.val_set_aside is None


def test_a_triple_without_a_positive_is_set_aside() -> None:
    plan = make_plan(**{**PLAN, "n_val": 40, "n_val_positives": 0})
    assert plan.evidence == "none" and "no positive label" in plan.val_set_aside and not plan.val_trained_on


def test_holdout_size() -> None:
    assert holdout_size(500, 0.1) == 50 and holdout_size(15, 0.1) == 2 and holdout_size(3, 0.1) == 0


def _validation_rows(seed: int = 0, n: int = 60, labels: int = 5):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, labels)) < 0.3).astype(np.int64)
    good = np.clip(y * 0.7 + 0.15 + rng.normal(0, 0.1, y.shape), 0, 1)
    poor = np.clip(rng.random(y.shape), 0, 1)
    return y, good, poor


def _folds(n: int, k: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.setdiff1d(np.arange(n), part), part) for part in np.array_split(np.arange(n), k)]


def test_a_better_output_is_kept_and_a_worse_one_hands_back_the_base_model() -> None:
    y, good, poor = _validation_rows()
    w, evidence = blend.test_on_validation(y, good, poor, candidates=(0.0, 0.5), confidence=0.4, folds=_folds(60),
                                           rng=np.random.default_rng(0))
    assert w == 0.0 and evidence["loss_support"][0.0] == pytest.approx(0.0) and evidence["n_rows"] == 60
    assert evidence["folds"] == 5 and sum(evidence["scores"][0.0]) > sum(evidence["scores"][1.0])
    w, evidence = blend.test_on_validation(y, poor, good, candidates=(0.0, 0.5), confidence=0.4, folds=_folds(60),
                                           rng=np.random.default_rng(0))
    assert w == 1.0 and all(s >= 0.4 for s in evidence["loss_support"].values())
    assert list(evidence["loss_support"]) == [0.0, 0.5] and set(evidence["scores"]) == {0.0, 0.5, 1.0}


def test_the_blend_test_records_how_finely_its_rows_tell_a_blend_from_the_base_model() -> None:
    # the bootstrap standard error of (blend - base) F1: 0 where a blend decides as the base model does, and about
    # half as large on four times the rows
    y, good, poor = _validation_rows()
    _, same = blend.test_on_validation(y, good, good, candidates=(0.0, 0.5), confidence=0.4, folds=_folds(60),
                                       rng=np.random.default_rng(0))
    assert same["difference_se"] == {0.0: [0.0, 0.0], 0.5: [0.0, 0.0]}
    spreads = []
    for n in (60, 240):
        y, good, poor = _validation_rows(n=n)
        _, evidence = blend.test_on_validation(y, good, poor, candidates=(0.0, 0.5), confidence=0.4,
                                               folds=_folds(n), rng=np.random.default_rng(0))
        micro, macro = evidence["difference_se"][0.0]
        gap = np.subtract(evidence["scores"][0.0], evidence["scores"][1.0])
        assert 0.0 < micro < gap[0] and 0.0 < macro < gap[1]  # a clear win stands more than one SE clear
        spreads.append(micro)
    assert 0.35 < spreads[1] / spreads[0] < 0.7


def test_each_candidate_is_judged_at_its_own_tuned_threshold_not_at_one_half() -> None:
    # an output that ranks every row right but sits below 0.5, against a base model that is right at 0.5 on
    # fewer rows: at 0.5 the output predicts nothing and would lose; at its own threshold it wins
    rng = np.random.default_rng(1)
    y = (rng.random((100, 4)) < 0.3).astype(np.int64)
    low = np.where(y == 1, 0.3, 0.1) + rng.uniform(0, 0.05, y.shape)
    base = np.clip(np.where(rng.random(y.shape) < 0.75, y, 1 - y) * 0.6 + 0.2, 0, 1)
    w, evidence = blend.test_on_validation(y, low, base, candidates=(0.0, 0.5), confidence=0.4, folds=_folds(100),
                                           rng=np.random.default_rng(0))
    assert (low >= 0.5).sum() == 0 and w == 0.0
    assert min(evidence["scores"][0.0]) > 0.95 > max(evidence["scores"][1.0])  # cross-fitted, at tuned thresholds


def test_the_noisy_label_test_keeps_the_output_or_the_prior_never_more() -> None:
    y, good, poor = _validation_rows(1)
    assert blend.test_on_noisy_labels(y, good, poor, prior=0.25, confidence=0.4, rng=np.random.default_rng(0))[0] == 0
    w, evidence = blend.test_on_noisy_labels(y, poor, good, prior=0.25, confidence=0.4, rng=np.random.default_rng(0))
    assert w == 0.25 and evidence["loss_support"][0.0] >= 0.4 and evidence["prior"] == 0.25


def test_the_prior_is_zero_for_a_sparse_and_vague_base_model() -> None:
    rng = np.random.default_rng(0)
    vague = np.clip(0.05 + rng.normal(0, 0.01, (200, 10)), 0, 1)
    sharp = (rng.random((200, 10)) < 0.05).astype(float) * 0.9 + 0.05
    dense = np.clip(0.2 + 0.5 * (rng.random((200, 10)) < 0.4) + rng.normal(0, 0.01, (200, 10)), 0, 1)
    assert blend.prior_weight(vague, prior=1 / 3) == (0.0, pytest.approx(
        {"prior": 1 / 3, "base_density": blend.base_density(vague), "base_sharpness": blend.base_sharpness(vague),
         "sparse_and_vague": True, "flat": False}))
    assert blend.prior_weight(sharp, prior=1 / 3)[0] == pytest.approx(1 / 3)
    assert blend.prior_weight(dense, prior=1 / 3)[0] == pytest.approx(1 / 3)


def test_a_flat_dense_base_model_comes_back_whole() -> None:
    rng = np.random.default_rng(0)
    flat = np.clip(0.4 + rng.normal(0, 0.005, (200, 10)), 0, 1)
    w, evidence = blend.prior_weight(flat, prior=1 / 3)
    assert w == 1.0 and evidence["flat"] is True and evidence["sparse_and_vague"] is False


def test_sharpness_and_density() -> None:
    assert blend.base_sharpness(np.array([[1.0, 0.0], [0.0, 1.0]])) == 1.0
    assert blend.base_sharpness(np.full((4, 3), 0.3)) == 0.0
    assert blend.base_density(np.full((4, 3), 0.3)) == pytest.approx(0.3)


def _report() -> FitReport:
    plan = make_plan(**{**PLAN, "labels": True})
    return FitReport(plan, (
        Decision("epoch", 7, "noisy_f1", {"epochs": 40, "n_holdout": 50}),
        Decision("student", 0.5, "mean", {"epochs": 30}),
        Decision("blend", 0.0, "noisy-label test", {"loss_support": {0.0: 0.1}, "n_rows": 50, "prior": 1 / 3,
                                                    "confidence": 0.4}),
        Decision("threshold", 0.35, "tuned on held-out noisy labels", {"threshold": 0.35, "n_rows": 50,
                                                                       "scores": [1.0, float("nan")]}),
    ))


def test_the_report_round_trips_through_json_and_reads_by_step() -> None:
    report = _report()
    again = FitReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.plan == report.plan and again["threshold"].choice == 0.35
    assert again["threshold"].evidence["scores"] == [1.0, None]  # NaN written as null
    assert again["blend"].evidence["loss_support"] == {"0.0": 0.1}
    with pytest.raises(KeyError, match="no decision for step 'guard'"):
        report["guard"]
    summary = report.summary()
    assert "0.35" in summary and "held-out" in summary and "rule" not in summary.lower()


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d.pop("plan"), "exactly 'plan' and 'decisions'"),
    (lambda d: d["plan"].pop("evidence"), "report_.plan must hold exactly"),
    (lambda d: d["plan"].update(n_holdout=-1), "n_holdout must be an integer >= 0"),
    (lambda d: d["decisions"].pop(), "one object per step"),
    (lambda d: d["decisions"][2].update(choice="half"), "choice must be a number or null"),
    (lambda d: d["decisions"][2].update(evidence=[]), "evidence an object"),
])
def test_a_damaged_report_is_refused(edit, match) -> None:
    data = json.loads(json.dumps(_report().to_dict()))
    edit(data)
    with pytest.raises(ValueError, match=match):
        FitReport.from_dict(data)


def test_the_plan_dataclass_is_frozen() -> None:
    with pytest.raises(AttributeError):
        make_plan(**PLAN).evidence = "validation"
    assert FitPlan(**make_plan(**PLAN).to_dict()) == make_plan(**PLAN)


def test_the_policy_modules_import_without_torch() -> None:
    code = ("import sys; import lsnpc.corrector.plan, lsnpc.corrector.blend, lsnpc.corrector.report, "
            "lsnpc.corrector.threshold; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
