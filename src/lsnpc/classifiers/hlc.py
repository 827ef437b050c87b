"""HLC: ADDGCN trained with holistic label correction (Xia et al., ICCV 2023)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from torch import nn

from lsnpc._validation import check_scalar
from lsnpc.classifiers.addgcn import ADDGCN

__all__ = ["HLC", "holistic_scores", "holistic_correction"]


def holistic_scores(
    probs: torch.Tensor, adjacency: torch.Tensor, label_sets: torch.Tensor, beta: float
) -> torch.Tensor:
    """Holistic score of one label set per sample.

    ``score = beta * sum_{k in S} probs[k] + (1 - beta) * sum_{i != j in S} adjacency[i, j]``,
    S the positive labels of the set: the first term is the instance–label agreement, the second the
    label–label dependency read from the sample's dynamic graph (over ordered pairs; 0 when S has
    fewer than 2 labels).

    Sums, as in the authors' code (and HLC's), not means. :func:`holistic_correction` compares two
    sets of the same size k, so the choice only sets how the two terms are weighed: with sums the
    dependency term (k(k − 1) pairs) counts k − 1 times more against the agreement term (k labels)
    than with means — the same for k ≤ 2, and the balance the threshold δ of the HLC paper was
    tuned for.

    Parameters
    ----------
    probs : tensor (n, L)
        Predicted probabilities.
    adjacency : tensor (n, L, L)
        Each sample's dynamic adjacency (entries in [0, 1]).
    label_sets : tensor (n, L) of 0/1
        The label set to score for each sample.
    beta : float in [0, 1]

    Returns
    -------
    tensor (n,)
        0 for an empty set.
    """
    sets = label_sets.to(probs.dtype)
    agreement = (probs * sets).sum(dim=1)
    dependency = torch.einsum("ni,nij,nj->n", sets, adjacency, sets)
    dependency = dependency - (torch.diagonal(adjacency, dim1=1, dim2=2) * sets).sum(dim=1)
    return beta * agreement + (1 - beta) * dependency


def holistic_correction(
    probs: torch.Tensor,
    adjacency: torch.Tensor,
    labels: torch.Tensor,
    delta: float,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """HLC's rule: replace a sample's labels by its top-k predicted labels when they score far higher.

    For sample i with k positive (noisy) labels, the predicted set is the k labels of highest
    probability. If ``holistic(noisy) / holistic(predicted) <= delta`` the labels become the
    predicted set (the number of positives is kept). Samples without positives are left alone.

    Parameters
    ----------
    probs : tensor (n, L)
    adjacency : tensor (n, L, L)
    labels : tensor (n, L) of 0/1
        Current training labels.
    delta : float >= 0
        Ratio threshold.
    beta : float in [0, 1]
        Weight of the instance–label term (see :func:`holistic_scores`).

    Returns
    -------
    new_labels : tensor (n, L), same dtype as ``labels``
    corrected : bool tensor (n,)
        Which samples' labels changed.
    """
    k = labels.sum(dim=1).round().long()
    order = probs.argsort(dim=1, descending=True, stable=True)
    positions = torch.arange(probs.shape[1], device=probs.device).expand_as(order)
    ranks = torch.empty_like(order).scatter_(1, order, positions)
    predicted = (ranks < k[:, None]).to(labels.dtype)
    ratio = holistic_scores(probs, adjacency, labels, beta) / holistic_scores(
        probs, adjacency, predicted, beta
    ).clamp(min=torch.finfo(probs.dtype).tiny)
    differs = (predicted != labels).any(dim=1)
    corrected = (k > 0) & differs & (ratio <= delta)
    new_labels = torch.where(corrected[:, None], predicted, labels)
    return new_labels, corrected


class HLC(ADDGCN):
    """ADDGCN trained with holistic label correction (Xia et al., ICCV 2023).

    Training is ADDGCN's until epoch ``start``. From then on, at the start of every epoch, each
    sample's current training labels are compared with its top-k predicted labels (k = its number of
    positive labels) through the holistic score (see :func:`holistic_scores`): β × the sum of the
    predicted probabilities of the set's labels + (1 − β) × the sum of the dynamic-graph dependencies
    between them. If score(current) / score(predicted) ≤ δ_e the sample's labels are replaced by the
    predicted set for this and later epochs (corrections accumulate, as in the authors' code).

    The threshold decays linearly with the epoch e (0-based):
    ``δ_e = delta * max(0, 1 - delta_decay * (e - start))``; with the defaults (start 5, decay 0.2)
    this is the authors' schedule ``δ · max(0, 0.2 · (10 − e))``: full δ at epoch 5, none from 10.

    Deviation from the authors' code, on purpose: the scores are computed in eval mode in one pass
    over the training set at the start of the epoch (theirs come from the dropout/BatchNorm training
    pass of each batch), so a sample's correction does not depend on its batch.

    Parameters
    ----------
    hidden_dim, epochs, batch_size, lr, weight_decay, max_grad_norm, standardize
        As for :class:`ADDGCN`.
    start : int, default 5
        First (0-based) epoch at which labels are corrected.
    delta : float in [0, 1], default 0.4
        Ratio threshold at epoch ``start`` (the HLC paper uses 0.4–0.45).
    delta_decay : float >= 0, default 0.2
        Fraction of ``delta`` removed per epoch after ``start`` (0 keeps δ constant).
    beta : float in [0, 1], default 0.5
        Weight of the instance–label term against the label-dependency term.
    random_state, device, n_threads, verbose
        As for :class:`ADDGCN`.

    Attributes
    ----------
    n_corrected_ : ndarray of int, shape (epochs,)
        Samples whose labels were changed at the start of each epoch (also
        ``history_["n_corrected"]``; ``history_["delta"]`` holds δ_e).
    corrected_labels_ : ndarray of int64, shape (n_samples, n_labels)
        The training labels of the last epoch (the noisy labels after all corrections).
    trunk_, embedding_dim_, network_, history_, best_epoch_, n_features_in_, input_shape_, n_labels_
        As for :class:`ADDGCN`.
    """

    _fitted_arrays = ("n_corrected_", "corrected_labels_")

    def __init__(
        self,
        hidden_dim: int = 256,
        epochs: int = 30,
        batch_size: int = 64,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        max_grad_norm: float | None = 10.0,
        standardize: bool = True,
        start: int = 5,
        delta: float = 0.4,
        delta_decay: float = 0.2,
        beta: float = 0.5,
        random_state: int | np.random.Generator | None = None,
        device: str | torch.device = "cpu",
        n_threads: int | None = 1,
        verbose: bool = False,
    ) -> None:
        super().__init__(
            hidden_dim=hidden_dim,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            weight_decay=weight_decay,
            max_grad_norm=max_grad_norm,
            standardize=standardize,
            random_state=random_state,
            device=device,
            n_threads=n_threads,
            verbose=verbose,
        )
        self.start = start
        self.delta = delta
        self.delta_decay = delta_decay
        self.beta = beta

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.start, "start", kind=Integral, low=0)
        check_scalar(self.delta, "delta", kind=Real, low=0.0, high=1.0)
        check_scalar(self.delta_decay, "delta_decay", kind=Real, low=0.0)
        check_scalar(self.beta, "beta", kind=Real, low=0.0, high=1.0)

    def delta_at(self, epoch: int) -> float:
        """The ratio threshold δ_e used at (0-based) ``epoch``; 0 before ``start``."""
        if epoch < self.start:
            return 0.0
        return float(self.delta) * max(0.0, 1.0 - float(self.delta_decay) * (epoch - self.start))

    def _labels_for_epoch(
        self, epoch: int, network: nn.Module, X: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        delta = self.delta_at(epoch)
        n_corrected = 0
        if delta > 0:
            device = next(network.parameters()).device
            probs, adjacency = self._scores_and_adjacency_tensor(network, X, device)
            labels, corrected = holistic_correction(probs, adjacency, labels, delta, self.beta)
            n_corrected = int(corrected.sum())
        self.history_.setdefault("n_corrected", []).append(n_corrected)
        self.history_.setdefault("delta", []).append(delta)
        self._last_labels = labels
        return labels

    def fit(self, X: Any, y: Any, *, X_val: Any | None = None, y_val: Any | None = None) -> HLC:
        """Train with label correction; see :meth:`ADDGCN.fit` for the arguments."""
        super().fit(X, y, X_val=X_val, y_val=y_val)
        self.n_corrected_ = np.asarray(self.history_["n_corrected"], dtype=np.int64)
        self.corrected_labels_ = self._last_labels.numpy().astype(np.int64)
        del self._last_labels
        return self
