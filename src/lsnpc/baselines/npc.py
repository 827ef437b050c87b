"""The direct multilabel extension of NPC (section 3 of the paper), as a baseline post-processor.

NPC treats the true labels ``y`` as the latent variable of a VAE whose observation is the base
classifier's noisy prediction ``ŷ``:

- encoder ``q(y | x, ŷ)``: independent Bernoullis, one per label, from an MLP over ``[x, ŷ]``;
- decoder ``p(ŷ | x, y)``: independent Bernoullis from an MLP over ``[x, y]``;
- label correlation in the sample of ``y``: a Normal (Gaussian) copula with a learned low-rank
  correlation, following Wang et al. (2020, "relaxed multivariate Bernoulli");
- loss per sample: ``BCE(p(ŷ | x, y), ŷ) + β · KL(q(y | x, ŷ) ‖ p_h(ŷ | x))``, where ``p_h`` is
  the base classifier's probability vector and the KL is the multivariate-Bernoulli one of the
  paper, ``Σ_k π_k log(π_k / h_k) + (1 − π_k) log((1 − π_k) / (1 − h_k))``; both terms are summed
  over labels and averaged over the batch.

Sampling ``y``: draw ``g ~ N(0, Σ)`` with ``Σ = V Vᵀ + diag(D)`` (``V`` of shape
(L, copula_rank)), standardise it to unit variance and map it through the Normal CDF to correlated
uniforms ``u``. ``logit(u)`` is then standard-logistic noise per label, and the relaxed Bernoulli
(binary Concrete) sample ``sigmoid((logit π + logit u) / temperature)`` is fed to the decoder. The
relaxation is used rather than straight-through hard samples because its gradient to the encoder
is smooth at the default temperature 0.5 and becomes exact as the temperature goes to 0;
``copula_rank=0`` gives independent labels.

Training ``ŷ``: a fresh Bernoulli sample of ``pred_probs`` every batch, used as the encoder's
input and the reconstruction target. Prediction: ``q(y | x, ŷ = pred_probs)``, the encoder's
probabilities.

With a clean set, each epoch on the noisy data is followed by one pass over the clean data whose
loss is ``BCE(q(y | x, ŷ), y_clean) + BCE(p(ŷ | x, y_clean), ŷ)``: the encoder is supervised by
the true labels and the decoder learns the noise process from them.

The paper shows this extension does not learn a useful correction (the KL is dominated by the many
agreeing negatives); it is here so that this finding can be reproduced.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from torch import nn
from torch.distributions import LowRankMultivariateNormal
from torch.nn import functional as F

from lsnpc._numerics import minibatches, standardization
from lsnpc._sklearn import PostProcessorTagsMixin
from lsnpc._torch import num_threads, resolve_device, seeded, to_tensor, torch_seed_from
from lsnpc._validation import (
    check_bool,
    check_finite_output,
    check_random_state,
    check_scalar,
)
from lsnpc.baselines._common import FitData, PostProcessorMixin, validate_fit

__all__ = ["NPCCorrector"]

_EPS = 1e-6


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(n_in, hidden),
        nn.GELU(),
        nn.Linear(hidden, hidden),
        nn.GELU(),
        nn.Linear(hidden, n_out),
    )


class _NPCNetwork(nn.Module):
    """Encoder q(y | x, ŷ), decoder p(ŷ | x, y) and the copula's low-rank covariance."""

    def __init__(self, n_features: int, n_labels: int, hidden_dim: int, copula_rank: int) -> None:
        super().__init__()
        self.encoder = _mlp(n_features + n_labels, hidden_dim, n_labels)
        self.decoder = _mlp(n_features + n_labels, hidden_dim, n_labels)
        self.copula_rank = copula_rank
        if copula_rank > 0:
            # Small start: the copula begins close to independent labels.
            self.copula_factor = nn.Parameter(0.1 * torch.randn(n_labels, copula_rank))
            self.copula_log_diag = nn.Parameter(torch.zeros(n_labels))

    def encode(self, x: torch.Tensor, noisy: torch.Tensor) -> torch.Tensor:
        """Logits of q(y | x, ŷ), shape (batch, L)."""
        return self.encoder(torch.cat([x, noisy], dim=1))

    def decode(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Logits of p(ŷ | x, y), shape (batch, L)."""
        return self.decoder(torch.cat([x, y], dim=1))

    def correlated_uniforms(self, n: int) -> torch.Tensor:
        """(n, L) uniforms whose dependence is the Normal copula (independent when rank is 0)."""
        n_labels = self.encoder[-1].out_features
        device = self.encoder[-1].weight.device
        if self.copula_rank == 0:
            return torch.rand(n, n_labels, device=device).clamp(_EPS, 1 - _EPS)
        diag = F.softplus(self.copula_log_diag) + _EPS
        gauss = LowRankMultivariateNormal(
            torch.zeros(n_labels, device=device), self.copula_factor, diag
        ).rsample((n,))
        std = torch.sqrt((self.copula_factor**2).sum(dim=1) + diag)
        return torch.special.ndtr(gauss / std).clamp(_EPS, 1 - _EPS)  # the Normal CDF

    def sample_labels(self, logits: torch.Tensor, temperature: float) -> torch.Tensor:
        """Relaxed Bernoulli sample of y with copula-correlated logistic noise, in (0, 1)."""
        u = self.correlated_uniforms(logits.shape[0])
        return torch.sigmoid((logits + torch.log(u) - torch.log1p(-u)) / temperature)


def _bernoulli_kl(logits: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """Σ_k KL(Bern(sigmoid(logits_k)) ‖ Bern(prior_k)) per row, shape (batch,)."""
    prior = prior.clamp(_EPS, 1 - _EPS)
    p = torch.sigmoid(logits)
    kl = p * (F.logsigmoid(logits) - torch.log(prior)) + (1 - p) * (
        F.logsigmoid(-logits) - torch.log1p(-prior)
    )
    return kl.sum(dim=1)


class NPCCorrector(PostProcessorTagsMixin, PostProcessorMixin, BaseEstimator):
    """Multilabel NPC: a VAE with the true labels as latent variable (see the module docstring).

    Parameters
    ----------
    beta : float, default 1.0
        Weight β of the KL term that keeps ``q(y | x, ŷ)`` near the base classifier's
        probabilities.
    copula_rank : int, default 3
        Rank of the Normal copula's covariance factor; 0 samples the labels independently.
    hidden_dim : int, default 128
        Width of the two hidden layers of the encoder and of the decoder.
    epochs : int, default 30
        Passes over the noisy data (each followed by one pass over the clean set, if any).
    batch_size : int, default 64
    lr : float, default 1e-3
        AdamW learning rate.
    weight_decay : float, default 1e-5
        AdamW weight decay.
    temperature : float, default 0.5
        Temperature of the relaxed Bernoulli sample of y.
    random_state : None, int or numpy Generator
        Seeds parameter initialisation, batching and sampling; the same int gives identical output.
    device : str or torch.device, default "cpu"
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    verbose : bool, default False
        Print the mean loss of every epoch.
    n_threads : int or None, default 1
        Torch CPU threads used during fit and predict (torch's setting is restored afterwards);
        None leaves torch's current setting. One by default, as for every estimator here (the
        docs/speed.md, "Threads": two threads run several times slower on a busy machine).

    Attributes
    ----------
    n_features_in_, n_labels_ : int
        ``d`` and ``L`` seen in fit.
    loss_history_ : list of float
        Mean training loss (on the noisy data) of every epoch.
    history_ : list of dict
        One entry per epoch (the paper's Fig. 2, the training analysis of this extension): ``epoch``,
        ``loss`` (the mean training loss) and, with a validation triple, ``val_loss`` (the same objective on
        the validation rows, at the base probabilities, with no sampling), ``val_clean_loss`` (binary
        cross-entropy of the corrected probabilities against the clean validation labels, summed over labels)
        and ``val_micro_f1`` / ``val_macro_f1`` (at 0.5). The last epoch is kept whatever they say.
    selection_ : str
        How the epoch kept was chosen (always the last).
    network_ : torch.nn.Module
        The trained encoder / decoder / copula, on ``device_``.
    device_ : torch.device
    """

    def __init__(
        self,
        beta: float = 1.0,
        copula_rank: int = 3,
        hidden_dim: int = 128,
        epochs: int = 30,
        batch_size: int = 64,
        lr: float = 1e-3,
        weight_decay: float = 1e-5,
        temperature: float = 0.5,
        random_state: int | np.random.Generator | None = None,
        device: str | torch.device = "cpu",
        verbose: bool = False,
        n_threads: int | None = 1,
    ) -> None:
        self.beta = beta
        self.copula_rank = copula_rank
        self.hidden_dim = hidden_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.temperature = temperature
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.n_threads = n_threads

    def _check_params(self) -> None:
        check_scalar(self.beta, "beta", kind=Real, low=0.0)
        check_scalar(self.copula_rank, "copula_rank", kind=Integral, low=0)
        check_scalar(self.hidden_dim, "hidden_dim", kind=Integral, low=1)
        check_scalar(self.epochs, "epochs", kind=Integral, low=1)
        check_scalar(self.batch_size, "batch_size", kind=Integral, low=1)
        check_scalar(self.lr, "lr", kind=Real, low=0.0, low_inclusive=False)
        check_scalar(self.weight_decay, "weight_decay", kind=Real, low=0.0)
        check_scalar(self.temperature, "temperature", kind=Real, low=0.0, low_inclusive=False)
        if self.n_threads is not None:
            check_scalar(self.n_threads, "n_threads", kind=Integral, low=1)
        check_bool(self.verbose, "verbose")

    def fit(
        self,
        X: Any,
        pred_probs: Any,
        *,
        X_clean: Any = None,
        y_clean: Any = None,
        pred_probs_clean: Any = None,
        X_val: Any = None,
        y_val: Any = None,
        pred_probs_val: Any = None,
    ) -> NPCCorrector:
        """Train the encoder and decoder on the base classifier's predictions.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features of the samples the base classifier predicted.
        pred_probs : array-like of shape (n, L)
            The base classifier's probabilities for X.
        X_clean, y_clean, pred_probs_clean : array-like of shape (m, d), (m, L), (m, L), optional
            A small clean set: features, true 0/1 labels and the base classifier's probabilities.
        X_val, y_val, pred_probs_val : array-like of shape (v, d), (v, L), (v, L), optional
            A clean validation set, only recorded in ``history_`` each epoch (it chooses nothing).

        Returns
        -------
        self
        """
        self._check_params()
        self._require_pred_probs(pred_probs)
        data = validate_fit(X, pred_probs, X_clean, y_clean, pred_probs_clean)
        if (X_val is None) != (y_val is None) or (X_val is None) != (pred_probs_val is None):
            raise ValueError("X_val, y_val and pred_probs_val go together: give all three or none")
        # the clean-set check of validate_fit checks the validation triple's labels too
        val = validate_fit(X_val, pred_probs_val, X_val, y_val, pred_probs_val) if X_val is not None else None
        if val is not None and (val.X.shape[1] != data.X.shape[1] or val.pred_probs.shape[1] != data.pred_probs.shape[1]):
            raise ValueError(f"X_val, pred_probs_val must have {data.X.shape[1]} features and "
                             f"{data.pred_probs.shape[1]} labels (as X, pred_probs), got {val.X.shape[1]} and "
                             f"{val.pred_probs.shape[1]}")
        self._record_names(X, pred_probs)
        device = resolve_device(self.device)
        seed = torch_seed_from(check_random_state(self.random_state))
        # Standardised inputs make one learning rate work across feature scales.
        mean, scale = standardization(data.X)
        self.feature_mean_, self.feature_scale_ = mean.astype(np.float32), scale.astype(np.float32)
        self.n_features_in_ = data.X.shape[1]
        self.device_ = device
        with seeded(seed, device), num_threads(self.n_threads):
            network = _NPCNetwork(
                data.X.shape[1],
                data.pred_probs.shape[1],
                int(self.hidden_dim),
                int(self.copula_rank),
            ).to(device)
            self.history_ = self._train(network, data, device, val)
        self.loss_history_ = [entry["loss"] for entry in self.history_]
        self.selection_ = "last epoch (the validation set, if any, is recorded, not used to choose)"
        self.network_ = network.eval()
        self.n_labels_ = data.pred_probs.shape[1]
        return self

    def _scaled(self, X: np.ndarray, device: torch.device) -> torch.Tensor:
        return to_tensor((X - self.feature_mean_) / self.feature_scale_, device)

    def _monitor(self, network: _NPCNetwork, val: FitData, device: torch.device) -> dict[str, float]:
        """The validation entries of ``history_`` (no sampling, so the training draws are not disturbed)."""
        from lsnpc.metrics import macro_f1, micro_f1

        x, probs = self._scaled(val.X, device), to_tensor(val.pred_probs, device)
        truth = to_tensor(val.y_clean, device)
        network.eval()
        with torch.no_grad():
            logits = network.encode(x, probs)
            recon = F.binary_cross_entropy_with_logits(network.decode(x, torch.sigmoid(logits)), probs, reduction="none")
            loss = (recon.sum(1) + float(self.beta) * _bernoulli_kl(logits, probs)).mean()
            clean = F.binary_cross_entropy_with_logits(logits, truth, reduction="none").sum(1).mean()
            corrected = torch.sigmoid(logits).cpu().numpy()
        network.train()
        return {"val_loss": float(loss), "val_clean_loss": float(clean),
                "val_micro_f1": micro_f1(val.y_clean, corrected), "val_macro_f1": macro_f1(val.y_clean, corrected)}

    def _train(self, network: _NPCNetwork, data: FitData, device: torch.device,
               val: FitData | None = None) -> list[dict[str, float]]:
        x = self._scaled(data.X, device)
        probs = to_tensor(data.pred_probs, device)
        clean = None
        if data.has_clean:
            clean = (
                self._scaled(data.X_clean, device),
                to_tensor(data.y_clean, device),
                to_tensor(data.pred_probs_clean, device),
            )
        optimiser = torch.optim.AdamW(
            network.parameters(), lr=self.lr, weight_decay=self.weight_decay
        )
        history = []
        network.train()
        for epoch in range(int(self.epochs)):
            total, count = 0.0, 0
            for batch in minibatches(x.shape[0], int(self.batch_size)):
                loss = self._noisy_loss(network, x[batch], probs[batch])
                self._step(optimiser, loss)
                total += float(loss.detach()) * batch.numel()
                count += batch.numel()
            if clean is not None:
                xc, yc, pc = clean
                for batch in minibatches(xc.shape[0], int(self.batch_size)):
                    loss = self._clean_loss(network, xc[batch], yc[batch], pc[batch])
                    self._step(optimiser, loss)
            entry = {"epoch": epoch + 1, "loss": total / count}
            if val is not None:
                entry.update(self._monitor(network, val, device))
            history.append(entry)
            if self.verbose:
                print(f"NPCCorrector epoch {epoch + 1}/{self.epochs}: loss {entry['loss']:.4f}")
        return history

    @staticmethod
    def _step(optimiser: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    def _noisy_loss(
        self, network: _NPCNetwork, x: torch.Tensor, probs: torch.Tensor
    ) -> torch.Tensor:
        # ŷ: a fresh sample of the base prediction, both the encoder's input and the target.
        noisy = torch.bernoulli(probs)
        logits = network.encode(x, noisy)
        y = network.sample_labels(logits, float(self.temperature))
        recon = F.binary_cross_entropy_with_logits(network.decode(x, y), noisy, reduction="none")
        return (recon.sum(dim=1) + float(self.beta) * _bernoulli_kl(logits, probs)).mean()

    @staticmethod
    def _clean_loss(
        network: _NPCNetwork, x: torch.Tensor, y: torch.Tensor, probs: torch.Tensor
    ) -> torch.Tensor:
        noisy = torch.bernoulli(probs)
        supervised = F.binary_cross_entropy_with_logits(
            network.encode(x, noisy), y, reduction="none"
        )
        recon = F.binary_cross_entropy_with_logits(network.decode(x, y), noisy, reduction="none")
        return (supervised.sum(dim=1) + recon.sum(dim=1)).mean()

    def predict_proba(self, X: Any, pred_probs: Any) -> np.ndarray:
        """Corrected probabilities ``q(y | x, ŷ = pred_probs)``.

        Parameters
        ----------
        X : array-like of shape (n, d)
        pred_probs : array-like of shape (n, L)
            The base classifier's probabilities for X.

        Returns
        -------
        ndarray of shape (n, L), float32, in [0, 1]
        """
        X, probs = self._validate_predict(X, pred_probs)
        x = self._scaled(X, self.device_)
        p = to_tensor(probs, self.device_)
        out = []
        with torch.no_grad(), num_threads(self.n_threads):
            for rows in torch.arange(x.shape[0], device=self.device_).split(4096):
                out.append(torch.sigmoid(self.network_.encode(x[rows], p[rows])).cpu())
        return check_finite_output(torch.cat(out).numpy().astype(np.float32), "X", X)
