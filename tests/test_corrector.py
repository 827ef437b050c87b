"""The LSNPC estimator: the fit plan's steps and their report, semi-supervision, determinism and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from lsnpc import LSNPC, NotFittedError, tune_threshold
from lsnpc.corrector.blend import base_density, base_sharpness
from lsnpc.metrics import micro_f1
from tests.conftest import make_noisy_problem, make_toy_multilabel

FAST = dict(epochs=2, n_threads=1, latent_dim=8, label_embedding_dim=16, hidden_dim=32)


@pytest.fixture(scope="module")
def problem() -> dict[str, np.ndarray]:
    """A toy problem whose base probabilities are noisy versions of the truth."""
    return make_noisy_problem(400, 0.15)


@pytest.fixture(scope="module")
def fitted(problem: dict[str, np.ndarray]) -> LSNPC:
    X, Y, P = problem["X"], problem["Y"], problem["P"]
    return LSNPC(random_state=0, **FAST).fit(
        X[:300], P[:300], X_val=X[300:350], y_val=Y[300:350], pred_probs_val=P[300:350]
    )


def test_shapes_and_ranges(fitted: LSNPC, problem: dict[str, np.ndarray]) -> None:
    X, P = problem["X"][350:], problem["P"][350:]
    probs = fitted.predict_proba(X, P)
    labels = fitted.predict(X, P)
    assert probs.shape == labels.shape == (50, 4)
    assert probs.dtype == np.float32 and np.all((probs >= 0) & (probs <= 1))
    assert set(np.unique(labels)) <= {0, 1}
    np.testing.assert_array_equal(labels, (probs >= fitted.threshold_).astype(int))
    assert fitted.n_features_in_ == 8 and fitted.n_labels_ == 4


def test_a_validation_triple_plans_every_step_and_the_report_holds_the_numbers(
    fitted: LSNPC, problem: dict[str, np.ndarray]
) -> None:
    report = fitted.report_
    assert (report.plan.evidence, report.plan.selection) == ("validation", "val_f1")
    assert (report.plan.blend, report.plan.threshold) == ("validation test", "tuned on validation")
    assert fitted.selection_ == "val_f1" and report["epoch"].choice == fitted.best_epoch_
    assert report["epoch"].evidence["n_val"] == 50 and report["epoch"].evidence["n_holdout"] == 0
    epochs = [h for h in fitted.history_ if h["phase"] == "train"]
    assert len(epochs) == fitted.epochs_ == 2 and all("val_tuned_micro_f1" in h for h in epochs)
    # each epoch scored as predict decides it: at the threshold tuned on the triple
    best = max(epochs, key=lambda h: h["val_tuned_micro_f1"] + h["val_tuned_macro_f1"])
    assert fitted.best_epoch_ == best["epoch"]
    # the blend: of the candidates whose loss support is below the confidence, the best cross-fitted F1s, else
    # the base model
    blend = report["blend"]
    assert blend.choice == fitted.base_weight_ and blend.evidence["n_rows"] == 50 and blend.evidence["folds"] == 5
    support = {float(w): s for w, s in blend.evidence["loss_support"].items()}  # JSON keys: the weights as text
    scores = {float(w): sum(v) for w, v in blend.evidence["scores"].items()}
    passed = [w for w, s in support.items() if s < blend.evidence["confidence"]]
    assert fitted.base_weight_ == (max(passed, key=lambda w: (scores[w], w)) if passed else 1.0)
    assert list(support) == [0.0, 0.5] and set(scores) == {0.0, 0.5, 1.0}
    spread = {float(w): v for w, v in blend.evidence["difference_se"].items()}  # how finely 50 rows tell them apart
    assert set(spread) == {0.0, 0.5} and all(len(v) == 2 and 0.0 <= min(v) <= max(v) < 0.5 for v in spread.values())
    # the threshold: tune_threshold on the validation rows of what predict_proba returns
    X, Y, P = problem["X"][300:350], problem["Y"][300:350], problem["P"][300:350]
    curve = tune_threshold(Y, fitted.predict_proba(X, P))
    threshold = report["threshold"]
    assert threshold.choice == fitted.threshold_ == curve.threshold
    assert threshold.evidence["scores"] == pytest.approx(list(curve.scores))
    assert report["student"].choice == 0.5 and report["student"].method == "mean"
    assert "rule" not in report.summary().lower()


def test_the_noisy_labels_choose_the_epoch_test_the_output_and_tune_the_threshold(
    problem: dict[str, np.ndarray],
) -> None:
    X, Y, P = problem["X"][:300], problem["Y"][:300], problem["P"][:300]
    model = LSNPC(random_state=0, **FAST).fit(X, P, labels=Y)
    plan = model.report_.plan
    assert (plan.evidence, plan.selection, plan.n_holdout) == ("noisy labels", "noisy_f1", 30)
    assert plan.threshold == "tuned on held-out noisy labels"
    assert all("holdout_noisy_micro_f1" in h for h in model.history_ if h["phase"] == "train")
    blend = model.report_["blend"]
    assert blend.method == "noisy-label test" and blend.evidence["n_rows"] == 30
    support = blend.evidence["loss_support"]["0.0"]
    expected = 0.0 if support < model.blend_confidence else model.prior_base_weight
    assert model.base_weight_ == pytest.approx(expected)
    threshold = model.report_["threshold"]
    assert threshold.evidence["n_rows"] == 30
    # tuned only among the thresholds at which the output keeps to the noisy labels' count on the training rows
    assert threshold.evidence["expected_count"] == pytest.approx(float(Y.sum(1).mean()))
    output = model.predict_proba(X, P)
    for t in threshold.evidence["thresholds"][:-1]:
        assert t >= model.count_floor and float((output >= t).sum(1).mean()) <= threshold.evidence["expected_count"]
    # the candidates span the output's own range (and 0.5); the highest is always among them
    assert threshold.evidence["thresholds"][-1] == pytest.approx(max(0.5, float(output.max())), rel=1e-6)
    assert threshold.choice in threshold.evidence["thresholds"]
    # fewer held-out rows than min_val_rows: the label count sets the threshold
    small = LSNPC(random_state=0, **FAST).fit(X[:90], P[:90], labels=Y[:90])
    assert small.report_.plan.n_holdout == 9 and small.report_.plan.threshold == "label count"


def test_without_any_label_the_elbo_chooses_and_the_threshold_keeps_to_the_expected_count(
    problem: dict[str, np.ndarray],
) -> None:
    X, P = problem["X"][:300], problem["P"][:300]
    model = LSNPC(random_state=0, **FAST).fit(X, P)
    plan = model.report_.plan
    assert (plan.evidence, plan.selection, plan.blend, plan.threshold) == ("none", "noisy_elbo", "prior", "label count")
    assert all("holdout_neg_elbo" in h for h in model.history_ if h["phase"] == "train")
    blend, threshold = model.report_["blend"], model.report_["threshold"]
    assert blend.method == "prior" and not blend.evidence["flat"] and not blend.evidence["sparse_and_vague"]
    assert model.base_weight_ == pytest.approx(model.prior_base_weight)  # a dense, sharp base model
    evidence = threshold.evidence
    output = model.predict_proba(X, P)
    # the base model's expected count, uncapped: the base model is not flat
    assert evidence["count_of"] == "base model" and evidence["growth_limit"] is None
    assert evidence["base_expected_count"] == pytest.approx(float(P.sum(1).mean()), rel=1e-6)
    assert evidence["expected_count"] == evidence["base_expected_count"]
    assert threshold.choice >= model.count_floor
    predicted = float((output >= threshold.choice).sum(1).mean())
    assert predicted == pytest.approx(evidence["predicted_count"], rel=1e-6)
    assert predicted <= evidence["expected_count"] or threshold.choice == 0.5


def test_unlabelled_rows_the_base_model_never_saw_set_the_label_count() -> None:
    # a random forest is surer of the rows it was trained on than of new ones: the count met on its training rows
    # is met at too high a threshold on new rows; rows it never saw, given without labels, set the threshold
    from sklearn.ensemble import RandomForestClassifier

    from lsnpc import simulate_noise

    X, Y = make_toy_multilabel(500, 8, 4, seed=5)
    noisy = simulate_noise(Y[:300], "symmetric", 0.3, random_state=0)[0]
    forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(X[:300], noisy)
    P = np.stack([p[:, 1] for p in forest.predict_proba(X)], axis=1).astype(np.float32)
    train, new = slice(0, 300), slice(300, 400)
    for given in ({}, {"labels": noisy}):
        with pytest.warns(UserWarning, match="memorised") if given else warnings.catch_warnings():
            plain = LSNPC(random_state=0, **FAST).fit(X[train], P[train], **given)
        counted = LSNPC(random_state=0, **FAST).fit(X[train], P[train], X_unlabelled=X[new],
                                                    pred_probs_unlabelled=P[new], **given)
        threshold = counted.report_["threshold"]
        assert threshold.method == counted.report_.plan.threshold == "label count on unlabelled rows"
        assert threshold.evidence["n_counted"] == 100
        expected = float(noisy.sum(1).mean()) if given else float(P[train].sum(1).mean())
        assert threshold.evidence["expected_count"] == pytest.approx(expected, rel=1e-6)
        output = counted.predict_proba(X[new], P[new])
        predicted = float((output >= threshold.choice).sum(1).mean())
        assert predicted == pytest.approx(threshold.evidence["predicted_count"]) and predicted <= expected
        # only the threshold moves: the same networks, the same blend
        np.testing.assert_array_equal(output, plain.predict_proba(X[new], P[new]))
        assert counted.threshold_ < plain.threshold_
        assert "on 100 unlabelled rows the base model was not trained on" in counted.report_.summary()
    # a validation triple that tests tunes the threshold; the unlabelled rows are not needed then
    triple = dict(X_val=X[400:], y_val=Y[400:], pred_probs_val=P[400:])
    with_triple = LSNPC(random_state=0, **FAST).fit(X[train], P[train], X_unlabelled=X[new],
                                                    pred_probs_unlabelled=P[new], **triple)
    assert with_triple.report_["threshold"].method == "tuned on validation"
    assert with_triple.threshold_ == LSNPC(random_state=0, **FAST).fit(X[train], P[train], **triple).threshold_


@pytest.mark.parametrize(("given", "match"), [
    (dict(X_unlabelled="X"), "need X_unlabelled and pred_probs_unlabelled together; missing pred_probs_unlabelled"),
    (dict(pred_probs_unlabelled="P"), "missing X_unlabelled"),
    (dict(X_unlabelled="X3", pred_probs_unlabelled="P"), "X_unlabelled has 3 features, but X has 8"),
    (dict(X_unlabelled="X", pred_probs_unlabelled="P3"), "pred_probs_unlabelled has 3 labels, but pred_probs has 4"),
    (dict(X_unlabelled="X", pred_probs_unlabelled="P_short"), "X_unlabelled"),
    (dict(X_unlabelled="X", pred_probs_unlabelled="P_bad"), "pred_probs_unlabelled"),
])
def test_unlabelled_rows_are_checked_by_name(problem: dict[str, np.ndarray], given: dict, match: str) -> None:
    X, P = problem["X"][:100], problem["P"][:100]
    arrays = dict(X=X[:20], X3=X[:20, :3], P=P[:20], P3=P[:20, :3], P_short=P[:19], P_bad=P[:20] + 1.5)
    with pytest.raises(ValueError, match=match):
        LSNPC(random_state=0, **FAST).fit(X, P, **{k: arrays[v] for k, v in given.items()})


def test_a_sparse_and_vague_base_model_is_not_blended_in_without_labels() -> None:
    X, Y = make_toy_multilabel(300, 8, 10, seed=1)
    rng = np.random.default_rng(1)
    P = np.clip(0.04 + 0.03 * Y + rng.normal(0, 0.01, Y.shape), 0, 1).astype(np.float32)
    assert base_density(P) < 0.1 and base_sharpness(P) < 0.4
    model = LSNPC(random_state=0, **FAST).fit(X, P)
    blend = model.report_["blend"]
    assert blend.method == "prior" and blend.evidence["sparse_and_vague"] is True and model.base_weight_ == 0.0


def test_a_flat_base_model_comes_back_without_labels() -> None:
    # probabilities that barely vary around a dense mean: nothing to learn from P, nothing to test a correction
    # with, so the base model comes back, decided at the label count's threshold
    X, Y = make_toy_multilabel(300, 8, 5, seed=2)
    rng = np.random.default_rng(2)
    P = np.clip(Y.mean(0) + 0.3 + rng.normal(0, 0.003, Y.shape), 0, 1).astype(np.float32)
    with pytest.warns(UserWarning, match="barely vary"):
        model = LSNPC(random_state=0, **FAST).fit(X, P)
    blend = model.report_["blend"]
    assert blend.method == "prior" and blend.evidence["flat"] is True and model.base_weight_ == 1.0
    np.testing.assert_array_equal(model.predict_proba(X, P), P)
    threshold = model.report_["threshold"]
    assert threshold.method == "label count"
    # a flat base model expects more labels than the data hold: its count is capped at count_growth times the
    # labels a row it predicts at 0.5
    limit = 1.5 * float((P >= 0.5).sum(1).mean())
    assert threshold.evidence["growth_limit"] == pytest.approx(limit, rel=1e-6)
    assert threshold.evidence["expected_count"] == min(threshold.evidence["base_expected_count"], limit)


def test_a_validation_triple_too_small_to_test_is_trained_on(problem: dict[str, np.ndarray]) -> None:
    X, Y, P = problem["X"], problem["Y"], problem["P"]
    model = LSNPC(random_state=0, **FAST).fit(X[:200], P[:200], X_val=X[200:208], y_val=Y[200:208],
                                              pred_probs_val=P[200:208])
    plan = model.report_.plan
    assert plan.val_trained_on and plan.evidence == "none" and plan.selection == "noisy_elbo"
    assert model.report_["epoch"].evidence["n_clean"] == 8
    assert all("clean_loss" in h for h in model.history_ if h["phase"] == "train")
    # a dozen rows already test the output and tune the threshold
    dozen = LSNPC(random_state=0, **FAST).fit(X[:200], P[:200], X_val=X[200:212], y_val=Y[200:212],
                                              pred_probs_val=P[200:212])
    assert dozen.report_.plan.evidence == "validation" and not dozen.report_.plan.val_trained_on
    # an explicit selection keeps it choosing the epoch
    chosen = LSNPC(random_state=0, selection="val_f1", **FAST).fit(
        X[:200], P[:200], X_val=X[200:208], y_val=Y[200:208], pred_probs_val=P[200:208])
    assert not chosen.report_.plan.val_trained_on and chosen.selection_ == "val_f1"
    assert chosen.report_.plan.evidence == "none"  # still too few rows to test the output


def test_validation_labels_without_a_positive_are_set_aside_with_a_warning(problem: dict[str, np.ndarray]) -> None:
    X, P = problem["X"], problem["P"]
    with pytest.warns(UserWarning, match="y_val is set aside: its 40 rows hold no positive label"):
        model = LSNPC(random_state=0, **FAST).fit(X[:200], P[:200], X_val=X[200:240], y_val=np.zeros((40, 4)),
                                                  pred_probs_val=P[200:240])
    assert model.report_.plan.evidence == "none" and "no positive label" in model.report_.plan.val_set_aside
    with pytest.raises(ValueError, match="selection='val_f1' needs a y_val with a positive label"):
        LSNPC(selection="val_f1", **FAST).fit(X[:200], P[:200], X_val=X[200:240], y_val=np.zeros((40, 4)),
                                              pred_probs_val=P[200:240])


def test_guard_off_and_a_given_threshold_are_recorded(problem: dict[str, np.ndarray]) -> None:
    X, Y, P = problem["X"], problem["Y"], problem["P"]
    model = LSNPC(random_state=0, guard=False, threshold=0.4, **FAST).fit(
        X[:200], P[:200], X_val=X[200:240], y_val=Y[200:240], pred_probs_val=P[200:240])
    assert model.report_["blend"].method == "off" and model.base_weight_ == 0.0
    assert model.report_["threshold"].method == "given" and model.threshold_ == 0.4
    np.testing.assert_array_equal(model.predict(X[300:], P[300:]),
                                  (model.predict_proba(X[300:], P[300:]) >= 0.4).astype(int))


def test_column_names_are_remembered_and_checked(problem: dict[str, np.ndarray]) -> None:
    X, P = problem["X"][:120], problem["P"][:120]
    features = pd.DataFrame(X, columns=[f"f{j}" for j in range(8)])
    probs = pd.DataFrame(P, columns=list("abcd"))
    model = LSNPC(random_state=0, **FAST).fit(features, probs)
    assert list(model.feature_names_in_) == [f"f{j}" for j in range(8)]
    assert list(model.label_names_in_) == list("abcd")
    with pytest.warns(UserWarning, match="X has no column names, but LSNPC was fitted with named columns"):
        expected = model.predict_proba(X, probs)
    np.testing.assert_array_equal(model.predict_proba(features, probs), expected)
    with pytest.raises(ValueError, match="X has the columns LSNPC was fitted with, in another order"):
        model.predict_proba(features[features.columns[::-1]], probs)
    with pytest.raises(ValueError, match="pred_probs has the columns LSNPC was fitted with, in another order"):
        model.predict_proba(features, probs[["b", "a", "c", "d"]])
    with pytest.raises(ValueError, match="X's column names differ .*not seen in fit: g0"):
        model.predict_proba(features.rename(columns={"f0": "g0"}), probs)
    plain = LSNPC(random_state=0, **FAST).fit(X, P)
    assert not hasattr(plain, "feature_names_in_")
    with pytest.warns(UserWarning, match="X has column names, but LSNPC was fitted without them"):
        plain.predict_proba(features, P)


@pytest.mark.parametrize("latent", ["gauss", "learned"])
def test_ablation_families_train_without_nan(problem: dict[str, np.ndarray], latent: str) -> None:
    X, Y, P = problem["X"], problem["Y"], problem["P"]
    model = LSNPC(latent=latent, random_state=1, **FAST).fit(
        X[:200], P[:200], X_clean=X[200:260], y_clean=Y[200:260], pred_probs_clean=P[200:260]
    )
    for entry in model.history_:
        if entry["phase"] == "train":
            assert math.isfinite(entry["loss"]) and math.isfinite(entry["clean_loss"])
            assert not entry.get("diverged")
    assert np.isfinite(model.predict_proba(X[300:], P[300:])).all()


def test_clean_set_changes_the_fit() -> None:
    """Base probabilities that systematically give label k's evidence to label k+1: only the clean set
    can reveal that, and semi-supervised LSNPC must use it."""
    X, Y = make_toy_multilabel(700, 10, 4, seed=0)
    rng = np.random.default_rng(0)
    P = np.clip(0.8 * np.roll(Y, 1, axis=1) + 0.1 + rng.normal(0, 0.05, Y.shape), 0, 1).astype(np.float32)
    train, clean, test = slice(0, 400), slice(400, 550), slice(550, 700)
    params = dict(random_state=0, epochs=12, n_threads=1, student=False, guard=False)  # the training alone
    unsupervised = LSNPC(**params).fit(X[train], P[train])
    semi = LSNPC(**params).fit(X[train], P[train], X_clean=X[clean], y_clean=Y[clean], pred_probs_clean=P[clean])
    f1_unsup = micro_f1(Y[test], unsupervised.predict_proba(X[test], P[test]))
    f1_semi = micro_f1(Y[test], semi.predict_proba(X[test], P[test]))
    assert f1_semi > f1_unsup + 0.05, (f1_semi, f1_unsup)
    assert any("clean_loss" in h for h in semi.history_)
    # what was used is said truthfully: the epoch was chosen without clean labels, but it trained on them
    assert semi.selection_ == unsupervised.selection_ == "noisy_elbo"
    assert semi.report_["epoch"].evidence["n_clean"] == 150 and unsupervised.report_["epoch"].evidence["n_clean"] == 0


def test_default_settings_train_on_one_thread_and_leave_the_callers_setting(
    problem: dict[str, np.ndarray],
) -> None:
    """One torch thread by default (two lose 3-5x on a busy machine: docs/speed.md); the hook sees every epoch
    without changing the numbers."""
    X, P = problem["X"][:150], problem["P"][:150]
    params = {k: v for k, v in FAST.items() if k != "n_threads"}
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[tuple[int, int, int]] = []
        phases: list[str] = []
        hooked = LSNPC(random_state=0, **params).fit(
            X, P, on_epoch=lambda epoch, epochs, entry: (seen.append((epoch, epochs, torch.get_num_threads())),
                                                         phases.append(entry["phase"]))
        )
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    # the warm start, each epoch, the student and the decisions, on one thread
    assert seen == [(0, 2, 1), (1, 2, 1), (2, 2, 1), (2, 2, 1), (2, 2, 1)]
    assert phases == ["warm_start", "train", "train", "student", "decide"]
    plain = LSNPC(random_state=0, **params).fit(X, P)
    np.testing.assert_array_equal(hooked.predict_proba(X, P), plain.predict_proba(X, P))
    assert hooked.history_[-1]["loss"] == plain.history_[-1]["loss"]


@pytest.mark.parametrize("evidence", ["validation", "noisy labels"])
def test_several_networks_average_and_the_first_is_the_single_fit(problem: dict[str, np.ndarray], evidence: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """n_fits=3: the first network is the one n_fits=1 trains with the same seed, the later ones hold out the same
    rows and differ; the output is the three networks' mean, and the blend and threshold are decided on it."""
    from lsnpc import simulate_noise
    from lsnpc.corrector import estimator as module

    X, Y, P = problem["X"], problem["Y"], problem["P"]
    given = (dict(X_val=X[300:350], y_val=Y[300:350], pred_probs_val=P[300:350]) if evidence == "validation"
             else dict(labels=simulate_noise(Y[:300], "symmetric", 0.2, random_state=0)[0]))
    one = LSNPC(random_state=3, **FAST).fit(X[:300], P[:300], **given)
    held: list[np.ndarray | None] = []  # each network's held-out rows, as the real training drew or was given them
    train = module.train_latent_shift_model

    def recording(*args, **kwargs):
        result = train(*args, **kwargs)
        held.append(result.holdout_rows)
        return result

    monkeypatch.setattr(module, "train_latent_shift_model", recording)
    three = LSNPC(random_state=3, n_fits=3, **FAST).fit(X[:300], P[:300], **given)
    if evidence == "noisy labels":  # the rows that choose the epoch, test the blend and tune the threshold
        assert len(held) == 3 and len(held[0]) == 30
        assert all(np.array_equal(np.sort(h), np.sort(held[0])) for h in held[1:])
    else:
        assert held == [None, None, None]
    assert len(three.models_) == len(three.students_) == 3 and three.model_ is three.models_[0]
    for name, tensor in one.model_.state_dict().items():
        torch.testing.assert_close(three.model_.state_dict()[name], tensor, rtol=0, atol=0)
    untimed = [[{k: v for k, v in e.items() if k != "seconds"} for e in fit.history_] for fit in (one, three)]
    assert three.best_epoch_ == one.best_epoch_ and untimed[0] == untimed[1]
    assert not torch.equal(three.models_[1].label_decoder.out.weight, three.models_[2].label_decoder.out.weight)
    epoch = three.report_["epoch"].evidence
    assert len(epoch["best_epochs"]) == 3 and epoch["best_epochs"][0] == three.best_epoch_
    assert epoch["n_holdout"] == one.report_["epoch"].evidence["n_holdout"]
    assert len(three.report_["student"].evidence["best_epochs"]) == 3
    Xt, Pt = X[350:], P[350:]
    each = []
    for model, student in zip(three.models_, three.students_):
        single = LSNPC(**three.get_params())
        single.models_, single.students_, single._student_share = [model], [student], three._student_share
        single.device_ = three.device_
        each.append(single._output(Xt, Pt))
    np.testing.assert_allclose(three._output(Xt, Pt), np.mean(each, axis=0), rtol=0, atol=1e-6)
    w = three.base_weight_
    np.testing.assert_allclose(three.predict_proba(Xt, Pt), (1 - w) * np.mean(each, axis=0) + w * Pt, atol=1e-6)
    if evidence == "validation":  # the threshold is the one tuned on the mean as blended
        tuned = tune_threshold(Y[300:350], three.predict_proba(X[300:350], P[300:350]))
        assert three.threshold_ == tuned.threshold


def test_a_later_network_holds_out_the_rows_it_is_given(problem: dict[str, np.ndarray]) -> None:
    """The rows held out of training (to choose the epoch, then to test and threshold the mean of the networks)
    are those passed, so every network of a fit leaves the same rows unseen."""
    from lsnpc.corrector.config import ModelSpec, TrainingConfig, build_model
    from lsnpc.corrector.training import TrainingData, train_latent_shift_model

    X, Y, P = problem["X"][:100], problem["Y"][:100], problem["P"][:100]
    params = LSNPC(**{**FAST, "epochs": 1}).get_params()
    rows = np.array([5, 17, 40, 63, 99, 2, 8, 11, 20, 30])
    cpu = torch.device("cpu")

    def train(n_holdout: int) -> np.ndarray:
        model = build_model(ModelSpec.from_params(params), n_features=X.shape[1], n_labels=P.shape[1])
        data = TrainingData.build(X, P, clean=None, val=None, labels=Y, device=cpu)
        return train_latent_shift_model(model, data, config=TrainingConfig.from_params(params), own_encoder=True,
                                        selection="noisy_f1", n_holdout=n_holdout, rng=np.random.default_rng(0),
                                        device=cpu, holdout_rows=rows).holdout_rows

    assert sorted(train(10)) == sorted(rows)
    with pytest.raises(ValueError, match="holdout_rows must hold n_holdout = 12 row indices, got 10"):
        train(12)


def test_same_seed_same_predictions_other_seed_other(problem: dict[str, np.ndarray]) -> None:
    X, P = problem["X"], problem["P"]
    runs = [LSNPC(random_state=s, **FAST).fit(X[:150], P[:150]).predict_proba(X[300:], P[300:]) for s in (5, 5, 6)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_user_encoder_is_copied_and_used(problem: dict[str, np.ndarray]) -> None:
    X, P = problem["X"], problem["P"]
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU())
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    model = LSNPC(encoder=encoder, random_state=0, **FAST).fit(X[:150], P[:150])
    assert model.data_dim_ == 12
    for k, v in encoder.state_dict().items():
        assert torch.equal(v, before[k]), "the user's encoder must stay untouched"
    assert model.predict_proba(X[300:], P[300:]).shape == (100, 4)


def test_user_encoder_over_spatial_maps() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3, 2, 2)).astype(np.float32)
    P = rng.uniform(size=(60, 3)).astype(np.float32)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 6))
    model = LSNPC(encoder=encoder, random_state=0, **FAST).fit(X, P)
    assert model.predict_proba(X[:5], P[:5]).shape == (5, 3)
    with pytest.raises(ValueError, match="sample shape"):
        model.predict_proba(X[:5, :2], P[:5])


def test_paper_preset_is_the_papers_recipe() -> None:
    model = LSNPC.paper(random_state=3)
    params = model.get_params()
    assert params["epochs"] == 20 and params["batch_size"] == 32 and params["lr"] == 2e-4
    assert params["beta"] == 0.01 and params["nu"] == params["nu0"] == 2.01 and params["eta"] == 0.5
    assert params["schedule"] == "paper" and params["guard"] is False and params["random_state"] == 3
    assert params["student"] is False and params["threshold"] == 0.5
    assert LSNPC.paper(epochs=5).epochs == 5


def test_predict_before_fit_raises() -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        LSNPC().predict_proba(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(NotFittedError):
        LSNPC().save("unused")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(pred_probs=np.full((10, 4), 1.5, np.float32)), "pred_probs must hold probabilities"),
        (dict(pred_probs=np.full((10, 4), np.nan, np.float32)), "pred_probs contains NaN"),
        (dict(pred_probs=np.full((9, 4), 0.5, np.float32)), "same number of samples"),
        (dict(X=np.zeros((1, 8), np.float32), pred_probs=np.zeros((1, 4), np.float32)), "at least 2 sample"),
        (dict(X=np.zeros(10, np.float32)), "X must be a 2-d array"),
        (dict(X_clean=np.zeros((5, 8)), y_clean=np.zeros((5, 4))), "missing pred_probs_clean"),
        (dict(X_clean=np.zeros((5, 8)), y_clean=np.full((5, 4), 2), pred_probs_clean=np.zeros((5, 4))),
         "y_clean must hold only 0/1"),
        (dict(X_clean=np.zeros((5, 7)), y_clean=np.zeros((5, 4)), pred_probs_clean=np.zeros((5, 4))),
         "X_clean has 7 features, but X has 8"),
        (dict(X_val=np.zeros((5, 8)), y_val=np.zeros((5, 3)), pred_probs_val=np.zeros((5, 4))), "y_val has 3 labels"),
        (dict(X_val=np.zeros((5, 8)), pred_probs_val=np.zeros((5, 4))), "missing y_val"),
        (dict(labels=np.zeros((10, 3))), "labels has 3 label columns, but pred_probs has 4"),
        (dict(labels=np.zeros((9, 4))), "same number of samples"),
        (dict(labels=np.full((10, 4), 0.5)), "labels must hold only 0/1"),
        (dict(labels=np.zeros((10, 4))), "labels holds no positive entry in its 10 rows"),
    ],
)
def test_fit_rejects_bad_input(kwargs: dict, match: str) -> None:
    rng = np.random.default_rng(0)
    args = dict(X=rng.normal(size=(10, 8)).astype(np.float32), pred_probs=rng.uniform(size=(10, 4)).astype(np.float32))
    args.update(kwargs)
    X, P = args.pop("X"), args.pop("pred_probs")
    with pytest.raises(ValueError, match=match):
        LSNPC(**FAST).fit(X, P, **args)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        (dict(latent="cauchy"), "latent must be one of"),
        (dict(nu=0), "nu must be >"),
        (dict(eta=1.5), "eta must be <= 1"),
        (dict(epochs=0), "epochs must be 'auto' or an integer >= 1"),
        (dict(epochs="many"), "epochs must be 'auto' or an integer"),
        (dict(guard="maybe"), "guard must be True or False"),
        (dict(warm_start=1), "warm_start must be True or False"),
        (dict(random_state="x"), "random_state must be None"),
        (dict(device="tpu"), "device must be 'cpu'"),
        (dict(n_threads=0), "n_threads must be"),
        (dict(selection="best"), "selection must be one of"),
        (dict(train_feed="soft"), "train_feed must be one of"),
        (dict(encoder="resnet"), "encoder must be a torch.nn.Module"),
        (dict(random_state=-1), "random_state must be a non-negative"),
        (dict(threshold=0.0), r"threshold must be 'auto' or a number in \(0, 1\], got 0.0"),
        (dict(threshold=1.5), "threshold must be 'auto' or a number in"),
        (dict(threshold="half"), "threshold must be 'auto' or a number in"),
        (dict(blend_candidates=(0.5, 2)), r"blend_candidates must be a sequence of base-model weights in \[0, 1\]"),
        (dict(blend_candidates="half"), "blend_candidates must be a sequence"),
        (dict(blend_confidence=0), "blend_confidence must be >"),
        (dict(prior_base_weight=-0.1), "prior_base_weight must be >= 0"),
        (dict(threshold_grid=[]), "threshold_grid must be 'auto' or a non-empty sequence"),
        (dict(threshold_grid=[0.0, 0.5]), r"threshold_grid must hold numbers in \(0, 1\]"),
        (dict(count_floor=0), "count_floor must be >"),
        (dict(count_growth=0.5), "count_growth must be >= 1"),
        (dict(min_val_rows=0), "min_val_rows must be >= 1"),
        (dict(n_fits=0), "n_fits must be >= 1"),
        (dict(n_fits=1.5), "n_fits must be"),
    ],
)
def test_bad_hyper_parameters_are_named(params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LSNPC(**params).fit(np.zeros((4, 2)), np.zeros((4, 2)))


def test_selection_val_f1_needs_a_validation_set() -> None:
    with pytest.raises(ValueError, match="X_val, y_val, pred_probs_val"):
        LSNPC(selection="val_f1", **FAST).fit(np.zeros((4, 2)), np.zeros((4, 2)))


def test_predict_rejects_other_d_or_l(fitted: LSNPC) -> None:
    with pytest.raises(ValueError, match="X has 7 features"):
        fitted.predict_proba(np.zeros((3, 7)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="pred_probs has 5 labels"):
        fitted.predict_proba(np.zeros((3, 8)), np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"threshold must be a number in \(0, 1\]"):
        fitted.predict(np.zeros((3, 8)), np.zeros((3, 4)), threshold=2)
    with pytest.raises(ValueError, match=r"threshold must be a number in \(0, 1\], got 0"):
        fitted.predict(np.zeros((3, 8)), np.zeros((3, 4)), threshold=0)


def test_clean_set_of_another_sample_shape_is_rejected_with_an_encoder():
    """With a user encoder X may have any rank; the clean set must have X's sample shape."""
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 4))
    X, P = np.zeros((6, 3, 4), np.float32), np.full((6, 2), 0.5, np.float32)
    with pytest.raises(ValueError, match=r"X_clean has sample shape \(4, 3\), but X has \(3, 4\)"):
        LSNPC(encoder=encoder, epochs=1).fit(
            X, P, X_clean=np.zeros((3, 4, 3), np.float32), y_clean=np.zeros((3, 2)), pred_probs_clean=P[:3]
        )


def test_a_base_model_that_memorised_its_labels_is_warned_of_where_they_alone_set_the_threshold() -> None:
    # a random forest reproduces its training rows' labels; where those labels alone set the threshold, fit says
    # so and names the rows that would set it instead; given those rows, or a triple, or a model that did not
    # memorise, it says nothing
    from sklearn.ensemble import RandomForestClassifier

    from lsnpc import simulate_noise
    from lsnpc.corrector.checks import MEMORISED_F1

    X, Y = make_toy_multilabel(500, 8, 4, seed=5)
    noisy = simulate_noise(Y[:300], "symmetric", 0.3, random_state=0)[0]
    forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(X[:300], noisy)
    P = np.stack([p[:, 1] for p in forest.predict_proba(X)], axis=1).astype(np.float32)
    assert micro_f1(noisy, P[:300]) >= MEMORISED_F1
    with pytest.warns(UserWarning, match=r"pred_probs reproduce the noisy labels on the training rows \(micro-F1 "):
        LSNPC(random_state=0, **FAST).fit(X[:300], P[:300], labels=noisy)
    quiet = [dict(labels=noisy, X_unlabelled=X[300:400], pred_probs_unlabelled=P[300:400]),
             dict(labels=noisy, X_val=X[400:], y_val=Y[400:], pred_probs_val=P[400:]), {}]
    for given in quiet:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="pred_probs reproduce the noisy labels")
            LSNPC(random_state=0, **FAST).fit(X[:300], P[:300], **given)
    # noisy probabilities of the true labels do not reproduce the noisy labels
    rng = np.random.default_rng(0)
    vague = np.clip(0.35 * Y[:300] + 0.3 + 0.2 * rng.random((300, 4)), 0, 1).astype(np.float32)
    assert micro_f1(noisy, vague) < MEMORISED_F1
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="pred_probs reproduce the noisy labels")
        LSNPC(random_state=0, **FAST).fit(X[:300], vague, labels=noisy)
