"""Multilabel label-noise simulation.

Three kinds of noise, all drawn from an explicit numpy Generator (never the global RNG):

``"symmetric"`` and ``"pairflip"``
    The scheme of the paper (shared with the HLC paper's code): every positive label ``k`` of a row
    draws a replacement class from row ``k`` of a transition matrix ``T``
    (:func:`transition_matrix`), and the whole row is redrawn until the new positives do not
    collide. The number of positives per row is therefore kept and only positives move. Symmetric
    noise sends a moving label uniformly to one of the other ``L - 1`` labels; pairflip sends label
    ``k`` to ``(k + 1) mod L``.
``"flip"``
    Independent per-entry bit flips with a class-conditional false-negative rate (1 -> 0) and
    false-positive rate (0 -> 1).

This module is torch-free on purpose: the noise is a property of label matrices, not of models.

Examples
--------
>>> import numpy as np
>>> from lsnpc.noise import simulate_noise
>>> Y = np.array([[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0]])
>>> Y_noisy, report = simulate_noise(Y, "pairflip", 0.4, random_state=0)
>>> Y_noisy.sum(axis=1).tolist()  # positives per row are kept
[2, 1, 0]
>>> report.kind, report.rate
('pairflip', 0.4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np

from lsnpc._validation import (
    check_binary_labels,
    check_in_choices,
    check_random_state,
    check_scalar,
)

__all__ = ["NOISE_KINDS", "NoiseReport", "transition_matrix", "simulate_noise"]

NOISE_KINDS: tuple[str, ...] = ("symmetric", "pairflip", "flip")
_MATRIX_KINDS: tuple[str, ...] = ("symmetric", "pairflip")

# Rejection sampling of a row is exact but can be hopeless for pathological rows (e.g. pairflip on a
# row with a long run of consecutive positives at a high rate). After this many rounds the rows that
# still collide are left unchanged and counted in the report, so the call always terminates.
_MAX_REDRAW_ROUNDS = 1000


@dataclass(frozen=True, eq=False)  # eq=False: it holds an array
class NoiseReport:
    """What :func:`simulate_noise` did.

    Attributes
    ----------
    kind : str
        ``"symmetric"``, ``"pairflip"`` or ``"flip"``.
    rate : float
        The nominal rate that was asked for (for ``"flip"``, the ``rate`` argument, or NaN when only
        ``fn_rate`` / ``fp_rate`` were given).
    realised_rate : float
        Symmetric / pairflip: the fraction of originally positive entries that moved, i.e. whose
        accepted draw from ``T`` is another label (its expectation is ``rate``, up to the small
        bias of rejecting colliding rows). Flip: the fraction of all entries that were flipped.
        NaN when there is nothing to measure.
    per_label_rate : ndarray of shape (L,)
        The same quantity per label: symmetric / pairflip, fraction of label ``k``'s positives that
        moved (NaN for a label without positives); flip, fraction of column ``k`` flipped.
    n_rows_changed : int
        Number of rows whose label vector differs from the original.
    fn_rate, fp_rate : float or None
        Flip only: nominal false-negative (1 -> 0) and false-positive (0 -> 1) rates.
    realised_fn_rate, realised_fp_rate : float or None
        Flip only: fraction of positives turned to 0, of negatives turned to 1 (NaN if none exist).
    n_rows_unresolved : int
        Symmetric / pairflip only: rows left unchanged because no collision-free redraw was found
        (every row whose labels are all positive, and rows still colliding after the redraw limit).
    positives_lost_rate : float or None
        Symmetric / pairflip only: the fraction of originally positive entries that are 0 in the
        noisy matrix. Lower than ``realised_rate`` when a moved label lands where another positive
        left (e.g. two positives swapping), which leaves that entry 1.
    """

    kind: str
    rate: float
    realised_rate: float
    per_label_rate: np.ndarray = field(repr=False)
    n_rows_changed: int
    fn_rate: float | None = None
    fp_rate: float | None = None
    realised_fn_rate: float | None = None
    realised_fp_rate: float | None = None
    n_rows_unresolved: int = 0
    positives_lost_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: plain Python numbers and lists, NaN written as ``None``."""

        def clean(value: Any) -> Any:
            if value is None:
                return None
            value = float(value)
            return None if math.isnan(value) else value

        return {
            "kind": self.kind,
            "rate": clean(self.rate),
            "realised_rate": clean(self.realised_rate),
            "per_label_rate": [clean(v) for v in self.per_label_rate.tolist()],
            "n_rows_changed": int(self.n_rows_changed),
            "fn_rate": clean(self.fn_rate),
            "fp_rate": clean(self.fp_rate),
            "realised_fn_rate": clean(self.realised_fn_rate),
            "realised_fp_rate": clean(self.realised_fp_rate),
            "n_rows_unresolved": int(self.n_rows_unresolved),
            "positives_lost_rate": clean(self.positives_lost_rate),
        }


def _check_rate(rate: Any, name: str) -> float:
    return float(check_scalar(rate, name, low=0.0, high=1.0, high_inclusive=False))


def transition_matrix(kind: str, rate: float, n_labels: int) -> np.ndarray:
    """The label transition matrix ``T`` with ``T[i, j] = p(noisy label j | true label i)``.

    Parameters
    ----------
    kind : {"symmetric", "pairflip"}
        Symmetric: ``1 - rate`` on the diagonal and ``rate / (L - 1)`` elsewhere.
        Pairflip: ``1 - rate`` on the diagonal and ``rate`` at ``(i, (i + 1) mod L)``.
    rate : float in [0, 1)
        The noise rate.
    n_labels : int >= 2
        Number of labels ``L``.

    Returns
    -------
    ndarray of shape (L, L), float64
        A row-stochastic matrix.

    Examples
    --------
    >>> transition_matrix("pairflip", 0.3, 3)
    array([[0.7, 0.3, 0. ],
           [0. , 0.7, 0.3],
           [0.3, 0. , 0.7]])
    """
    check_in_choices(kind, "kind", _MATRIX_KINDS)
    rate = _check_rate(rate, "rate")
    check_scalar(n_labels, "n_labels", kind=Integral, low=2)
    n_labels = int(n_labels)
    if kind == "symmetric":
        T = np.full((n_labels, n_labels), rate / (n_labels - 1))
    else:
        T = np.zeros((n_labels, n_labels))
        T[np.arange(n_labels), (np.arange(n_labels) + 1) % n_labels] = rate
    np.fill_diagonal(T, 1.0 - rate)
    return T


def _draw_targets(
    labels: np.ndarray, kind: str, rate: float, n_labels: int, rng: np.random.Generator
) -> np.ndarray:
    """One draw from row ``labels[i]`` of T for every entry, without materialising T's rows.

    A label moves with probability ``rate``; a moving label goes to ``k + 1`` (pairflip) or to one
    of the other ``L - 1`` labels uniformly (symmetric), which is exactly row ``k`` of
    :func:`transition_matrix`.
    """
    moves = rng.random(labels.shape[0]) < rate
    if kind == "pairflip":
        offset = np.ones(labels.shape[0], dtype=np.int64)
    else:
        offset = 1 + rng.integers(0, n_labels - 1, size=labels.shape[0])
    return np.where(moves, (labels + offset) % n_labels, labels)


def _colliding_rows(rows: np.ndarray, targets: np.ndarray, n_labels: int) -> np.ndarray:
    """Unique row ids in which two entries drew the same target label."""
    keys = np.sort(rows * n_labels + targets)
    dup = keys[1:] == keys[:-1]
    return np.unique(keys[1:][dup] // n_labels)


def _matrix_noise(
    Y: np.ndarray, kind: str, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, int]:
    """Symmetric / pairflip noise by vectorised rejection sampling.

    Returns (Y_noisy, moved_per_label (L,) counts of positives that moved, n_unresolved_rows).
    """
    n, n_labels = Y.shape
    Y_noisy = Y.copy()
    if rate == 0.0:
        return Y_noisy, np.zeros(n_labels, dtype=np.int64), 0
    rows, labels = np.nonzero(Y)  # row-major, so each row's entries are contiguous
    n_pos = Y.sum(axis=1)
    # A row with every label positive can only map onto itself: skip it (and count it) up front.
    full = n_pos == n_labels
    keep = ~full[rows]
    rows, labels = rows[keep], labels[keep]
    targets = np.empty_like(labels)

    # Entries of the rows that still need a (re)draw, as indices into rows / labels.
    pending = np.arange(rows.shape[0])
    for _ in range(_MAX_REDRAW_ROUNDS):
        if pending.size == 0:
            break
        targets[pending] = _draw_targets(labels[pending], kind, rate, n_labels, rng)
        bad_rows = _colliding_rows(rows[pending], targets[pending], n_labels)
        pending = pending[np.isin(rows[pending], bad_rows)]
    unresolved_rows = np.unique(rows[pending])
    # Rows that never found a collision-free draw keep their original labels.
    targets[pending] = labels[pending]

    Y_noisy[rows, labels] = 0
    Y_noisy[rows, targets] = 1
    moved = np.bincount(labels[targets != labels], minlength=n_labels)
    return Y_noisy, moved, int(full.sum() + unresolved_rows.size)


def _flip_noise(
    Y: np.ndarray, fn_rate: float, fp_rate: float, rng: np.random.Generator
) -> np.ndarray:
    u = rng.random(Y.shape)
    flip = np.where(Y == 1, u < fn_rate, u < fp_rate)
    return np.where(flip, 1 - Y, Y)


def _safe_ratio(num: np.ndarray | float, den: np.ndarray | float) -> Any:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.asarray(den) > 0, np.asarray(num) / np.maximum(den, 1), np.nan)


def simulate_noise(
    Y: Any,
    kind: str = "symmetric",
    rate: float | None = None,
    *,
    random_state: int | np.random.Generator | np.random.SeedSequence | None = None,
    fn_rate: float | None = None,
    fp_rate: float | None = None,
) -> tuple[np.ndarray, NoiseReport]:
    """Corrupt a binary label matrix with synthetic multilabel noise.

    Parameters
    ----------
    Y : array-like of shape (n, L)
        Clean 0/1 labels (bool or numbers).
    kind : {"symmetric", "pairflip", "flip"}
        The noise model (see the module docstring). Symmetric and pairflip need ``L >= 2``.
    rate : float in [0, 1)
        Symmetric / pairflip: the off-diagonal mass of each row of ``T`` (the probability that a
        positive label moves). Flip: the default for both ``fn_rate`` and ``fp_rate``; may be
        omitted when both of those are given.
    random_state : None, int, SeedSequence or numpy Generator
        Source of randomness; the same seed gives the same output. ``None`` is non-reproducible.
    fn_rate, fp_rate : float in [0, 1), optional
        Flip only: probability that a positive becomes 0 / that a negative becomes 1.

    Returns
    -------
    Y_noisy : ndarray of shape (n, L), int64
        The noisy labels (a new array; ``Y`` is not modified). Rows without positives are unchanged
        by symmetric / pairflip noise, and a rate of 0 returns an unchanged copy.
    report : NoiseReport
        Nominal and realised rates and how many rows changed.

    Raises
    ------
    ValueError
        ``Y`` not a 2-d 0/1 matrix, unknown ``kind``, a rate outside [0, 1), fewer than 2 labels for
        symmetric / pairflip, ``fn_rate`` / ``fp_rate`` with a kind other than flip, or no rate
        given.

    Notes
    -----
    Symmetric / pairflip use rejection sampling per row, as in the reference scheme. A row whose
    labels are all positive can only map onto itself and is left as is; a row that finds no
    collision-free draw after 1000 rounds (only possible for extreme rows, e.g. long runs of
    consecutive positives under pairflip at a high rate) is also left unchanged. Both are counted in
    ``report.n_rows_unresolved``. Conditioning on "no collision" means the realised rate can be a
    little below the nominal one when labels co-occur a lot.
    """
    Y = check_binary_labels(Y, "Y")
    check_in_choices(kind, "kind", NOISE_KINDS)
    rng = check_random_state(random_state)
    n, n_labels = Y.shape

    if kind in _MATRIX_KINDS:
        if fn_rate is not None or fp_rate is not None:
            raise ValueError(f"fn_rate and fp_rate apply only to kind='flip', not kind={kind!r}")
        if rate is None:
            raise ValueError(f"rate is required for kind={kind!r}, got None")
        rate = _check_rate(rate, "rate")
        if n_labels < 2:
            raise ValueError(
                f"Y must have at least 2 label columns for kind={kind!r} (a label can only move to "
                f"another label), got {n_labels}"
            )
        Y_noisy, moved, n_unresolved = _matrix_noise(Y, kind, rate, rng)
        n_pos = Y.sum(axis=0)
        lost = ((Y == 1) & (Y_noisy == 0)).sum()
        report = NoiseReport(
            kind=kind,
            rate=rate,
            realised_rate=float(_safe_ratio(moved.sum(), n_pos.sum())),
            per_label_rate=_safe_ratio(moved, n_pos).astype(np.float64),
            n_rows_changed=int((Y_noisy != Y).any(axis=1).sum()),
            n_rows_unresolved=n_unresolved,
            positives_lost_rate=float(_safe_ratio(lost, n_pos.sum())),
        )
        return Y_noisy, report

    # kind == "flip"
    if rate is None and (fn_rate is None or fp_rate is None):
        raise ValueError(
            "rate is required for kind='flip' unless both fn_rate and fp_rate are given"
        )
    nominal = _check_rate(rate, "rate") if rate is not None else math.nan
    fn = _check_rate(fn_rate, "fn_rate") if fn_rate is not None else nominal
    fp = _check_rate(fp_rate, "fp_rate") if fp_rate is not None else nominal
    Y_noisy = _flip_noise(Y, fn, fp, rng)
    flipped = Y_noisy != Y
    report = NoiseReport(
        kind=kind,
        rate=nominal,
        realised_rate=float(flipped.mean()),
        per_label_rate=flipped.mean(axis=0).astype(np.float64),
        n_rows_changed=int(flipped.any(axis=1).sum()),
        fn_rate=fn,
        fp_rate=fp,
        realised_fn_rate=float(_safe_ratio(flipped[Y == 1].sum(), (Y == 1).sum())),
        realised_fp_rate=float(_safe_ratio(flipped[Y == 0].sum(), (Y == 0).sum())),
    )
    return Y_noisy, report
