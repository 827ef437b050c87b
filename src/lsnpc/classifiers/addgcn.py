"""ADDGCN: attention-driven dynamic graph convolution for multilabel recognition (Ye et al., 2020).

The network, for an input map x of shape (C, H, W) (a plain vector is a 1 × 1 map):

1. *encoder* (our stand-in for the trainable backbone, since the input here is already a backbone's
   output): per-channel standardisation, a 1 × 1 convolution (a Linear over channels) to ``hidden_dim`` channels, LeakyReLU.
   Call its output F (hidden_dim, H, W).
2. *semantic attention module (SAM)*: a 1 × 1 convolution gives one activation map per label,
   M (L, H, W). Its spatial maximum is the SAM score s_m (L,). The label-specific content vectors
   are V = F' · sigmoid(M)ᵀ (hidden_dim, L), where F' is F after another 1 × 1 convolution: each
   label gets the feature map pooled under its own attention.
3. *static graph convolution*: V ← V + LeakyReLU(W_s · LeakyReLU(V · A_sᵀ)), A_s a learned L × L
   adjacency shared by every sample.
4. *dynamic graph convolution*: a sample-specific adjacency
   A_d = sigmoid(conv([global(V); V])) (L × L) from the content vectors and their pooled summary;
   Z = LeakyReLU(W_d · LeakyReLU(V · A_d)).
5. the GCN score s_r (L,): label k's own linear classifier applied to column k of V + Z.

Training minimises the mean of the BCE losses of s_m and s_r; the predicted probability is
sigmoid((s_m + s_r) / 2), the paper's average of the two scores.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lsnpc._torch import num_threads, to_tensor
from lsnpc._validation import check_scalar
from lsnpc.classifiers._base import NetClassifier, Standardize

__all__ = ["ADDGCN"]

_SLOPE = 0.2  # LeakyReLU slope of the original ADD-GCN


def as_pixels(x: torch.Tensor) -> torch.Tensor:
    """(batch, C, H, W) maps become (batch, H*W, C) pixel rows; (batch, d) vectors (batch, 1, d).

    Channel-last lets every 1 × 1 convolution of the original be an ``nn.Linear``, which is much
    faster than a convolution on CPUs for the small maps used here.
    """
    return x[:, None, :] if x.ndim == 2 else x.flatten(2).transpose(1, 2)


class PooledTrunk(nn.Module):
    """Encoder followed by global average pooling: (batch, d) or (batch, C, H, W) → (batch, h)."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Encoded pixels (batch, H*W, h)."""
        return self.encoder(as_pixels(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).mean(dim=1)


class DynamicGraphConvolution(nn.Module):
    """Static then dynamic graph convolution over L label nodes of ``dim`` features each.

    Nodes are laid out (batch, L, dim).
    """

    def __init__(self, dim: int, n_labels: int) -> None:
        super().__init__()
        self.static_adjacency = nn.Linear(n_labels, n_labels, bias=False)
        self.static_weight = nn.Linear(dim, dim)
        self.global_linear = nn.Linear(dim, dim)
        self.global_norm = nn.BatchNorm1d(dim)
        self.adjacency_linear = nn.Linear(2 * dim, n_labels)
        self.dynamic_weight = nn.Linear(dim, dim)

    def dynamic_adjacency(self, nodes: torch.Tensor) -> torch.Tensor:
        """(batch, L, L) adjacency from the node features (batch, L, dim); entries in (0, 1).

        Entry (i, j) is the weight with which node i's features flow into node j: row j of the
        linear map applied to node j's features (joined with the pooled summary) gives column j.
        """
        summary = self.global_norm(self.global_linear(nodes.mean(dim=1)))
        summary = F.leaky_relu(summary, _SLOPE)[:, None, :].expand_as(nodes)
        per_target = self.adjacency_linear(torch.cat([summary, nodes], dim=2))  # (batch, j, i)
        return torch.sigmoid(per_target).transpose(1, 2)

    def forward(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Update (batch, L, dim) to add to ``nodes``, and the dynamic adjacency (batch, L, L)."""
        mixed = F.leaky_relu(self.static_adjacency(nodes.transpose(1, 2)), _SLOPE).transpose(1, 2)
        nodes = nodes + F.leaky_relu(self.static_weight(mixed), _SLOPE)
        adjacency = self.dynamic_adjacency(nodes)
        out = F.leaky_relu(torch.matmul(adjacency.transpose(1, 2), nodes), _SLOPE)
        return F.leaky_relu(self.dynamic_weight(out), _SLOPE), adjacency


class ADDGCNNetwork(nn.Module):
    """The ADD-GCN network; ``forward`` gives the averaged logits (batch, L)."""

    def __init__(self, trunk: PooledTrunk, hidden_dim: int, n_labels: int) -> None:
        super().__init__()
        self.trunk = trunk
        self.embedding_dim = hidden_dim
        self.attention = nn.Linear(hidden_dim, n_labels, bias=False)
        self.transform = nn.Linear(hidden_dim, hidden_dim)
        self.gcn = DynamicGraphConvolution(hidden_dim, n_labels)
        # one linear classifier per label node (the diagonal of the original's Conv1d)
        self.label_weight = nn.Parameter(torch.empty(n_labels, hidden_dim))
        self.label_bias = nn.Parameter(torch.zeros(n_labels))
        nn.init.normal_(self.label_weight, std=hidden_dim**-0.5)

    def forward_parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SAM logits (batch, L), GCN logits (batch, L) and dynamic adjacency (batch, L, L)."""
        pixels = self.trunk.feature_map(x)  # (batch, P, D)
        maps = self.attention(pixels)  # (batch, P, L): one activation map per label
        sam_logits = maps.amax(dim=1)
        # content vector of label k: the transformed pixels summed under k's attention
        nodes = torch.matmul(torch.sigmoid(maps).transpose(1, 2), self.transform(pixels))
        update, adjacency = self.gcn(nodes)
        gcn_logits = ((nodes + update) * self.label_weight).sum(dim=2) + self.label_bias
        return sam_logits, gcn_logits, adjacency

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sam_logits, gcn_logits, _ = self.forward_parts(x)
        return (sam_logits + gcn_logits) / 2


class ADDGCN(NetClassifier):
    """Attention-driven dynamic graph convolutional network (Ye et al., ECCV 2020).

    Semantic attention over a spatial feature map gives one content vector per label; a static
    graph convolution (learned L × L adjacency) and a dynamic one (adjacency computed per sample
    from the content vectors) relate the labels; the final score averages the attention (SAM) and
    graph (GCN) scores. See the module docstring for the equations.

    Input X is either spatial maps (n, C, H, W), e.g. the last convolutional block of an image
    backbone, or plain vectors (n, d), treated as 1 × 1 maps (then the attention reduces to a
    per-label gating of the transformed vector). A trainable 1 × 1 convolution ("encoder") stands
    in for the backbone that the original fine-tunes; it is what ``trunk_`` exposes.

    Parameters
    ----------
    hidden_dim : int, default 256
        Channels of the encoder output and of the label node features (1024 in the original,
        on top of 2048-channel ResNet maps).
    epochs : int, default 30
    batch_size : int, default 64
    lr : float, default 1e-3
        Adam learning rate (the original fine-tunes a whole ResNet with SGD; these defaults suit a
        network trained on fixed features).
    weight_decay : float, default 1e-4
    max_grad_norm : float or None, default 10.0
        Gradient-norm clipping per step (HLC's training clips at 10); None disables it.
    standardize : bool, default True
        Per-channel standardisation with the training statistics (inside ``trunk_``).
    random_state : None, int or numpy Generator
        Same value → identical ``predict_proba``; the global RNGs are never touched.
    device : str or torch.device, default "cpu"
    n_threads : int or None, default 1
        torch intra-op threads while fitting / predicting (restored after); None leaves torch's
        setting alone. One thread by default: these small networks gain little from more on an idle
        machine and run several times slower with two when other processes share the cores (the
        docs/speed.md, "Threads"); pass more for large inputs on a machine of your own.
    verbose : bool, default False
        One line per epoch on stderr.

    Attributes
    ----------
    trunk_ : torch.nn.Module
        Maps a float tensor shaped like X's rows, (batch, d) or (batch, C, H, W), to the
        spatially averaged encoder output (batch, embedding_dim_). In eval mode.
    embedding_dim_ : int
        ``hidden_dim``.
    network_ : torch.nn.Module
        The whole network; ``forward`` gives the averaged logits, ``forward_parts`` the SAM
        logits, the GCN logits and the dynamic adjacency.
    history_ : dict of str to list of float
        ``"train_loss"`` per epoch and, with a validation set, ``"val_micro_f1"``.
    best_epoch_ : int
        0-based epoch whose weights were kept (best validation micro-F1, else the last).
    n_features_in_ : int
        d, or C for maps.
    input_shape_ : tuple of int
        Per-sample shape of X seen in ``fit``.
    n_labels_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from lsnpc.classifiers import ADDGCN
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 8, 3, 3)).astype("float32")
    >>> y = np.stack([X[:, 0].mean((1, 2)) > 0, X[:, 1].max((1, 2)) > 1], axis=1).astype(int)
    >>> clf = ADDGCN(hidden_dim=16, epochs=5, random_state=0).fit(X, y)
    >>> proba, adjacency = clf.scores_and_adjacency(X[:4])
    >>> proba.shape, adjacency.shape
    ((4, 2), (4, 2, 2))
    """

    _input_ndims = (2, 4)

    def __init__(
        self,
        hidden_dim: int = 256,
        epochs: int = 30,
        batch_size: int = 64,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        max_grad_norm: float | None = 10.0,
        standardize: bool = True,
        random_state: int | np.random.Generator | None = None,
        device: str | torch.device = "cpu",
        n_threads: int | None = 1,
        verbose: bool = False,
    ) -> None:
        self.hidden_dim = hidden_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_grad_norm = max_grad_norm
        self.standardize = standardize
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads
        self.verbose = verbose

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.hidden_dim, "hidden_dim", kind=Integral, low=1)
        if self.max_grad_norm is not None:
            check_scalar(self.max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False)

    def _build_network(self, X: np.ndarray, n_labels: int) -> nn.Module:
        layers: list[nn.Module] = []
        if self.standardize:
            layers.append(Standardize.from_data(X))
        layers += [nn.Linear(X.shape[1], self.hidden_dim), nn.LeakyReLU(_SLOPE)]
        return ADDGCNNetwork(PooledTrunk(nn.Sequential(*layers)), self.hidden_dim, n_labels)

    def _batch_loss(self, network: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        sam_logits, gcn_logits, _ = network.forward_parts(xb)
        return (
            F.binary_cross_entropy_with_logits(sam_logits, yb)
            + F.binary_cross_entropy_with_logits(gcn_logits, yb)
        ) / 2

    @torch.no_grad()
    def _scores_and_adjacency_tensor(
        self, network: nn.Module, X: torch.Tensor, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Probabilities (n, L) and dynamic adjacencies (n, L, L), CPU tensors, in eval mode."""
        was_training = network.training
        network.eval()
        probs, graphs = [], []
        for chunk in X.split(self._predict_batch_size()):
            sam_logits, gcn_logits, adjacency = network.forward_parts(chunk.to(device))
            probs.append(torch.sigmoid((sam_logits + gcn_logits) / 2).float().cpu())
            graphs.append(adjacency.float().cpu())
        network.train(was_training)
        return torch.cat(probs), torch.cat(graphs)

    def scores_and_adjacency(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Per-label probabilities and the dynamic label graph of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) with the per-sample shape seen in ``fit``

        Returns
        -------
        proba : ndarray of shape (n_samples, n_labels), float32
            Same as :meth:`predict_proba`.
        adjacency : ndarray of shape (n_samples, n_labels, n_labels), float32 in (0, 1)
            The dynamic adjacency A_d of each sample; entry (i, j) is how strongly label i's content
            vector feeds label j's in the dynamic graph convolution.
        """
        X = self._check_predict_input(X)
        device = next(self.network_.parameters()).device
        with num_threads(self.n_threads):
            probs, graphs = self._scores_and_adjacency_tensor(
                self.network_, to_tensor(X, torch.device("cpu")), device
            )
        return probs.numpy(), graphs.numpy()
