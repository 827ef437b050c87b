"""LSNPC's label-issue methods: the corrector's view of which given training labels are wrong.

Kept apart from the estimator, which reads as fit / predict / save; these methods only use a fitted
corrector's ``predict_proba`` and its data encoder (:mod:`lsnpc.corrector.label_posterior` does the work).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._torch import as_tensor, num_threads
from .._validation import check_multilabel, check_same_n_samples
from .label_posterior import label_correction, label_posterior, label_quality, neighbour_label_rates, review
from .model import StandardizedMLPEncoder

__all__ = ["LabelIssueMethods"]


class LabelIssueMethods:
    """Mixin for :class:`~lsnpc.LSNPC`: label posterior, quality scores, suggested labels and issues."""

    def _label_inputs(
        self, X: Any, labels: Any, pred_probs: Any, *, neighbours: bool = True
    ) -> tuple[np.ndarray, ...]:
        """(given labels as (n, L) 0/1, pred_probs, this corrector's correction of them, and with
        ``neighbours`` how often the rows' nearest neighbours were given each label — all (n, L))."""
        Xa, P = self._check_predict_input(X, pred_probs)
        given = check_multilabel(labels, "labels", n_labels=P.shape[1], min_samples=2 if neighbours else 1)
        check_same_n_samples(labels=given, pred_probs=P)
        inputs = (given, P, self.predict_proba(Xa, P))
        if not neighbours:
            return inputs
        return (*inputs, neighbour_label_rates(self._neighbour_space(Xa), given, device=self.device_))

    def _neighbour_space(self, X: np.ndarray) -> np.ndarray:
        """The rows as the neighbour search sees them (n, d): the features themselves for LSNPC's own encoder;
        a user's encoder's embedding otherwise (pixels are no place to look for neighbours)."""
        encoder = self.model_.data_encoder
        if isinstance(encoder, StandardizedMLPEncoder):
            return X.reshape(len(X), -1)
        encoder.eval()
        parts = []
        with num_threads(self.n_threads), torch.no_grad():
            for start in range(0, len(X), 1024):
                chunk = as_tensor(X[start : start + 1024], device=self.device_)
                parts.append(encoder(chunk).reshape(len(chunk), -1).float().cpu().numpy())
        return np.concatenate(parts)

    def label_posterior(self, X: Any, labels: Any, pred_probs: Any) -> np.ndarray:
        """P(true label = 1 | x, given labels) (n, L), float64.

        ``labels``: the given (noisy) labels of the rows X, multi-hot (n, L) or lists of class indices;
        ``pred_probs``: a model's out-of-fold probabilities on them (``lsnpc.cross_val_pred_probs``). The prior is
        this corrector's output on ``pred_probs`` (:meth:`predict_proba`) blended with them and with the labels the
        rows' nearest neighbours in X were given (neighbours among the rows passed, so pass the whole labelled set
        at once), raised where the row's other given labels usually go with a label; the noise, a swap channel
        estimated from the labels and ``pred_probs`` (:mod:`lsnpc.corrector.label_posterior`).
        """
        inputs = self._label_inputs(X, labels, pred_probs)
        with num_threads(self.n_threads):  # the prior's weights are chosen with torch
            return label_posterior(*inputs)

    def label_quality_scores(self, X: Any, labels: Any, pred_probs: Any) -> np.ndarray:
        """How likely each given label is right (n, L) in [0, 1]; low = likely wrong."""
        inputs = self._label_inputs(X, labels, pred_probs)
        with num_threads(self.n_threads):
            return label_quality(*inputs)

    def correct_labels(self, X: Any, labels: Any, pred_probs: Any) -> np.ndarray:
        """(n, L) 0/1 int64: the suggested labels. Each given positive is replaced by the label it most likely
        came from (itself when it looks right), so rows keep their number of positives. The prior here leaves the
        neighbours and co-occurrences out: they rank better but decide worse (docs/label-issues.md)."""
        return label_correction(*self._label_inputs(X, labels, pred_probs, neighbours=False))

    def find_label_issues(self, X: Any, labels: Any, pred_probs: Any) -> np.ndarray:
        """(n, L) bool: the entries :meth:`correct_labels` changes."""
        inputs = self._label_inputs(X, labels, pred_probs, neighbours=False)
        return label_correction(*inputs) != inputs[0]

    def review_labels(self, X: Any, labels: Any, pred_probs: Any) -> dict[str, np.ndarray]:
        """All three label answers from one correction and one neighbour search: ``{"scores": ...,
        "suggested": ..., "issues": ...}``, each (n, L), equal to :meth:`label_quality_scores`,
        :meth:`correct_labels` and :meth:`find_label_issues`."""
        given, P, corrected, rates = self._label_inputs(X, labels, pred_probs)
        with num_threads(self.n_threads):
            scores, suggested = review(given, P, corrected, rates)
        return {"scores": scores, "suggested": suggested, "issues": suggested != given}
