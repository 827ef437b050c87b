"""The base model at the threshold its noisy labels' count implies: the simplest competitor without clean labels.

No correction: ``predict_proba`` returns the base probabilities unchanged, and ``predict`` decides them at
``threshold_``, the lowest candidate at which the base model predicts no more labels a row, on average, than
the noisy labels hold, as LSNPC's own no-label plan chooses its threshold
(:func:`lsnpc.corrector.threshold.count_threshold` over the same candidates and floor); on rows the base model
never saw, where they are given (``X_unlabelled``, ``pred_probs_unlabelled``), as LSNPC counts there too.
Beside LSNPC it shows how much of a gain is the correction and how much a threshold.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from lsnpc._validation import check_binary_labels, check_random_state, check_scalar
from lsnpc.baselines._common import PostProcessorMixin, validate_fit
from lsnpc.corrector.threshold import check_thresholds, count_threshold

__all__ = ["CountThreshold"]


class CountThreshold(PostProcessorMixin, BaseEstimator):
    """The base model's probabilities, decided at the count threshold of the noisy labels.

    Parameters
    ----------
    count_floor : float in (0, 1], default 0.05
        No threshold below this is chosen (LSNPC's ``count_floor``, the same default).
    thresholds : "auto" or sequence of float, default "auto"
        The candidates: "auto" is LSNPC's own grid over the probabilities' range, with 0.5 beside it.
    random_state : None, int or Generator
        Unused (nothing is random); kept so that a grid seeds every post-processor alike.

    Attributes
    ----------
    threshold_ : float
        The threshold ``predict`` uses.
    threshold_evidence_ : dict
        What chose it: the expected count, where it came from, the floor, the count predicted at it.
    n_features_in_, n_labels_ : int

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[0.45, 0.1], [0.4, 0.05], [0.2, 0.42], [0.1, 0.3]])
    >>> labels = np.array([[1, 0], [1, 0], [0, 1], [0, 0]])
    >>> est = CountThreshold().fit(np.zeros((4, 1)), P, labels=labels)
    >>> est.predict(np.zeros((4, 1)), P).sum(1).tolist()
    [1, 1, 1, 0]
    """

    def __init__(self, count_floor: float = 0.05, thresholds: Any = "auto",
                 random_state: int | np.random.Generator | None = None) -> None:
        self.count_floor = count_floor
        self.thresholds = thresholds
        self.random_state = random_state

    def fit(self, X: Any, pred_probs: Any, *, labels: Any = None, X_clean: Any = None, y_clean: Any = None,
            pred_probs_clean: Any = None, X_unlabelled: Any = None,
            pred_probs_unlabelled: Any = None) -> CountThreshold:
        """Choose ``threshold_`` on the base probabilities of the training rows, or of the unlabelled rows given.

        Parameters
        ----------
        X : array (n, d)
            Features (only checked: the threshold reads the probabilities alone).
        pred_probs : array (n, L)
            The base model's probabilities on the training rows.
        labels : array (n, L) of 0/1, optional
            The noisy labels the base model was trained on: their mean count a row is the count kept to.
            Without them, the base model's expected count (the sum of its probabilities a row) is.
        X_clean, y_clean, pred_probs_clean : optional
            Accepted for the common interface and ignored: this competitor has no clean labels.
        X_unlabelled, pred_probs_unlabelled : arrays (n_u, d), (n_u, L), optional
            Rows the base model was not trained on, without labels: the count is met on their probabilities,
            not on the training rows' (a model that memorised its training rows is surer of them than of new
            rows). The expected count still comes from the noisy labels or the training rows' probabilities.
        """
        check_scalar(self.count_floor, "count_floor", kind=Real, low=0, high=1, low_inclusive=False)
        grid = check_thresholds(self.thresholds, "thresholds", auto=True)
        check_random_state(self.random_state)
        data = validate_fit(X, pred_probs, X_clean, y_clean, pred_probs_clean, X_unlabelled, pred_probs_unlabelled)
        P = data.pred_probs  # compared in its own precision, as predict compares it
        if labels is not None:
            given = check_binary_labels(labels, "labels")
            if given.shape != P.shape:
                raise ValueError(f"labels must have pred_probs' shape {P.shape} (the training rows' noisy labels), "
                                 f"got {given.shape}")
            expected, source = float(given.sum(1).mean()), "noisy labels"
        else:
            expected, source = float(P.sum(1).mean()), "base model"
        unlabelled = data.unlabelled
        counted = P if unlabelled is None else unlabelled[1]
        self.threshold_, evidence = count_threshold(counted, expected, grid, floor=float(self.count_floor))
        self.threshold_evidence_ = {**evidence, "count_of": source,
                                    "counted_on": "training rows" if unlabelled is None else "unlabelled rows",
                                    "n_counted": len(counted)}
        self.n_features_in_, self.n_labels_ = int(data.X.shape[1]), int(P.shape[1])
        return self

    def predict_proba(self, X: Any, pred_probs: Any) -> np.ndarray:
        """The base probabilities (n, L), unchanged (checked against the fit's shapes)."""
        _, P = self._validate_predict(X, pred_probs)
        return P

    def predict(self, X: Any, pred_probs: Any, threshold: float | None = None) -> np.ndarray:
        """``pred_probs >= threshold`` (default ``threshold_``), (n, L) int64."""
        return super().predict(X, pred_probs, self.threshold_ if threshold is None else threshold)
