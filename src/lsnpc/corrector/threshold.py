"""Decision thresholds for multilabel probabilities, chosen on labelled rows.

A model trained on noisy labels, and LSNPC's output too, is rarely best decided at 0.5: label noise flattens
probabilities, and the F1-optimal threshold of calibrated probabilities is half the best attainable F1 (Lipton,
Elkan and Naryanaswamy, 2014), below 0.5 wherever that F1 is below 1; for a rare label it can sit far below.
:func:`tune_threshold` chooses the threshold on rows whose labels are known, among candidates drawn from the
scores themselves (as scikit-learn's ``TunedThresholdClassifierCV`` does for one binary label), one for all
labels or one per label, and returns the whole score curve. It works on any probabilities: LSNPC's output, or
the base model's own (the simplest competitor to any correction)::

    from lsnpc import tune_threshold
    tuned = tune_threshold(y_val, base_probs_val)        # (n, L) 0/1 labels, (n, L) probabilities
    labels = tuned.predict(base_probs_test)              # (m, L) 0/1 at tuned.threshold
    tuned.thresholds, tuned.scores                       # the curve the choice was read from
    per_label = tune_threshold(y_val, base_probs_val, per_label=True)   # a threshold a label, where it has
    per_label.label_thresholds                                          # enough positives to choose one

Where no labelled row can choose, :func:`count_threshold` keeps to a label count instead: the lowest
threshold at which the output predicts no more labels a row than a count known from elsewhere (the noisy
labels', or the base model's expected count, Σ_j p_ij averaged over rows).

Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from .._validation import check_multilabel, check_probabilities, check_same_n_samples, check_scalar
from .scores import f1_from_counts, resample_weights

__all__ = ["AUTO", "NARROW_THRESHOLDS", "N_CANDIDATES", "MIN_LABEL_POSITIVES", "SCORINGS", "BAG_BELOW_ROWS", "N_BAGS",
           "ThresholdCurve",
           "tune_threshold", "candidate_thresholds", "within_count", "count_threshold", "check_thresholds",
           "cross_fitted_predictions"]

#: ``thresholds="auto"``: the candidates are drawn from the scores (:func:`candidate_thresholds`).
AUTO = "auto"
#: The fixed grid 0.2, 0.225, ..., 0.5 the library searched before its candidates came from the scores (for
#: comparisons; it stops above the best threshold of a rare label).
NARROW_THRESHOLDS: tuple[float, ...] = tuple(round(0.2 + 0.025 * i, 3) for i in range(13))
#: How many candidates ``thresholds="auto"`` tries, spread over the scores of the positive entries.
N_CANDIDATES = 50
# the lowest (and 1 − the highest) candidate: a probability of exactly 0 or 1 has no log-odds
_EDGE = 1e-6
#: ``per_label=True``: the fewest positives a label needs among the rows to get a threshold of its own.
MIN_LABEL_POSITIVES = 10
#: ``bagging="auto"``: below this many rows the threshold for all labels is the median of the best thresholds of
#: ``N_BAGS`` bootstrap resamples of the rows (a fixed seed), not the best on the rows as they are: on a few dozen
#: rows the curve's peak is one row's luck.
BAG_BELOW_ROWS = 100
N_BAGS = 100
#: Named scorings: micro-F1 + macro-F1 (the default: rare labels count, frequent ones too), or either alone.
SCORINGS = ("micro+macro", "micro_f1", "macro_f1")


@dataclass(frozen=True)
class ThresholdCurve:
    """A threshold chosen on labelled rows, and the score curve it was read from.

    Attributes
    ----------
    threshold : float
        The chosen threshold: the best score among the candidates (ties: the highest threshold). With
        ``label_thresholds``, the threshold of the labels that have too few positives for one of their own.
    thresholds : tuple of float
        The candidates, ascending.
    scores : tuple of float
        The score at each candidate, on the rows given.
    scoring : str
        The scoring's name (a callable's ``__name__``).
    n_rows : int
        How many labelled rows scored it.
    label_thresholds : tuple of float or None
        ``per_label=True``: the threshold of each label (L,); None for one threshold for all labels.
    tuned_labels : int
        How many labels chose their own threshold (0 without ``per_label``).
    bagged : int
        How many bootstrap resamples' best thresholds the threshold is the median of (0: the best on the rows as
        they are).
    """

    threshold: float
    thresholds: tuple[float, ...]
    scores: tuple[float, ...]
    scoring: str
    n_rows: int
    label_thresholds: tuple[float, ...] | None = None
    tuned_labels: int = 0
    bagged: int = 0

    @property
    def best_score(self) -> float:
        """The score at :attr:`threshold` (one threshold for all labels)."""
        return self.scores[self.thresholds.index(self.threshold)]

    @property
    def decision(self) -> float | np.ndarray:
        """What :meth:`predict` compares the probabilities with: :attr:`threshold`, or the (L,) array of
        :attr:`label_thresholds`."""
        return self.threshold if self.label_thresholds is None else np.asarray(self.label_thresholds)

    def predict(self, probs: Any) -> np.ndarray:
        """0/1 labels (m, L) int64: ``probs`` (m, L) >= :attr:`decision`."""
        p = check_probabilities(probs, "probs")
        if self.label_thresholds is not None and p.shape[1] != len(self.label_thresholds):
            raise ValueError(f"probs has {p.shape[1]} label columns, but the thresholds were chosen for "
                             f"{len(self.label_thresholds)}")
        return (p >= self.decision).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {"threshold": self.threshold, "thresholds": list(self.thresholds), "scores": list(self.scores),
                "scoring": self.scoring, "n_rows": self.n_rows,
                "label_thresholds": None if self.label_thresholds is None else list(self.label_thresholds),
                "tuned_labels": self.tuned_labels, "bagged": self.bagged}


def check_thresholds(thresholds: Any, name: str = "thresholds", *, auto: bool = False) -> tuple[float, ...] | str:
    """A grid of thresholds as a sorted tuple of distinct floats, each in (0, 1]; with ``auto``, the string
    ``"auto"`` too (returned as it is). A ValueError names ``name``."""
    expected = "'auto' or " if auto else ""
    if isinstance(thresholds, str):
        if auto and thresholds == AUTO:
            return AUTO
        raise ValueError(f"{name} must be {expected}a non-empty sequence of numbers in (0, 1], got {thresholds!r:.80}")
    try:
        values = np.asarray(thresholds, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {expected}a sequence of numbers in (0, 1], got {thresholds!r:.80}") from None
    if values.ndim != 1 or values.size == 0 or isinstance(thresholds, bytes):
        raise ValueError(f"{name} must be {expected}a non-empty sequence of numbers in (0, 1], got {thresholds!r:.80}")
    if not np.isfinite(values).all() or values.min() <= 0.0 or values.max() > 1.0:
        raise ValueError(f"{name} must hold numbers in (0, 1], got {values.min():g} to {values.max():g}")
    return tuple(float(t) for t in np.unique(values))


def candidate_thresholds(scores: np.ndarray, n_candidates: int = N_CANDIDATES) -> tuple[float, ...]:
    """The thresholds worth trying on ``scores`` (any shape), ascending: ``n_candidates`` points evenly spaced in
    log-odds from the lowest to the highest score (each kept within [1e-6, 1 − 1e-6]); one point when they are
    all equal; empty when there is no score.

    Passed the scores of the positive entries, they span every place an F1 curve can peak (lowering a threshold
    below the lowest positive adds negatives only), wherever those scores sit: far below 0.5 for a rare label,
    above it for a model that memorised its labels. Spaced in log-odds, they are dense near 0 and 1 where small
    probabilities differ most; a fixed count keeps the choice from fitting a small set's noise point by point.
    Every candidate is a number of the scores' own precision (float32 scores give float32 numbers), so
    ``scores >= t`` is the same comparison in either precision, and the ends are the lowest and highest score.
    """
    values = np.asarray(scores).ravel()
    dtype = values.dtype if values.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    values = values.astype(dtype)
    if not values.size:
        return ()
    low, high = np.clip(np.array([values.min(), values.max()], dtype=dtype), dtype.type(_EDGE), dtype.type(1 - _EDGE))
    if high <= low:
        return (float(low),)
    low64, high64 = float(low), float(high)
    logits = np.linspace(np.log(low64 / (1 - low64)), np.log(high64 / (1 - high64)), n_candidates)
    points = (1 / (1 + np.exp(-logits))).astype(dtype)
    points[0], points[-1] = low, high
    return tuple(float(t) for t in np.unique(points))


def _scorer(scoring: str | Callable[[np.ndarray, np.ndarray], float]) -> tuple[str, Callable[..., float] | None]:
    """(name, callable) for a callable scoring; (name, None) for a named one, scored from counts."""
    if callable(scoring):
        name = getattr(scoring, "__name__", "custom")

        def custom(y: np.ndarray, pred: np.ndarray, threshold: float) -> float:
            value = scoring(y, pred)
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number):
                raise ValueError(f"scoring {name} returned {value!r} at threshold {threshold:g}; it must return a "
                                 "finite number (larger is better)")
            return number

        return name, custom
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))} or a callable "
                         f"scoring(y_true, y_pred) -> float, got {scoring!r}")
    return scoring, None


def _counts_at(y: np.ndarray, p: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label (TP, FP, FN) of ``p >= t`` for every t of ``grid``: three (len(grid), L) arrays, from sorted
    scores (no (n, L) array a threshold). A threshold is compared in the scores' precision, as ``predict`` compares
    it (``p >= t`` with float32 ``p`` rounds ``t`` to float32)."""
    grid = _in_dtype_of(p, grid)
    n_labels = y.shape[1]
    tp = np.empty((len(grid), n_labels))
    fp = np.empty((len(grid), n_labels))
    positives = y.sum(0).astype(np.float64)
    for j in range(n_labels):
        column, mask = p[:, j], y[:, j] == 1
        pos, neg = np.sort(column[mask]), np.sort(column[~mask])
        tp[:, j] = len(pos) - np.searchsorted(pos, grid, side="left")
        fp[:, j] = len(neg) - np.searchsorted(neg, grid, side="left")
    return tp, fp, positives - tp


def _in_dtype_of(scores: np.ndarray, grid: Any) -> np.ndarray:
    """``grid`` as an array of the scores' float type (float32 for float32 scores, else float64)."""
    return np.asarray(grid, dtype=scores.dtype if scores.dtype == np.float32 else np.float64)


def _best(grid: Sequence[float], scores: Sequence[float]) -> float:
    """The highest threshold of ``grid`` whose score is the best."""
    top = max(scores)
    return max(t for t, s in zip(grid, scores) if s >= top - 1e-12)


def _label_threshold(column: np.ndarray, truth: np.ndarray, grid: Sequence[float] | None = None) -> float | None:
    """The threshold maximising one label's F1 on its scores ``column`` (n,) against ``truth`` (n,) 0/1, among
    ``grid`` or, when None, :func:`candidate_thresholds` of its positives' scores (ties: the highest); None when
    there is no candidate."""
    candidates = np.asarray(candidate_thresholds(column[truth == 1]) if grid is None else grid)
    if not candidates.size:
        return None
    tp, fp, fn = (a[:, 0] for a in _counts_at(truth[:, None], column[:, None], candidates))
    f1 = 2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)
    return _best(candidates.tolist(), f1.tolist())


def tune_threshold(
    y_true: Any,
    probs: Any,
    *,
    thresholds: Sequence[float] | str = AUTO,
    scoring: str | Callable[[np.ndarray, np.ndarray], float] = "micro+macro",
    per_label: bool = False,
    min_positives: int = MIN_LABEL_POSITIVES,
    bagging: bool | str = AUTO,
) -> ThresholdCurve:
    """Choose the decision threshold of ``probs`` that scores best against ``y_true``.

    Parameters
    ----------
    y_true : array (n, L) of 0/1, or lists of label indices
        The rows' labels (clean ones, ideally: a small validation set).
    probs : array (n, L) in [0, 1]
        Probabilities on the same rows: a base model's, or LSNPC's ``predict_proba``.
    thresholds : "auto" or sequence of float in (0, 1]
        The candidates. "auto" (default): 50 points evenly spaced in log-odds over the range of the positive
        entries' scores (:func:`candidate_thresholds`), so the search covers wherever the scores are, far below
        0.5 for a rare label included; or a grid of your own.
    scoring : {"micro+macro", "micro_f1", "macro_f1"} or callable
        What the threshold for all labels maximises; a callable gets ``(y_true, y_pred)``, both (n, L) 0/1 int
        arrays, and returns a finite number (larger is better), e.g.
        ``functools.partial(sklearn.metrics.f1_score, average="samples")``.
    per_label : bool, default False
        Also choose a threshold for each label with at least ``min_positives`` positives among the rows: the one
        that maximises that label's F1 (with "auto" thresholds, over the range of its own positives' scores;
        else on the grid).
        The other labels keep the threshold for all labels. Per-label thresholds fit small sets' noise: they pay
        where each label has a few dozen positives.
    min_positives : int >= 1, default 10
        ``per_label``: the fewest positives a label needs to get its own threshold.
    bagging : "auto" or bool, default "auto"
        Choose the threshold for all labels as the median of the best thresholds of 100 bootstrap resamples of
        the rows (fixed seed: the same rows give the same threshold), not the best on the rows as they are.
        "auto": below 100 rows, where one row moves the curve's peak. The curve's scores stay those of the rows
        as they are.

    Returns
    -------
    ThresholdCurve
        ``threshold`` (ties: the highest), the candidates with the score at each, and with ``per_label`` the
        threshold of every label (``label_thresholds``; ``predict`` applies them).
    """
    p = check_probabilities(probs, "probs")
    y = check_multilabel(y_true, "y_true", n_labels=p.shape[1])
    check_same_n_samples(y_true=y, probs=p)
    grid = check_thresholds(thresholds, auto=True)
    name, custom = _scorer(scoring)
    check_scalar(min_positives, "min_positives", kind=Integral, low=1)
    if not isinstance(per_label, (bool, np.bool_)):
        raise ValueError(f"per_label must be True or False, got {per_label!r}")
    if not (isinstance(bagging, (bool, np.bool_)) or bagging == AUTO):
        raise ValueError(f"bagging must be 'auto', True or False, got {bagging!r}")
    if grid == AUTO:
        grid = candidate_thresholds(p[y == 1]) or (0.5,)
    if custom is not None:
        scores = tuple(custom(y, (p >= t).astype(np.int64), t) for t in grid)
    else:
        scores = _named_scores(name, *_counts_at(y, p, np.asarray(grid)))[0]
    chosen, bagged = _best(grid, scores), 0
    if bagging is True or (bagging == AUTO and len(y) < BAG_BELOW_ROWS):
        chosen, bagged = _bagged_threshold(y, p, grid, name, custom, chosen)
    if not per_label:
        return ThresholdCurve(threshold=chosen, thresholds=tuple(grid), scores=scores, scoring=name, n_rows=len(y),
                              bagged=bagged)
    label_thresholds, tuned = [], 0
    own_grid = None if isinstance(thresholds, str) else grid  # "auto": each label's own positives' range
    for j in range(y.shape[1]):
        own = _label_threshold(p[:, j], y[:, j], own_grid) if y[:, j].sum() >= min_positives else None
        tuned += own is not None
        label_thresholds.append(chosen if own is None else float(own))
    return ThresholdCurve(threshold=chosen, thresholds=tuple(grid), scores=scores, scoring=name, n_rows=len(y),
                          label_thresholds=tuple(label_thresholds), tuned_labels=tuned, bagged=bagged)


def _named_scores(name: str, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> list[tuple[float, ...]]:
    """The named scoring of count arrays (..., G, L): one tuple of G scores for each leading index."""
    micro, macro = f1_from_counts(tp, fp, fn)
    values = {"micro+macro": micro + macro, "micro_f1": micro, "macro_f1": macro}[name].reshape(-1, tp.shape[-2])
    return [tuple(float(v) for v in row) for row in values]


def _bagged_threshold(y: np.ndarray, p: np.ndarray, grid: Sequence[float], name: str,
                      custom: Callable[..., float] | None, fallback: float) -> tuple[float, int]:
    """(threshold, resamples): the median (the upper one: a candidate itself) of the best thresholds of
    ``N_BAGS`` bootstrap resamples of the rows that hold a positive label (seed 0); ``fallback`` and 0 when none
    does."""
    weights = resample_weights(len(y), N_BAGS, np.random.default_rng(0))
    weights = weights[(weights @ y).sum(1) > 0]
    if not len(weights):
        return fallback, 0
    if custom is None:  # counts of every resample at every candidate at once: (B, G, L)
        above = p[:, None, :] >= _in_dtype_of(p, grid)[None, :, None]     # (n, G, L)
        hits = (above & (y[:, None, :] == 1)).reshape(len(y), -1).astype(np.float64)
        calls = above.reshape(len(y), -1).astype(np.float64)
        shape = (len(weights), len(grid), y.shape[1])
        tp, called = (weights @ hits).reshape(shape), (weights @ calls).reshape(shape)
        fn = (weights @ y.astype(np.float64))[:, None, :] - tp
        curves = _named_scores(name, tp, called - tp, fn)
    else:
        curves = []
        for w in weights:
            rows = np.repeat(np.arange(len(y)), w)
            curves.append([custom(y[rows], (p[rows] >= t).astype(np.int64), t) for t in grid])
    best = np.sort([_best(grid, curve) for curve in curves])
    return float(best[len(best) // 2]), len(best)


def within_count(output: np.ndarray, expected_count: float, thresholds: Sequence[float] | str, *,
                 floor: float) -> tuple[float, ...]:
    """The thresholds from ``floor`` up at which ``output`` (n, L) predicts no more labels a row, on average, than
    ``expected_count``, ascending; the highest candidate is always among them. ``thresholds``: the candidates, or
    "auto" for :func:`candidate_thresholds` over the output's range, with 0.5 beside them.

    A lower threshold adds labels the data never had: where no clean label scores the choice, it keeps to a count
    known from elsewhere (the noisy labels', or the base model's expected count).
    """
    if isinstance(thresholds, str):
        grid = np.asarray(sorted({*candidate_thresholds(output), 0.5}))
    else:
        grid = np.asarray(sorted(thresholds), dtype=np.float64)
    top = grid[-1]
    flat = np.sort(np.ravel(output))
    counts = (len(flat) - np.searchsorted(flat, _in_dtype_of(flat, grid), side="left")) / max(1, len(output))
    keep = (grid == top) | ((grid >= floor) & (counts <= expected_count + 1e-12))
    return tuple(float(t) for t in grid[keep])


def count_threshold(output: np.ndarray, expected_count: float, thresholds: Sequence[float] | str, *,
                    floor: float) -> tuple[float, dict[str, Any]]:
    """The lowest of :func:`within_count`: (threshold, evidence), the evidence holding ``expected_count``,
    ``floor`` and ``predicted_count`` (the labels a row at the threshold chosen)."""
    chosen = within_count(output, expected_count, thresholds, floor=floor)[0]
    predicted = float((output >= chosen).sum(1).mean())
    return chosen, {"expected_count": float(expected_count), "floor": float(floor), "predicted_count": predicted}


def cross_fitted_predictions(
    y_true: np.ndarray, probs: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]], **tune: Any,
) -> np.ndarray:
    """0/1 predictions (n, L) of ``probs`` (n, L) in which no row is decided at a threshold chosen with its own
    label: each fold's test part at the threshold :func:`tune_threshold` (``**tune``: its keyword arguments)
    chooses on the fold's training part against ``y_true`` (n, L). Their F1 is what a threshold tuned on such
    rows is worth on new ones; a candidate judged at its own tuned threshold is judged this way."""
    pred = np.zeros(y_true.shape, dtype=np.int64)
    for train, test in folds:
        pred[test] = tune_threshold(y_true[train], probs[train], **tune).predict(probs[test])
    return pred
