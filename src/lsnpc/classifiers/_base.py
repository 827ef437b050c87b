"""The fit / predict machinery shared by every base classifier (MLP, ADDGCN, HLC).

A subclass says how to build its network and how to compute a batch loss; this module owns input
validation, seeding, the mini-batch loop over in-memory arrays, checkpoint selection by validation
micro-F1 and batched prediction, so the three classifiers behave identically at their edges.
"""

from __future__ import annotations

import sys
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from torch import nn

from lsnpc._names import check_names, column_names, record_names
from lsnpc._numerics import minibatches, standardization
from lsnpc._sklearn import MultilabelClassifierMixin, binary_target
from lsnpc._torch import num_threads, resolve_device, seeded, to_tensor, torch_seed_from
from lsnpc._validation import (
    check_array,
    check_binary_labels,
    check_bool,
    check_finite_output,
    check_is_fitted,
    check_n_features,
    check_random_state,
    check_same_n_samples,
    check_scalar,
)
from lsnpc.metrics import micro_f1

__all__ = ["NetClassifier", "Standardize"]

# Training inputs up to this size are copied to the accelerator once rather than per batch.
_STAGE_BYTES = 1 << 30


class Standardize(nn.Module):
    """Subtract a per-feature mean and divide by a per-feature scale (both fixed buffers).

    ``mean`` and ``scale`` (d,) broadcast against the last axis of the input. Being buffers, they
    travel with ``state_dict`` and ``copy.deepcopy``, so a trunk holding this module maps *raw* X.
    """

    def __init__(self, mean: torch.Tensor, scale: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)

    @classmethod
    def from_data(cls, X: np.ndarray) -> Standardize:
        """The statistics of ``X`` (n, d), or per channel of maps (n, C, H, W) (see :mod:`lsnpc._numerics`)."""
        mean, scale = standardization(X, (0,) if X.ndim == 2 else (0, 2, 3))
        return cls(torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(scale, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


class NetClassifier(MultilabelClassifierMixin, BaseEstimator):
    """Base class of the torch multilabel classifiers; not public.

    A scikit-learn estimator: the constructor only stores its parameters (``get_params``,
    ``set_params``, ``clone`` and the repr come from ``BaseEstimator``); they are checked in ``fit``.
    Subclasses implement :meth:`_check_params`, :meth:`_build_network` (a module with a ``trunk``
    attribute, an ``embedding_dim`` int and a forward giving (batch, L) logits) and may override
    :meth:`_batch_loss`, :meth:`_labels_for_epoch` and :attr:`_input_ndims`.
    """

    #: allowed ``ndim`` of X; (2,) means (n, d) feature vectors only
    _input_ndims: tuple[int, ...] = (2,)
    #: fitted array attributes beyond the network that :meth:`save` writes (HLC's corrected labels)
    _fitted_arrays: tuple[str, ...] = ()

    # -- hooks ------------------------------------------------------------------------------------
    def _check_params(self) -> None:
        check_scalar(self.epochs, "epochs", kind=Integral, low=1)
        check_scalar(self.batch_size, "batch_size", kind=Integral, low=1)
        check_scalar(self.lr, "lr", kind=Real, low=0.0, low_inclusive=False)
        check_scalar(self.weight_decay, "weight_decay", kind=Real, low=0.0)
        check_bool(self.standardize, "standardize")
        check_bool(self.verbose, "verbose")
        if self.n_threads is not None:
            check_scalar(self.n_threads, "n_threads", kind=Integral, low=1)

    def _build_network(self, X: np.ndarray, n_labels: int) -> nn.Module:
        raise NotImplementedError

    def _batch_loss(self, network: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        logits = network(xb)
        return nn.functional.binary_cross_entropy_with_logits(logits, yb)

    def _labels_for_epoch(
        self, epoch: int, network: nn.Module, X: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """Training labels for ``epoch`` (HLC corrects them here); the default keeps them."""
        return labels

    # -- validation -------------------------------------------------------------------------------
    def _check_X(self, X: Any, name: str, *, min_samples: int = 1) -> np.ndarray:
        try:
            ndim = X.ndim if hasattr(X, "ndim") else np.asarray(X).ndim
        except (ValueError, TypeError):  # ragged input: let check_array word the error
            ndim = None
        allowed = self._input_ndims
        expected = ndim if ndim in allowed else allowed[0]
        try:
            out = check_array(X, name, ndim=expected, dtype=np.float32, min_samples=min_samples)
        except ValueError as exc:
            if ndim not in allowed and len(allowed) > 1:
                shapes = " or ".join(
                    "(n_samples, n_features)" if k == 2 else "(n_samples, C, H, W)" for k in allowed
                )
                hint = f"; Reshape your data: {name}.reshape(-1, 1) for one feature" if ndim == 1 else ""
                raise ValueError(f"{name} must have shape {shapes}, got {ndim} dimension(s){hint}") from exc
            raise
        if out.ndim == 4 and min(out.shape[1:]) < 1:
            raise ValueError(f"{name} must have non-empty C, H and W, got shape {out.shape}")
        return out

    def _check_input_shape(self, X: np.ndarray, name: str, expected: tuple[int, ...]) -> None:
        owner = type(self).__name__
        if X.shape[1:] != expected:
            if X.ndim == 2 and len(expected) == 1:
                check_n_features(X, name, expected[0], "features", owner)
            raise ValueError(
                f"{name} has per-sample shape {X.shape[1:]}, but the estimator was fitted with "
                f"{expected}"
            )

    # -- fit --------------------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        *,
        X_val: Any | None = None,
        y_val: Any | None = None,
    ) -> "NetClassifier":
        """Train on features ``X`` and (possibly noisy) labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) (or (n_samples, C, H, W) where supported)
            Input features, finite floats.
        y : array-like of shape (n_samples, n_labels), or (n_samples,)
            0/1 training labels (the noisy ones, in the noisy-label setting). A 1-d y is one binary label, as in
            scikit-learn: ``predict`` then returns its classes (n_samples,) and ``predict_proba`` (n_samples, 2).
        X_val, y_val : array-like, optional
            A validation set (same per-sample shape / same label count). When given, the weights of
            the epoch with the best validation micro-F1 (threshold 0.5) are kept, as in the paper;
            without it the last epoch's weights are kept.

        Returns
        -------
        self
        """
        self._check_params()
        names = column_names(X)
        X = self._check_X(X, "X", min_samples=2)
        y, binary_classes = binary_target(y)
        y = check_binary_labels(y, "y", min_samples=2)
        check_same_n_samples(X=X, y=y)
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together (or neither)")
        device = resolve_device(self.device)
        rng = check_random_state(self.random_state)

        if X_val is not None:
            X_val = self._check_X(X_val, "X_val")
            self._check_input_shape(X_val, "X_val", X.shape[1:])
            y_val = check_binary_labels(y_val, "y_val")
            check_n_features(y_val, "y_val", y.shape[1], "label columns")
            check_same_n_samples(X_val=X_val, y_val=y_val)

        seed = torch_seed_from(rng)
        with num_threads(self.n_threads), seeded(seed, device):
            network = self._build_network(X, y.shape[1]).to(device)
            self._train(network, X, y, X_val, y_val, device, seed)
        network.eval()
        record_names(self, names)
        self._binary_classes = binary_classes
        self.input_shape_ = tuple(X.shape[1:])
        self.n_features_in_ = int(X.shape[1])
        self.n_labels_ = int(y.shape[1])
        self.network_ = network
        self.trunk_ = network.trunk
        self.embedding_dim_ = int(network.embedding_dim)
        return self

    def _train(
        self,
        network: nn.Module,
        X: np.ndarray,
        y: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
        device: torch.device,
        seed: int,
    ) -> None:
        # Each batch is gathered by an index tensor, far cheaper than a DataLoader. X is copied to
        # the accelerator once when it is small; a large spatial-map array stays in host memory
        # and moves batch by batch. Labels stay on the CPU (HLC rewrites them between epochs).
        on_device = device.type != "cpu" and X.nbytes <= _STAGE_BYTES
        X_t = to_tensor(X, device if on_device else torch.device("cpu"))
        labels = to_tensor(y, torch.device("cpu"))
        optimizer = torch.optim.Adam(network.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        shuffle = torch.Generator().manual_seed(seed)
        n = len(X)

        history: dict[str, list[float]] = {"train_loss": []}
        if y_val is not None:
            history["val_micro_f1"] = []
        best_f1, best_state, best_epoch = -1.0, None, self.epochs - 1
        self.history_ = history
        for epoch in range(self.epochs):
            labels = self._labels_for_epoch(epoch, network, X_t, labels)
            network.train()
            total, seen = torch.zeros((), device=device), 0
            for idx in minibatches(n, self.batch_size, shuffle):
                xb = X_t[idx].to(device, non_blocking=True)
                yb = labels[idx].to(device, non_blocking=True)
                loss = self._batch_loss(network, xb, yb)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                max_norm = getattr(self, "max_grad_norm", None)
                if max_norm is not None:
                    nn.utils.clip_grad_norm_(network.parameters(), max_norm)
                optimizer.step()
                total += loss.detach() * len(idx)
                seen += len(idx)
            history["train_loss"].append(float(total) / seen)
            message = f"epoch {epoch + 1}/{self.epochs}  train loss {history['train_loss'][-1]:.4f}"
            if y_val is not None:
                f1 = micro_f1(y_val, self._predict_tensor(network, X_val, device).numpy())
                history["val_micro_f1"].append(f1)
                message += f"  val micro-F1 {f1:.4f}"
                if f1 > best_f1:
                    best_f1, best_epoch = f1, epoch
                    best_state = {k: v.detach().clone() for k, v in network.state_dict().items()}
            if self.verbose:
                print(f"[{type(self).__name__}] {message}", file=sys.stderr)
        if best_state is not None:
            network.load_state_dict(best_state)
        self.best_epoch_ = best_epoch

    # -- predict ----------------------------------------------------------------------------------
    @torch.no_grad()
    def _predict_tensor(
        self, network: nn.Module, X: np.ndarray | torch.Tensor, device: torch.device
    ) -> torch.Tensor:
        """Sigmoid probabilities (n, L) as a CPU float32 tensor, computed batch by batch."""
        was_training = network.training
        network.eval()
        X_t = X if isinstance(X, torch.Tensor) else to_tensor(X, torch.device("cpu"))
        out = [torch.sigmoid(network(chunk.to(device))).float().cpu() for chunk in X_t.split(self._predict_batch_size())]
        network.train(was_training)
        return torch.cat(out)

    def _predict_batch_size(self) -> int:
        # no gradients at prediction time, so bigger batches than in training are cheap
        return max(int(self.batch_size), 256)

    def _check_predict_input(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "network_")
        check_names(self, column_names(X), "X", "feature_names_in_")
        X = self._check_X(X, "X")
        self._check_input_shape(X, "X", self.input_shape_)
        return X

    def predict_proba(self, X: Any) -> np.ndarray:
        """Per-label probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) with the per-sample shape seen in ``fit``

        Returns
        -------
        ndarray of shape (n_samples, n_labels), float32 in [0, 1]
            Entry (i, k) is the predicted probability that label k applies to sample i. After a 1-d y,
            (n_samples, 2): the probabilities of ``classes_[0]`` and ``classes_[1]``.
        """
        return self._proba_out(self._probabilities(X))

    def _probabilities(self, X: Any) -> np.ndarray:
        """(n_samples, n_labels) probabilities, whatever y fit saw."""
        X = self._check_predict_input(X)
        device = next(self.network_.parameters()).device
        with num_threads(self.n_threads):
            out = self._predict_tensor(self.network_, X, device).numpy()
        return check_finite_output(out, "X", X)

    def predict(self, X: Any, threshold: float = 0.5) -> np.ndarray:
        """0/1 predictions (n_samples, n_labels), int64: probability >= ``threshold``. After a 1-d y: the class
        of each row (n_samples,)."""
        check_scalar(threshold, "threshold", kind=Real, low=0.0, high=1.0)
        return self._labels_out((self._probabilities(X) >= threshold).astype(np.int64))

    # -- persistence ------------------------------------------------------------------------------
    def save(self, path: str | Path, *, overwrite: bool = False) -> None:
        """Write the fitted classifier to the folder ``path``: its network's weights as safetensors and its
        parameters and fitted fields as JSON, both checksummed (:mod:`lsnpc.classifiers.persistence`).

        The write is atomic; an existing saved classifier at ``path`` is replaced only with
        ``overwrite=True``, and any other existing folder or file is never replaced (FileExistsError).
        """
        from lsnpc.classifiers import classifier_classes
        from lsnpc.classifiers.persistence import save_classifier

        save_classifier(self, path, classes=classifier_classes(), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> "NetClassifier":
        """Load a classifier written by :meth:`save` onto ``device``; never unpickles. Every part is checked
        (checksums, parameters, fitted fields, the weights' names and shapes); anything damaged raises one
        ValueError saying what. Called on a class, the folder must hold that class."""
        from lsnpc.classifiers import classifier_classes
        from lsnpc.classifiers.persistence import load_classifier

        model = load_classifier(path, classes=classifier_classes(), device=device)
        if cls is not NetClassifier and not isinstance(model, cls):
            raise ValueError(f"{str(path)!r} holds a saved {type(model).__name__}, not a {cls.__name__}")
        return model
