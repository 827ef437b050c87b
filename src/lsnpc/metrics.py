"""Multilabel evaluation metrics, computed from true 0/1 labels and predicted probabilities.

Every function takes ``y_true`` (n, L) of 0/1 and ``probs`` (n, L) in [0, 1]. Threshold metrics
binarise with ``probs >= threshold`` (:func:`binarize`), ``threshold`` one number for every label or one
per label, shape (L,); ranking metrics use the probabilities as
scores. scikit-learn computes every metric it has; only :func:`one_error` is written here.

Conventions (so numbers can be compared with papers):

- F1 values, mAP, LRAP, accuracies and losses are fractions in [0, 1], never percent.
- ``micro_f1`` / ``macro_f1`` / ``per_label_f1``: scikit-learn's ``f1_score`` with
  ``zero_division=0`` (a label never true and never predicted scores 0 in the macro average).
- ``map`` (:func:`mean_average_precision`): per-label average precision (scikit-learn's
  ``average_precision_score``, no interpolation) averaged over the labels that have at least one
  positive in ``y_true``; the other labels are undefined and skipped. This is the per-class mAP of
  the VOC / COCO literature, *not* LRAP (which the reference code logged as "mAP").
- ``lrap``: scikit-learn's ``label_ranking_average_precision_score`` (a sample without positives
  scores 1).
- ``ranking_loss``: scikit-learn's ``label_ranking_loss``.
- ``coverage``: scikit-learn's ``coverage_error``: the mean number of top-ranked labels needed to
  cover all true labels (best value is the mean number of true labels; MULAN's convention is this
  minus 1).
- ``one_error``: fraction of samples whose top-scored label is not a true label, over the samples
  with at least one true label; ties go to the lowest label index.
- ``hamming_loss`` and ``subset_accuracy``: scikit-learn's ``hamming_loss`` / ``accuracy_score`` of
  the binarised predictions.
- A metric that is undefined for the input (e.g. mAP when no label has a positive) is NaN.
- :data:`LOWER_IS_BETTER` names the losses (ranking loss, Hamming loss, one-error, coverage); for
  every other metric larger is better.

This module is torch-free.

Examples
--------
>>> import numpy as np
>>> from lsnpc.metrics import evaluate
>>> y = np.array([[1, 0], [0, 1], [1, 1]])
>>> p = np.array([[0.9, 0.2], [0.3, 0.8], [0.6, 0.4]])
>>> scores = evaluate(y, p)
>>> round(scores["micro_f1"], 4), scores["one_error"]
(0.8571, 0.0)
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from sklearn import metrics as skm

from lsnpc._validation import (
    check_binary_labels,
    check_probabilities,
    check_same_n_samples,
    check_scalar,
)

__all__ = [
    "METRIC_NAMES",
    "LOWER_IS_BETTER",
    "evaluate",
    "binarize",
    "per_label_f1",
    "micro_f1",
    "macro_f1",
    "mean_average_precision",
    "per_label_average_precision",
    "lrap",
    "ranking_loss",
    "hamming_loss",
    "one_error",
    "coverage",
    "subset_accuracy",
]

#: The keys of :func:`evaluate`'s result, in a stable order (for tables).
METRIC_NAMES: tuple[str, ...] = (
    "micro_f1",
    "macro_f1",
    "map",
    "lrap",
    "ranking_loss",
    "hamming_loss",
    "one_error",
    "coverage",
    "subset_accuracy",
)

#: The metrics of :data:`METRIC_NAMES` for which smaller is better; for the others larger is better.
LOWER_IS_BETTER: frozenset[str] = frozenset({"ranking_loss", "hamming_loss", "one_error", "coverage"})


def _check_inputs(y_true: Any, probs: Any) -> tuple[np.ndarray, np.ndarray]:
    y = check_binary_labels(y_true, "y_true")
    check_probabilities(probs, "probs")
    # Validated above; scored in float64 so ties and threshold edges match scikit-learn on the
    # user's input.
    p = np.asarray(probs.toarray() if hasattr(probs, "toarray") else probs, dtype=np.float64)
    check_same_n_samples(y_true=y, probs=p)
    if y.shape[1] != p.shape[1]:
        raise ValueError(
            f"y_true and probs must have the same number of labels (columns): "
            f"y_true has {y.shape[1]}, probs has {p.shape[1]}"
        )
    return y, p


def _check_threshold(threshold: Any, n_labels: int) -> float | np.ndarray:
    """One threshold in [0, 1] as a float, or one per label (shape (n_labels,), each in [0, 1]) as an array."""
    if np.ndim(threshold) == 0:
        return float(check_scalar(threshold, "threshold", kind=Real, low=0.0, high=1.0))
    try:
        per_label = np.asarray(threshold, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"threshold must be a number or one number per label, got {threshold!r:.80}") from None
    if per_label.shape != (n_labels,):
        raise ValueError(f"threshold must be a number or one per label, shape ({n_labels},), got shape "
                         f"{per_label.shape}")
    if not np.isfinite(per_label).all():
        raise ValueError("threshold must hold numbers in [0, 1] (one per label), got a NaN or infinity")
    if per_label.min() < 0.0 or per_label.max() > 1.0:
        raise ValueError(f"threshold must hold numbers in [0, 1] (one per label), got {per_label.min():g} to "
                         f"{per_label.max():g}")
    return per_label


def binarize(probs: Any, threshold: Any = 0.5) -> np.ndarray:
    """Hard 0/1 predictions ``probs >= threshold``, shape (n, L), int64; ``threshold``: a number, or one
    per label (L,)."""
    p = check_probabilities(probs, "probs")
    return _binarized(p, threshold)


def _binarized(p: np.ndarray, threshold: Any) -> np.ndarray:
    return (p >= _check_threshold(threshold, p.shape[1])).astype(np.int64)


# --- threshold metrics -------------------------------------------------------------------------


def _f1(y: np.ndarray, pred: np.ndarray, average: str | None) -> Any:
    if y.shape[1] == 1:
        # scikit-learn reads one label column as a binary target with two classes (its "micro" F1 is then
        # the accuracy); as multilabel data it is one label, whose F1 is the micro, macro and per-label F1.
        f1 = skm.f1_score(y[:, 0], pred[:, 0], average="binary", zero_division=0)
        return np.array([f1]) if average is None else f1
    return skm.f1_score(y, pred, average=average, zero_division=0)


def per_label_f1(y_true: Any, probs: Any, threshold: Any = 0.5) -> np.ndarray:
    """F1 of each label, shape (L,), in [0, 1] (0 for a label never true and never predicted)."""
    y, p = _check_inputs(y_true, probs)
    return np.asarray(_f1(y, _binarized(p, threshold), None), dtype=np.float64)


def micro_f1(y_true: Any, probs: Any, threshold: Any = 0.5) -> float:
    """F1 over all (sample, label) entries pooled, in [0, 1]."""
    y, p = _check_inputs(y_true, probs)
    return float(_f1(y, _binarized(p, threshold), "micro"))


def macro_f1(y_true: Any, probs: Any, threshold: Any = 0.5) -> float:
    """Unweighted mean of the per-label F1 scores, in [0, 1]."""
    y, p = _check_inputs(y_true, probs)
    return float(_f1(y, _binarized(p, threshold), "macro"))


def hamming_loss(y_true: Any, probs: Any, threshold: Any = 0.5) -> float:
    """Fraction of (sample, label) entries predicted wrongly, in [0, 1] (lower is better)."""
    y, p = _check_inputs(y_true, probs)
    return float(skm.hamming_loss(y, _binarized(p, threshold)))


def subset_accuracy(y_true: Any, probs: Any, threshold: Any = 0.5) -> float:
    """Fraction of samples whose whole predicted label vector is exactly right, in [0, 1]."""
    y, p = _check_inputs(y_true, probs)
    return float(skm.accuracy_score(y, _binarized(p, threshold)))


# --- ranking metrics ---------------------------------------------------------------------------


def per_label_average_precision(y_true: Any, probs: Any) -> np.ndarray:
    """Average precision of each label, shape (L,); NaN for a label without positives."""
    y, p = _check_inputs(y_true, probs)
    ap = np.full(y.shape[1], np.nan)
    for k in np.flatnonzero(y.sum(axis=0) > 0):
        ap[k] = skm.average_precision_score(y[:, k], p[:, k])
    return ap


def mean_average_precision(y_true: Any, probs: Any) -> float:
    """Per-class mAP: mean AP over labels with at least one positive (NaN if there is none)."""
    ap = per_label_average_precision(y_true, probs)
    return float(np.nanmean(ap)) if np.isfinite(ap).any() else float("nan")


# scikit-learn's ranking metrics refuse a single label column (it reads as "binary", not multilabel);
# with one label there is nothing to rank, and their definitions give the values used below.


def lrap(y_true: Any, probs: Any) -> float:
    """Label-ranking average precision, in [0, 1] (higher is better; 1 with a single label)."""
    y, p = _check_inputs(y_true, probs)
    if y.shape[1] == 1:
        return 1.0
    return float(skm.label_ranking_average_precision_score(y, p))


def ranking_loss(y_true: Any, probs: Any) -> float:
    """Fraction of (true, false) label pairs ranked in the wrong order, in [0, 1] (lower is better;
    0 with a single label: no pairs)."""
    y, p = _check_inputs(y_true, probs)
    if y.shape[1] == 1:
        return 0.0
    return float(skm.label_ranking_loss(y, p))


def coverage(y_true: Any, probs: Any) -> float:
    """scikit-learn's coverage error: mean rank depth needed to cover every true label (a sample without
    one needs 0; with a single label, the fraction of samples where it is true)."""
    y, p = _check_inputs(y_true, probs)
    if y.shape[1] == 1:
        return float(y.mean())
    return float(skm.coverage_error(y, p))


def one_error(y_true: Any, probs: Any) -> float:
    """Fraction of samples whose top-scored label is not true, over samples with a true label.

    Ties at the top go to the lowest label index. NaN if no sample has a true label.
    """
    y, p = _check_inputs(y_true, probs)
    has_pos = y.any(axis=1)
    if not has_pos.any():
        return float("nan")
    top = np.argmax(p[has_pos], axis=1)
    return float(1.0 - y[has_pos][np.arange(top.size), top].mean())


# --- everything at once ------------------------------------------------------------------------


def evaluate(y_true: Any, probs: Any, threshold: Any = 0.5) -> dict[str, float]:
    """Every metric of this module for one prediction.

    Parameters
    ----------
    y_true : array-like of shape (n, L)
        True 0/1 labels.
    probs : array-like of shape (n, L)
        Predicted probabilities in [0, 1] (hard 0/1 predictions are accepted too, but then the
        ranking metrics are not very informative).
    threshold : float in [0, 1], or array of shape (L,) in [0, 1]
        A label is predicted positive when its probability is ``>= threshold`` (its own, given one per
        label).

    Returns
    -------
    dict[str, float]
        Keys in :data:`METRIC_NAMES` order: micro_f1, macro_f1, map, lrap, ranking_loss,
        hamming_loss, one_error, coverage, subset_accuracy (see the module docstring for each
        convention).
    """
    y, p = _check_inputs(y_true, probs)
    threshold = _check_threshold(threshold, p.shape[1])
    return {
        "micro_f1": micro_f1(y, p, threshold),
        "macro_f1": macro_f1(y, p, threshold),
        "map": mean_average_precision(y, p),
        "lrap": lrap(y, p),
        "ranking_loss": ranking_loss(y, p),
        "hamming_loss": hamming_loss(y, p, threshold),
        "one_error": one_error(y, p),
        "coverage": coverage(y, p),
        "subset_accuracy": subset_accuracy(y, p, threshold),
    }
