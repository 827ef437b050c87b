"""What lsnpc's estimators tell scikit-learn about themselves: tags, ``classes_`` and ``score``.

Two kinds of estimator share these mixins:

- classifiers (``fit(X, y)``, ``predict_proba(X)``): :class:`MultilabelClassifierMixin`. scikit-learn sees a
  multilabel classifier whose target is an (n, L) 0/1 indicator matrix, so ``cross_val_predict``,
  ``GridSearchCV`` without ``scoring`` and ``Pipeline.score`` work;
- post-processors (``fit(X, pred_probs)``, ``predict_proba(X, pred_probs)``): :class:`PostProcessorTagsMixin`.
  What scikit-learn calls ``y`` is here the base model's probabilities, a required (n, L) target; the estimator
  is neither a classifier nor a regressor in scikit-learn's sense, since every prediction needs ``pred_probs``.

Neither takes sparse X (the tags say so; a sparse matrix is refused with an error that says to densify it).
"""

from __future__ import annotations

import sys
from numbers import Number
from typing import Any

import numpy as np
from sklearn.utils import ClassifierTags

from ._validation import _to_ndarray, check_finite, check_is_fitted, check_multilabel
from .metrics import micro_f1

__all__ = ["MultilabelClassifierMixin", "PostProcessorTagsMixin", "binary_target"]


def _common_tags(tags: Any) -> Any:
    tags.input_tags.sparse = False
    tags.input_tags.two_d_array = True
    tags.target_tags.required = True
    tags.target_tags.multi_output = True
    tags.target_tags.single_output = True
    tags.non_deterministic = False
    return tags


class MultilabelClassifierMixin:
    """Tags, ``classes_`` and ``score`` of a multilabel classifier fitted on an (n, L) 0/1 label matrix.

    The subclass sets ``n_labels_`` in fit and has ``predict(X)``.
    """

    n_labels_: int
    #: the two classes of a 1-d y (fit read it as one binary label, :func:`binary_target`), else None; set at the
    #: end of a fit that succeeded, so that ``predict`` gives them back and ``predict_proba`` gives (n, 2)
    _binary_classes: np.ndarray | None = None


    def _proba_out(self, probs: np.ndarray) -> np.ndarray:
        """(n, L) probabilities as returned: (n, 2) ``[1 - p, p]`` after a 1-d y."""
        if self._binary_classes is None:
            return probs
        return np.column_stack([1.0 - probs[:, 0], probs[:, 0]]).astype(probs.dtype)

    def _labels_out(self, labels: np.ndarray) -> np.ndarray:
        """(n, L) 0/1 predictions as returned: the class of each row (n,) after a 1-d y."""
        return labels if self._binary_classes is None else self._binary_classes[labels[:, 0]]

    def __sklearn_tags__(self) -> Any:
        tags = _common_tags(super().__sklearn_tags__())  # type: ignore[misc]
        tags.estimator_type = "classifier"
        # multi_class=False: each label is one binary problem; a multiclass 1-d target is not read as one-hot.
        # poor_score=False: with their defaults they pass scikit-learn's score test (0.83 accuracy on blobs)
        tags.classifier_tags = ClassifierTags(poor_score=False, multi_class=False, multi_label=True)
        return tags

    @property
    def classes_(self) -> np.ndarray:
        """The label columns, ``arange(n_labels_)``, as scikit-learn's multilabel classifiers give them
        (column k of ``predict_proba`` is the probability that label k applies)."""
        check_is_fitted(self, "n_labels_")
        if self._binary_classes is not None:
            return self._binary_classes.copy()
        return np.arange(self.n_labels_)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Micro-averaged F1 of ``predict(X)`` against the (n, L) 0/1 labels ``y``.

        Why micro-F1 and not scikit-learn's classifier default (subset accuracy): a multilabel row is rarely right
        in every label, so subset accuracy is near 0 for every model on many labels and cannot rank them; micro-F1
        is the headline metric of lsnpc's results and of the paper, and it counts each (row, label) decision once.
        The decision is ``predict``'s own (threshold 0.5, or the threshold the estimator chose in fit).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples, n_labels), 0/1 (a 1-d y is one label column)
        sample_weight : None
            Not supported (a ValueError when given).

        Returns
        -------
        float in [0, 1]
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by score; leave it None")
        pred = self.predict(X)  # type: ignore[attr-defined]
        if self._binary_classes is not None:  # fitted on a 1-d y: F1 of its larger class
            positive = self._binary_classes[1]
            truth = (np.asarray(y).reshape(-1) == positive).astype(np.int64).reshape(-1, 1)
            return float(micro_f1(truth, (np.asarray(pred) == positive).astype(np.int64).reshape(-1, 1)))
        truth = check_multilabel(_as_label_matrix(y), "y")
        return float(micro_f1(truth, pred))


class PostProcessorTagsMixin:
    """Tags, ``classes_`` and ``score`` of a post-processor fitted on ``(X, pred_probs)``.

    The subclass sets ``n_labels_`` in fit and has ``predict(X, pred_probs)``.
    """

    n_labels_: int

    def __sklearn_tags__(self) -> Any:
        tags = _common_tags(super().__sklearn_tags__())  # type: ignore[misc]
        tags.estimator_type = None  # predictions need pred_probs too: not a classifier in scikit-learn's sense
        tags.target_tags.single_output = False  # pred_probs is (n, L)
        return tags

    @staticmethod
    def _require_pred_probs(pred_probs: Any) -> None:
        """Refuse a missing ``pred_probs`` (to scikit-learn, this estimator's y) in its words and ours."""
        if pred_probs is None:
            raise ValueError("pred_probs is required: fit(X, pred_probs) requires y to be passed, but the target y "
                             "is None (pred_probs, the base model's probabilities, is this estimator's y)")

    @property
    def classes_(self) -> np.ndarray:
        """The label columns, ``arange(n_labels_)``: column k of ``predict_proba`` is label k."""
        check_is_fitted(self, "n_labels_")
        return np.arange(self.n_labels_)

    def score(self, X: Any, pred_probs: Any, y: Any) -> float:
        """Micro-averaged F1 of the corrected labels ``predict(X, pred_probs)`` against the true 0/1 labels ``y``
        (n, L): the metric lsnpc reports first, each (row, label) decision counted once (see
        :meth:`MultilabelClassifierMixin.score` for why not subset accuracy)."""
        truth = check_multilabel(_as_label_matrix(y), "y")
        return float(micro_f1(truth, self.predict(X, pred_probs)))  # type: ignore[attr-defined]


def _as_label_matrix(y: Any) -> Any:
    """A 1-d y (one label) as an (n, 1) column; anything else as given."""
    if not isinstance(y, (list, tuple)) and np.ndim(y) == 1:
        return np.asarray(y).reshape(-1, 1)
    return y


def binary_target(y: Any, name: str = "y") -> tuple[Any, np.ndarray | None]:
    """Read a classifier's target: a 1-d ``y`` is one binary problem, as in scikit-learn.

    Returns ``(labels, classes)``: for a 1-d ``y`` with two distinct values, an (n, 1) int64 0/1 column (1 where
    ``y`` is the larger value) and those two values sorted (n,); for anything else (an (n, L) 0/1 matrix, lists of
    label indices) ``y`` unchanged and None. A 1-d ``y`` with one value or more than two is refused.
    """
    if y is None:
        raise ValueError(f"this estimator requires {name} to be passed, but the target {name} is None")
    if isinstance(y, (list, tuple)) and any(isinstance(row, (list, tuple, set, frozenset, np.ndarray)) for row in y):
        return y, None  # label matrix rows or lists of label indices
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(y, pandas.Series):
        y = y.to_numpy()
    try:
        arr = np.asarray(y)
    except Exception:  # let the label checks word it
        return y, None
    if arr.ndim != 1:
        return y, None
    if arr.dtype == object:
        arr = _to_ndarray(arr, name) if all(isinstance(v, Number) for v in arr) else arr.astype(str)
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: Complex data not supported (got dtype {arr.dtype})")
    if np.issubdtype(arr.dtype, np.floating):
        check_finite(arr, name)
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} is 1-d with continuous values: a classifier needs class labels (a 1-d y is "
                             "one binary label; several labels are an (n_samples, n_labels) 0/1 matrix)")
    classes = np.unique(arr)
    if len(classes) > 2:
        raise ValueError(f"{name} is 1-d with {len(classes)} classes: Only binary classification is supported. A 1-d "
                         "y is one binary label; give several labels as an (n_samples, n_labels) 0/1 matrix "
                         "(e.g. sklearn.preprocessing.MultiLabelBinarizer)")
    if len(classes) < 2:
        raise ValueError(f"{name} is 1-d with one class only ({classes.tolist()}): a binary label needs both classes "
                         "(as an (n_samples, 1) 0/1 column it is a label that is never or always on)")
    return (arr == classes[1]).astype(np.int64).reshape(-1, 1), classes
