"""MLPClassifier: a multilabel head over fixed features (the paper's MLP_r / MLP_v)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn

from lsnpc._validation import check_scalar
from lsnpc.classifiers._base import NetClassifier, Standardize

__all__ = ["MLPClassifier"]


class _MLPNetwork(nn.Module):
    """``head(trunk(x))``: the trunk gives the embedding, the head one logit per label."""

    def __init__(self, trunk: nn.Module, head: nn.Module, embedding_dim: int) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = head
        self.embedding_dim = embedding_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


class MLPClassifier(NetClassifier):
    """A multilabel MLP over a feature matrix, trained with Adam and binary cross-entropy.

    This is the paper's MLP_r / MLP_v base model: a head on top of frozen backbone features (there
    ResNet-50 or LeViT embeddings; here any feature matrix X). Labels are independent sigmoid
    outputs. With a validation set the weights of the epoch with the best validation micro-F1 are
    kept (the paper's selection rule); without one, the last epoch's.

    The defaults suit tabular features (e.g. MULAN data sets, a few hundred columns, ~10^3 rows).
    The paper trains its head on 2048-d ResNet features with ``lr=5e-5``, ``batch_size=128``,
    ``epochs=20``, ``hidden_dims=()``; with a standardised low-dimensional input that rate is far too
    slow, hence ``lr=1e-3`` and one hidden layer here.

    Parameters
    ----------
    hidden_dims : sequence of int, default (256,)
        Widths of the hidden layers (Linear → ReLU → Dropout each). ``()`` gives a linear head.
    dropout : float in [0, 1), default 0.2
        Dropout after every hidden layer.
    epochs : int, default 30
    batch_size : int, default 128
    lr : float, default 1e-3
        Adam learning rate.
    weight_decay : float, default 1e-4
        Adam (L2) weight decay.
    standardize : bool, default True
        Standardise each feature with the training mean and standard deviation. The statistics are
        part of ``trunk_``, so the trunk maps raw X.
    random_state : None, int or numpy Generator
        Seeds the weight initialisation, dropout and the shuffling: the same value gives identical
        ``predict_proba``. The global RNGs are never touched.
    device : str or torch.device, default "cpu"
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    n_threads : int or None, default 1
        torch intra-op threads while fitting / predicting (restored after); None leaves torch's
        setting alone. One thread by default: these small networks gain little from more on an idle
        machine and run several times slower with two when other processes share the cores (the
        docs/speed.md, "Threads"); pass more for large inputs on a machine of your own.
    verbose : bool, default False
        Print one line per epoch to stderr.

    Attributes
    ----------
    trunk_ : torch.nn.Module
        Maps a float tensor (batch, n_features) to the embedding (batch, embedding_dim_):
        standardisation followed by the hidden layers (just the standardisation when
        ``hidden_dims=()``). In eval mode; LSNPC deep-copies and fine-tunes it.
    embedding_dim_ : int
        Last hidden width, or n_features when ``hidden_dims=()``.
    network_ : torch.nn.Module
        The whole network (trunk + linear head), giving logits.
    history_ : dict of str to list of float
        ``"train_loss"`` (mean BCE per epoch) and, with a validation set, ``"val_micro_f1"``.
    best_epoch_ : int
        0-based index (into the history lists) of the epoch whose weights were kept.
    n_features_in_, n_labels_ : int
    input_shape_ : tuple of int
        Per-sample shape of X seen in ``fit``, ``(n_features,)``.

    Examples
    --------
    >>> import numpy as np
    >>> from lsnpc.classifiers import MLPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)).astype("float32")
    >>> y = np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(int)
    >>> clf = MLPClassifier(hidden_dims=(16,), epochs=20, random_state=0).fit(X, y)
    >>> clf.predict_proba(X).shape
    (200, 2)
    >>> clf.trunk_.__class__.__name__, clf.embedding_dim_
    ('Sequential', 16)
    """

    def __init__(
        self,
        hidden_dims: Sequence[int] = (256,),
        dropout: float = 0.2,
        epochs: int = 30,
        batch_size: int = 128,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        standardize: bool = True,
        random_state: int | np.random.Generator | None = None,
        device: str | torch.device = "cpu",
        n_threads: int | None = 1,
        verbose: bool = False,
    ) -> None:
        self.hidden_dims = hidden_dims
        self.dropout = dropout
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads
        self.verbose = verbose

    def _check_params(self) -> None:
        super()._check_params()
        if isinstance(self.hidden_dims, (str, bytes)) or not isinstance(self.hidden_dims, Sequence):
            raise ValueError(f"hidden_dims must be a sequence of positive ints, got {self.hidden_dims!r}")
        for width in self.hidden_dims:
            check_scalar(width, "hidden_dims entries", kind=Integral, low=1)
        check_scalar(self.dropout, "dropout", kind=Real, low=0.0, high=1.0, high_inclusive=False)

    def _build_network(self, X: np.ndarray, n_labels: int) -> nn.Module:
        layers: list[nn.Module] = []
        if self.standardize:
            layers.append(Standardize.from_data(X))
        width = X.shape[1]
        for hidden in self.hidden_dims:
            layers += [nn.Linear(width, int(hidden)), nn.ReLU(), nn.Dropout(self.dropout)]
            width = int(hidden)
        trunk = nn.Sequential(*layers)  # an empty Sequential is the identity
        return _MLPNetwork(trunk, nn.Linear(width, n_labels), width)
