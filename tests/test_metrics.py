"""Tests for lsnpc.metrics: each metric equals scikit-learn's (or a hand computation)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from sklearn import metrics as skm

from lsnpc import metrics as M
from lsnpc.metrics import METRIC_NAMES, evaluate


def _random_problem(seed: int, n: int = 80, L: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random((n, L)) < 0.35).astype(np.int64)
    y[0] = 0  # a sample without labels (edge case for one_error / lrap)
    y[:, -1] = 0  # a label without positives (edge case for mAP / macro-F1)
    probs = np.clip(0.5 * y + rng.random((n, L)) * 0.7, 0.0, 1.0)
    return y, probs


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("threshold", [0.3, 0.5])
def test_evaluate_equals_scikit_learn(seed, threshold):
    y, probs = _random_problem(seed)
    pred = (probs >= threshold).astype(int)
    has_pos = y.sum(axis=0) > 0
    expected = {
        "micro_f1": skm.f1_score(y, pred, average="micro", zero_division=0),
        "macro_f1": skm.f1_score(y, pred, average="macro", zero_division=0),
        "map": np.mean(
            [skm.average_precision_score(y[:, k], probs[:, k]) for k in np.flatnonzero(has_pos)]
        ),
        "lrap": skm.label_ranking_average_precision_score(y, probs),
        "ranking_loss": skm.label_ranking_loss(y, probs),
        "hamming_loss": skm.hamming_loss(y, pred),
        "coverage": skm.coverage_error(y, probs),
        "subset_accuracy": skm.accuracy_score(y, pred),
    }
    got = evaluate(y, probs, threshold=threshold)
    assert tuple(got) == METRIC_NAMES
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name
    assert all(isinstance(v, float) for v in got.values())
    np.testing.assert_allclose(
        M.per_label_f1(y, probs, threshold), skm.f1_score(y, pred, average=None, zero_division=0)
    )


def test_map_is_not_lrap_and_skips_labels_without_positives():
    y, probs = _random_problem(3)
    ap = M.per_label_average_precision(y, probs)
    assert np.isnan(ap[-1]) and np.isfinite(ap[:-1]).all()
    assert M.mean_average_precision(y, probs) == pytest.approx(np.mean(ap[:-1]))
    assert M.mean_average_precision(y, probs) != pytest.approx(M.lrap(y, probs))


def test_one_error_by_hand():
    y = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]])
    p = np.array(
        [
            [0.9, 0.1, 0.2],  # top 0, true  -> right
            [0.8, 0.7, 0.1],  # top 0, false -> error
            [0.1, 0.2, 0.3],  # top 2, true  -> right
            [0.9, 0.1, 0.1],  # no true label: not counted
            [0.5, 0.5, 0.1],  # tie 0/1 -> index 0, true -> right
        ]
    )
    assert M.one_error(y, p) == pytest.approx(1 / 4)
    assert evaluate(y, p)["one_error"] == pytest.approx(0.25)


def test_threshold_is_inclusive_and_binarize():
    y = np.array([[1, 0], [0, 1]])
    p = np.array([[0.5, 0.49], [0.2, 0.5]])
    np.testing.assert_array_equal(M.binarize(p, 0.5), [[1, 0], [0, 1]])
    assert M.micro_f1(y, p) == 1.0
    assert M.subset_accuracy(y, p) == 1.0
    assert M.hamming_loss(y, p) == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_a_threshold_per_label_binarises_each_column_at_its_own(seed):
    y, probs = _random_problem(seed)
    per_label = np.linspace(0.25, 0.55, y.shape[1])  # as LSNPC.label_thresholds_
    pred = (probs >= per_label).astype(int)
    assert not np.array_equal(pred, probs >= 0.5)
    np.testing.assert_array_equal(M.binarize(probs, per_label), pred)
    scores = evaluate(y, probs, threshold=per_label)
    assert scores["micro_f1"] == pytest.approx(skm.f1_score(y, pred, average="micro", zero_division=0))
    assert scores["macro_f1"] == pytest.approx(skm.f1_score(y, pred, average="macro", zero_division=0))
    assert scores["hamming_loss"] == pytest.approx(skm.hamming_loss(y, pred))
    assert scores["subset_accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    np.testing.assert_allclose(M.per_label_f1(y, probs, per_label),
                               skm.f1_score(y, pred, average=None, zero_division=0))
    # the same number for every label is that number
    assert evaluate(y, probs, threshold=np.full(y.shape[1], 0.4)) == evaluate(y, probs, threshold=0.4)


def test_perfect_and_worst_predictions():
    y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]])
    best = evaluate(y, y.astype(float))
    assert best["micro_f1"] == best["macro_f1"] == best["map"] == best["lrap"] == 1.0
    assert best["ranking_loss"] == best["hamming_loss"] == best["one_error"] == 0.0
    assert best["subset_accuracy"] == 1.0
    assert best["coverage"] == pytest.approx(skm.coverage_error(y, y.astype(float)))
    worst = evaluate(y, 1.0 - y)
    assert worst["micro_f1"] == 0.0 and worst["hamming_loss"] == 1.0 and worst["one_error"] == 1.0


def test_undefined_metrics_are_nan():
    y = np.zeros((3, 2), dtype=int)
    p = np.full((3, 2), 0.3)
    scores = evaluate(y, p)
    assert np.isnan(scores["map"]) and np.isnan(scores["one_error"])
    assert scores["hamming_loss"] == 0.0


def test_accepts_bool_labels_and_lists():
    y = [[True, False], [False, True]]
    p = [[0.8, 0.1], [0.3, 0.6]]
    assert evaluate(y, p)["micro_f1"] == 1.0


@pytest.mark.parametrize(
    "y, p, kwargs, match",
    [
        (np.array([[1, 0]]), np.array([[0.5, 1.2]]), {}, "probs"),
        (np.array([[1, 0]]), np.array([[0.5, np.nan]]), {}, "probs"),
        (np.array([[1, 2]]), np.array([[0.5, 0.2]]), {}, "y_true"),
        (np.array([[1, 0], [0, 1]]), np.array([[0.5, 0.2]]), {}, "same number of samples"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2, 0.1]]), {}, "same number of labels"),
        (np.array([1, 0]), np.array([0.5, 0.2]), {}, "y_true"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2]]), {"threshold": 1.5}, "threshold"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2]]), {"threshold": [0.5, 0.4, 0.3]}, r"one per label, shape \(2,\)"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2]]), {"threshold": [0.5, 1.2]}, r"threshold must hold numbers in"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2]]), {"threshold": [0.5, np.nan]}, r"threshold.*NaN"),
        (np.array([[1, 0]]), np.array([[0.5, 0.2]]), {"threshold": ["high", "low"]}, r"threshold must be a number"),
    ],
)
def test_bad_inputs_raise_value_errors_naming_them(y, p, kwargs, match):
    with pytest.raises(ValueError, match=match):
        evaluate(y, p, **kwargs)


def test_every_public_metric_validates():
    for fn in (M.micro_f1, M.macro_f1, M.lrap, M.ranking_loss, M.coverage, M.one_error,
               M.hamming_loss, M.subset_accuracy, M.mean_average_precision, M.per_label_f1):
        with pytest.raises(ValueError, match="probs"):
            fn(np.array([[1, 0]]), np.array([[0.5, -0.1]]))


def test_docstring_examples_run():
    assert doctest.testmod(M).failed == 0


def test_a_single_label_column_is_scored() -> None:
    """scikit-learn's ranking metrics refuse one column ("binary"); with one label they must equal what they
    give when a second, never-true label is always ranked last (it changes no ranking of true labels)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(40, 1))
    p = rng.uniform(size=(40, 1))
    scores = evaluate(y, p)
    y2, p2 = np.hstack([y, np.zeros_like(y)]), np.hstack([p, np.full_like(p, -1.0)])
    assert scores["lrap"] == pytest.approx(skm.label_ranking_average_precision_score(y2, p2))
    assert scores["ranking_loss"] == pytest.approx(skm.label_ranking_loss(y2, p2))
    assert scores["coverage"] == pytest.approx(skm.coverage_error(y2, p2))
    f1 = skm.f1_score(y[:, 0], p[:, 0] >= 0.5)  # the label's F1 (scikit-learn's "micro" of one column: accuracy)
    assert scores["micro_f1"] == pytest.approx(f1) and scores["macro_f1"] == pytest.approx(f1)
