"""CorrectedLabelsClassifier (lsnpc.retrain): retraining on corrected labels, the choice on validation rows,
its report, save / load, bad input; on the real scene data where it matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.neural_network import MLPClassifier as SklearnMLP

from lsnpc import (
    CorrectedLabelsClassifier,
    MLPClassifier,
    NotFittedError,
    RetrainReport,
    simulate_noise,
    tune_threshold,
)
from lsnpc._saving import seal
from lsnpc.data import load_dataset
from lsnpc.metrics import macro_f1, micro_f1
from lsnpc.model_selection import multilabel_folds
from lsnpc.retrain import CANDIDATES, CandidateScore
from lsnpc.retrain.selection import (
    GivenLabelTest,
    choose,
    cross_fitted_scores,
    model_of,
)
from tests.conftest import make_toy_multilabel

FAST_LSNPC = {"epochs": 3, "warm_start": False}


def small_mlp(**kw) -> MLPClassifier:
    return MLPClassifier(**{"hidden_dims": (32,), "epochs": 15, "random_state": 0, **kw})


def sklearn_mlp() -> SklearnMLP:
    return SklearnMLP(hidden_layer_sizes=(32,), max_iter=150, random_state=0)


@pytest.fixture(scope="module")
def scene(shared_data: Path) -> dict[str, np.ndarray]:
    """420 rows of scene's training split (360 noisy at 30% symmetric noise, 60 clean validation rows) and
    400 of its test split."""
    train = load_dataset("scene", "train", data_home=shared_data)
    test = load_dataset("scene", "test", data_home=shared_data)
    rows = np.random.default_rng(0).permutation(len(train))[:420]
    X, Y = np.asarray(train.X, np.float32)[rows], np.asarray(train.Y)[rows]
    Yn, _ = simulate_noise(Y[:360], "symmetric", 0.3, random_state=0)
    test_rows = np.random.default_rng(1).permutation(len(test))[:400]  # the file is sorted by label
    return {"X": X[:360], "Y": Y[:360], "Yn": Yn, "Xv": X[360:], "Yv": Y[360:],
            "Xt": np.asarray(test.X, np.float32)[test_rows], "Yt": np.asarray(test.Y)[test_rows]}


@pytest.fixture(scope="module")
def fitted_sklearn(scene) -> CorrectedLabelsClassifier:
    """scikit-learn's MLP wrapped, every candidate compared (the post-hoc ones too)."""
    model = CorrectedLabelsClassifier(sklearn_mlp(), corrector_params=FAST_LSNPC, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning, LSNPC's flat-probability note
        return model.fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])


# ----------------------------------------------------------------------------- on scene


def test_a_scikit_learn_mlp_is_wrapped_and_the_shapes_are_right(fitted_sklearn, scene) -> None:
    model, n, L = fitted_sklearn, len(scene["X"]), scene["Y"].shape[1]
    assert model.models_ and all(isinstance(m, SklearnMLP) and m is not model.estimator for m in model.models_.values())
    assert not hasattr(model.estimator, "coefs_")  # the given estimator is cloned, never fitted
    probs = model.predict_proba(scene["Xt"])
    assert probs.shape == (400, L) and probs.dtype == np.float32 and 0 <= probs.min() and probs.max() <= 1
    pred = model.predict(scene["Xt"])
    assert pred.dtype == np.int64
    np.testing.assert_array_equal(pred, (probs >= model.threshold_).astype(np.int64))
    np.testing.assert_array_equal(model.predict(scene["Xt"], threshold=0.9), (probs >= 0.9).astype(np.int64))
    assert model.labels_.shape == (n, L) and model.labels_.dtype == np.int64 and set(np.unique(model.labels_)) <= {0, 1}
    assert model.oof_probs_.shape == (n, L) and model.oof_probs_.dtype == np.float32
    assert (model.n_features_in_, model.n_labels_) == (scene["X"].shape[1], L)


def test_the_report_records_every_candidate_and_what_was_kept(fitted_sklearn, scene) -> None:
    report = fitted_sklearn.report_
    assert isinstance(report, RetrainReport)
    assert [c.name for c in report.candidates] == list(CANDIDATES)
    assert (report.val_rows, report.folds, report.scoring) == (60, 5, "micro+macro")
    mean = report.candidate("mean")
    assert (mean.micro_se, mean.macro_se) == (0, 0)
    # given the validation triple, the mean is that of the three corrections; only they may replace it
    assert report.eligible == ("noisy+lsnpc", "noisy+lsnpc-insample", "retrained+lsnpc") and report.min_val_rows == 10
    clear = [c for c in report.candidates[1:] if c.name in report.eligible and c.micro_f1 - mean.micro_f1 > c.micro_se
             and c.macro_f1 - mean.macro_f1 > c.macro_se]  # a standard error better in both F1s
    assert report.kept == (max(clear, key=lambda c: c.score).name if clear else "mean")
    assert report.components == (report.eligible if report.kept == "mean" else (report.kept,))
    for c in report.candidates:
        assert c.score == pytest.approx(c.micro_f1 + c.macro_f1)
        assert c is mean or (c.micro_se > 0 and c.macro_se > 0)
    assert report.threshold == fitted_sklearn.threshold_ == report.candidate(report.kept).threshold
    assert report.gain_micro_f1 == report.candidate(report.kept).micro_f1 - report.candidate("noisy").micro_f1
    assert report.labels_changed == int((fitted_sklearn.labels_ != scene["Yn"]).sum()) > 0
    assert report.n_entries == scene["Yn"].size and report.n_rows == len(scene["Yn"])
    assert report.rows_trained == fitted_sklearn.train_rows_.sum()
    assert set(fitted_sklearn.models_) == {model_of(c) for c in report.components}
    assert set(fitted_sklearn.correctors_) == {c for c in report.components if "+" in c}
    assert json.loads(json.dumps(report.to_dict())) == report.to_dict()
    assert RetrainReport.from_dict(report.to_dict()) == report
    assert f"threshold {report.threshold:g}" in report.summary()


@pytest.fixture(scope="module")
def fitted_mean(scene) -> CorrectedLabelsClassifier:
    """The same fit as ``fitted_sklearn``, nothing allowed to replace the mean (every part is kept)."""
    model = CorrectedLabelsClassifier(sklearn_mlp(), corrector_params=FAST_LSNPC, random_state=0, min_gain_se=1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])


def test_the_mean_is_the_mean_of_its_components(fitted_sklearn, fitted_mean, scene) -> None:
    model = fitted_mean
    assert model.report_.kept == "mean"
    assert model.report_.components == ("noisy+lsnpc", "noisy+lsnpc-insample", "retrained+lsnpc")
    Xt = scene["Xt"]
    noisy, retrained = (model.models_[k].predict_proba(Xt) for k in ("noisy", "retrained"))
    parts = [model.correctors_["noisy+lsnpc"].predict_proba(Xt, noisy),
             model.correctors_["noisy+lsnpc-insample"].predict_proba(Xt, noisy),
             model.correctors_["retrained+lsnpc"].predict_proba(Xt, retrained)]
    np.testing.assert_allclose(model.predict_proba(Xt), np.mean(parts, axis=0), rtol=1e-6)
    assert model.report_.candidates == fitted_sklearn.report_.candidates  # the same fit, another rule


def test_the_post_hoc_corrections_are_tested_on_the_validation_triple(fitted_sklearn, scene) -> None:
    """Each post-hoc LSNPC is given the validation rows with its own model's probabilities on them: it
    chooses its epoch on them and says so in its own report."""
    for corrector in fitted_sklearn.correctors_.values():
        assert corrector.report_.plan.evidence == "validation"
    model = CorrectedLabelsClassifier(sklearn_mlp(), corrector_params={**FAST_LSNPC, "min_val_rows": 61},
                                      random_state=0, min_gain_se=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])
    # 60 rows, fewer than LSNPC's min_val_rows: it trains on them, so no single candidate may replace the mean
    report = model.report_
    assert (report.val_rows, report.min_val_rows, report.eligible, report.kept) == (60, 61, (), "mean")
    assert all(c.report_.plan.val_trained_on for c in model.correctors_.values())
    assert "fewer than 61 validation rows" in report.summary()


def test_the_in_sample_part_is_lsnpc_post_hoc_on_the_given_label_model(fitted_mean, scene) -> None:
    """"noisy+lsnpc-insample" is what ``LSNPC()`` post-hoc gives: fitted on the noisy-trained model's
    probabilities on its own training rows, without the labels, with the validation triple."""
    from lsnpc import LSNPC

    Xv, Xt = scene["Xv"], scene["Xt"]
    lsnpc_seed = int(np.random.default_rng(0).integers(2**31 - 1, size=5)[2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        noisy = clone(fitted_mean.estimator).fit(scene["X"], scene["Yn"])  # what fit trained, the same seed
        by_hand = LSNPC(**FAST_LSNPC, random_state=lsnpc_seed).fit(
            scene["X"], noisy.predict_proba(scene["X"]), X_val=Xv, y_val=scene["Yv"],
            pred_probs_val=noisy.predict_proba(Xv))
    part = fitted_mean.correctors_["noisy+lsnpc-insample"]
    assert part.report_.plan.evidence == "validation"
    np.testing.assert_allclose(part.predict_proba(Xt, noisy.predict_proba(Xt)),
                               by_hand.predict_proba(Xt, noisy.predict_proba(Xt)), rtol=1e-5, atol=1e-6)


def test_the_scores_are_those_of_thresholds_chosen_on_other_rows(fitted_sklearn, scene) -> None:
    """The noisy-trained candidate's numbers, recomputed by hand: each validation fold predicted at the
    threshold tune_threshold chooses on the other folds, on the folds the estimator drew."""
    model = fitted_sklearn
    noisy = clone(model.estimator).fit(scene["X"], scene["Yn"])  # what fit trained, the same seed
    probs = noisy.predict_proba(scene["Xv"])
    Yv = scene["Yv"]
    val_seed = int(np.random.default_rng(0).integers(2**31 - 1, size=5)[4])
    pred = np.zeros_like(Yv)
    for train, test in multilabel_folds(Yv, 5, np.random.default_rng(val_seed)):
        pred[test] = probs[test] >= tune_threshold(Yv[train], probs[train]).threshold
    entry = model.report_.candidate("noisy")
    assert entry.micro_f1 == pytest.approx(micro_f1(Yv, pred)) and entry.macro_f1 == pytest.approx(macro_f1(Yv, pred))
    assert entry.threshold == tune_threshold(Yv, probs).threshold


def test_retraining_on_corrected_labels_beats_the_noisy_labels_on_scene(scene) -> None:
    """scikit-learn's MLP trained to convergence, on 360 rows at 30% symmetric noise: the rows retrained on
    hold fewer wrong labels than the given ones, the retrained model gains on the test split, and the model
    kept scores at least what the noisy-trained model re-thresholded on the same validation rows does."""
    def memorising():
        return SklearnMLP(hidden_layer_sizes=(256,), max_iter=300, random_state=0)

    model = CorrectedLabelsClassifier(memorising(), post_hoc=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])
        noisy = memorising().fit(scene["X"], scene["Yn"])
        rows = model.train_rows_
        retrained = memorising().fit(scene["X"][rows], model.labels_[rows])
    Xt, Yt, Yv = scene["Xt"], scene["Yt"], scene["Yv"]

    def test_f1(probs_val, probs_test):
        t = tune_threshold(Yv, probs_val).threshold
        return micro_f1(Yt, probs_test, t), macro_f1(Yt, probs_test, t)

    wrong_rows = lambda labels, rows: (labels[rows] != scene["Y"][rows]).any(axis=1).mean()
    assert wrong_rows(model.labels_, rows) < 0.6 * wrong_rows(scene["Yn"], slice(None))
    base = test_f1(noisy.predict_proba(scene["Xv"]), noisy.predict_proba(Xt))
    again = test_f1(retrained.predict_proba(scene["Xv"]), retrained.predict_proba(Xt))
    kept = micro_f1(Yt, model.predict(Xt)), macro_f1(Yt, model.predict(Xt))
    assert again[0] > base[0] + 0.03 and again[1] > base[1] + 0.03, (base, again)
    assert kept[0] >= base[0] - 0.01 and kept[1] >= base[1] - 0.01, (base, kept)


def test_the_models_are_fresh_fits_on_their_labels(scene) -> None:
    """Without post-hoc candidates the output is the mean of (or one of) a clone fitted on the given labels and
    a clone fitted on the unchanged rows; the same seed gives the same model twice."""
    make = lambda: CorrectedLabelsClassifier(sklearn_mlp(), post_hoc=False, corrector_params=FAST_LSNPC,
                                             random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = make().fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])
        second = make().fit(scene["X"], scene["Yn"], X_val=scene["Xv"], y_val=scene["Yv"])
        rows = first.train_rows_
        refit = {"noisy": sklearn_mlp().fit(scene["X"], scene["Yn"]),
                 "retrained": sklearn_mlp().fit(scene["X"][rows], first.labels_[rows])}
    assert [c.name for c in first.report_.candidates] == ["mean", "noisy", "retrained"]
    expected = np.mean([refit[c].predict_proba(scene["Xt"]) for c in first.report_.components], axis=0)
    np.testing.assert_allclose(first.predict_proba(scene["Xt"]), expected, rtol=1e-6)
    np.testing.assert_array_equal(first.predict_proba(scene["Xt"]), second.predict_proba(scene["Xt"]))
    assert first.report_ == second.report_


def test_both_label_formats_give_the_same_model(scene) -> None:
    X, Yn, Xv, Yv = scene["X"][:200], scene["Yn"][:200], scene["Xv"], scene["Yv"]
    lists = [list(np.flatnonzero(row)) for row in Yn]
    val_lists = [list(np.flatnonzero(row)) for row in Yv]
    make = lambda: CorrectedLabelsClassifier(small_mlp(), post_hoc=False, corrector_params=FAST_LSNPC,
                                             random_state=1)
    multi_hot = make().fit(X, Yn, X_val=Xv, y_val=Yv)
    index_lists = make().fit(X, lists, X_val=Xv, y_val=val_lists)
    np.testing.assert_array_equal(index_lists.labels_, multi_hot.labels_)
    np.testing.assert_array_equal(index_lists.predict_proba(Xv), multi_hot.predict_proba(Xv))
    assert index_lists.report_ == multi_hot.report_
    # a label no row was given still counts when n_labels says so
    wider = make().fit(X, lists, n_labels=7)
    assert wider.labels_.shape == (200, 7) and wider.predict_proba(Xv).shape == (60, 7)


def test_without_validation_rows_the_mean_is_kept_at_one_half(scene) -> None:
    model = CorrectedLabelsClassifier(small_mlp(), corrector_params=FAST_LSNPC, random_state=0)
    model.fit(scene["X"][:200], scene["Yn"][:200])
    report = model.report_
    assert (report.kept, report.threshold, report.candidates, report.val_rows, report.folds) == ("mean", 0.5, (), 0, 0)
    # no clean row tested the corrections: the models themselves steady the mean (and LSNPC post-hoc on the
    # model's in-sample probabilities, which only clean rows can test, is not fitted)
    assert report.components == ("noisy", "retrained", "noisy+lsnpc", "retrained+lsnpc")
    assert set(model.correctors_) == {"noisy+lsnpc", "retrained+lsnpc"}
    assert report.eligible == () and all(c.report_.plan.evidence != "validation" for c in model.correctors_.values())
    assert report.gain_micro_f1 is None and report.gain_macro_f1 is None
    assert "no validation rows" in report.summary()
    rows = model.train_rows_
    assert rows.dtype == bool and rows.shape == (200,) and report.rows_trained == rows.sum() < 200
    np.testing.assert_array_equal(rows, (model.labels_ == scene["Yn"][:200]).all(axis=1))  # unchanged rows only
    refit = small_mlp().fit(scene["X"][:200][rows], model.labels_[rows])
    np.testing.assert_array_equal(model.models_["retrained"].predict_proba(scene["Xv"]), refit.predict_proba(scene["Xv"]))


# ----------------------------------------------------------------------------- save / load, clone


def test_save_and_load_round_trip(scene, tmp_path: Path) -> None:
    model = CorrectedLabelsClassifier(small_mlp(), corrector_params=FAST_LSNPC, random_state=0)
    model.fit(scene["X"][:200], scene["Yn"][:200], X_val=scene["Xv"], y_val=scene["Yv"])
    model.save(tmp_path / "m")
    loaded = CorrectedLabelsClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict_proba(scene["Xt"]), model.predict_proba(scene["Xt"]))
    np.testing.assert_array_equal(loaded.predict(scene["Xt"]), model.predict(scene["Xt"]))
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    np.testing.assert_array_equal(loaded.oof_probs_, model.oof_probs_)
    np.testing.assert_array_equal(loaded.train_rows_, model.train_rows_)
    assert loaded.report_ == model.report_ and loaded.threshold_ == model.threshold_
    assert loaded.get_params(deep=True) == {**model.get_params(deep=True), "estimator": loaded.estimator}
    assert loaded.estimator.get_params() == model.estimator.get_params()
    assert set(loaded.models_) == set(model.models_) and set(loaded.correctors_) == set(model.correctors_)

    with pytest.raises(FileExistsError, match="overwrite=True"):
        model.save(tmp_path / "m")
    model.save(tmp_path / "m", overwrite=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="never replaced"):
        model.save(tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_save_and_load_read_a_tilde_as_the_home_folder(scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    model = CorrectedLabelsClassifier(small_mlp(), post_hoc=False, corrector_params=FAST_LSNPC, random_state=0)
    model.fit(scene["X"][:120], scene["Yn"][:120])
    model.save("~/m")
    assert (home / "m" / "config.json").is_file() and list(work.iterdir()) == []
    with pytest.raises(FileExistsError, match="overwrite=True"):
        model.save("~/m")
    np.testing.assert_array_equal(CorrectedLabelsClassifier.load("~/m").predict_proba(scene["Xt"]),
                                  model.predict_proba(scene["Xt"]))


def test_a_single_kept_candidate_saves_only_its_parts(scene, tmp_path: Path) -> None:
    model = CorrectedLabelsClassifier(small_mlp(), corrector_params=FAST_LSNPC, random_state=0, min_gain_se=0)
    model.fit(scene["X"][:200], scene["Yn"][:200], X_val=scene["Xv"], y_val=scene["Yv"])
    model.save(tmp_path / "m")
    prefixes = {p.name.split(".")[0] for p in (tmp_path / "m").iterdir()} - {"config", "arrays"}
    components = model.report_.components
    assert prefixes == {f"model-{model_of(c)}" for c in components} | {f"corrector-{c}" for c in components if "+" in c}
    loaded = CorrectedLabelsClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict_proba(scene["Xt"]), model.predict_proba(scene["Xt"]))
    # a part missing from the folder is named
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    victim = next(name for name in config["files"] if name.startswith("model-"))
    (tmp_path / "m" / victim).unlink()
    with pytest.raises(ValueError, match="the saved model is incomplete"):
        CorrectedLabelsClassifier.load(tmp_path / "m")


def test_damage_is_refused_on_load(scene, tmp_path: Path) -> None:
    model = CorrectedLabelsClassifier(small_mlp(), post_hoc=False, corrector_params=FAST_LSNPC, random_state=0)
    model.fit(scene["X"][:120], scene["Yn"][:120])
    model.save(tmp_path / "m")
    weights = tmp_path / "m" / "model-retrained.model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model-retrained.model.safetensors is damaged"):
        CorrectedLabelsClassifier.load(tmp_path / "m")
    model.save(tmp_path / "m", overwrite=True)
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["fitted"]["threshold_"] = 0.1
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="config_sha256"):
        CorrectedLabelsClassifier.load(tmp_path / "m")
    with pytest.raises(ValueError, match="not a saved CorrectedLabelsClassifier"):
        CorrectedLabelsClassifier.load(tmp_path / "absent")
    # the format before the test against the given-label model loads: no test in its report, no floor
    model.save(tmp_path / "v3")
    config = json.loads((tmp_path / "v3" / "config.json").read_text())
    config.pop("config_sha256")
    config["fitted"]["report_"].pop("given_test")
    for name in ("fallback_se", "min_positive_fraction"):
        config["params"].pop(name)
    (tmp_path / "v3" / "config.json").write_text(json.dumps(seal({**config, "format_version": 3})))
    old = CorrectedLabelsClassifier.load(tmp_path / "v3")
    assert old.report_.given_test is None and old.min_positive_fraction is None
    np.testing.assert_array_equal(old.predict_proba(scene["Xt"]), model.predict_proba(scene["Xt"]))
    # an older format (its LSNPC parts named by model, or a report without what could replace the mean) is
    # refused, whatever it holds
    model.save(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    config.pop("config_sha256")
    for version in (1, 2):
        (tmp_path / "old" / "config.json").write_text(json.dumps(seal({**config, "format_version": version})))
        with pytest.raises(ValueError, match="fit it again"):
            CorrectedLabelsClassifier.load(tmp_path / "old")
    model.save(tmp_path / "old", overwrite=True)  # and replaced by a new save
    assert CorrectedLabelsClassifier.load(tmp_path / "old").report_ == model.report_


def test_a_scikit_learn_model_is_not_saved_in_lsnpcs_format(fitted_sklearn, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sklearn.neural_network.*skops"):
        fitted_sklearn.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_clone_gives_an_unfitted_copy_with_the_same_parameters(fitted_sklearn) -> None:
    twin = clone(fitted_sklearn)
    assert twin.get_params(deep=False).keys() == fitted_sklearn.get_params(deep=False).keys()
    assert twin.estimator is not fitted_sklearn.estimator
    assert twin.estimator.get_params() == fitted_sklearn.estimator.get_params()
    assert "estimator__max_iter" in twin.get_params(deep=True)
    assert twin.set_params(estimator__max_iter=10).estimator.max_iter == 10
    with pytest.raises(NotFittedError):
        twin.predict_proba(np.zeros((2, fitted_sklearn.n_features_in_)))


# ----------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def toy() -> tuple[np.ndarray, np.ndarray]:
    return make_toy_multilabel(80, 5, 3, seed=0)


@pytest.mark.parametrize("make_args, match", [
    (lambda X, Y: ((X[:70], Y), {}), "X has 70, y has 80"),
    # a 1-d y is one binary label, as in scikit-learn; one of several classes is not multilabel data
    (lambda X, Y: ((X, np.arange(len(Y)) % 3), {}), "y is 1-d with 3 classes"),
    (lambda X, Y: ((X, Y * 2), {}), "y must hold only 0/1"),
    (lambda X, Y: ((X, Y), {"X_val": X[:10]}), "X_val and y_val must be given together"),
    (lambda X, Y: ((X, Y), {"X_val": X[:10], "y_val": np.zeros((10, 3), int)}), "y_val holds no positive label"),
    (lambda X, Y: ((X, Y), {"X_val": X[:10], "y_val": Y[:10, :2]}), "y_val has 2 label columns, but y has 3"),
    (lambda X, Y: ((X, Y), {"X_val": X[:10, :4], "y_val": Y[:10]}), "X_val has 4 features"),
    (lambda X, Y: ((X, Y), {"X_val": X[:4], "y_val": Y[:4]}), "X_val has 4 rows.*val_folds=5"),
    (lambda X, Y: ((X, Y), {"X_val": X[:10], "y_val": Y[:12]}), "X_val has 10, y_val has 12"),
    (lambda X, Y: ((X, Y), {"n_labels": 5}), "y has 3 label columns, but n_labels is 5"),
])
def test_bad_data_is_named(toy, make_args, match: str) -> None:
    args, kwargs = make_args(*toy)
    with pytest.raises(ValueError, match=match):
        CorrectedLabelsClassifier(small_mlp(epochs=1), corrector_params=FAST_LSNPC).fit(*args, **kwargs)


class _NoProba:
    def get_params(self, deep: bool = True) -> dict:
        return {}

    def fit(self, X, y):
        return self


@pytest.mark.parametrize("params, match", [
    ({"estimator": _NoProba()}, "estimator must have fit and predict_proba methods; _NoProba has no predict_proba"),
    ({"cv": 1}, "cv must be >= 2"),
    ({"val_folds": "5"}, "val_folds must be an integer"),
    ({"post_hoc": "yes"}, "post_hoc must be True or False"),
    ({"thresholds": [0.0, 0.5]}, r"thresholds must hold numbers in \(0, 1\]"),
    ({"scoring": "accuracy"}, "scoring must be one of"),
    ({"corrector_params": {"random_state": 1}}, "corrector_params may not set 'random_state'"),
    ({"corrector_params": {"colour": 1}}, "corrector_params: LSNPC has no parameter 'colour'"),
    ({"corrector_params": [1]}, "corrector_params must be a dict"),
    ({"random_state": -1}, "random_state must be a non-negative integer"),
    ({"n_threads": 0}, "n_threads must be >= 1"),
    ({"fallback_se": -1}, "fallback_se must be >= 0"),
    ({"min_positive_fraction": 1.5}, "min_positive_fraction must be <= 1"),
    ({"min_positive_fraction": "all"}, "min_positive_fraction must be a number"),
])
def test_bad_parameters_are_named(toy, params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorrectedLabelsClassifier(**params).fit(*toy)


def test_predicting_before_fit_or_with_other_features(toy) -> None:
    X, Y = toy
    with pytest.raises(NotFittedError, match="fit"):
        CorrectedLabelsClassifier().predict(X)
    model = CorrectedLabelsClassifier(small_mlp(epochs=2), corrector_params=FAST_LSNPC, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="X has 4 features"):
        model.predict_proba(X[:, :4])
    with pytest.raises(ValueError, match="threshold must be <= 1"):
        model.predict(X, threshold=2)


# ----------------------------------------------------------------------------- the selection step


def test_cross_fitted_scores_predict_each_fold_at_the_other_folds_threshold() -> None:
    y = np.array([[1], [0], [1], [0]])
    probs = np.array([[0.3], [0.25], [0.45], [0.1]], dtype=np.float32)
    folds = [(np.array([2, 3]), np.array([0, 1])), (np.array([0, 1]), np.array([2, 3]))]
    # fold 1 is predicted at the threshold rows 2-3 choose (0.45: the highest that keeps row 2), fold 2 at rows
    # 0-1's (0.3): row 0 (0.3) is then missed, row 2 (0.45) kept, no false positive
    micro, macro, score = cross_fitted_scores(y, probs, folds, thresholds=(0.2, 0.3, 0.45), scoring="micro+macro")
    assert micro == pytest.approx(2 / 3) and macro == pytest.approx(2 / 3) and score == pytest.approx(4 / 3)


def _good_and_poor(seed: int, shape: tuple[int, int], rate: float, poor_signal: float):
    """Labels (shape) of positive ``rate``, a candidate's probabilities that track them well and one's that track
    them by ``poor_signal`` only, float32."""
    rng = np.random.default_rng(seed)
    y = (rng.random(shape) < rate).astype(np.int64)
    good = np.clip(y * 0.6 + rng.normal(0.2, 0.1, y.shape), 0, 1).astype(np.float32)
    poor = np.clip(y * poor_signal + rng.normal(0.3, 0.2, y.shape), 0, 1).astype(np.float32)
    return y, good, poor


def test_the_default_is_kept_unless_another_is_clearly_better_in_both_f1s() -> None:
    y, good, poor = _good_and_poor(0, (60, 3), 0.4, 0.2)
    grid = (0.3, 0.4, 0.5)
    kept, scores, name, test = choose(y, {"mean": good, "noisy": good.copy()}, n_folds=3, random_state=0,
                                      thresholds=grid, scoring="micro_f1", min_gain_se=0)
    assert test is None  # no fallback named, no test
    assert kept == "mean" and scores[0].score == scores[1].score and name == "micro_f1"  # a tie keeps the default
    kept, scores, _, _ = choose(y, {"mean": poor, "noisy": good}, n_folds=3, random_state=0, thresholds=grid,
                                scoring="micro+macro")
    assert kept == "noisy"
    gap = min((scores[1].micro_f1 - scores[0].micro_f1) / scores[1].micro_se,
              (scores[1].macro_f1 - scores[0].macro_f1) / scores[1].macro_se)
    kept, _, _, _ = choose(y, {"mean": poor, "noisy": good}, n_folds=3, random_state=0, thresholds=grid,
                           scoring="micro+macro", min_gain_se=gap * 1.01)
    assert kept == "mean"  # not clear enough at that many standard errors

    def hamming_accuracy(y_true, y_pred):
        return float((y_true == y_pred).mean())

    _, scores, name, _ = choose(y, {"mean": good, "noisy": 1 - good}, n_folds=3, random_state=0, thresholds=grid,
                                scoring=hamming_accuracy)
    assert name == "hamming_accuracy" and scores[1].score < 0.5 < scores[0].score <= 1
    assert all(isinstance(s, CandidateScore) for s in scores)


def test_the_given_label_model_comes_back_where_the_retraining_path_loses_in_either_f1() -> None:
    y, good, poor = _good_and_poor(1, (80, 4), 0.35, 0.15)
    grid = (0.3, 0.4, 0.5)
    # the path (the mean, nothing eligible to replace it) loses to the given-label model: it comes back
    kept, scores, _, test = choose(y, {"mean": poor, "noisy": good}, n_folds=4, random_state=0, thresholds=grid,
                                   scoring="micro+macro", eligible=(), fallback="noisy")
    mean, noisy = scores
    assert (kept, test.path_kept, test.fell_back, test.margin_se) == ("noisy", "mean", True, 1.0)
    assert test.micro_gap == pytest.approx(mean.micro_f1 - noisy.micro_f1) and test.micro_gap < -test.micro_se < 0
    assert test.macro_gap == pytest.approx(mean.macro_f1 - noisy.macro_f1)
    # at a margin just past the larger of the two losses in standard errors, the path's choice stays
    margin = max(-test.micro_gap / test.micro_se, -test.macro_gap / test.macro_se)
    kept, _, _, test = choose(y, {"mean": poor, "noisy": good}, n_folds=4, random_state=0, thresholds=grid,
                              scoring="micro+macro", eligible=(), fallback="noisy", fallback_se=margin * 1.01)
    assert (kept, test.fell_back) == ("mean", False)
    # a path that wins keeps its choice; the given-label model is never one of the path's own candidates
    kept, _, _, test = choose(y, {"mean": good, "noisy": poor}, n_folds=4, random_state=0, thresholds=grid,
                              scoring="micro+macro", min_gain_se=0, fallback="noisy")
    assert (kept, test.path_kept, test.fell_back) == ("mean", "mean", False) and test.micro_gap > 0
    # equal predictions: no gap, no standard error, no fallback
    kept, _, _, test = choose(y, {"mean": good, "noisy": good.copy()}, n_folds=4, random_state=0, thresholds=grid,
                              scoring="micro+macro", fallback="noisy")
    assert (kept, test.micro_gap, test.micro_se, test.fell_back) == ("mean", 0.0, 0.0, False)
    with pytest.raises(ValueError, match="fallback 'given' is not among the candidates"):
        choose(y, {"mean": good, "noisy": poor}, n_folds=4, random_state=0, thresholds=grid, scoring="micro+macro",
               fallback="given")


def test_the_report_records_the_test_against_the_given_label_model(fitted_sklearn, scene) -> None:
    assert fitted_sklearn.report_.given_test is None and fitted_sklearn.fallback_se is None  # off by default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = clone(fitted_sklearn).set_params(fallback_se=1.0).fit(scene["X"], scene["Yn"], X_val=scene["Xv"],
                                                                      y_val=scene["Yv"])
    report = model.report_
    test = report.given_test
    path = report.candidate(test.path_kept)
    noisy = report.candidate("noisy")
    assert test.micro_gap == pytest.approx(path.micro_f1 - noisy.micro_f1)
    assert test.macro_gap == pytest.approx(path.macro_f1 - noisy.macro_f1)
    assert test.margin_se == 1.0 and test.micro_se > 0 and test.macro_se > 0
    loses = test.micro_gap < -test.micro_se or test.macro_gap < -test.macro_se
    assert test.fell_back == loses
    assert report.kept == ("noisy" if loses else test.path_kept)
    assert RetrainReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_at_no_noise_the_given_label_model_comes_back_where_the_rows_prefer_it(scene, tmp_path: Path) -> None:
    """Clean training labels: every change the correction makes is a mistake. Here the path's mean (of the model
    on the given labels and the one retrained on fewer rows; nothing may replace the mean) loses to the
    given-label model on the validation rows by about two standard errors: the given-label model comes back, at
    its own tuned threshold, and saves and loads as such."""
    clean = scene["Y"][:200]
    model = CorrectedLabelsClassifier(small_mlp(), post_hoc=False, min_gain_se=1e9, corrector_params=FAST_LSNPC,
                                      random_state=0, fallback_se=1.0)
    model.fit(scene["X"][:200], clean, X_val=scene["Xv"], y_val=scene["Yv"])
    report = model.report_
    test = report.given_test
    assert (test.path_kept, test.fell_back, test.margin_se) == ("mean", True, 1.0)
    assert test.micro_gap < -test.micro_se or test.macro_gap < -test.macro_se
    assert report.kept == "noisy" and report.components == ("noisy",) and set(model.models_) == {"noisy"}
    assert model.correctors_ == {} and "lost to it on the validation rows" in report.summary()
    noisy = model.models_["noisy"]
    tuned = tune_threshold(scene["Yv"], noisy.predict_proba(scene["Xv"]))
    assert model.threshold_ == report.candidate("noisy").threshold == tuned.threshold
    np.testing.assert_array_equal(model.predict(scene["Xt"]), tuned.predict(noisy.predict_proba(scene["Xt"])))
    # the same fit with a margin past its loss keeps the path's mean
    wide = max(-test.micro_gap / test.micro_se, -test.macro_gap / test.macro_se) * 1.01
    kept = clone(model).set_params(fallback_se=wide).fit(scene["X"][:200], clean, X_val=scene["Xv"], y_val=scene["Yv"])
    assert (kept.report_.kept, kept.report_.given_test.fell_back) == ("mean", False)
    assert kept.report_.candidates == report.candidates  # the same fit, another margin
    model.save(tmp_path / "m")
    loaded = CorrectedLabelsClassifier.load(tmp_path / "m")
    assert loaded.report_ == report
    np.testing.assert_array_equal(loaded.predict(scene["Xt"]), model.predict(scene["Xt"]))


def test_retraining_never_leaves_a_label_fewer_positives_than_asked(fitted_sklearn, scene) -> None:
    from lsnpc.label_issues import correct_labels

    given = scene["Yn"]
    assert (fitted_sklearn.labels_.sum(axis=0) >= np.ceil(given.sum(axis=0) - 1e-9)).all()  # the default, 1
    raw = correct_labels(given, fitted_sklearn.oof_probs_, features=scene["X"], **FAST_LSNPC)
    floored = correct_labels(given, fitted_sklearn.oof_probs_, features=scene["X"], min_positive_fraction=0.9,
                             **FAST_LSNPC)
    drained = raw.sum(axis=0) < np.ceil(0.9 * given.sum(axis=0))
    # the drained labels get their given positives back, the others are the plain correction
    np.testing.assert_array_equal(floored[:, ~drained], raw[:, ~drained])
    np.testing.assert_array_equal(floored[:, drained], raw[:, drained] | given[:, drained])


@pytest.mark.parametrize("edit, match", [
    (lambda r: r.pop("kept"), "report field kept is missing"),
    (lambda r: r.update(kept="pickle"), "not among"),
    (lambda r: r.update(val_rows="ten"), "val_rows must be a int"),
    (lambda r: r.update(threshold=0), r"threshold must be in \(0, 1\]"),
    (lambda r: r["candidates"][0].pop("score"), "report field score is missing"),
    (lambda r: r.update(components=["pickle"]), "components must list"),
    (lambda r: r.update(components=["noisy"]), "must be the kept candidate 'retrained' alone"),
    (lambda r: r.update(eligible=["noisy+lsnpc"]), r"eligible \(\['noisy\+lsnpc'\]\) must hold the kept"),
    (lambda r: r.update(eligible=["pickle"]), "eligible must list some of noisy, "),
    (lambda r: r.update(min_val_rows=2.5), "min_val_rows must be a int"),
    (lambda r: r.update(given_test=[1]), "given_test must be an object or null"),
    (lambda r: r["given_test"].pop("fell_back"), "report field fell_back is missing"),
    (lambda r: r["given_test"].update(fell_back=1), "fell_back must be a bool"),
    (lambda r: r["given_test"].update(path_kept="pickle"), "path_kept .'pickle'. is not among"),
    (lambda r: r["given_test"].update(fell_back=True), "must be 'noisy' where fell_back is true"),
])
def test_a_damaged_report_is_refused(edit, match: str) -> None:
    report = RetrainReport("retrained", ("retrained",), 0.4,
                           (CandidateScore("mean", 0.55, 0.45, 1.0, 0.35, 0.0, 0.0),
                            CandidateScore("noisy", 0.5, 0.4, 0.9, 0.3, 0.02, 0.03),
                            CandidateScore("retrained", 0.6, 0.5, 1.1, 0.4, 0.02, 0.03)), ("retrained",), 20, 40, 5,
                           "micro+macro", 3, 90, 28, 30, GivenLabelTest("retrained", 0.1, 0.1, 0.03, 0.04, 1.0, False))
    raw = report.to_dict()
    assert RetrainReport.from_dict(raw) == report
    edit(raw)
    with pytest.raises(ValueError, match=match):
        RetrainReport.from_dict(raw)


# ----------------------------------------------------------------------------- the command line


def lsnpc_cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": "200", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    return subprocess.run([sys.executable, "-m", "lsnpc.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env, check=False)


@pytest.fixture
def scene_files(scene, tmp_path: Path) -> Path:
    import pandas as pd

    np.save(tmp_path / "X.npy", scene["X"])
    pd.DataFrame(scene["Yn"], columns=[f"c{j}" for j in range(6)]).to_csv(tmp_path / "Y.csv", index=False)
    np.save(tmp_path / "Xv.npy", scene["Xv"])
    np.save(tmp_path / "Yv.npy", scene["Yv"])
    return tmp_path


def test_cli_retrain_saves_the_kept_model_and_says_what_it_kept(scene, scene_files: Path) -> None:
    args = ["retrain", "--features", "X.npy", "--labels", "Y.csv", "--val-features", "Xv.npy", "--val-labels",
            "Yv.npy", "--out", "model", "--epochs", "10", "--no-post-hoc", "--seed", "2"]
    result = lsnpc_cli(*args, "--json", cwd=scene_files)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads(result.stdout)
    report = RetrainReport.from_dict(summary["report"])
    assert [c.name for c in report.candidates] == ["mean", "noisy", "retrained"] and report.val_rows == 60
    assert summary["gain_micro_f1"] == pytest.approx(report.gain_micro_f1)
    loaded = CorrectedLabelsClassifier.load(scene_files / "model")
    assert loaded.report_ == report and all(isinstance(m, MLPClassifier) for m in loaded.models_.values())
    assert all(m.epochs == 10 for m in loaded.models_.values()) and loaded.random_state == 2
    assert loaded.predict(scene["Xt"]).shape == (400, 6)

    again = lsnpc_cli(*args, cwd=scene_files)  # a saved model is replaced only with --force
    assert again.returncode == 1 and "--force" in again.stderr and "Traceback" not in again.stderr
    text = lsnpc_cli(*args, "--force", cwd=scene_files)
    assert text.returncode == 0, text.stderr
    assert "kept the " in text.stdout and "60 validation rows" in text.stdout
    # the same seed gives the same model
    np.testing.assert_array_equal(CorrectedLabelsClassifier.load(scene_files / "model").predict_proba(scene["Xt"]),
                                  loaded.predict_proba(scene["Xt"]))


def test_cli_retrain_names_its_flags_in_errors(scene_files: Path) -> None:
    np.save(scene_files / "Yv0.npy", np.zeros((60, 6), int))
    cases = [
        (["--val-features", "Xv.npy"], "--val-features and --val-labels must be given together"),
        (["--val-features", "Xv.npy", "--val-labels", "Yv0.npy"], "--val-labels holds no positive label"),
        (["--cv", "1"], "--cv must be >= 2"),
    ]
    for extra, message in cases:
        result = lsnpc_cli("retrain", "--features", "X.npy", "--labels", "Y.csv", "--out", "m", "--epochs", "1",
                           *extra, cwd=scene_files)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert message in " ".join(result.stderr.split()), result.stderr
        assert not (scene_files / "m").exists()
    np.save(scene_files / "X300.npy", np.load(scene_files / "X.npy")[:300])
    result = lsnpc_cli("retrain", "--features", "X300.npy", "--labels", "Y.csv", "--out", "m", cwd=scene_files)
    assert result.returncode == 1 and "--features has 300, --labels has 360" in " ".join(result.stderr.split())
    # an output that is an input, or a file, is refused before any training
    for out, message in (("X.npy", "is also --features"), ("Y.csv", "is also --labels"),
                         ("Yv0.npy", "is not a folder")):
        result = lsnpc_cli("retrain", "--features", "X.npy", "--labels", "Y.csv", "--out", out, "--force",
                           cwd=scene_files)
        assert result.returncode == 1 and message in " ".join(result.stderr.split()), result.stderr
    assert np.load(scene_files / "Yv0.npy").shape == (60, 6)


def test_cli_correct_labels_writes_them_and_never_overwrites_an_input(scene, scene_files: Path) -> None:
    import pandas as pd

    before = (scene_files / "Y.csv").read_bytes()
    result = lsnpc_cli("correct-labels", "--features", "X.npy", "--labels", "Y.csv", "--out", "fixed.npy", "--json",
                       cwd=scene_files)
    assert result.returncode == 0, result.stderr
    fixed = np.load(scene_files / "fixed.npy")
    summary = json.loads(result.stdout)
    assert fixed.shape == scene["Yn"].shape and set(np.unique(fixed)) <= {0, 1}
    assert summary["changed"] == int((fixed != scene["Yn"]).sum()) > 0
    assert (fixed != scene["Y"]).sum() < (scene["Yn"] != scene["Y"]).sum()  # fewer wrong entries than given
    # with the out-of-fold probabilities given, the library's correct_labels on the same inputs
    from lsnpc import correct_labels, cross_val_pred_probs

    P = cross_val_pred_probs(MLPClassifier(random_state=0, n_threads=1), scene["X"], scene["Yn"], cv=5, random_state=0)
    np.save(scene_files / "P.npy", P)
    result = lsnpc_cli("correct-labels", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P.npy", "--out",
                       "fixed.csv", cwd=scene_files)
    assert result.returncode == 0, result.stderr
    assert "label entries" in result.stdout
    written = pd.read_csv(scene_files / "fixed.csv")
    assert list(written.columns) == [f"c{j}" for j in range(6)]  # the labels' names kept
    np.testing.assert_array_equal(written.to_numpy(), correct_labels(scene["Yn"], P, features=scene["X"], random_state=0,
                                                                     min_positive_fraction=1.0))
    np.testing.assert_array_equal(written.to_numpy(), fixed)  # the same probabilities the command computed
    assert (fixed.sum(axis=0) >= scene["Yn"].sum(axis=0)).all()  # no label left fewer positives than given
    result = lsnpc_cli("correct-labels", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P.npy", "--out",
                       "raw.npy", "--min-positive-fraction", "0", cwd=scene_files)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(scene_files / "raw.npy"),
                                  correct_labels(scene["Yn"], P, features=scene["X"], random_state=0))
    result = lsnpc_cli("correct-labels", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P.npy", "--out",
                       "bad.npy", "--min-positive-fraction", "2", cwd=scene_files)
    assert result.returncode == 1 and "--min-positive-fraction must be <= 1" in result.stderr, result.stderr

    for out, force, message in (("fixed.npy", False, "--force"), ("Y.csv", True, "is also --labels"),
                                ("X.npy", True, "never writes over its own input")):
        result = lsnpc_cli("correct-labels", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P.npy", "--out",
                           out, *(["--force"] if force else []), cwd=scene_files)
        assert result.returncode == 1 and message in result.stderr, result.stderr
    assert (scene_files / "Y.csv").read_bytes() == before


def test_out_of_fold_probabilities_that_reproduce_the_labels_get_no_memorisation_warning() -> None:
    # the corrections are fitted with labels only on out-of-fold probabilities: a tree that predicts its labels
    # well out of fold memorised nothing, so LSNPC's warning is not passed on to the user
    from sklearn.tree import DecisionTreeClassifier

    X, _ = make_toy_multilabel(200, 6, 3, seed=4)
    Y = (X[:, :3] > 0).astype(np.int64)  # a rule a tree learns out of fold
    model = CorrectedLabelsClassifier(DecisionTreeClassifier(random_state=0), corrector_params=FAST_LSNPC,
                                      random_state=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="pred_probs reproduce the noisy labels")
        model.fit(X, Y)
    assert micro_f1(Y, model.oof_probs_) >= 0.9
