"""F1 from confusion counts, for many row weightings at once: the arithmetic the policy steps share.

Choosing a threshold scores one output at a dozen thresholds; testing a blend scores it on 500 bootstrap
resamples of a few dozen rows. Both reduce to per-label true-positive, false-positive and false-negative
counts under a matrix of row weights (B, n), so each costs a matrix product. The numbers equal
:func:`lsnpc.metrics.micro_f1` and :func:`lsnpc.metrics.macro_f1` (scikit-learn's, ``zero_division=0``;
tested equal). Torch-free.
"""

from __future__ import annotations

import numpy as np

__all__ = ["label_counts", "f1_from_counts", "f1_scores", "resample_weights", "loses"]


def label_counts(y_true: np.ndarray, pred: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Weighted per-label (TP, FP, FN): ``y_true``, ``pred`` (n, L) 0/1; ``weights`` (B, n) → three (B, L)."""
    y = y_true.astype(np.float64)
    p = pred.astype(np.float64)
    return weights @ (y * p), weights @ ((1 - y) * p), weights @ (y * (1 - p))


def f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(micro-F1, macro-F1) along the last axis (labels) of count arrays (..., L); 0 where undefined."""
    with np.errstate(invalid="ignore", divide="ignore"):
        micro_den = 2 * tp.sum(-1) + fp.sum(-1) + fn.sum(-1)
        micro = np.where(micro_den > 0, 2 * tp.sum(-1) / micro_den, 0.0)
        per_label_den = 2 * tp + fp + fn
        per_label = np.where(per_label_den > 0, 2 * tp / per_label_den, 0.0)
    return micro, per_label.mean(-1)


def f1_scores(y_true: np.ndarray, pred: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(micro-F1, macro-F1) of 0/1 predictions ``pred`` (n, L) against ``y_true`` (n, L), one pair per row of
    ``weights`` (B, n) (None: the rows as they are, B = 1)."""
    if weights is None:
        weights = np.ones((1, len(y_true)))
    return f1_from_counts(*label_counts(y_true, pred, weights))


def resample_weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap resamples of n rows as counts (n_boot, n): how often each row is drawn in each resample."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)


def loses(scores: tuple[np.ndarray, np.ndarray], reference: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per resample, whether a candidate's (micro-F1, macro-F1) fell below the reference's in either one."""
    (micro, macro), (ref_micro, ref_macro) = scores, reference
    return (micro < ref_micro - 1e-12) | (macro < ref_macro - 1e-12)
