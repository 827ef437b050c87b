"""Out-of-fold predicted probabilities with multilabel-stratified folds.

Label-issue detection (:mod:`lsnpc.label_issues`, cleanlab) needs a model's probabilities on rows it
was not trained on: a model scores its own training labels as right, mistakes included. Typical use::

    from lsnpc import MLPClassifier, cross_val_pred_probs
    P = cross_val_pred_probs(MLPClassifier(random_state=0), X, Y_noisy, cv=5, random_state=0)

Folds come from iterative stratification (Sechidis et al., 2011; the ``iterative-stratification``
package), which keeps each label's share of positives nearly equal across folds — plain K-fold can
leave a rare label with no positive in some training part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from numbers import Integral
from typing import Any

import numpy as np

from ._validation import check_multilabel, check_random_state, check_same_n_samples, check_scalar

__all__ = ["cross_val_pred_probs", "multilabel_folds"]


def multilabel_folds(labels: np.ndarray, n_splits: int, random_state: Any = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train indices, test indices) of ``n_splits`` multilabel-stratified folds of (n, L) 0/1 ``labels``.

    Every row is in exactly one test part. The same ``random_state`` gives the same folds.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedKFold

    check_scalar(n_splits, "cv", kind=Integral, low=2)
    if n_splits > len(labels):
        raise ValueError(f"cv={n_splits} folds need at least {n_splits} samples, got {len(labels)}")
    seed = int(check_random_state(random_state).integers(2**31 - 1))
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        # iterative stratification refuses a single column ("binary"); on one label it is plain stratification
        from sklearn.model_selection import KFold, StratifiedKFold

        column = labels[:, 0]
        counts = np.bincount(column.astype(np.int64), minlength=2)
        splitter = (StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed) if counts.min() >= n_splits
                    else KFold(n_splits=n_splits, shuffle=True, random_state=seed))
        return [(train, test) for train, test in splitter.split(np.zeros((len(labels), 1)), column)]
    splitter = MultilabelStratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return [(train, test) for train, test in splitter.split(np.zeros((len(labels), 1)), labels)]


def cross_val_pred_probs(
    estimator: Any,
    X: Any,
    labels: Any,
    *,
    cv: int | Iterable[tuple[np.ndarray, np.ndarray]] = 5,
    random_state: Any = None,
    n_labels: int | None = None,
    fit_params: dict[str, Any] | None = None,
    on_fold: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Out-of-fold probabilities: each row scored by a copy of ``estimator`` not trained on it.

    Parameters
    ----------
    estimator : object with ``fit(X, Y)`` and ``predict_proba(X)``
        Cloned for every fold (``sklearn.base.clone``), so the object passed in is never fitted.
        ``predict_proba`` may return an (n, L) array or, as scikit-learn's multi-output classifiers do,
        a list of L (n, 2) arrays.
    X : array (n, ...)
        Features, indexed by row.
    labels : (n, L) 0/1 array, or a list of n lists of class indices (cleanlab's format; L is then
        ``n_labels``, or the largest index + 1)
        The (noisy) training labels.
    cv : int or iterable of (train indices, test indices)
        Number of multilabel-stratified folds (:func:`multilabel_folds`), or the folds themselves; the
        test parts must cover every row exactly once.
    random_state : int, numpy Generator or None
        Seeds the fold assignment (the estimator's own seed is its parameter).
    n_labels : int, optional
        L, for labels given as lists of indices.
    fit_params : dict, optional
        Extra keyword arguments for every ``fit`` call.
    on_fold : callable(done, total), optional
        Called after each fold (for progress bars).

    Returns
    -------
    ndarray (n, L) float32: row i holds the probabilities of the copy fitted without row i.
    """
    Xa = np.asarray(X)
    if n_labels is None and isinstance(labels, (list, tuple)):
        n_labels = _widest_index(labels)
    Y = check_multilabel(labels, "labels", n_labels=n_labels, min_samples=2)
    check_same_n_samples(X=Xa, labels=Y)
    folds = multilabel_folds(Y, cv, random_state) if isinstance(cv, Integral) else _check_folds(cv, len(Y))
    out = np.full(Y.shape, np.nan, dtype=np.float32)
    for done, (train, test) in enumerate(folds, start=1):
        model = _clone(estimator)
        model.fit(Xa[train], Y[train], **(fit_params or {}))
        out[test] = _as_label_matrix(model.predict_proba(Xa[test]), len(test), Y.shape[1],
                                     getattr(model, "classes_", None))
        if on_fold is not None:
            on_fold(done, len(folds))
    return out


def _widest_index(labels: list | tuple) -> int | None:
    """L for lists of class indices: the largest index + 1 (None when it cannot be read)."""
    try:
        largest = max((int(k) for row in labels for k in row), default=-1)
    except (TypeError, ValueError):
        return None
    return largest + 1 if largest >= 0 else None


def _check_folds(cv: Iterable[tuple[np.ndarray, np.ndarray]], n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    try:
        folds = [(np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)) for train, test in cv]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cv must be an int or an iterable of (train indices, test indices): {exc}") from exc
    covered = np.concatenate([test for _, test in folds]) if folds else np.empty(0, dtype=np.int64)
    if len(covered) != n or not np.array_equal(np.sort(covered), np.arange(n)):
        raise ValueError(f"cv: the test parts must cover each of the {n} rows exactly once")
    for train, test in folds:
        if np.intersect1d(train, test).size:
            raise ValueError("cv: a fold trains on some of its own test rows")
    return folds


def _clone(estimator: Any) -> Any:
    """An unfitted copy with the same parameters (``sklearn.base.clone``)."""
    from sklearn.base import clone

    for method in ("fit", "predict_proba"):
        if not callable(getattr(estimator, method, None)):
            raise ValueError(f"estimator must have fit and predict_proba methods; {type(estimator).__name__} "
                             f"has no {method}")
    return clone(estimator)


def _as_label_matrix(probs: Any, n_rows: int, n_labels: int, classes: Any = None) -> np.ndarray:
    """predict_proba's output as (n_rows, n_labels): an array, or a list of per-label (n, 2) arrays; for one
    label, also a binary classifier's (n, 2) array, whose ``classes`` (the model's ``classes_``) are 0 and 1:
    scikit-learn reads a one-column target as one binary problem."""
    if isinstance(probs, list):
        widths = {np.shape(p)[1] if np.ndim(p) == 2 else None for p in probs}
        if widths != {2}:
            raise ValueError("estimator.predict_proba returned a list whose entries are not all (n, 2) arrays "
                             "(a label with one class in a training part?)")
        probs = np.stack([np.asarray(p)[:, 1] for p in probs], axis=1)
    probs = np.asarray(probs, dtype=np.float32)
    if n_labels == 1 and probs.shape == (n_rows, 2) and classes is not None and np.array_equal(classes, [0, 1]):
        probs = probs[:, 1:]
    if probs.shape != (n_rows, n_labels):
        raise ValueError(f"estimator.predict_proba returned shape {probs.shape}, expected ({n_rows}, {n_labels})")
    return probs
