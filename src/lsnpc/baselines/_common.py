"""Input checks and the shared predict() of every baseline post-processor.

The interface (shared with LSNPC):

    fit(X, pred_probs, *, X_clean=None, y_clean=None, pred_probs_clean=None) -> self
    predict_proba(X, pred_probs) -> (n, L) probabilities
    predict(X, pred_probs, threshold=0.5) -> (n, L) of 0/1
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from lsnpc._names import check_names, column_names, record_names
from lsnpc._validation import (
    check_array,
    check_is_fitted,
    check_labelled_triple,
    check_n_features,
    check_probabilities,
    check_same_n_samples,
    check_scalar,
    check_unlabelled_pair,
)


@dataclass(frozen=True)
class FitData:
    """Validated fit inputs: X (n, d) float32, pred_probs (n, L) float32, optional clean set, optional unlabelled
    rows (X_unlabelled, pred_probs_unlabelled)."""

    X: np.ndarray
    pred_probs: np.ndarray
    X_clean: np.ndarray | None
    y_clean: np.ndarray | None
    pred_probs_clean: np.ndarray | None
    unlabelled: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def has_clean(self) -> bool:
        return self.X_clean is not None


def _check_pair(X: Any, pred_probs: Any, x_name: str, p_name: str) -> tuple[np.ndarray, np.ndarray]:
    X = check_array(X, x_name, ndim=2, dtype=np.float32)
    pred_probs = check_probabilities(pred_probs, p_name)
    check_same_n_samples(**{x_name: X, p_name: pred_probs})
    return X, pred_probs


def validate_fit(
    X: Any,
    pred_probs: Any,
    X_clean: Any = None,
    y_clean: Any = None,
    pred_probs_clean: Any = None,
    X_unlabelled: Any = None,
    pred_probs_unlabelled: Any = None,
) -> FitData:
    """Check the fit arguments; the clean set is all three of X_clean, y_clean, pred_probs_clean, the unlabelled
    rows both of X_unlabelled, pred_probs_unlabelled."""
    X, pred_probs = _check_pair(X, pred_probs, "X", "pred_probs")
    like_X = {"check_X": lambda value, name: check_array(value, name, ndim=2, dtype=np.float32),
              "sample_shape": X.shape[1:], "n_labels": pred_probs.shape[1]}
    clean = check_labelled_triple("clean", X_clean, y_clean, pred_probs_clean, **like_X) or (None, None, None)
    unlabelled = check_unlabelled_pair("unlabelled", X_unlabelled, pred_probs_unlabelled, **like_X)
    return FitData(X, pred_probs, *clean, unlabelled)


class PostProcessorMixin:
    """predict_proba-input checks and a thresholding predict() for fitted post-processors.

    Subclasses set ``n_features_in_`` and ``n_labels_`` in fit and implement ``predict_proba``.
    """

    n_features_in_: int
    n_labels_: int

    def _record_names(self, X: Any, pred_probs: Any) -> None:
        """Remember the column names of fit's X and pred_probs (DataFrames), as ``feature_names_in_`` and
        ``label_names_in_``; call before the arrays are converted."""
        record_names(self, column_names(X), "feature_names_in_")
        record_names(self, column_names(pred_probs), "label_names_in_")

    def _validate_predict(self, X: Any, pred_probs: Any) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self, "n_labels_")
        check_names(self, column_names(X), "X", "feature_names_in_")
        check_names(self, column_names(pred_probs), "pred_probs", "label_names_in_")
        X, pred_probs = _check_pair(X, pred_probs, "X", "pred_probs")
        check_n_features(X, "X", self.n_features_in_, "features", type(self).__name__)
        check_n_features(pred_probs, "pred_probs", self.n_labels_, "labels", type(self).__name__)
        return X, pred_probs

    def predict_proba(self, X: Any, pred_probs: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict(self, X: Any, pred_probs: Any, threshold: float = 0.5) -> np.ndarray:
        """Corrected hard labels ``predict_proba(X, pred_probs) >= threshold``, (n, L) int64."""
        threshold = float(check_scalar(threshold, "threshold", kind=Real, low=0.0, high=1.0))
        return (self.predict_proba(X, pred_probs) >= threshold).astype(np.int64)
