"""A plain training loop written the way the authors' code trains LSNPC: the yardstick for speed.

``torch.optim.AdamW``, a ``DataLoader`` over a ``TensorDataset`` (batch 32, shuffled),
``torch.distributions.StudentT`` / ``Normal`` with their default argument validation,
``clip_grad_norm_`` (2, as on their noisy batches), cosine annealing stepped per epoch, a fresh
Bernoulli sample of the base probabilities as ŷ in every batch, and the loss of
../shared/REFERENCE_NOTES.md: BCE(g_φ(x, ẑ), ŷ) + β (log q(ẑ | x, ŷ) − log p(ẑ | z)
+ KL(q(z | ẑ) ‖ N(0, I))).
It trains the same networks as :class:`lsnpc.LSNPC` (``build_model``), so the two differ only in how a
step is computed. Used by ``bench_corrector.py``, which reports our speed as a ratio against it.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch.distributions import Normal, StudentT, kl_divergence
from torch.utils.data import DataLoader, TensorDataset

from lsnpc.corrector.model import LatentShiftModel


def reference_loss(model: LatentShiftModel, x: torch.Tensor, probs: torch.Tensor, beta: float) -> torch.Tensor:
    """The negative ELBO of one noisy batch, written with torch.distributions as the authors do."""
    noisy = torch.bernoulli(probs)
    h = model.data_encoder(x)
    loc, scale, _ = model.shift_encoder(h, model.label_encoder(noisy))
    q_shifted = StudentT(model.nu, loc, scale)
    shifted = q_shifted.rsample()
    kappa_loc, kappa_scale = model.true_latent_encoder(shifted)
    q_true = Normal(kappa_loc, kappa_scale)
    true = q_true.rsample()
    p_shifted = StudentT(model.nu0, model.shift_decoder(true), torch.ones_like(loc))
    recon = F.binary_cross_entropy(torch.sigmoid(model.label_decoder(h, shifted)), noisy)
    prior = Normal(torch.zeros_like(kappa_loc), torch.ones_like(kappa_scale))
    latent = (q_shifted.log_prob(shifted) - p_shifted.log_prob(shifted)).mean()
    latent = latent + kl_divergence(q_true, prior).mean()
    return recon + beta * latent


def reference_epochs(
    model: LatentShiftModel,
    X: torch.Tensor,
    P: torch.Tensor,
    *,
    epochs: int,
    batch_size: int = 32,
    lr: float = 2e-4,
    beta: float = 0.01,
    weight_decay: float = 1e-5,
) -> list[float]:
    """Train ``model`` for ``epochs`` passes over (X, P); returns the seconds each epoch took."""
    loader = DataLoader(TensorDataset(X, P), batch_size=batch_size, shuffle=True, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    model.train()
    seconds = []
    for _ in range(epochs):
        started = time.perf_counter()
        for x, p in loader:
            reference_step(model, optimizer, x, p, beta)
        scheduler.step()
        seconds.append(time.perf_counter() - started)
    return seconds


def reference_step(
    model: LatentShiftModel, optimizer: torch.optim.Optimizer, x: torch.Tensor, p: torch.Tensor, beta: float
) -> None:
    """One optimiser step on a batch: zero the gradients, backpropagate the loss, clip to 2, step."""
    optimizer.zero_grad()
    reference_loss(model, x, p, beta).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
    optimizer.step()
