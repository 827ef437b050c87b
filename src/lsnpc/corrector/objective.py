"""The training objectives of LSNPC: the negative ELBOs of section 4.2, term by term.

Conventions (as in the authors' implementation): the reconstruction terms are binary cross-entropies
averaged over batch and labels; the latent terms are averaged over batch and latent dimensions and
weighted by β (the β-VAE of appendix D, which applies β only to the terms of z and ẑ).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.distributions import Distribution, Normal

from .model import LatentShiftModel

__all__ = [
    "reconstruction_nll",
    "shift_divergence",
    "standard_normal_kl",
    "LossParts",
    "unsupervised_loss",
    "unsupervised_terms",
    "supervised_loss",
    "supervised_terms",
]


def reconstruction_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """−E_q[log p(labels | x, latent)] for Bernoulli labels: BCE(sigmoid(logits), labels).

    logits, labels: (batch, L). Labels may be 0/1 samples or probabilities. Returns a scalar (mean).
    """
    return F.binary_cross_entropy_with_logits(logits, labels)


def shift_divergence(
    q_shifted: Distribution, shifted: torch.Tensor, p_shifted_given_true: Distribution
) -> torch.Tensor:
    """One-sample estimate of E_q[log q(ẑ | x, ŷ) − log p(ẑ | z)] (eq. 3, the ẑ terms).

    ``shifted`` is the ẑ drawn from ``q_shifted``; ``p_shifted_given_true`` is p(ẑ | z) at the z drawn
    from the proposal. Returns the mean over batch and latent dimensions.
    """
    return (q_shifted.log_prob(shifted) - p_shifted_given_true.log_prob(shifted)).mean()


def standard_normal_kl(q: Normal) -> torch.Tensor:
    """Analytic KL(q ‖ Normal(0, I)) per element (batch, m): E_q[log q(z) − log p(z)] of eq. 3."""
    var = q.scale.pow(2)
    return 0.5 * (var + q.loc.pow(2) - 1.0 - torch.log(var))


@dataclass
class LossParts:
    """The pieces of one batch's loss, detached, for the training history."""

    total: float
    reconstruction: float
    latent: float


def _parts(total: torch.Tensor, recon: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
    """(total, reconstruction, latent) as one detached tensor (3,), left on the device."""
    return torch.stack([total.detach(), recon.detach(), latent.detach()])


def _loss_parts(values: torch.Tensor) -> LossParts:
    total, recon, latent = values.tolist()
    return LossParts(total, recon, latent)


def unsupervised_loss(
    model: LatentShiftModel, data_embedding: torch.Tensor, noisy: torch.Tensor, beta: float
) -> tuple[torch.Tensor, LossParts]:
    """−ELBO of eq. 3 for a noisy batch, i.e. 𝒰(B̃) of eq. 7.

    data_embedding: (batch, h); noisy: ŷ (batch, L), a 0/1 sample of the base probabilities (or the
    probabilities themselves). Proposal: ẑ ~ q(ẑ | x, ŷ), z ~ q(z | ẑ). Returns the loss and its parts.
    """
    total, values = unsupervised_terms(model, data_embedding, noisy, beta)
    return total, _loss_parts(values)


def unsupervised_terms(
    model: LatentShiftModel, data_embedding: torch.Tensor, noisy: torch.Tensor, beta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`unsupervised_loss` with its parts as a detached tensor (total, reconstruction, latent):
    nothing is read back to the host (the training step on a GPU)."""
    q_shifted = model.q_latent(data_embedding, noisy)
    shifted = q_shifted.rsample()
    q_true = model.q_true_given_shifted(shifted)
    true = q_true.rsample()
    recon = reconstruction_nll(model.label_logits(data_embedding, shifted), noisy)
    latent = shift_divergence(q_shifted, shifted, model.p_shifted_given_true(true))
    latent = latent + standard_normal_kl(q_true).mean()
    total = recon + beta * latent
    return total, _parts(total, recon, latent)


def supervised_loss(
    model: LatentShiftModel,
    data_embedding: torch.Tensor,
    noisy: torch.Tensor,
    clean: torch.Tensor,
    beta: float,
    eta: float,
) -> tuple[torch.Tensor, LossParts]:
    """−ELBO of eq. 10 for a clean batch, i.e. ℒ(B) of eq. 13.

    z comes from the η-mixture proposal of eq. 11: per sample, with probability η from q(z | x, y),
    otherwise from q(z | ẑ). The z-terms use the analytic KL of the component that produced each z.
    clean: the true labels y (batch, L). Returns the loss and its parts.
    """
    total, values = supervised_terms(model, data_embedding, noisy, clean, beta, eta)
    return total, _loss_parts(values)


def supervised_terms(
    model: LatentShiftModel,
    data_embedding: torch.Tensor,
    noisy: torch.Tensor,
    clean: torch.Tensor,
    beta: float,
    eta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`supervised_loss` with its parts as a detached tensor (total, reconstruction, latent)."""
    q_shifted = model.q_latent(data_embedding, noisy)
    shifted = q_shifted.rsample()
    q_from_labels = model.q_true_given_labels(data_embedding, clean)
    q_from_shift = model.q_true_given_shifted(shifted)
    use_labels = (torch.rand(shifted.shape[0], 1, device=shifted.device) < eta).to(shifted.dtype)
    true = use_labels * q_from_labels.rsample() + (1 - use_labels) * q_from_shift.rsample()
    kl_true = use_labels * standard_normal_kl(q_from_labels) + (1 - use_labels) * standard_normal_kl(
        q_from_shift
    )
    recon = reconstruction_nll(model.label_logits(data_embedding, shifted), noisy)
    recon = recon + reconstruction_nll(model.label_logits(data_embedding, true), clean)
    latent = shift_divergence(q_shifted, shifted, model.p_shifted_given_true(true)) + kl_true.mean()
    total = recon + beta * latent
    return total, _parts(total, recon, latent)
