"""lsnpc.tune_threshold and the label-count threshold: the candidates, the choice, the curve, per-label thresholds,
the scorings, cross-fitting, bad input."""

from __future__ import annotations

import subprocess
import sys
from functools import partial

import numpy as np
import pytest
from sklearn.metrics import f1_score

from lsnpc import ThresholdCurve, tune_threshold
from lsnpc.corrector.scores import f1_scores, resample_weights
from lsnpc.corrector.threshold import (
    NARROW_THRESHOLDS,
    candidate_thresholds,
    count_threshold,
    cross_fitted_predictions,
    within_count,
)
from lsnpc.metrics import macro_f1, micro_f1


def _problem(seed: int = 0, n: int = 80, labels: int = 6):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, labels)) < 0.3).astype(np.int64)
    # a flattened model: positives around 0.4, negatives around 0.15, so the best threshold is below 0.5
    probs = np.clip(np.where(y == 1, 0.4, 0.15) + rng.normal(0, 0.08, y.shape), 0, 1).astype(np.float32)
    return y, probs


def test_the_choice_is_the_best_point_of_its_curve_and_the_curve_is_sklearns_f1():
    y, probs = _problem()
    tuned = tune_threshold(y, probs, bagging=False)
    assert isinstance(tuned, ThresholdCurve) and tuned.bagged == 0
    assert tuned.thresholds == candidate_thresholds(probs[y == 1])
    expected = [micro_f1(y, probs, t) + macro_f1(y, probs, t) for t in tuned.thresholds]
    np.testing.assert_allclose(tuned.scores, expected, atol=1e-12)
    assert tuned.best_score == pytest.approx(max(expected))
    assert tuned.threshold < 0.5  # the flattened model is decided best below 0.5
    assert tuned.n_rows == len(y) and tuned.scoring == "micro+macro"
    np.testing.assert_array_equal(tuned.predict(probs), (probs >= tuned.threshold).astype(np.int64))


def test_ties_go_to_the_highest_threshold():
    y = np.array([[1, 0], [0, 1]])
    probs = np.array([[0.9, 0.05], [0.05, 0.9]])  # every threshold of the grid scores the same
    assert tune_threshold(y, probs, thresholds=NARROW_THRESHOLDS).threshold == 0.5
    assert tune_threshold(y, probs).threshold == pytest.approx(0.9)  # the one candidate: both positives score 0.9


def test_auto_candidates_span_the_positives_scores_in_log_odds():
    scores = np.array([0.001, 0.02, 0.3, 0.97])
    grid = np.asarray(candidate_thresholds(scores))
    assert len(grid) == 50 and grid[0] == pytest.approx(0.001) and grid[-1] == pytest.approx(0.97)
    logits = np.log(grid / (1 - grid))
    np.testing.assert_allclose(np.diff(logits), np.diff(logits)[0])  # evenly spaced in log-odds
    assert candidate_thresholds(np.full(3, 0.4)) == (pytest.approx(0.4),)
    assert candidate_thresholds(np.zeros(0)) == ()
    assert candidate_thresholds(np.array([0.0, 1.0]))[0] > 0  # within (0, 1): 0 has no log-odds


def test_candidates_are_numbers_of_the_scores_precision():
    # float32 scores: every candidate is a float32 number, the ends are the lowest and highest score exactly, so
    # a positive scored at the chosen threshold is called whether the comparison runs in float32 or float64
    rng = np.random.default_rng(5)
    scores = rng.random(200).astype(np.float32) * 0.3 + 0.01
    grid = candidate_thresholds(scores)
    assert all(float(np.float32(t)) == t for t in grid)
    assert grid[0] == float(scores.min()) and grid[-1] == float(scores.max())
    top = np.array([[scores.max()]], dtype=np.float32)
    assert int(ThresholdCurve(grid[-1], grid, (0.0,) * len(grid), "micro+macro", 1).predict(top)[0, 0]) == 1
    assert all(float(np.float64(t)) == t for t in candidate_thresholds(scores.astype(np.float64)))


def test_a_grid_is_compared_in_the_scores_precision_as_predict_compares_it():
    # float32(0.45) is below the float64 0.45; predict rounds the threshold to float32, and so does the curve
    y = np.array([[1], [0], [1], [0]] * 30)
    probs = np.array([[0.45], [0.1], [0.45], [0.3]] * 30, dtype=np.float32)
    tuned = tune_threshold(y, probs, thresholds=(0.2, 0.45))
    assert tuned.threshold == 0.45 and tuned.scores[1] == pytest.approx(2.0)
    np.testing.assert_array_equal(tuned.predict(probs), y)
    assert within_count(probs, 0.5, (0.2, 0.45), floor=0.05) == (0.45,)


def test_few_rows_choose_the_median_of_bootstrap_resamples_best_thresholds():
    y, probs = _problem(n=60)
    bagged, plain = tune_threshold(y, probs), tune_threshold(y, probs, bagging=False)
    assert bagged.bagged == 100 and plain.bagged == 0 and bagged.to_dict()["bagged"] == 100
    assert bagged.threshold in bagged.thresholds and bagged.scores == plain.scores
    # the same resamples, scored one by one with sklearn: the median of their best thresholds
    weights = resample_weights(len(y), 100, np.random.default_rng(0))
    best = []
    for w in weights[(weights @ y).sum(1) > 0]:
        rows = np.repeat(np.arange(len(y)), w)
        curve = [micro_f1(y[rows], probs[rows], t) + macro_f1(y[rows], probs[rows], t) for t in plain.thresholds]
        top = max(curve)
        best.append(max(t for t, s in zip(plain.thresholds, curve) if s >= top - 1e-12))
    assert bagged.threshold == sorted(best)[len(best) // 2]
    # a callable scoring is bagged the same way
    assert tune_threshold(y, probs, scoring=lambda a, b: micro_f1(a, b) + macro_f1(a, b)).threshold == pytest.approx(
        bagged.threshold)
    # from 100 rows on, or with bagging=False, the best on the rows as they are
    many_y, many_p = _problem(n=100)
    assert tune_threshold(many_y, many_p).bagged == 0
    assert tune_threshold(y, probs, bagging=True).threshold == bagged.threshold


def test_a_rare_label_is_called_below_the_old_grid():
    # a model whose scores for a rare label sit near 0.05: the 0.2-0.5 grid never calls it, the scores' own
    # range does, and the F1 on the same rows says so
    rng = np.random.default_rng(3)
    y = (rng.random((400, 3)) < 0.04).astype(np.int64)
    probs = np.clip(np.where(y == 1, 0.08, 0.01) + rng.normal(0, 0.01, y.shape), 0, 1)
    auto, narrow = tune_threshold(y, probs), tune_threshold(y, probs, thresholds=NARROW_THRESHOLDS)
    assert auto.threshold < 0.2 <= narrow.threshold
    assert auto.best_score > narrow.best_score + 1.0  # both F1s from 0 to most of the way


def test_per_label_thresholds_maximise_each_labels_f1_where_it_has_enough_positives():
    rng = np.random.default_rng(4)
    y = np.column_stack([(rng.random(300) < p).astype(np.int64) for p in (0.4, 0.2, 0.01)])
    # each label's scores on its own scale: label 0 near 0.6, label 1 near 0.15, label 2 (3 positives) flat
    probs = np.clip(np.column_stack([0.3 + 0.4 * y[:, 0], 0.05 + 0.15 * y[:, 1], np.full(300, 0.2)])
                    + rng.normal(0, 0.08, y.shape), 0, 1)
    tuned = tune_threshold(y, probs, per_label=True, min_positives=10)
    assert tuned.tuned_labels == 2 and tuned.label_thresholds[2] == tuned.threshold
    for j in (0, 1):
        grid = candidate_thresholds(probs[y[:, j] == 1, j])
        best = max(f1_score(y[:, j], probs[:, j] >= t) for t in grid)
        assert f1_score(y[:, j], probs[:, j] >= tuned.label_thresholds[j]) == pytest.approx(best)
    assert tuned.label_thresholds[0] > tuned.label_thresholds[1]
    np.testing.assert_array_equal(tuned.predict(probs), (probs >= np.asarray(tuned.label_thresholds)).astype(int))
    assert macro_f1(y, probs, tuned.decision) >= macro_f1(y, probs, tuned.threshold)
    with pytest.raises(ValueError, match="probs has 2 label columns"):
        tuned.predict(probs[:, :2])
    assert tune_threshold(y, probs).label_thresholds is None and tune_threshold(y, probs).tuned_labels == 0


def test_cross_fitted_predictions_decide_each_fold_at_the_others_threshold():
    y, probs = _problem(5, n=90)
    folds = [(np.setdiff1d(np.arange(90), part), part) for part in np.array_split(np.arange(90), 3)]
    pred = cross_fitted_predictions(y, probs, folds, thresholds=NARROW_THRESHOLDS)
    for train, test in folds:
        t = tune_threshold(y[train], probs[train], thresholds=NARROW_THRESHOLDS).threshold
        np.testing.assert_array_equal(pred[test], (probs[test] >= t).astype(np.int64))


def test_scorings_named_and_callable():
    y, probs = _problem(1)
    micro = tune_threshold(y, probs, scoring="micro_f1")
    assert micro.scores == pytest.approx([micro_f1(y, probs, t) for t in micro.thresholds])
    samples = tune_threshold(y, probs, scoring=partial(f1_score, average="samples", zero_division=0),
                             thresholds=[0.3, 0.4, 0.5])
    assert samples.thresholds == (0.3, 0.4, 0.5)
    assert samples.scores == pytest.approx(
        [f1_score(y, (probs >= t).astype(int), average="samples", zero_division=0) for t in (0.3, 0.4, 0.5)])


def test_count_threshold_is_the_lowest_within_the_count():
    output = np.array([[0.45, 0.38, 0.1], [0.6, 0.3, 0.36]])
    # labels a row: 0.35 -> 2.0, 0.375 -> 1.5, 0.4 -> 1.0, 0.5 -> 0.5
    chosen, evidence = count_threshold(output, 1.0, NARROW_THRESHOLDS, floor=0.35)
    assert chosen == 0.4 and evidence["predicted_count"] == 1.0 and evidence["expected_count"] == 1.0
    assert count_threshold(output, 5.0, NARROW_THRESHOLDS, floor=0.35)[0] == 0.35  # the floor holds
    assert count_threshold(output, 0.1, NARROW_THRESHOLDS, floor=0.35)[0] == 0.5  # none within: the top
    assert within_count(output, 1.0, NARROW_THRESHOLDS, floor=0.35) == (0.4, 0.425, 0.45, 0.475, 0.5)
    # "auto": the output's own range (and 0.5): here 0.1 to 0.6, so without a floor the count alone decides
    auto = within_count(output, 1.0, "auto", floor=0.01)
    assert all(float((output >= t).sum(1).mean()) <= 1.0 for t in auto) and auto[-1] == pytest.approx(0.6)
    assert count_threshold(output, 1.0, "auto", floor=0.01)[0] == auto[0] < 0.4
    assert within_count(output, 0.0, (0.3, 0.6), floor=0.2) == (0.6,)  # the top always


def test_f1_from_counts_equals_sklearn_on_resamples():
    y, probs = _problem(2)
    weights = resample_weights(len(y), 5, np.random.default_rng(0))
    micro, macro = f1_scores(y, probs >= 0.3, weights)
    for b in range(5):
        rows = np.repeat(np.arange(len(y)), weights[b])
        assert micro[b] == pytest.approx(micro_f1(y[rows], probs[rows], 0.3))
        assert macro[b] == pytest.approx(macro_f1(y[rows], probs[rows], 0.3))


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(thresholds=[]), "thresholds must be .auto. or a non-empty"),
    (dict(thresholds=[0.0, 0.5]), r"thresholds must hold numbers in \(0, 1\]"),
    (dict(thresholds="0.5"), "thresholds must be"),
    (dict(scoring="accuracy"), "scoring must be one of"),
    (dict(scoring=lambda y, pred: float("nan")), "scoring <lambda> returned nan at threshold"),
    (dict(scoring=lambda y, pred: None), "scoring <lambda> returned None at threshold"),
    (dict(per_label="yes"), "per_label must be True or False"),
    (dict(per_label=True, min_positives=0), "min_positives"),
])
def test_bad_arguments_are_named(kwargs, match):
    y, probs = _problem()
    with pytest.raises(ValueError, match=match):
        tune_threshold(y, probs, **kwargs)


def test_bad_arrays_are_named():
    y, probs = _problem()
    with pytest.raises(ValueError, match="y_true"):
        tune_threshold(y[:, :3], probs)
    with pytest.raises(ValueError, match="probs"):
        tune_threshold(y, probs * 3)
    with pytest.raises(ValueError, match="same number of samples|y_true"):
        tune_threshold(y[:10], probs)


def test_the_policy_modules_do_not_load_torch():
    code = ("import sys, lsnpc.corrector.threshold, lsnpc.corrector.scores; from lsnpc import tune_threshold; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
