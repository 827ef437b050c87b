"""Label issues and corrected training labels for multilabel data, from LSNPC (beyond the paper).

cleanlab's inputs — the given ``labels`` and a model's ``pred_probs`` on the same rows — plus the
``features``: an LSNPC corrector is fitted on (features, pred_probs), and the posterior of the true
labels given the observed ones, p(y | x, ŷ = labels), says which labels look wrong and what they should
be (:mod:`lsnpc.corrector.label_posterior`). The scores' prior also reads the labels the rows'
nearest neighbours in ``features`` were given and how often labels go together across the rows, so pass
the whole labelled set in one call. Use out-of-fold probabilities::

    from lsnpc import MLPClassifier, cross_val_pred_probs, find_label_issues, correct_labels
    P = cross_val_pred_probs(MLPClassifier(random_state=0), X, Y, random_state=0)
    issues = find_label_issues(Y, P, features=X)          # (n, L) bool
    Y_fixed = correct_labels(Y, P, features=X)            # (n, L) 0/1

Each function fits its own corrector (``LSNPC(random_state=0, student=False, guard=False)`` unless
``params`` say otherwise, :data:`LABEL_CORRECTOR_DEFAULTS`); to get all three from one fit, fit that
:class:`lsnpc.LSNPC` once and call its methods of the same names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import (
    _to_ndarray,
    check_multilabel,
    check_probabilities,
    check_same_n_samples,
    check_scalar,
)
from .corrector import LSNPC

__all__ = ["LABEL_CORRECTOR_DEFAULTS", "label_quality_scores", "find_label_issues", "correct_labels", "fit_corrector",
           "keep_label_positives"]

LABEL_CORRECTOR_DEFAULTS: dict[str, Any] = {"random_state": 0, "student": False, "guard": False}
"""The LSNPC parameters the label functions set unless ``params`` give others: a fixed seed, so results
repeat, and the plain correction (no student, no guard) in the prior. On scene and yeast (4 noise
settings × 3 seeds) the default's student and ¼ base blend (its prior then; ⅓ now) moved AUROC by at
most 0.1 points in a setting, AP by 0.4 and the relabelled retraining's F1 by 0.5, either way, and made
the fit ~40% slower (docs/label-issues.md, "Which corrector")."""

_FIT_ARGUMENTS = ("X_clean", "y_clean", "pred_probs_clean", "X_val", "y_val", "pred_probs_val")


def fit_corrector(labels: Any, pred_probs: Any, *, features: Any, **params: Any) -> tuple[LSNPC, np.ndarray]:
    """Check the inputs and fit the LSNPC corrector the three functions use.

    Returns (the fitted corrector, the given labels as an (n, L) 0/1 matrix). ``params``: LSNPC's
    constructor parameters, over :data:`LABEL_CORRECTOR_DEFAULTS` (``random_state=0``, ``student=False``,
    ``guard=False`` unless given), and its fit-time sets (``X_clean``/``y_clean``/``pred_probs_clean``,
    ``X_val``/``y_val``/``pred_probs_val``).
    """
    P = check_probabilities(pred_probs, "pred_probs", min_samples=2)
    given = check_multilabel(labels, "labels", n_labels=P.shape[1], min_samples=2)
    check_same_n_samples(labels=given, pred_probs=P)
    if features is None:
        raise ValueError("features is required: the rows' features X, shape (n, d)")
    shape = np.shape(_to_ndarray(features, "features"))  # refuses sparse and complex features by name
    if len(shape) < 2:
        raise ValueError(f"features must be an array of shape (n, d), one row per row of labels; got shape {shape}")
    check_same_n_samples(labels=given, features=np.empty(shape[:1]))
    fit_args = {name: params.pop(name) for name in _FIT_ARGUMENTS if name in params}
    params = {**LABEL_CORRECTOR_DEFAULTS, **params}
    try:
        corrector = LSNPC(**params)
    except TypeError as exc:
        raise ValueError(f"unknown LSNPC parameter: {exc}") from exc
    return corrector.fit(features, P, **fit_args), given


def label_quality_scores(labels: Any, pred_probs: Any, *, features: Any, **params: Any) -> np.ndarray:
    """How likely each given label is right, from the posterior p(y | x, ŷ = labels).

    Parameters
    ----------
    labels : (n, L) 0/1 array, or a list of n lists of class indices (cleanlab's format)
        The given (possibly wrong) labels.
    pred_probs : (n, L) array in [0, 1]
        A model's probabilities on the same rows, best out-of-fold (:func:`lsnpc.cross_val_pred_probs`).
    features : (n, d) array
        The rows' features X: LSNPC's input, and where each row's nearest neighbours are looked for
        (cosine similarity of the standardised features; their given labels enter the prior of the
        scores, not of :func:`correct_labels`).
    **params
        Passed to :class:`lsnpc.LSNPC` (e.g. ``random_state``, ``device``, ``epochs``) or to its fit
        (``X_val``, ``y_val``, ``pred_probs_val``; ``X_clean``, ...).

    Returns
    -------
    ndarray (n, L) float64 in [0, 1]: entry (i, k) says how likely the given label k of row i is right —
    the posterior's probability blended (in logits, 0.7 / 0.3) with ``pred_probs``' own, so a ranking
    never rests on the estimated noise alone; low = likely wrong.

    Examples
    --------
    >>> scores = label_quality_scores(Y, P, features=X)            # doctest: +SKIP
    >>> worst = np.dstack(np.unravel_index(np.argsort(scores, axis=None), scores.shape))[0][:10]  # doctest: +SKIP
    """
    corrector, given = fit_corrector(labels, pred_probs, features=features, **params)
    return corrector.label_quality_scores(features, given, pred_probs)


def find_label_issues(labels: Any, pred_probs: Any, *, features: Any, **params: Any) -> np.ndarray:
    """(n, L) bool: True where the given label looks wrong — the entries :func:`correct_labels` changes.

    Same arguments as :func:`label_quality_scores`. A wrong positive and the missing positive it most
    likely replaced are flagged together.
    """
    corrector, given = fit_corrector(labels, pred_probs, features=features, **params)
    return corrector.find_label_issues(features, given, pred_probs)


def correct_labels(labels: Any, pred_probs: Any, *, features: Any, min_positive_fraction: float | None = None,
                   **params: Any) -> np.ndarray:
    """(n, L) 0/1 int64: the suggested labels.

    Same arguments as :func:`label_quality_scores`. Each given positive is replaced by the label it most
    likely came from under the estimated noise (itself when it looks right), so a row keeps its number of
    positives; rows keep their place, so the result can replace the given labels for training.

    ``min_positive_fraction`` (a float in [0, 1], or None: off): for retraining, never leave a label with fewer
    positives than this fraction of its given count; where the correction would, that label's given positives
    come back (:func:`keep_label_positives`). The correction moves a rare label's positives to frequent ones
    more readily than back, and a model retrained on the result can lose the rare label altogether.
    """
    if min_positive_fraction is not None:
        check_scalar(min_positive_fraction, "min_positive_fraction", low=0.0, high=1.0)
    corrector, given = fit_corrector(labels, pred_probs, features=features, **params)
    corrected = corrector.correct_labels(features, given, pred_probs)
    if min_positive_fraction is None:
        return corrected
    return keep_label_positives(given, corrected, min_fraction=min_positive_fraction)


def keep_label_positives(labels: Any, corrected: Any, *, min_fraction: float) -> np.ndarray:
    """The corrected labels, with every given positive of a label put back where the correction left that label
    fewer than ``min_fraction`` of its given positives.

    Parameters
    ----------
    labels : (n, L) 0/1 array, or a list of n lists of class indices
        The given labels.
    corrected : (n, L) 0/1 array
        A correction of them (:func:`correct_labels`).
    min_fraction : float in [0, 1]
        A label whose corrected positives number fewer than ``ceil(min_fraction × its given positives)`` gets
        all its given positives back (the positives the correction added to it stay). 0 changes nothing; 1
        lets no label end with fewer positives than it was given.

    Returns
    -------
    ndarray (n, L) 0/1 int64.
    """
    check_scalar(min_fraction, "min_fraction", low=0.0, high=1.0)
    out = np.array(check_multilabel(corrected, "corrected"), dtype=np.int64)
    given = check_multilabel(labels, "labels", n_labels=out.shape[1])
    check_same_n_samples(labels=given, corrected=out)
    need = np.ceil(min_fraction * given.sum(axis=0) - 1e-9)  # the tolerance: 0.3 × 10 is 3, not 3.0000000000000004
    drained = out.sum(axis=0) < need
    out[:, drained] |= given[:, drained].astype(np.int64)
    return out
