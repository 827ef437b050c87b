"""lsnpc.tune_threshold and the label-count threshold: the choice, the curve, the scorings, bad input."""

from __future__ import annotations

import subprocess
import sys
from functools import partial

import numpy as np
import pytest
from sklearn.metrics import f1_score

from lsnpc import ThresholdCurve, tune_threshold
from lsnpc.corrector.scores import f1_scores, resample_weights
from lsnpc.corrector.threshold import DEFAULT_THRESHOLDS, count_threshold, within_count
from lsnpc.metrics import macro_f1, micro_f1


def _problem(seed: int = 0, n: int = 80, labels: int = 6):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, labels)) < 0.3).astype(np.int64)
    # a flattened model: positives around 0.4, negatives around 0.15, so the best threshold is below 0.5
    probs = np.clip(np.where(y == 1, 0.4, 0.15) + rng.normal(0, 0.08, y.shape), 0, 1).astype(np.float32)
    return y, probs


def test_the_choice_is_the_best_point_of_its_curve_and_the_curve_is_sklearns_f1():
    y, probs = _problem()
    tuned = tune_threshold(y, probs)
    assert isinstance(tuned, ThresholdCurve)
    assert tuned.thresholds == DEFAULT_THRESHOLDS
    expected = [micro_f1(y, probs, t) + macro_f1(y, probs, t) for t in DEFAULT_THRESHOLDS]
    np.testing.assert_allclose(tuned.scores, expected, atol=1e-12)
    assert tuned.best_score == pytest.approx(max(expected))
    assert tuned.threshold < 0.5  # the flattened model is decided best below 0.5
    assert tuned.n_rows == len(y) and tuned.scoring == "micro+macro"
    np.testing.assert_array_equal(tuned.predict(probs), (probs >= tuned.threshold).astype(np.int64))


def test_ties_go_to_the_highest_threshold():
    y = np.array([[1, 0], [0, 1]])
    probs = np.array([[0.9, 0.05], [0.05, 0.9]])  # every threshold of the grid scores the same
    assert tune_threshold(y, probs).threshold == 0.5


def test_scorings_named_and_callable():
    y, probs = _problem(1)
    micro = tune_threshold(y, probs, scoring="micro_f1")
    assert micro.scores == pytest.approx([micro_f1(y, probs, t) for t in DEFAULT_THRESHOLDS])
    samples = tune_threshold(y, probs, scoring=partial(f1_score, average="samples", zero_division=0),
                             thresholds=[0.3, 0.4, 0.5])
    assert samples.thresholds == (0.3, 0.4, 0.5)
    assert samples.scores == pytest.approx(
        [f1_score(y, (probs >= t).astype(int), average="samples", zero_division=0) for t in (0.3, 0.4, 0.5)])


def test_count_threshold_is_the_lowest_within_the_count():
    output = np.array([[0.45, 0.38, 0.1], [0.6, 0.3, 0.36]])
    # labels a row: 0.35 -> 2.0, 0.375 -> 1.5, 0.4 -> 1.0, 0.5 -> 0.5
    chosen, evidence = count_threshold(output, 1.0, DEFAULT_THRESHOLDS, floor=0.35)
    assert chosen == 0.4 and evidence["predicted_count"] == 1.0 and evidence["expected_count"] == 1.0
    assert count_threshold(output, 5.0, DEFAULT_THRESHOLDS, floor=0.35)[0] == 0.35  # the floor holds
    assert count_threshold(output, 0.1, DEFAULT_THRESHOLDS, floor=0.35)[0] == 0.5  # none within: the top
    assert within_count(output, 1.0, DEFAULT_THRESHOLDS, floor=0.35) == (0.4, 0.425, 0.45, 0.475, 0.5)
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
    (dict(thresholds=[]), "thresholds must be a non-empty"),
    (dict(thresholds=[0.0, 0.5]), r"thresholds must hold numbers in \(0, 1\]"),
    (dict(thresholds="0.5"), "thresholds must be"),
    (dict(scoring="accuracy"), "scoring must be one of"),
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
