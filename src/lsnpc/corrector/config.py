"""The frozen configuration that training and persistence read, and the one place the model is built.

The estimator (:mod:`lsnpc.corrector.estimator`) validates its constructor parameters and turns them
into a :class:`ModelSpec` (what to build) and a :class:`TrainingConfig` (how to train it); the
training loop and the save/load code read only these, never the estimator, so no module of the
corrector imports the estimator back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from torch import nn

from .model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder, clone_encoder

__all__ = ["ModelSpec", "TrainingConfig", "build_model"]


@dataclass(frozen=True)
class ModelSpec:
    """What :func:`build_model` builds: the latent family, the widths of the networks and the number
    of Monte-Carlo samples whose fixed draws the model carries.

    ``encoder_dim`` is the width of LSNPC's own data encoder (the estimator's ``hidden_dim``); it is
    ignored when a user encoder is given.
    """

    latent: str
    nu: float
    nu0: float
    latent_dim: int
    label_embedding_dim: int
    encoder_dim: int
    n_samples: int

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ModelSpec:
        """From the estimator's parameters (``get_params()`` or a saved config's ``params``)."""
        return cls(
            latent=str(params["latent"]), nu=float(params["nu"]), nu0=float(params["nu0"]),
            latent_dim=int(params["latent_dim"]), label_embedding_dim=int(params["label_embedding_dim"]),
            encoder_dim=int(params["hidden_dim"]), n_samples=int(params["n_samples"]),
        )


@dataclass(frozen=True)
class TrainingConfig:
    """How Algorithm 1 runs (see :class:`lsnpc.LSNPC` for each field's meaning)."""

    beta: float
    eta: float
    epochs: int | str
    batch_size: int
    lr: float
    weight_decay: float
    n_samples: int
    train_feed: str
    predict_feed: str
    warm_start: bool
    schedule: str
    holdout_fraction: float
    min_steps: int | str
    verbose: bool

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> TrainingConfig:
        return cls(**{f.name: params[f.name] for f in fields(cls)})


def build_model(
    spec: ModelSpec,
    *,
    n_features: int,
    n_labels: int,
    encoder: nn.Module | None = None,
    data_dim: int | None = None,
) -> LatentShiftModel:
    """The LSNPC networks for ``spec``, freshly initialised (from torch's global RNG).

    With ``encoder=None`` the data encoder is LSNPC's own standardised MLP over ``n_features``;
    otherwise a trainable copy of ``encoder`` whose embedding width ``data_dim`` the caller knows
    (``infer_output_dim`` at fit time, the saved config at load time).
    """
    if encoder is None:
        data_encoder: nn.Module = StandardizedMLPEncoder(n_features, spec.encoder_dim)
        data_dim = spec.encoder_dim
    else:
        if data_dim is None:
            raise ValueError("build_model needs data_dim, the width of the user encoder's embedding")
        data_encoder = clone_encoder(encoder)
    return LatentShiftModel(
        data_encoder, data_dim, n_labels, LatentConfig(spec.latent, spec.nu, spec.nu0),
        latent_dim=spec.latent_dim, label_embedding_dim=spec.label_embedding_dim, n_samples=spec.n_samples,
    )
