"""The gradient of a noisy batch's negative ELBO (eq. 7's 𝒰(B̃)), written out by hand.

A training step at batch 32 is a few MFLOP; under autograd its time went to per-operation overhead
(building the graph, ~70 transposes, gradient accumulation, the engine's bookkeeping). Here the
forward pass keeps what the backward pass needs and the backward pass calls the ATen kernels autograd
would call (``addmm``/``mm``, ``native_batch_norm_backward``, ``gelu_backward``), writing each gradient
straight into :class:`~lsnpc.corrector.training.FlatAdamW`'s flat buffer. Random numbers are drawn
in the same order, with the same calls, as :func:`~lsnpc.corrector.objective.unsupervised_loss` and the
training loop draw them (dropout masks of the data encoder, ŷ, dropout masks of the label encoder, the
standard draws of ẑ, then of z), so a seed gives the training autograd gives, to float rounding
(tested).

The ELBO terms use their closed-form derivatives. With ẑ = μ + σ ⊙ t (t the standard draw), the
log q(ẑ | x, ŷ) term is log C − log σ − φ(t) and (ẑ − μ)/σ = t does not depend on the parameters: its
gradient is −1/σ through σ alone. −log p(ẑ | z) = φ₀(ẑ − g_ψ(z)) + const with φ₀'(r) = (ν0 + 1) r / (ν0 + r²)
for Student-t(ν0) and r for the Normal (GAUSS). KL(q(z | ẑ) ‖ N(0, I)) = ½ (s² + μ² − 1 − log s²).

Covers the "student" and "gauss" families with LSNPC's own data encoder or a user's (whose backward
autograd runs from the hand-made gradient of its output). Learned ν (whose Student-t draws need Gamma
variates to be differentiated in ν) and clean batches train through autograd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .model import _LOGVAR_MAX, _MIN_SCALE, LatentShiftModel, StandardizedMLPEncoder
from .montecarlo import standard_student_t

__all__ = ["NoisyBatchStep"]

_Tape = tuple[torch.Tensor, ...]


@dataclass
class _Block:
    """Linear → BatchNorm1d → GELU (→ Dropout) in training mode, as ``model._mlp`` builds it."""

    linear: nn.Linear
    norm: nn.BatchNorm1d
    dropout: float

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, _Tape]:
        pre = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        norm = self.norm
        normed, mean, invstd = torch.native_batch_norm(
            pre, norm.weight, norm.bias, norm.running_mean, norm.running_var, True, norm.momentum, norm.eps
        )
        out = F.gelu(normed)
        if self.dropout > 0:  # what F.dropout computes on the CPU: input * (Bernoulli(1 − p) / (1 − p))
            keep = 1.0 - self.dropout
            noise = torch.empty_like(out).bernoulli_(keep).div_(keep)
            out.mul_(noise)
            return out, (x, pre, normed, mean, invstd, noise)
        return out, (x, pre, normed, mean, invstd)

    def backward(self, tape: _Tape, grad: torch.Tensor, *, input_grad: bool) -> torch.Tensor | None:
        """Write the block's parameter gradients; return the gradient of its input if asked."""
        x, pre, normed, mean, invstd = tape[:5]
        if len(tape) > 5:
            grad = grad * tape[5]
        grad = torch.ops.aten.gelu_backward(grad, normed)
        norm, linear = self.norm, self.linear
        grad, grad_weight, grad_bias = torch.ops.aten.native_batch_norm_backward(
            grad, pre, norm.weight, norm.running_mean, norm.running_var, mean, invstd, True, norm.eps,
            [True, True, True],
        )
        norm.weight.grad.copy_(grad_weight)  # type: ignore[union-attr]
        norm.bias.grad.copy_(grad_bias)  # type: ignore[union-attr]
        _linear_backward(linear, x, grad)
        return torch.mm(grad, linear.weight) if input_grad else None


def _linear_backward(linear: nn.Linear, x: torch.Tensor, grad: torch.Tensor) -> None:
    """Write the gradients of y = x Wᵀ + b: ∂W = gradᵀ x, ∂b = Σ_batch grad."""
    torch.mm(grad.t(), x, out=linear.weight.grad)
    torch.sum(grad, 0, out=linear.bias.grad)


def _blocks(net: nn.Sequential) -> list[_Block]:
    """The blocks of a ``model._mlp`` stack; TypeError for anything else."""
    modules, blocks, i = list(net), [], 0
    while i < len(modules):
        linear, norm, act = modules[i : i + 3]
        if not (isinstance(linear, nn.Linear) and isinstance(norm, nn.BatchNorm1d) and type(act) is nn.GELU
                and act.approximate == "none" and norm.affine and norm.momentum is not None):
            raise TypeError("expected Linear → BatchNorm1d → GELU blocks")
        i += 3
        dropout = 0.0
        if i < len(modules) and isinstance(modules[i], nn.Dropout):
            dropout = float(modules[i].p)
            i += 1
        blocks.append(_Block(linear, norm, dropout))
    return blocks


def _norm_forward(norm: nn.BatchNorm1d, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.native_batch_norm(
        x, norm.weight, norm.bias, norm.running_mean, norm.running_var, True, norm.momentum, norm.eps
    )


def _norm_backward(
    norm: nn.BatchNorm1d, grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor
) -> torch.Tensor:
    grad, grad_weight, grad_bias = torch.ops.aten.native_batch_norm_backward(
        grad, x, norm.weight, norm.running_mean, norm.running_var, mean, invstd, True, norm.eps, [True, True, True]
    )
    norm.weight.grad.copy_(grad_weight)  # type: ignore[union-attr]
    norm.bias.grad.copy_(grad_bias)  # type: ignore[union-attr]
    return grad


def _bounded_scale(logvar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """σ = max(exp(½ min(log σ², cap)), σ_min) as the model computes it, and where it is not clamped
    (the only places its derivative is non-zero)."""
    raw = torch.exp(0.5 * logvar.clamp(max=_LOGVAR_MAX))
    free = (logvar <= _LOGVAR_MAX) & (raw >= _MIN_SCALE)
    return raw.clamp_(min=_MIN_SCALE), free


def _bounded_scale_backward(grad_scale: torch.Tensor, scale: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
    """∂/∂ log σ² of σ: ½ σ where σ is not clamped, else 0."""
    return (grad_scale * scale).mul_(0.5).mul_(free)


class NoisyBatchStep:
    """Loss and gradient of :func:`~lsnpc.corrector.objective.unsupervised_loss` for one noisy batch.

    Built once per training run, inside the :class:`~lsnpc.corrector.training.FlatAdamW` context
    (the parameters' ``.grad`` must be the optimiser's views). ``beta``: the weight of the latent
    terms; ``feed``: "sample" (ŷ a Bernoulli draw of the probabilities) or "probs".
    """

    def __init__(self, model: LatentShiftModel, *, beta: float, feed: str) -> None:
        if not self.supports(model):
            raise ValueError(f"NoisyBatchStep covers the 'student' and 'gauss' latents, not {model.latent.family!r}")
        self.model, self.beta, self.sample_feed = model, float(beta), feed == "sample"
        self.student = model.latent.family == "student"
        encoder = model.data_encoder
        self.data_blocks = _blocks(encoder.net) if isinstance(encoder, StandardizedMLPEncoder) else None
        self.label_blocks = _blocks(model.label_encoder.net)
        kappa = model.true_latent_encoder
        self.kappa_hidden, self.kappa_out = kappa.loc[0], kappa.loc[2]
        psi = model.shift_decoder.net
        self.psi_layers = [psi[0], psi[2], psi[4]]
        if not (isinstance(kappa.loc[1], nn.GELU) and isinstance(psi[1], nn.GELU) and isinstance(psi[3], nn.GELU)):
            raise TypeError("expected GELU between the layers of μ_κ and g_ψ")
        blocks = self.label_blocks + (self.data_blocks or [])
        norms = [b.norm for b in blocks] + [model.shift_encoder.norm, model.label_decoder.norm]
        self.batch_counters = [n.num_batches_tracked for n in norms]  # what BatchNorm1d.forward counts
        nu, nu0 = float(model.nu), float(model.nu0)
        self.nu, self.nu0 = nu, nu0
        if self.student:  # log of the Student-t normalising constants
            self.log_c = math.lgamma(0.5 * (nu + 1)) - math.lgamma(0.5 * nu) - 0.5 * math.log(nu * math.pi)
            self.log_c0 = math.lgamma(0.5 * (nu0 + 1)) - math.lgamma(0.5 * nu0) - 0.5 * math.log(nu0 * math.pi)
        else:
            self.log_c = self.log_c0 = -0.5 * math.log(2 * math.pi)

    @staticmethod
    def supports(model: LatentShiftModel) -> bool:
        return model.latent.family in ("student", "gauss")

    def __call__(self, x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """Write the gradient of the batch's loss into the parameters' ``.grad``; update BatchNorm's
        running statistics as a forward pass does. x (B, ...) features, probs (B, L) base probabilities.
        Returns the detached (total, reconstruction, latent) as a (3,) tensor."""
        model = self.model
        with torch.no_grad():
            torch._foreach_add_(self.batch_counters, 1)
            encoder = model.data_encoder
            data_tapes: list[_Tape] = []
            if self.data_blocks is not None:
                h = (x - encoder.mean) / encoder.scale
                for block in self.data_blocks:
                    h, tape = block.forward(h)
                    data_tapes.append(tape)
                user_h = None
            else:
                with torch.enable_grad():
                    user_h = encoder(x)
                h = user_h.detach()
            noisy = torch.bernoulli(probs) if self.sample_feed else probs
            e = noisy
            label_tapes = []
            for block in self.label_blocks:
                e, tape = block.forward(e)
                label_tapes.append(tape)
            grads_h, values = self._latent_terms(h, e, noisy)
            grad_h, grad_e = grads_h
            for block, tape in zip(reversed(self.label_blocks), reversed(label_tapes), strict=True):
                grad_e = block.backward(tape, grad_e, input_grad=block is not self.label_blocks[0])
            if self.data_blocks is not None:
                for block, tape in zip(reversed(self.data_blocks), reversed(data_tapes), strict=True):
                    grad_h = block.backward(tape, grad_h, input_grad=block is not self.data_blocks[0])
        if user_h is not None:
            for p in encoder.parameters():
                p.grad.zero_()  # type: ignore[union-attr]
            user_h.backward(grad_h)
        return values

    def _latent_terms(
        self, h: torch.Tensor, e: torch.Tensor, noisy: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """From the data embedding h (B, H) and label embedding e (B, E): the loss and the gradients of
        h and e, the latent networks' gradients written on the way."""
        model = self.model
        batch, width = h.shape
        shift = model.shift_encoder
        joint = torch.cat([h, e], 1)
        features, shift_mean, shift_invstd = _norm_forward(shift.norm, joint)
        loc = torch.addmm(shift.loc.bias, features, shift.loc.weight.t())
        logvar = torch.addmm(shift.logvar.bias, features, shift.logvar.weight.t())
        scale, scale_free = _bounded_scale(logvar)
        shape, dtype, device = tuple(loc.shape), loc.dtype, loc.device
        if self.student:
            draws = standard_student_t(shape, model.nu, dtype=dtype, device=device)
        else:
            draws = torch.empty(shape, dtype=dtype, device=device).normal_()
        zhat = loc + scale * draws

        kappa = model.true_latent_encoder
        kappa_pre = torch.addmm(self.kappa_hidden.bias, zhat, self.kappa_hidden.weight.t())
        kappa_hidden = F.gelu(kappa_pre)
        kappa_loc = torch.addmm(self.kappa_out.bias, kappa_hidden, self.kappa_out.weight.t())
        kappa_logvar = torch.addmm(kappa.logvar.bias, zhat, kappa.logvar.weight.t())
        kappa_scale, kappa_free = _bounded_scale(kappa_logvar)
        true_draws = torch.empty_like(kappa_loc).normal_()
        z = kappa_loc + true_draws * kappa_scale

        decoder = model.label_decoder
        decoder_in = torch.cat([h, zhat], 1)
        decoder_features, decoder_mean, decoder_invstd = _norm_forward(decoder.norm, decoder_in)
        logits = torch.addmm(decoder.out.bias, decoder_features, decoder.out.weight.t())

        psi = self.psi_layers
        psi_pre1 = torch.addmm(psi[0].bias, z, psi[0].weight.t())
        psi_hidden1 = F.gelu(psi_pre1)
        psi_pre2 = torch.addmm(psi[1].bias, psi_hidden1, psi[1].weight.t())
        psi_hidden2 = F.gelu(psi_pre2)
        residual = zhat - torch.addmm(psi[2].bias, psi_hidden2, psi[2].weight.t())  # ẑ − g_ψ(z)

        # values: E[log q(ẑ) − log p(ẑ | z)] and KL(q(z | ẑ) ‖ N(0, I)), each a mean over (B, m)
        kappa_var = kappa_scale * kappa_scale
        kl = (kappa_var + kappa_loc * kappa_loc).sub_(1.0).sub_(torch.log(kappa_var)).mul_(0.5)
        if self.student:
            log_q_tail = torch.log1p(draws * draws / self.nu).mul_(0.5 * (self.nu + 1))
            neg_log_p = torch.log1p(residual * residual / self.nu0).mul_(0.5 * (self.nu0 + 1))
        else:
            log_q_tail = 0.5 * draws * draws
            neg_log_p = 0.5 * residual * residual
        shift_term = (neg_log_p - log_q_tail - torch.log(scale)).mean() + (self.log_c - self.log_c0)
        latent = shift_term + kl.mean()
        recon = F.binary_cross_entropy_with_logits(logits, noisy)
        total = recon + self.beta * latent

        # gradients, from the loss back to h and e
        weight = self.beta / kl.numel()  # d(β · mean over B·m) per element
        grad_logits = torch.sigmoid(logits).sub_(noisy).div_(logits.numel())
        _linear_backward(decoder.out, decoder_features, grad_logits)
        grad_decoder_in = _norm_backward(
            decoder.norm, torch.mm(grad_logits, decoder.out.weight), decoder_in, decoder_mean, decoder_invstd
        )
        if self.student:  # ∂ −log p / ∂ residual
            grad_residual = residual * ((self.nu0 + 1) * weight) / (residual * residual + self.nu0)
        else:
            grad_residual = residual * weight
        # g_ψ, fed z: its output enters with the sign of −residual
        grad_out = -grad_residual
        _linear_backward(psi[2], psi_hidden2, grad_out)
        grad_pre = torch.ops.aten.gelu_backward(torch.mm(grad_out, psi[2].weight), psi_pre2)
        _linear_backward(psi[1], psi_hidden1, grad_pre)
        grad_pre = torch.ops.aten.gelu_backward(torch.mm(grad_pre, psi[1].weight), psi_pre1)
        _linear_backward(psi[0], z, grad_pre)
        grad_z = torch.mm(grad_pre, psi[0].weight)
        # z = μ_κ + σ_κ ⊙ ξ, plus the KL's own derivatives ∂/∂μ = μ, ∂/∂s = s − 1/s
        grad_kappa_loc = torch.add(grad_z, kappa_loc, alpha=weight)
        grad_kappa_scale = (grad_z * true_draws).add_(kappa_scale - 1.0 / kappa_scale, alpha=weight)
        grad_kappa_logvar = _bounded_scale_backward(grad_kappa_scale, kappa_scale, kappa_free)
        _linear_backward(self.kappa_out, kappa_hidden, grad_kappa_loc)
        grad_kappa_pre = torch.ops.aten.gelu_backward(torch.mm(grad_kappa_loc, self.kappa_out.weight), kappa_pre)
        _linear_backward(self.kappa_hidden, zhat, grad_kappa_pre)
        _linear_backward(kappa.logvar, zhat, grad_kappa_logvar)
        grad_zhat = torch.add(grad_decoder_in[:, width:], grad_residual)
        grad_zhat.addmm_(grad_kappa_pre, self.kappa_hidden.weight).addmm_(grad_kappa_logvar, kappa.logvar.weight)
        # ẑ = μ + σ ⊙ t; the log q term adds −β/σ (per element, weighted) to σ's gradient
        grad_scale = (grad_zhat * draws).sub_(weight / scale)
        grad_logvar = _bounded_scale_backward(grad_scale, scale, scale_free)
        _linear_backward(shift.loc, features, grad_zhat)
        _linear_backward(shift.logvar, features, grad_logvar)
        grad_features = torch.mm(grad_zhat, shift.loc.weight).addmm_(grad_logvar, shift.logvar.weight)
        grad_joint = _norm_backward(shift.norm, grad_features, joint, shift_mean, shift_invstd)
        grad_h = grad_joint[:, :width] + grad_decoder_in[:, :width]
        values = torch.stack([total, recon, latent])
        return (grad_h, grad_joint[:, width:]), values
