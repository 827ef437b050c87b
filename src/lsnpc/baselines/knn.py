"""The paper's k-nearest-neighbour post-processor, returning probabilities.

For each label, a k-NN vote is taken among the training samples whose base probability for that
label is confident (``< low`` or ``> high``), with the rounded probability as the target; clean
samples, when given, join every label's training set with their true labels. Unlike the reference
code (which returned hard labels, making ranking metrics meaningless), the output is the weighted
neighbour vote, a probability in [0, 1].

All labels share one neighbour search: the nearest candidates of each query are found once and each
label keeps the first ``n_neighbors`` of them that are confident for it. Queries for which too few
candidates are confident for some label are searched again with more candidates, so the result
equals a per-label scikit-learn ``KNeighborsClassifier`` at a fraction of the cost.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.neighbors import NearestNeighbors

from lsnpc._sklearn import PostProcessorTagsMixin
from lsnpc._validation import (
    check_finite_output,
    check_in_choices,
    check_random_state,
    check_scalar,
)
from lsnpc.baselines._common import PostProcessorMixin, validate_fit

__all__ = ["KNNCorrector"]

# The shared search fetches enough candidates that, at the sparsest label's confident fraction,
# about _CANDIDATE_MARGIN times n_neighbors confident ones are expected; at most _MAX_CANDIDATES
# (memory is n_queries x candidates). Queries still short of confident candidates are searched
# again with four times as many candidates (one search for all labels), until every training point
# is a candidate.
_CANDIDATE_MARGIN = 2.0
_MAX_CANDIDATES = 512
# Upper bound on rows x candidates held at once when the search is widened for a few rows.
_MAX_CANDIDATE_ENTRIES = 2_000_000


def _vote(dist: np.ndarray, targets: np.ndarray, valid: np.ndarray, weights: str) -> np.ndarray:
    """Weighted mean of ``targets`` over the ``valid`` neighbours of each row (scikit-learn's rule).

    With distance weights, a query at distance 0 from some neighbours gives them weight 1 and the
    rest weight 0, as in scikit-learn.
    """
    if weights == "uniform":
        w = valid.astype(np.float64)
    else:
        zero = (dist == 0) & valid
        with np.errstate(divide="ignore"):
            w = np.where(valid, 1.0 / dist, 0.0)
        has_zero = zero.any(axis=1)
        w[has_zero] = zero[has_zero].astype(np.float64)
    total = w.sum(axis=1)
    out = np.full(total.shape, np.nan)
    return np.divide((w * targets).sum(axis=1), total, out=out, where=total > 0)


class KNNCorrector(PostProcessorTagsMixin, PostProcessorMixin, BaseEstimator):
    """Per-label k-NN vote over confidently predicted (and clean) samples.

    Parameters
    ----------
    n_neighbors : int, default 5
        Neighbours per vote (fewer when a label has fewer confident samples). 5 is the paper's
        value ("the hyperparameter K is defaulted to 5"); the authors' published code uses 10
        (``n_neighbors=10`` reproduces it).
    low, high : float, default 0.1, 0.9
        A sample is a training point for label ``k`` when its base probability for ``k`` is
        ``< low`` (target 0) or ``> high`` (target 1). Need ``0 <= low <= high <= 1``.
    weights : {"distance", "uniform"}, default "distance"
        Vote weights, as in scikit-learn's ``KNeighborsClassifier``.
    metric : str, default "euclidean"
        Any metric scikit-learn's ``NearestNeighbors`` accepts.
    random_state : None, int or numpy Generator
        Accepted for a uniform interface with the other correctors; k-NN itself is deterministic.

    Attributes
    ----------
    n_features_in_ : int
        Feature dimension ``d`` seen in fit.
    n_labels_ : int
        Number of labels ``L``.
    fallback_labels_ : ndarray of shape (L,), bool
        Labels without a confident sample of both classes. For these the k-NN could only ever
        output one value, so predict_proba returns the base probabilities unchanged.
    n_train_per_label_ : ndarray of shape (L,), int
        Number of training points (confident plus clean) each label votes over.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    >>> P = np.array([[0.05], [0.02], [0.6], [0.95], [0.4], [0.97]])
    >>> knn = KNNCorrector(n_neighbors=2).fit(X, P)
    >>> knn.predict(X, P).ravel().tolist()
    [0, 0, 0, 1, 1, 1]
    """

    def __init__(
        self,
        n_neighbors: int = 5,
        low: float = 0.1,
        high: float = 0.9,
        weights: str = "distance",
        metric: str = "euclidean",
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.low = low
        self.high = high
        self.weights = weights
        self.metric = metric
        self.random_state = random_state

    def _check_params(self) -> None:
        check_scalar(self.n_neighbors, "n_neighbors", kind=Integral, low=1)
        check_scalar(self.low, "low", kind=Real, low=0.0, high=1.0)
        check_scalar(self.high, "high", kind=Real, low=0.0, high=1.0)
        if self.low > self.high:
            raise ValueError(f"low must be <= high, got low={self.low}, high={self.high}")
        check_in_choices(self.weights, "weights", ("distance", "uniform"))
        if not isinstance(self.metric, str):
            raise ValueError(f"metric must be a metric name (str), got {self.metric!r}")
        check_random_state(self.random_state)

    def fit(
        self,
        X: Any,
        pred_probs: Any,
        *,
        X_clean: Any = None,
        y_clean: Any = None,
        pred_probs_clean: Any = None,
    ) -> KNNCorrector:
        """Store the confident training points of every label and index them for search.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features (e.g. backbone embeddings) of the samples the base classifier predicted.
        pred_probs : array-like of shape (n, L)
            The base classifier's probabilities for X.
        X_clean, y_clean, pred_probs_clean : array-like of shape (m, d), (m, L), (m, L), optional
            A small clean set. Its samples join every label's training set with their true labels.
            ``pred_probs_clean`` is not used by k-NN but must be given with the clean set (the
            interface is the same for every corrector).

        Returns
        -------
        self
        """
        self._check_params()
        self._require_pred_probs(pred_probs)
        data = validate_fit(X, pred_probs, X_clean, y_clean, pred_probs_clean)
        self._record_names(X, pred_probs)
        probs = data.pred_probs
        confident = (probs < self.low) | (probs > self.high)
        targets = (probs > self.high).astype(np.float64)
        X_train = data.X
        if data.has_clean:
            X_train = np.concatenate([X_train, data.X_clean])
            confident = np.concatenate([confident, np.ones_like(data.y_clean, dtype=bool)])
            targets = np.concatenate([targets, data.y_clean.astype(np.float64)])

        n_pos = (confident & (targets == 1)).sum(axis=0)
        n_neg = (confident & (targets == 0)).sum(axis=0)
        self.fallback_labels_ = (n_pos == 0) | (n_neg == 0)
        self.n_train_per_label_ = confident.sum(axis=0)
        self._X_train = X_train
        # Per-label rows, contiguous: every vote gathers one label's column at neighbour ids.
        self._confident_by_label = np.ascontiguousarray(confident.T)
        self._targets_by_label = np.ascontiguousarray(targets.T)
        used = ~self.fallback_labels_
        n_train = X_train.shape[0]
        min_fraction = self.n_train_per_label_[used].min() / n_train if used.any() else 1.0
        wanted = int(np.ceil(_CANDIDATE_MARGIN * int(self.n_neighbors) / min_fraction))
        n_candidates = min(n_train, max(int(self.n_neighbors), min(wanted, _MAX_CANDIDATES)))
        self._n_candidates = n_candidates
        self._index = NearestNeighbors(n_neighbors=n_candidates, metric=self.metric).fit(X_train)
        self.n_features_in_ = data.X.shape[1]
        self.n_labels_ = probs.shape[1]
        return self

    def predict_proba(self, X: Any, pred_probs: Any) -> np.ndarray:
        """Corrected probabilities: each label's weighted neighbour vote.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features of the samples to correct.
        pred_probs : array-like of shape (n, L)
            The base classifier's probabilities for X (returned as is for ``fallback_labels_``).

        Returns
        -------
        ndarray of shape (n, L), float32, in [0, 1]
        """
        X, probs = self._validate_predict(X, pred_probs)
        out = probs.astype(np.float64)
        labels = np.flatnonzero(~self.fallback_labels_)
        if labels.size:
            out[:, labels] = self._votes(X, labels)
        # distances overflow on huge finite features (fit's or these): a NaN vote is refused, not returned
        return check_finite_output(out.astype(np.float32), "X", X)

    def _votes(self, X: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Votes (n, len(labels)) from the shared search, widened only for rows that need it."""
        n_train = self._X_train.shape[0]
        k_eff = np.minimum(int(self.n_neighbors), self.n_train_per_label_[labels])
        votes = np.empty((X.shape[0], labels.size))
        pending, n_candidates = np.arange(X.shape[0]), self._n_candidates
        while pending.size:
            short = np.zeros(pending.size, dtype=bool)
            # Row chunks bound the (rows, candidates) arrays.
            step = max(1, _MAX_CANDIDATE_ENTRIES // n_candidates)
            for start in range(0, pending.size, step):
                rows = pending[start : start + step]
                dist, idx = self._index.kneighbors(X[rows], n_neighbors=n_candidates)
                for j, k in enumerate(labels):
                    conf = self._confident_by_label[k][idx]
                    # Candidates are sorted by distance: keep the first k_eff confident ones.
                    keep = conf & (np.cumsum(conf, axis=1) <= k_eff[j])
                    votes[rows, j] = _vote(dist, self._targets_by_label[k][idx], keep, self.weights)
                    short[start : start + rows.size] |= keep.sum(axis=1) < k_eff[j]
            if n_candidates >= n_train:  # every training point was a candidate: none is short
                break
            pending = pending[short]
            n_candidates = min(n_train, 4 * n_candidates)
        return votes
