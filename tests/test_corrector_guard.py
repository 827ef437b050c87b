"""The guard: the base model's weight in LSNPC's output, from validation evidence or the noisy data."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from sklearn.metrics import f1_score

from lsnpc.corrector.guard import (
    BASE_WEIGHTS,
    BLENDED_BASE_WEIGHTS,
    DECISION_THRESHOLDS,
    NO_LABELS_BASE_WEIGHT,
    NO_LABELS_MIN_DENSITY,
    NO_LABELS_MIN_SHARPNESS,
    GuardDecision,
    _counts,
    base_density,
    base_sharpness,
    best_threshold,
    collapse_reasons,
    collapse_statistics,
    choose_threshold,
    decide_with_noisy_labels,
    decide_with_validation,
    decide_without_validation,
    f1_from_counts,
    label_count_limit,
    rare_label_thresholds,
    row_count_limit,
    thresholds_within_label_count,
)


def test_f1_from_counts_equals_scikit_learn() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(80, 6))
    y[:, 5] = 0  # a label with no positive: F1 0 by zero_division=0, as in scikit-learn
    pred = rng.integers(0, 2, size=(80, 6))
    pred[:, 5] = 0
    micro, macro = f1_from_counts(*_counts(y, pred, np.ones((1, 80))))
    assert micro[0] == pytest.approx(f1_score(y, pred, average="micro", zero_division=0))
    assert macro[0] == pytest.approx(f1_score(y, pred, average="macro", zero_division=0))


def _labels(n: int = 300, n_labels: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, size=(n, n_labels))


def _flip(probs: np.ndarray, cells: np.ndarray) -> np.ndarray:
    out = probs.copy()
    out[tuple(cells.T)] = 1 - out[tuple(cells.T)]
    return out


def _decide(y: np.ndarray, output: np.ndarray, base: np.ndarray, confidence: float = 0.75) -> GuardDecision:
    return decide_with_validation(y, output, base, confidence=confidence, rng=np.random.default_rng(0))


def test_a_better_output_is_kept_whole() -> None:
    y = _labels()
    rng = np.random.default_rng(1)
    base = np.clip(0.5 * y + 0.25 + rng.normal(0, 0.25, y.shape), 0, 1)  # often wrong
    output = np.clip(0.8 * y + 0.1, 0, 1)  # always right
    decision = _decide(y, output, base)
    assert decision.base_weight == 0.0
    assert decision.loss_support == {0.0: 0.0}
    assert decision.val_chosen_micro_f1 == decision.val_output_micro_f1 > decision.val_base_micro_f1


def test_a_clearly_worse_output_falls_back_to_the_base_model() -> None:
    y = _labels()
    base = np.clip(0.8 * y + 0.1, 0, 1)
    decision = _decide(y, 1 - base, base)
    assert decision.base_weight == 1.0
    assert decision.loss_support[0.0] == decision.loss_support[0.5] == 1.0
    assert decision.val_chosen_micro_f1 == decision.val_base_micro_f1


def test_a_given_encoders_candidates_start_at_the_half_blend() -> None:
    """Rule 42: with BLENDED_BASE_WEIGHTS the unblended output is not a candidate; an output that the
    default candidates keep whole is taken half blended, and the evidence about the output itself (its scores,
    the gain interval) is the same either way."""
    y = _labels()
    rng = np.random.default_rng(1)
    base = np.clip(0.5 * y + 0.25 + rng.normal(0, 0.25, y.shape), 0, 1)
    output = np.clip(0.8 * y + 0.1, 0, 1)
    whole = _decide(y, output, base)
    half = decide_with_validation(y, output, base, confidence=0.75, rng=np.random.default_rng(0),
                                  candidates=BLENDED_BASE_WEIGHTS)
    assert BASE_WEIGHTS[0] == 0.0 and BLENDED_BASE_WEIGHTS == (0.5, 1.0)
    assert whole.base_weight == 0.0 and half.base_weight == 0.5
    assert set(half.loss_support) == {0.5} and half.loss_support[0.5] < 0.75
    assert half.gain_interval_90 == whole.gain_interval_90
    assert half.val_output_micro_f1 == whole.val_output_micro_f1 == whole.val_chosen_micro_f1
    blended = (0.5 * output + 0.5 * base) >= 0.5
    assert half.val_chosen_micro_f1 == pytest.approx(f1_score(y, blended, average="micro", zero_division=0))
    # a half blend that loses hands the base model back
    worse = decide_with_validation(y, 1 - base, base, confidence=0.75, rng=np.random.default_rng(0),
                                   candidates=BLENDED_BASE_WEIGHTS)
    assert worse.base_weight == 1.0 and set(worse.loss_support) == {0.5}
    for bad in ((), (0.0, 0.5), (0.5, 1.5, 1.0)):
        with pytest.raises(ValueError, match="candidates must be base weights in \\[0, 1\\] ending with 1.0"):
            decide_with_validation(y, output, base, confidence=0.75, rng=np.random.default_rng(0), candidates=bad)


def test_a_loss_within_validation_noise_keeps_the_output() -> None:
    """An output worse on the full validation set by a couple of samples, but not in most bootstrap
    resamples, is kept at confidence 0.75 and passed over at a lax confidence."""
    y = _labels(200, 4, seed=3)
    base = y.astype(float) * 0.9 + 0.05
    rng = np.random.default_rng(4)
    flips = rng.random(y.shape) < 0.2
    base[flips] = 1 - base[flips]
    # fix 4 of the base model's mistakes and add 5 new ones: −1 net on 800 decisions
    output = _flip(_flip(base, np.argwhere(flips)[:4]), np.argwhere(~flips)[:5])
    kept = _decide(y, output, base, confidence=0.75)
    lax = _decide(y, output, base, confidence=0.3)
    assert kept.val_output_micro_f1 < kept.val_base_micro_f1
    assert 0.3 < kept.loss_support[0.0] < 0.75
    assert kept.base_weight == 0.0
    assert lax.base_weight > 0.0


def test_the_half_blend_is_the_middle_step() -> None:
    """An output that fixes the base model's one weak label but breaks two labels it was sure of: the
    output loses, its half blend with the base model keeps the sure labels and the fix — it is chosen."""
    y = _labels(400, 4, seed=5)
    sure, weak_right, weak_wrong = (np.where(y == 1, a, 1 - a) for a in (0.95, 0.9, 0.45))
    base = sure.copy()
    base[:, 1] = weak_wrong[:, 1]
    output = sure.copy()
    output[:, 1] = weak_right[:, 1]
    output[:, [0, 2]] = np.where(y[:, [0, 2]] == 1, 0.4, 0.6)
    decision = _decide(y, output, base)
    assert decision.loss_support[0.0] == 1.0 and decision.loss_support[0.5] == 0.0
    assert decision.base_weight == 0.5
    assert decision.val_chosen_micro_f1 == 1.0


def test_the_summary_says_what_the_output_is_and_why() -> None:
    y = _labels()
    base = np.clip(0.8 * y + 0.1, 0, 1)
    worse = _decide(y, 1 - base, base).summary()
    assert worse.startswith("the base model's probabilities") and "w = 0: 100%, w = 0.5: 100%" in worse
    assert "passed over at 75%" in worse
    assert f"decide differently on {y.size} validation entries" in worse  # 1 − base flips every decision
    kept = _decide(y, np.clip(0.8 * y + 0.1, 0, 1), np.clip(0.5 * y + 0.25, 0, 1)).summary()
    assert kept.startswith("LSNPC's output;") and "w = 0: 0%" in kept
    prior = decide_without_validation(base, base, base_weight=0.25).summary()
    assert prior == "LSNPC's output with base weight 0.25; prior base weight (no label tests the output)"
    assert GuardDecision.skipped("guard=False").summary() == "guard off (guard=False): LSNPC's output as it is"


def test_thin_evidence_is_reported() -> None:
    y = _labels(12, 3, seed=6)
    base = np.where(y == 1, 0.6, 0.4).astype(float)
    output = _flip(base, np.array([[0, 0], [1, 1], [2, 2]]))
    assert _decide(y, output, base).evidence_thin
    y_big = _labels(3000, 3, seed=6)
    base_big = np.where(y_big == 1, 0.6, 0.4).astype(float)
    assert not _decide(y_big, base_big, base_big).evidence_thin


def test_an_output_validation_cannot_test_is_left_to_the_no_label_rule() -> None:
    """Output and base model differ on two validation entries: the bootstrap cannot weigh anything, so the
    ``untestable`` callback (the no-label rule) decides — even though the output wins on those entries."""
    y = _labels(15, 20, seed=9)
    base = np.where(y == 1, 0.6, 0.4).astype(float)
    base[:5] = 0.1  # wrong on the first five rows' positives
    output = base.copy()
    wins = np.argwhere(y[:5] == 1)[:2]
    output[tuple(wins.T)] = 0.9  # right on two of them: the only entries where the two decide differently
    prior = decide_without_validation(output, base, base_weight=0.25)
    decision = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0),
                                      untestable=lambda: prior)
    assert decision.untestable and decision.n_discordant == 2 and decision.mode == "validation"
    assert decision.base_weight == 0.25 and decision.reason == prior.reason
    assert decision.val_output_micro_f1 > decision.val_base_micro_f1
    chosen = (0.75 * output + 0.25 * base) >= 0.5
    assert decision.val_chosen_micro_f1 == pytest.approx(f1_score(y, chosen, average="micro", zero_division=0))
    assert decision.val_chosen_macro_f1 == pytest.approx(f1_score(y, chosen, average="macro", zero_division=0))
    assert "cannot test it" in decision.summary() and "on 2 entries" in decision.summary()
    # without the callback the bootstrap's decision stands, and it is recorded as testable evidence
    plain = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0))
    assert plain.base_weight == 0.0 and plain.untestable is False and plain.n_discordant == 2
    assert GuardDecision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision


def test_three_discordant_entries_are_tested_not_left_to_the_prior() -> None:
    y = _labels(20, 20, seed=9)
    base = np.where(y == 1, 0.6, 0.4).astype(float)
    output = _flip(base, np.array([[0, 0], [1, 1], [2, 2]]))  # three entries made wrong

    def never() -> GuardDecision:
        raise AssertionError("the no-label rule must not be asked with three discordant entries")

    decision = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0), untestable=never)
    assert decision.n_discordant == 3 and not decision.untestable
    assert decision.base_weight == 1.0  # the output only loses there


def test_validation_labels_without_a_positive_cannot_test_the_output() -> None:
    """No positive label: F1 is 0 for base and output alike, so an output that adds false positives on
    every row never "loses" — the no-label rule decides, however many entries the two differ on."""
    y = np.zeros((20, 19), dtype=int)
    base = np.full(y.shape, 0.2)
    base[:3, 0] = 0.7  # three false positives of the base model
    output = np.full(y.shape, 0.2)
    output[:, :6] = 0.8  # 120 of the output's (three shared with the base model)
    plain = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0))
    assert plain.base_weight == 0.0 and plain.val_output_micro_f1 == plain.val_base_micro_f1 == 0.0
    prior = decide_without_validation(output, base, base_weight=1 / 3)
    decision = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0),
                                      untestable=lambda: prior)
    assert decision.n_discordant == 117 and decision.n_val_positives == 0 and decision.untestable
    assert decision.blend == prior.blend and decision.reason == prior.reason
    assert "no positive label" in decision.summary() and "F1 is 0 for every candidate" in decision.summary()
    assert GuardDecision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision
    # one positive entry makes F1 measurable: the bootstrap decides again
    y[0, 0] = 1
    tested = decide_with_validation(y, output, base, confidence=0.4, rng=np.random.default_rng(0),
                                    untestable=lambda: prior)
    assert tested.n_val_positives == 1 and not tested.untestable


def test_fewer_than_twenty_validation_rows_cannot_test_the_output() -> None:
    """Below 20 rows the bootstrap kept outputs that lost at 0% noise (module docstring): the no-label rule
    decides there, however many entries the output and the base model differ on."""
    y = _labels(40, 5, seed=3)
    base = np.where(y == 1, 0.6, 0.4).astype(float)
    output = _flip(base, np.argwhere(y == 0)[:12])  # twelve false positives: the output only loses
    prior = decide_without_validation(output, base, base_weight=1 / 3)
    small = decide_with_validation(y[:19], output[:19], base[:19], confidence=0.4, rng=np.random.default_rng(0),
                                   untestable=lambda: prior)
    assert small.untestable and small.n_val == 19 and small.n_discordant >= 3 and small.blend == prior.blend
    assert "fewer than 20 rows" in small.summary()
    enough = decide_with_validation(y[:20], output[:20], base[:20], confidence=0.4, rng=np.random.default_rng(0),
                                    untestable=lambda: prior)
    assert not enough.untestable and enough.base_weight == 1.0


def test_without_labels_a_plausible_output_gets_the_prior_weight() -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(size=(500, 6))
    output = np.clip(base + rng.normal(0, 0.1, base.shape), 0, 1)
    decision = decide_without_validation(output, base, base_weight=0.25)
    assert decision.base_weight == 0.25 and not decision.refused
    assert decision.kept_base_positives > 0.8
    assert 0.8 < decision.cardinality_ratio < 1.25


def test_without_any_label_an_uninformative_base_model_on_sparse_labels_is_not_blended_in() -> None:
    """``uninformed`` (no label at all): where the labels are sparse (mean base probability below 0.1) and
    the base model's probabilities resolve little of their variance (sharpness below 0.4) the prior is 0;
    a dense or a sharp base model keeps it, a collapse is refused either way, and with labels (not
    ``uninformed``) nothing changes (docs/quality.md, "No blend with an uninformative base model on sparse labels")."""
    rng = np.random.default_rng(5)
    y = (rng.uniform(size=(400, 10)) < 0.08).astype(float)
    vague = np.clip(0.25 * y + 0.04 + rng.normal(0, 0.02, y.shape), 0, 1)  # mean ≈ 0.06, little spread
    sharp = np.clip(0.9 * y + 0.01, 0, 1)  # mean ≈ 0.08, nearly 0 or 1
    dense = np.clip(0.8 * y + 0.1, 0, 1)  # mean ≈ 0.16
    assert base_density(vague) < NO_LABELS_MIN_DENSITY == 0.1
    assert base_sharpness(vague) < NO_LABELS_MIN_SHARPNESS == 0.4
    assert base_density(sharp) < 0.1 <= 0.4 <= base_sharpness(sharp) and base_density(dense) >= 0.1
    assert base_sharpness(np.full((5, 3), 0.3)) == 0.0 and base_sharpness(y) == pytest.approx(1.0)

    def decide(base: np.ndarray, output: np.ndarray | None = None, **kw) -> GuardDecision:
        out = np.clip(base + 0.3 * y, 0, 1) if output is None else output
        return decide_without_validation(out, base, base_weight=1 / 3, **kw)

    weak = decide(vague, uninformed=True)
    assert weak.base_weight == 0.0 and not weak.refused and "sparse labels" in weak.summary()
    assert weak.base_density == pytest.approx(base_density(vague))
    assert weak.base_sharpness == pytest.approx(base_sharpness(vague))
    for kept in (decide(sharp, uninformed=True), decide(dense, uninformed=True), decide(vague)):
        assert kept.base_weight == pytest.approx(1 / 3)
        assert kept.reason == "prior base weight (no label tests the output)"
    collapsed = decide(vague, np.zeros_like(vague), uninformed=True)
    assert collapsed.refused and collapsed.base_weight == 1.0
    assert GuardDecision.from_dict(json.loads(json.dumps(weak.to_dict()))) == weak


def _noisy_test_problem(seed: int = 11) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Noisy labels (flipped at 20%) of 200 rows × 6 labels, and a base model that is right 70% of the time."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=(200, 6)) < 0.3).astype(int)
    noisy = np.where(rng.uniform(size=y.shape) < 0.2, 1 - y, y)
    base = np.where(rng.uniform(size=y.shape) < 0.7, y, 1 - y) * 0.6 + 0.2
    return y, noisy, base


def test_the_noisy_labels_keep_an_output_that_beats_the_prior_blend_whole() -> None:
    """Given the held-out rows' noisy labels, an output closer to the truth than the base model is kept
    whole (w = 0); one farther from it keeps the prior; the test never goes past the prior."""
    y, noisy, base = _noisy_test_problem()
    better = np.clip(0.8 * y + 0.1, 0, 1)
    no_label = decide_without_validation(better, base, base_weight=0.25)
    kept = decide_with_noisy_labels(noisy, better, base, no_label=no_label, confidence=0.4, rng=np.random.default_rng(0))
    assert kept.base_weight == 0.0 and kept.mode == "noisy labels" and kept.n_holdout == 200
    assert kept.loss_support[0.0] < 0.4 and not kept.refused
    assert "200 held-out training rows' noisy labels" in kept.summary() and kept.summary().startswith("LSNPC's output;")
    worse = np.where(y == 1, 0.45, 0.55)  # wrong everywhere, and unsure: the ¼ blend turns the base model's calls
    no_label = decide_without_validation(worse, base, base_weight=0.25)
    assert not no_label.refused
    held = decide_with_noisy_labels(noisy, worse, base, no_label=no_label, confidence=0.4, rng=np.random.default_rng(0))
    assert held.base_weight == pytest.approx(0.25) and held.loss_support[0.0] >= 0.4  # never more base than the prior
    assert GuardDecision.from_dict(json.loads(json.dumps(held.to_dict()))) == held


def test_the_noisy_labels_leave_a_refused_output_refused() -> None:
    y, noisy, base = _noisy_test_problem()
    collapsed = np.zeros_like(base)
    no_label = decide_without_validation(collapsed, base, base_weight=0.25)
    assert no_label.refused
    decision = decide_with_noisy_labels(noisy, collapsed, base, no_label=no_label, confidence=0.4,
                                        rng=np.random.default_rng(0))
    assert decision == no_label and decision.base_weight == 1.0


@pytest.mark.parametrize("collapse", ["nothing", "everything"])
def test_without_labels_a_collapsed_output_is_refused(collapse: str) -> None:
    rng = np.random.default_rng(8)
    base = rng.uniform(0, 0.7, size=(500, 10))  # about 3 labels per row expected
    output = np.zeros_like(base) if collapse == "nothing" else np.ones_like(base)
    decision = decide_without_validation(output, base, base_weight=0.25)
    assert decision.refused and decision.base_weight == 1.0
    assert ("keeps" in decision.reason) == (collapse == "nothing")
    assert ("labels per row" in decision.reason)


def test_the_decision_round_trips_through_json() -> None:
    y = _labels()
    base = np.full(y.shape, 0.4)
    decisions = [_decide(y, np.clip(0.8 * y + 0.1, 0, 1), base),
                 decide_without_validation(np.clip(0.8 * y + 0.1, 0, 1), base, base_weight=0.25),
                 GuardDecision.skipped("guard=False")]
    assert decisions[0].mode == "validation" and decisions[1].mode == "no validation labels"
    decisions.append(replace(decisions[1], threshold=0.45, label_thresholds={3: 0.35, 1: 0.4}))  # rule 43
    for original in decisions:
        text = json.dumps(original.to_dict())  # plain JSON types only
        assert GuardDecision.from_dict(json.loads(text)) == original
    assert json.loads(json.dumps(decisions[-1].to_dict()))["label_thresholds"] == {"3": 0.35, "1": 0.4}


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda d: d.update(blend=1.5), r"guard_\.blend must be a number in \[0, 1\]"),
        (lambda d: d.pop("blend"), "missing the field.*'blend'"),
        (lambda d: d.update(applied="yes"), r"guard_\.applied must be true or false"),
        (lambda d: d.update(surprise=1), "unknown field.*'surprise'"),
        (lambda d: d.update(loss_support={"half": 0.5}), "loss_support key"),
        (lambda d: d.update(val_base_micro_f1="0.7"), r"guard_\.val_base_micro_f1"),
        (lambda d: d.update(reason=3), r"guard_\.reason"),
        (lambda d: d.update(n_val=0), r"guard_\.n_val"),
        (lambda d: d.update(n_discordant=-1), r"guard_\.n_discordant"),
        (lambda d: d.update(n_holdout=True), r"guard_\.n_holdout"),
        (lambda d: d.update(n_val_positives=1.5), r"guard_\.n_val_positives"),
        (lambda d: d.update(untestable=1), r"guard_\.untestable"),
        (lambda d: d.update(gain_interval_90=[0.1]), r"guard_\.gain_interval_90"),
        (lambda d: d.update(cardinality_ratio=-1), r"guard_\.cardinality_ratio"),
        (lambda d: d.update(base_density=1.2), r"guard_\.base_density must be a number in \[0, 1\]"),
        (lambda d: d.update(base_sharpness="high"), r"guard_\.base_sharpness must be a number in \[0, 1\]"),
        (lambda d: d.update(evidence_thin="no"), r"guard_\.evidence_thin"),
        (lambda d: d.update(label_thresholds=[0.35]), r"guard_\.label_thresholds must map a label index"),
        (lambda d: d.update(label_thresholds={"-1": 0.35}), r"guard_\.label_thresholds keys must be label indices"),
        (lambda d: d.update(label_thresholds={"first": 0.35}), r"guard_\.label_thresholds keys must be label"),
        (lambda d: d.update(label_thresholds={"2": 0.5}), r"guard_\.label_thresholds\['2'\] must be a number in "
                                                          r"\(0, threshold = 0\.5\)"),
        (lambda d: d.update(label_thresholds={"2": "low"}), r"guard_\.label_thresholds\['2'\]"),
    ],
)
def test_a_corrupt_decision_is_rejected_naming_the_field(change, match) -> None:
    data = GuardDecision.skipped("guard=False").to_dict()
    change(data)
    with pytest.raises(ValueError, match=match):
        GuardDecision.from_dict(data)
    with pytest.raises(ValueError, match="mapping"):
        GuardDecision.from_dict(["applied", True])


def test_the_summary_rounds_the_default_prior() -> None:
    """w = ⅓ (stored as 1 − blend, 0.33333333333333326) reads as 0.333, not as its float rounding."""
    base = np.full((4, 2), 0.6)
    summary = decide_without_validation(base, base, base_weight=NO_LABELS_BASE_WEIGHT).summary()
    assert "base weight 0.333;" in summary


def test_collapse_statistics_worked_by_hand():
    """kept: the share of the base model's positive decisions the output keeps; ratio: the output's positives
    per row over the base model's expected count (mean row sum of its probabilities). The check refuses below
    40% kept or beyond 2.5x either way, and the no-label guard uses the same numbers."""
    base = np.array([[0.9, 0.6, 0.1], [0.2, 0.7, 0.3]])  # 3 positive decisions; expected 1.6 + 1.2 = 1.4 a row
    output = np.array([[0.8, 0.1, 0.6], [0.1, 0.9, 0.2]])  # keeps 2 of 3; 3 positives over 2 rows
    kept, ratio = collapse_statistics(output, base)
    assert kept == pytest.approx(2 / 3) and ratio == pytest.approx(1.5 / 1.4)
    assert collapse_reasons(kept, ratio) == []
    assert collapse_reasons(0.39, 1.0) == ["keeps 39% of the base model's positive labels on the training rows"]
    assert collapse_reasons(1.0, 2.6) == ["predicts 2.60x the base model's expected labels per row"]
    assert collapse_reasons(1.0, 0.39) and not collapse_reasons(1.0, 0.4) and not collapse_reasons(1.0, 2.5)
    assert collapse_statistics(output, np.zeros_like(base)) == (1.0, 1.0)  # no positive, no expected label
    decision = decide_without_validation(output, base, base_weight=0.25)
    assert (decision.kept_base_positives, decision.cardinality_ratio) == (kept, ratio) and not decision.refused


# --- the decision threshold (rule 26) -------------------------------------------------------------------------


def _compressed(y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An output whose positives sit at 0.36-0.44 and negatives at 0.05-0.3 (all below 0.5), and a base
    model that finds half of the positives at 0.5."""
    rng = np.random.default_rng(seed)
    output = np.where(y == 1, rng.uniform(0.36, 0.44, y.shape), rng.uniform(0.05, 0.3, y.shape))
    base = np.where((y == 1) & (rng.random(y.shape) < 0.5), 0.7, 0.2)
    return output, base


def test_the_threshold_is_the_best_on_validation_and_the_highest_of_equals() -> None:
    y = _labels(200, 4)
    output, base = _compressed(y)
    threshold, support = choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0))
    # every threshold in (0.3, 0.36] separates the classes perfectly: the highest of them, 0.35, is chosen
    assert threshold == 0.35 and threshold in DECISION_THRESHOLDS
    assert support == 0.0  # perfect at 0.35, the base model at 0.5 never wins a resample
    pred = output >= threshold
    assert f1_score(y, pred, average="micro") == 1.0


def test_a_threshold_that_would_lose_to_the_base_model_is_not_taken() -> None:
    y = _labels(30, 4, seed=2)
    rng = np.random.default_rng(3)
    # the base model is right at 0.5; the output is right at 0.5 too, except for noise that a lower threshold
    # turns into false positives in some rows: 0.5 scores best, nothing to test
    base = np.where(y == 1, 0.8, 0.1)
    assert choose_threshold(y, base, base, confidence=0.4, rng=rng) == (0.5, None)
    # an output that beats the base model on the full set at 0.3 (macro-F1 0.7 against 0.5) but loses micro-F1
    # (0.57 against 0.67) wherever the one row with positives is drawn with the false positives: it is kept
    # or not by the share of resamples in which it loses, against the guard's confidence
    y = np.zeros((30, 2), dtype=int)
    y[0] = 1
    output = np.full((30, 2), 0.05)
    output[0] = 0.3
    output[1:4, 0] = 0.3  # three false positives at 0.3
    base = np.full((30, 2), 0.1)
    base[0, 0] = 0.9  # the base model finds one of the two positives
    full = np.ones((1, 30))
    assert sum(f1_from_counts(*_counts(y, output >= 0.3, full))) > sum(f1_from_counts(*_counts(y, base >= 0.5, full)))
    kept, support = choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0))
    assert kept == 0.3 and 0.2 < support < 0.4
    refused = choose_threshold(y, output, base, confidence=0.2, rng=np.random.default_rng(0))
    assert refused == (0.5, support)  # the same resamples: the support is the same, now too high


def test_a_best_threshold_that_leads_by_a_row_or_two_gives_way_to_one_nearer_one_half() -> None:
    """Rule 34: with a spread, the candidate is the highest threshold whose score falls short of the best's by
    no more than that many bootstrap standard deviations of the shortfall; a clear lead keeps the best."""
    rng = np.random.default_rng(0)
    y = (rng.random((60, 2)) < 0.3).astype(int)
    output = np.where(y == 1, 0.8, 0.1)
    positives, negatives = np.argwhere(y[:, 0] == 1)[:, 0], np.argwhere(y[:, 0] == 0)[:, 0]
    output[positives[0], 0] = 0.47  # 0.45 finds one more positive than 0.5 ...
    output[negatives[0], 0] = 0.46  # ... and one more false positive: a lead of one row's worth
    base = np.where(y == 1, 0.7, 0.2)
    base[positives[1:6], 0] = 0.3  # the base model misses five positives: the test against it passes
    assert best_threshold(y, output) == 0.45
    kept, support = choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0))
    assert kept == 0.45 and support < 0.4
    assert choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0), spread=0.25) == (0.5, None)
    # the output whose positives all sit at 0.36-0.44: 0.35 leads 0.5 (no positive found) by far
    y = _labels(200, 4)
    output, base = _compressed(y)
    assert choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0), spread=0.25) == (0.35, 0.0)
    assert choose_threshold(y, output, base, confidence=0.4, rng=np.random.default_rng(0), spread=1.0) == (0.35, 0.0)


def test_no_positive_in_validation_keeps_the_threshold_at_one_half() -> None:
    y = np.zeros((40, 3), dtype=int)
    output = np.random.default_rng(0).uniform(0, 1, (40, 3))
    assert choose_threshold(y, output, output, confidence=0.4, rng=np.random.default_rng(0)) == (0.5, None)


def test_thresholds_within_the_label_count_keep_the_rows_at_their_noisy_labels_count() -> None:
    """Rule 29d: a threshold below 0.5 is allowed from the floor up, and only where the output predicts no
    more labels a row on average than the noisy labels hold; 0.5 always. With a growth limit (rule 30d),
    also no more than that many times the labels a row it predicts at 0.5."""
    labels = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])  # one label a row
    output = np.tile([0.46, 0.41, 0.1], (4, 1))  # at most one label a row from 0.425 up, two at 0.4 and below
    assert thresholds_within_label_count(output, labels, floor=0.35) == (0.425, 0.45, 0.475, 0.5)
    assert thresholds_within_label_count(output, labels, floor=0.45) == (0.45, 0.475, 0.5)
    two = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])  # two labels a row: no threshold predicts more
    assert thresholds_within_label_count(output, two, floor=0.2) == DECISION_THRESHOLDS
    assert thresholds_within_label_count(np.full((4, 3), 0.9), labels, floor=0.2) == (0.5,)  # 0.5 even so
    # rule 30d: a loose count (two a row) with a growth limit: at most 1.5 times the 0.8 labels a row at 0.5
    output = np.array([[0.55, 0.41, 0.1], [0.55, 0.41, 0.1], [0.55, 0.41, 0.1], [0.55, 0.41, 0.1], [0.3, 0.2, 0.1]])
    two = np.array([[1, 1, 0]] * 5)
    assert thresholds_within_label_count(output, two, floor=0.35) == (0.35, 0.375, 0.4, 0.425, 0.45, 0.475, 0.5)
    assert thresholds_within_label_count(output, two, floor=0.35, growth=1.5) == (0.425, 0.45, 0.475, 0.5)
    assert thresholds_within_label_count(output, two, floor=0.35, growth=2.0) == (0.35, 0.375, 0.4, 0.425, 0.45,
                                                                                  0.475, 0.5)


def test_rare_labels_never_predicted_get_their_own_threshold_within_the_count() -> None:
    """Rule 43: a label the output predicts on no training row at the threshold gets the lowest from the floor
    up at which it predicts it on no more rows than the base model expects, rarest first, while the labels a
    row stay within rule 30d's count; the first that would break it ends the visit. Labels predicted at the
    threshold keep it."""
    n = 10
    output = np.zeros((n, 4))
    output[:5, 0], output[5:, 0] = 0.9, 0.1  # predicted at 0.5 on 5 rows: never lowered
    output[:, 1] = 0.3
    output[:2, 1] = 0.42  # 2 rows from 0.35 up to 0.42
    output[:, 2] = 0.1
    output[:4, 2], output[4:8, 2] = 0.45, 0.38  # 8 rows at 0.35 and 0.375, 4 from 0.4 up
    output[:, 3] = 0.2  # no row even at the floor
    expected = np.array([5.0, 2.5, 5.0, 0.5])  # the base model's expected count of each label
    base = np.tile(expected / n, (n, 1))  # 1.3 labels a row
    # rarest first: label 3 (adds no row, still lowered: unseen rows may reach it), 1 (2 rows at the floor),
    # 2 (8 rows at 0.35 and 0.375 are more than its 5 expected: 0.4, 4 rows); 11 labels on 10 rows <= 1.3 a row
    count = row_count_limit(output, base)  # rule 30d's count without its growth limit: 1.3 labels a row
    assert count == pytest.approx(1.3)
    assert rare_label_thresholds(output, base, 0.5, limit=count) == {3: 0.35, 1: 0.35, 2: 0.4}
    assert rare_label_thresholds(output, base, 0.5, limit=count, floor=0.4) == {3: 0.4, 1: 0.4, 2: 0.4}
    # the count binds: with label 0 expected on 2.5 rows the base model expects 1.05 labels a row, and label 2's
    # 4 rows would make 1.1; with a growth limit of 1 (0.5 labels a row at 0.5) label 1's 2 rows end the visit
    tighter = base.copy()
    tighter[:, 0] = 0.25
    assert rare_label_thresholds(output, tighter, 0.5, limit=row_count_limit(output, tighter)) == {3: 0.35, 1: 0.35}
    assert row_count_limit(output, base, growth=1.0) == 0.5
    assert rare_label_thresholds(output, base, 0.5, limit=row_count_limit(output, base, growth=1.0)) == {3: 0.35}
    # below a threshold at the floor there is nothing lower; at 0.4 labels 1 and 2 are predicted, so keep it
    assert rare_label_thresholds(output, base, 0.35, limit=count) == {}
    assert rare_label_thresholds(output, base, 0.4, limit=count) == {3: 0.35}


def test_a_small_triples_count_gives_way_by_its_standard_error() -> None:
    """Rule 36: the count a row is the labels' mean count plus k standard errors of that mean (sample standard
    deviation over the square root of the rows), so a threshold that predicts a little more than a few rows
    hold is allowed; with k = 0, or a single row, the mean alone (rules 29d, 30 and 30d)."""
    labels = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 0, 0]])  # 1.5 labels a row, sd 1.29, se 0.645
    se = np.std([1, 2, 3, 0], ddof=1) / 2
    assert label_count_limit(labels) == pytest.approx(1.5)
    assert label_count_limit(labels, 0.5) == pytest.approx(1.5 + 0.5 * se)
    assert label_count_limit(labels, 1.0) == pytest.approx(1.5 + se)
    assert label_count_limit(labels[:1], 1.0) == pytest.approx(1.0)  # one row: no spread to estimate
    assert label_count_limit(np.tile([1, 1, 0], (9, 1)), 3.0) == pytest.approx(2.0)  # no spread: the mean
    output = np.tile([0.46, 0.41, 0.37], (4, 1))  # one label a row from 0.425, two from 0.375, three at 0.35
    assert thresholds_within_label_count(output, labels, floor=0.35) == (0.425, 0.45, 0.475, 0.5)
    # 1.5 + 0.5 * 0.645 = 1.82 still refuses two labels a row; 1.5 + 0.645 = 2.15 allows them, not three
    assert thresholds_within_label_count(output, labels, floor=0.35, standard_errors=0.5) == (0.425, 0.45, 0.475,
                                                                                            0.5)
    assert thresholds_within_label_count(output, labels, floor=0.35, standard_errors=1.0) == (0.375, 0.4, 0.425,
                                                                                            0.45, 0.475, 0.5)


def test_the_threshold_is_saved_with_the_decision_and_checked_when_read() -> None:
    decision = GuardDecision(applied=True, blend=1.0, mode="no validation labels", reason="prior", threshold=0.375,
                             threshold_reason="chosen", threshold_loss_support=0.1)
    assert GuardDecision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision
    assert "labels predicted at probability >= 0.375 (chosen)" in decision.summary()
    assert "probability >=" not in GuardDecision(applied=True, blend=1.0, mode="no validation labels").summary()
    old = {k: v for k, v in decision.to_dict().items() if not k.startswith("threshold")}
    assert GuardDecision.from_dict(old).threshold == 0.5  # saved before rule 26: predicted at 0.5
    for bad in (0.0, 1.5, "0.4", True, None):
        with pytest.raises(ValueError, match="guard_.threshold must be a number in"):
            GuardDecision.from_dict({**decision.to_dict(), "threshold": bad})
    with pytest.raises(ValueError, match="guard_.threshold_loss_support"):
        GuardDecision.from_dict({**decision.to_dict(), "threshold_loss_support": 2.0})
