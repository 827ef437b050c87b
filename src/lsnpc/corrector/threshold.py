"""Decision thresholds for multilabel probabilities, chosen on labelled rows.

A model trained on noisy labels, and LSNPC's output too, is rarely best decided at 0.5: label noise flattens
probabilities, and the F1-optimal threshold of calibrated probabilities is half the best attainable F1 (Lipton,
Elkan and Naryanaswamy, 2014), below 0.5 wherever that F1 is below 1. :func:`tune_threshold` chooses one
threshold for all labels on rows whose labels are known, over a grid, as scikit-learn's
``TunedThresholdClassifierCV`` does for one binary label, and returns the whole score curve. It works on
any probabilities: LSNPC's output, or the base model's own (the simplest competitor to any correction)::

    from lsnpc import tune_threshold
    tuned = tune_threshold(y_val, base_probs_val)        # (n, L) 0/1 labels, (n, L) probabilities
    labels = tuned.predict(base_probs_test)              # (m, L) 0/1 at tuned.threshold
    tuned.thresholds, tuned.scores                       # the curve the choice was read from

Where no labelled row can choose, :func:`count_threshold` keeps to a label count instead: the lowest
threshold at which the output predicts no more labels a row than a count known from elsewhere (the base
model's expected count, Σ_j p_ij averaged over rows).

Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import check_multilabel, check_probabilities, check_same_n_samples
from .scores import f1_scores

__all__ = ["DEFAULT_THRESHOLDS", "SCORINGS", "ThresholdCurve", "tune_threshold", "within_count", "count_threshold",
           "check_thresholds"]

#: The grid :func:`tune_threshold` searches by default: 0.2, 0.225, ..., 0.5.
DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.2 + 0.025 * i, 3) for i in range(13))
#: Named scorings: micro-F1 + macro-F1 (the default: rare labels count, frequent ones too), or either alone.
SCORINGS = ("micro+macro", "micro_f1", "macro_f1")


@dataclass(frozen=True)
class ThresholdCurve:
    """A threshold chosen on labelled rows, and the score curve it was read from.

    Attributes
    ----------
    threshold : float
        The chosen threshold: the best score on the grid (ties: the highest threshold, the nearest to 0.5).
    thresholds : tuple of float
        The grid, ascending.
    scores : tuple of float
        The score at each threshold of the grid, on the rows given.
    scoring : str
        The scoring's name (a callable's ``__name__``).
    n_rows : int
        How many labelled rows scored it.
    """

    threshold: float
    thresholds: tuple[float, ...]
    scores: tuple[float, ...]
    scoring: str
    n_rows: int

    @property
    def best_score(self) -> float:
        """The score at :attr:`threshold`."""
        return self.scores[self.thresholds.index(self.threshold)]

    def predict(self, probs: Any) -> np.ndarray:
        """0/1 labels (m, L) int64: ``probs`` (m, L) >= :attr:`threshold`."""
        return (check_probabilities(probs, "probs") >= self.threshold).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {"threshold": self.threshold, "thresholds": list(self.thresholds), "scores": list(self.scores),
                "scoring": self.scoring, "n_rows": self.n_rows}


def check_thresholds(thresholds: Any, name: str = "thresholds") -> tuple[float, ...]:
    """A grid of thresholds as a sorted tuple of distinct floats, each in (0, 1]; a ValueError names ``name``."""
    try:
        values = np.asarray(thresholds, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1], got {thresholds!r:.80}") from None
    if values.ndim != 1 or values.size == 0 or isinstance(thresholds, (str, bytes)):
        raise ValueError(f"{name} must be a non-empty sequence of numbers in (0, 1], got {thresholds!r:.80}")
    if not np.isfinite(values).all() or values.min() <= 0.0 or values.max() > 1.0:
        raise ValueError(f"{name} must hold numbers in (0, 1], got {values.min():g} to {values.max():g}")
    return tuple(float(t) for t in np.unique(values))


def _scorer(scoring: str | Callable[[np.ndarray, np.ndarray], float]) -> tuple[str, Callable[..., float]]:
    if callable(scoring):
        return getattr(scoring, "__name__", "custom"), lambda y, pred: float(scoring(y, pred))

    def named(y: np.ndarray, pred: np.ndarray) -> float:
        micro, macro = (float(s[0]) for s in f1_scores(y, pred))
        return {"micro+macro": micro + macro, "micro_f1": micro, "macro_f1": macro}[scoring]

    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))} or a callable "
                         f"scoring(y_true, y_pred) -> float, got {scoring!r}")
    return scoring, named


def tune_threshold(
    y_true: Any,
    probs: Any,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    scoring: str | Callable[[np.ndarray, np.ndarray], float] = "micro+macro",
) -> ThresholdCurve:
    """Choose the decision threshold of ``probs`` that scores best against ``y_true``.

    Parameters
    ----------
    y_true : array (n, L) of 0/1, or lists of label indices
        The rows' labels (clean ones, ideally: a small validation set).
    probs : array (n, L) in [0, 1]
        Probabilities on the same rows: a base model's, or LSNPC's ``predict_proba``.
    thresholds : sequence of float in (0, 1]
        The grid searched (default 0.2, 0.225, ..., 0.5).
    scoring : {"micro+macro", "micro_f1", "macro_f1"} or callable
        What is maximised; a callable gets ``(y_true, y_pred)``, both (n, L) 0/1 int arrays, and returns a
        number (larger is better), e.g. ``functools.partial(sklearn.metrics.f1_score, average="samples")``.

    Returns
    -------
    ThresholdCurve
        ``threshold`` (ties: the highest), and the grid with the score at each point.
    """
    p = check_probabilities(probs, "probs")
    y = check_multilabel(y_true, "y_true", n_labels=p.shape[1])
    check_same_n_samples(y_true=y, probs=p)
    grid = check_thresholds(thresholds)
    name, score = _scorer(scoring)
    scores = tuple(score(y, (p >= t).astype(np.int64)) for t in grid)
    best = max(scores)
    chosen = max(t for t, s in zip(grid, scores) if s >= best - 1e-12)
    return ThresholdCurve(threshold=chosen, thresholds=grid, scores=scores, scoring=name, n_rows=len(y))


def within_count(output: np.ndarray, expected_count: float, thresholds: Sequence[float], *,
                 floor: float) -> tuple[float, ...]:
    """The thresholds of ``thresholds`` from ``floor`` up at which ``output`` (n, L) predicts no more labels a row,
    on average, than ``expected_count``, ascending; the grid's top (its highest threshold) is always among them.

    A lower threshold adds labels the data never had: where no clean label scores the choice, it keeps to a count
    known from elsewhere (the noisy labels', or the base model's expected count).
    """
    top = max(thresholds)
    return tuple(t for t in sorted(thresholds)
                 if t == top or (t >= floor and float((output >= t).sum(1).mean()) <= expected_count + 1e-12))


def count_threshold(output: np.ndarray, expected_count: float, thresholds: Sequence[float], *,
                    floor: float) -> tuple[float, dict[str, Any]]:
    """The lowest of :func:`within_count`: (threshold, evidence), the evidence holding ``expected_count``,
    ``floor`` and ``predicted_count`` (the labels a row at the threshold chosen)."""
    chosen = within_count(output, expected_count, thresholds, floor=floor)[0]
    predicted = float((output >= chosen).sum(1).mean())
    return chosen, {"expected_count": float(expected_count), "floor": float(floor), "predicted_count": predicted}
