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
gradient is −1/σ through σ alone. −log p(ẑ | z) = φ₀(ẑ − g_ψ(z)) + const with
φ₀'(r) = (ν0 + 1) r / (ν0 + r²) for Student-t(ν0) and r for the Normal (GAUSS).
KL(q(z | ẑ) ‖ N(0, I)) = ½ (s² + μ² − 1 − log s²). The loss values for the history are assembled from
a few sums (log σ is half the clamped log-variance).

Covers the "student" and "gauss" families with LSNPC's own data encoder or a user's (whose backward
autograd runs from the hand-made gradient of its output), on the CPU and, inside a CUDA graph, on a GPU
(fewer kernels than autograd's backward: 0.63 against 0.75 ms per step on an H100, docs/speed.md).
Learned ν (whose Student-t draws need Gamma variates to be differentiated in ν) and clean batches train
through autograd.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .model import _LOGVAR_MAX, _MIN_SCALE, LatentShiftModel, StandardizedMLPEncoder
from .montecarlo import standard_student_t

__all__ = ["NoisyBatchStep", "aten_kernels"]

_Tape = tuple[torch.Tensor, ...]
# σ = max(exp(½ min(v, cap)), σ_min) = exp(½ clamp(v, 2 log σ_min, cap)): one clamp, and its mask
_LOGVAR_MIN = 2 * math.log(_MIN_SCALE)


@contextlib.contextmanager
def aten_kernels() -> Iterator[None]:
    """Run the body with oneDNN off (restored after). oneDNN's GELU and its backward cost 7–14 µs per
    call whatever the size (primitive setup); at batch 32 ATen's own kernels are 2–4× faster and the
    whole training step ~20% faster (measured). Prediction's large chunks keep oneDNN, faster there,
    and so does a user's encoder (oneDNN's convolutions)."""
    previous = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = previous


def _grad(p: nn.Parameter) -> torch.Tensor:
    if p.grad is None:
        raise RuntimeError("NoisyBatchStep is built inside the FlatAdamW context (gradients are its views)")
    return p.grad


class _Ones:
    """Vectors of ones by length, made once each (the GPU's bias gradients are ones-vector products)."""

    def __init__(self, like: torch.Tensor) -> None:
        self.like, self.made = like, {}

    def __call__(self, n: int) -> torch.Tensor:
        ones = self.made.get(n)
        if ones is None:
            ones = self.made[n] = self.like.new_ones(n)
        return ones


class _Linear:
    """A Linear layer's tensors, held once: the hot loop then does no module attribute lookups.

    ``ones``: None for ATen's fused ``addmm`` and a column sum (the CPU's kernels, and the numbers every
    recorded CPU result was made with); on a GPU an :class:`_Ones`, for ``mm`` then the bias added, and
    the bias gradient as a matrix-vector product. At batch 32 cuBLAS serves ``addmm``'s bias epilogue
    with a split-K kernel, a memset and a scaling pass (13–17 µs a layer on an H100, against 7–11 for
    ``mm`` and an add), and the sum's reduction kernel takes 3.3 µs against 1.8 for ``mv`` (measured in
    CUDA graphs: ``benchmarks/bench_gpu_kernels.py``; docs/speed.md). The results differ from the CPU's
    formulas by float rounding only.
    """

    def __init__(self, linear: nn.Linear, ones: _Ones | None = None) -> None:
        self.weight, self.bias = linear.weight.detach(), linear.bias.detach()
        self.weight_t = self.weight.t()
        self.grad_weight, self.grad_bias = _grad(linear.weight), _grad(linear.bias)
        self.ones = ones

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ones is None:
            return torch.addmm(self.bias, x, self.weight_t)
        return torch.mm(x, self.weight_t).add_(self.bias)

    def backward(self, x: torch.Tensor, grad: torch.Tensor) -> None:
        """Write the gradients of y = x Wᵀ + b: ∂W = gradᵀ x, ∂b = Σ_batch grad."""
        torch.mm(grad.t(), x, out=self.grad_weight)
        if self.ones is None:
            torch.sum(grad, 0, out=self.grad_bias)
        else:
            torch.mv(grad.t(), self.ones(len(grad)), out=self.grad_bias)


class _Norm:
    """A BatchNorm1d in training mode: batch statistics, running statistics updated as forward does."""

    def __init__(self, norm: nn.BatchNorm1d) -> None:
        if not norm.affine or norm.momentum is None or norm.running_mean is None:
            raise TypeError("expected an affine BatchNorm1d with running statistics and a momentum")
        self.weight, self.bias = norm.weight.detach(), norm.bias.detach()
        self.running_mean, self.running_var = norm.running_mean, norm.running_var
        self.momentum, self.eps = float(norm.momentum), float(norm.eps)
        self.grad_weight, self.grad_bias = _grad(norm.weight), _grad(norm.bias)
        self.counter = norm.num_batches_tracked

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.native_batch_norm(
            x, self.weight, self.bias, self.running_mean, self.running_var, True, self.momentum, self.eps
        )

    def backward(self, x: torch.Tensor, grad: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor) -> torch.Tensor:
        """Write the gradients of the affine parameters; return the gradient of the input. (The ``.out``
        overload, writing them in place, measured slower than two copies: it is called through Python.)"""
        grad_x, grad_weight, grad_bias = torch.ops.aten.native_batch_norm_backward(
            grad, x, self.weight, self.running_mean, self.running_var, mean, invstd, True, self.eps,
            [True, True, True],
        )
        self.grad_weight.copy_(grad_weight)
        self.grad_bias.copy_(grad_bias)
        return grad_x


class _Block:
    """Linear → BatchNorm1d → GELU (→ Dropout), as ``model._mlp`` builds it, in training mode."""

    def __init__(self, linear: nn.Linear, norm: nn.BatchNorm1d, dropout: float, ones: _Ones | None = None) -> None:
        self.linear, self.norm, self.keep = _Linear(linear, ones), _Norm(norm), 1.0 - dropout
        # F.dropout multiplies by Bernoulli(1 − p) / (1 − p), the quotient taken in the tensor's dtype;
        # x · m · c with m ∈ {0, 1} is the same number, one operation (addcmul) instead of three
        self.inverse_keep = float(torch.ones((), dtype=linear.weight.dtype) / self.keep)
        self.zero = torch.zeros((), dtype=linear.weight.dtype, device=linear.weight.device)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, _Tape]:
        pre = self.linear.forward(x)
        normed, mean, invstd = self.norm.forward(pre)
        out = F.gelu(normed)
        if self.keep == 1.0:
            return out, (x, pre, normed, mean, invstd)
        mask = torch.bernoulli(out, self.keep)  # the draw F.dropout takes on the CPU
        dropped = torch.addcmul(self.zero, out, mask, value=self.inverse_keep)
        return dropped, (x, pre, normed, mean, invstd, mask)

    def backward(self, tape: _Tape, grad: torch.Tensor, *, input_grad: bool) -> torch.Tensor | None:
        """Write the block's parameter gradients; return the gradient of its input if asked."""
        x, pre, normed, mean, invstd = tape[:5]
        if len(tape) > 5:
            grad = torch.addcmul(self.zero, grad, tape[5], value=self.inverse_keep)
        grad = self.norm.backward(pre, torch.ops.aten.gelu_backward(grad, normed), mean, invstd)
        self.linear.backward(x, grad)
        return torch.mm(grad, self.linear.weight) if input_grad else None


def _blocks(net: nn.Sequential, ones: _Ones | None = None) -> list[_Block]:
    """The blocks of a ``model._mlp`` stack (``ones``: as :class:`_Linear` takes it); TypeError for anything
    else."""
    modules, blocks, i = list(net), [], 0
    while i < len(modules):
        linear, norm, act = modules[i : i + 3]
        if not (isinstance(linear, nn.Linear) and isinstance(norm, nn.BatchNorm1d) and type(act) is nn.GELU
                and act.approximate == "none"):
            raise TypeError("expected Linear → BatchNorm1d → GELU blocks")
        i += 3
        dropout = 0.0
        if i < len(modules) and isinstance(modules[i], nn.Dropout):
            dropout = float(modules[i].p)
            i += 1
        blocks.append(_Block(linear, norm, dropout, ones))
    return blocks


def _student_log_constant(nu: float) -> float:
    """log of Student-t(ν)'s normalising constant Γ((ν+1)/2) / (Γ(ν/2) sqrt(νπ))."""
    return math.lgamma(0.5 * (nu + 1)) - math.lgamma(0.5 * nu) - 0.5 * math.log(nu * math.pi)


def _bounded_scale(logvar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """σ = max(exp(½ min(log σ², cap)), σ_min) as the model computes it; the clamped log-variance
    (= log σ²); and where σ is not clamped (the only places its derivative is non-zero)."""
    clamped = logvar.clamp(_LOGVAR_MIN, _LOGVAR_MAX)
    free = clamped == logvar
    return (clamped * 0.5).exp_(), clamped, free


def _bounded_scale_backward(grad_scale: torch.Tensor, scale: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
    """∂/∂ log σ² of σ: ½ σ where σ is not clamped, else 0."""
    return (grad_scale * scale).mul_(0.5).mul_(free)


class NoisyBatchStep:
    """Loss and gradient of :func:`~lsnpc.corrector.objective.unsupervised_loss` for one noisy batch.

    Built once per training run, inside the :class:`~lsnpc.corrector.training.FlatAdamW` context
    (the parameters' ``.grad`` must be the optimiser's views). ``beta``: the weight of the latent
    terms; ``feed``: "sample" (ŷ a Bernoulli draw of the probabilities) or "probs".
    """

    def __init__(self, model: LatentShiftModel, *, beta: float, feed: str, gpu_kernels: bool | None = None) -> None:
        """``gpu_kernels``: the linear layers' GPU formulation (:class:`_Linear`); None: where the model
        is on a GPU. (True on the CPU serves the tests, which compare the two formulations there.)"""
        if not self.supports(model, gpu=True):
            raise ValueError(
                f"NoisyBatchStep covers the 'student' and 'gauss' latents on the CPU or CUDA, not "
                f"{model.latent.family!r} on {model.nu.device.type}"
            )
        # on a GPU the loss values stay on the device (a tensor), so that a step never waits for it
        self.device_values = model.nu.device.type != "cpu"
        self.model, self.beta, self.sample_feed = model, float(beta), feed == "sample"
        self.student = model.latent.family == "student"
        if gpu_kernels is None:
            gpu_kernels = self.device_values
        ones = _Ones(model.nu.detach()) if gpu_kernels else None
        encoder = model.data_encoder
        self.data_blocks = _blocks(encoder.net, ones) if isinstance(encoder, StandardizedMLPEncoder) else None
        # a user's encoder backpropagates through autograd; LSNPC's own needs none (inference mode serves)
        self.needs_autograd = self.data_blocks is None
        self.label_blocks = _blocks(model.label_encoder.net, ones)
        shift, kappa, decoder = model.shift_encoder, model.true_latent_encoder, model.label_decoder
        psi = model.shift_decoder.net
        if not all(type(m) is nn.GELU for m in (kappa.loc[1], psi[1], psi[3])):
            raise TypeError("expected GELU between the layers of μ_κ and g_ψ")
        self.shift_norm = _Norm(shift.norm)
        self.shift_loc, self.shift_logvar = _Linear(shift.loc, ones), _Linear(shift.logvar, ones)
        self.kappa_hidden, self.kappa_out = _Linear(kappa.loc[0], ones), _Linear(kappa.loc[2], ones)
        self.kappa_logvar = _Linear(kappa.logvar, ones)
        self.decoder_norm, self.decoder_out = _Norm(decoder.norm), _Linear(decoder.out, ones)
        self.psi = [_Linear(psi[0], ones), _Linear(psi[2], ones), _Linear(psi[4], ones)]
        norms = [b.norm for b in self.label_blocks + (self.data_blocks or [])] + [self.shift_norm, self.decoder_norm]
        self.batch_counters = [n.counter for n in norms]  # what BatchNorm1d.forward counts
        self.nu, self.nu0 = float(model.nu), float(model.nu0)
        self._one = torch.ones((), dtype=model.nu.dtype, device=model.nu.device)
        if self.student:
            self.log_c, self.log_c0 = _student_log_constant(self.nu), _student_log_constant(self.nu0)
        else:
            self.log_c = self.log_c0 = -0.5 * math.log(2 * math.pi)  # the Normal's

    @staticmethod
    def supports(model: LatentShiftModel, *, gpu: bool = False) -> bool:
        """Student-t or GAUSS latents on the CPU; on a CUDA device too with ``gpu=True``. (There dropout
        draws its masks with another kernel than ``bernoulli_``, so training matches autograd's in
        distribution, not draw for draw; the training loop uses it there only if chosen, see
        ``training.GPU_NOISY_GRADIENT``.)"""
        device = model.nu.device.type
        return model.latent.family in ("student", "gauss") and (device == "cpu" or (gpu and device == "cuda"))

    def __call__(self, x: torch.Tensor, probs: torch.Tensor) -> tuple[float, float, float] | torch.Tensor:
        """Write the gradient of the batch's loss into the parameters' ``.grad``; update BatchNorm's
        running statistics as a forward pass does. x (B, ...) features, probs (B, L) base probabilities.
        Returns the (total, reconstruction, latent) loss values: floats on the CPU, a tensor (3,) on
        the model's device elsewhere."""
        encoder = self.model.data_encoder
        user_h = None
        with torch.no_grad():
            torch._foreach_add_(self.batch_counters, 1)
            data_tapes: list[_Tape] = []
            if self.data_blocks is not None:
                h = (x - encoder.mean) / encoder.scale
                for block in self.data_blocks:
                    h, tape = block.forward(h)
                    data_tapes.append(tape)
            else:
                with torch.enable_grad():
                    user_h = encoder(x)
                h = user_h.detach()
            with aten_kernels():
                noisy = torch.bernoulli(probs) if self.sample_feed else probs
                e, label_tapes = noisy, []
                for block in self.label_blocks:
                    e, tape = block.forward(e)
                    label_tapes.append(tape)
                grad_h, grad_e, values = self._latent_terms(h, e, noisy)
                for block, tape in zip(reversed(self.label_blocks), reversed(label_tapes), strict=True):
                    grad_e = block.backward(tape, grad_e, input_grad=block is not self.label_blocks[0])
                if self.data_blocks is not None:
                    for block, tape in zip(reversed(self.data_blocks), reversed(data_tapes), strict=True):
                        grad_h = block.backward(tape, grad_h, input_grad=block is not self.data_blocks[0])
        if user_h is not None:
            for p in encoder.parameters():
                _grad(p).zero_()
            user_h.backward(grad_h)
        return values

    def _latent_terms(
        self, h: torch.Tensor, e: torch.Tensor, noisy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[float, float, float] | torch.Tensor]:
        """From the data embedding h (B, H) and label embedding e (B, E): the gradients of h and e and the
        loss values, the latent networks' gradients written on the way."""
        width = h.shape[1]
        joint = torch.cat([h, e], 1)
        features, shift_mean, shift_invstd = self.shift_norm.forward(joint)
        loc = self.shift_loc.forward(features)
        scale, log_var, scale_free = _bounded_scale(self.shift_logvar.forward(features))
        if self.student:
            draws = standard_student_t(tuple(loc.shape), self.nu, dtype=loc.dtype, device=loc.device)
        else:
            draws = torch.empty_like(loc).normal_()
        zhat = torch.addcmul(loc, scale, draws)

        kappa_pre = self.kappa_hidden.forward(zhat)
        kappa_hidden = F.gelu(kappa_pre)
        kappa_loc = self.kappa_out.forward(kappa_hidden)
        kappa_scale, kappa_log_var, kappa_free = _bounded_scale(self.kappa_logvar.forward(zhat))
        true_draws = torch.empty_like(kappa_loc).normal_()
        z = torch.addcmul(kappa_loc, true_draws, kappa_scale)

        decoder_in = torch.cat([h, zhat], 1)
        decoder_features, decoder_mean, decoder_invstd = self.decoder_norm.forward(decoder_in)
        logits = self.decoder_out.forward(decoder_features)

        psi = self.psi
        psi_pre1 = psi[0].forward(z)
        psi_hidden1 = F.gelu(psi_pre1)
        psi_pre2 = psi[1].forward(psi_hidden1)
        psi_hidden2 = F.gelu(psi_pre2)
        residual = zhat - psi[2].forward(psi_hidden2)  # ẑ − g_ψ(z)
        residual_sq = residual * residual

        # the loss: reconstruction + β (mean of log q(ẑ) − log p(ẑ | z) + mean KL), from sums
        if self.student:  # φ(t) = (ν+1)/2 log1p(t²/ν) and φ₀ alike
            tail_q = (draws * draws).div_(self.nu).log1p_().sum()
            tail_p = torch.div(residual_sq, self.nu0).log1p_().sum()
            tail_q_weight, tail_p_weight = 0.5 * (self.nu + 1), 0.5 * (self.nu0 + 1)
        else:  # φ(t) = t²/2
            flat_draws = draws.view(-1)
            tail_q, tail_p = torch.dot(flat_draws, flat_draws), residual_sq.sum()
            tail_q_weight = tail_p_weight = 0.5
        flat_loc, flat_scale = kappa_loc.view(-1), kappa_scale.view(-1)
        sums = torch.stack([
            F.binary_cross_entropy_with_logits(logits, noisy), tail_q, tail_p, log_var.sum(),
            torch.dot(flat_loc, flat_loc), torch.dot(flat_scale, flat_scale), kappa_log_var.sum(),
        ])
        n = kappa_loc.numel()
        if self.device_values:
            values: tuple[float, float, float] | torch.Tensor = self._values_on_device(
                sums, tail_q_weight, tail_p_weight, n
            )
        else:
            recon, tail_q_sum, tail_p_sum, log_var_sum, loc_sq_sum, scale_sq_sum, kappa_log_var_sum = sums.tolist()
            shift_term = self.log_c - self.log_c0 + (
                tail_p_weight * tail_p_sum - tail_q_weight * tail_q_sum - 0.5 * log_var_sum
            ) / n
            kl = 0.5 * (scale_sq_sum + loc_sq_sum - n - kappa_log_var_sum) / n
            latent = shift_term + kl
            values = (recon + self.beta * latent, recon, latent)

        # gradients, from the loss back to h and e
        weight = self.beta / n  # d(β · mean over B·m) per element
        grad_logits = torch.sigmoid(logits).sub_(noisy).div_(logits.numel())
        self.decoder_out.backward(decoder_features, grad_logits)
        grad_decoder_in = self.decoder_norm.backward(
            decoder_in, torch.mm(grad_logits, self.decoder_out.weight), decoder_mean, decoder_invstd
        )
        # g_ψ's output enters the loss as −residual: its gradient is −∂(−log p)/∂ residual
        if self.student:
            grad_psi = torch.div(residual, residual_sq.add_(self.nu0)).mul_(-(self.nu0 + 1) * weight)
        else:
            grad_psi = residual * -weight
        psi[2].backward(psi_hidden2, grad_psi)
        grad_pre = torch.ops.aten.gelu_backward(torch.mm(grad_psi, psi[2].weight), psi_pre2)
        psi[1].backward(psi_hidden1, grad_pre)
        grad_pre = torch.ops.aten.gelu_backward(torch.mm(grad_pre, psi[1].weight), psi_pre1)
        psi[0].backward(z, grad_pre)
        grad_z = torch.mm(grad_pre, psi[0].weight)
        # z = μ_κ + σ_κ ⊙ ξ, plus the KL's own derivatives ∂/∂μ = μ, ∂/∂s = s − 1/s
        grad_kappa_loc = torch.add(grad_z, kappa_loc, alpha=weight)
        one = self._one
        kl_grad_scale = torch.addcdiv(kappa_scale, one, kappa_scale, value=-1.0)  # s − 1/s
        grad_kappa_scale = (grad_z * true_draws).add_(kl_grad_scale, alpha=weight)
        grad_kappa_logvar = _bounded_scale_backward(grad_kappa_scale, kappa_scale, kappa_free)
        self.kappa_out.backward(kappa_hidden, grad_kappa_loc)
        grad_kappa_pre = torch.ops.aten.gelu_backward(torch.mm(grad_kappa_loc, self.kappa_out.weight), kappa_pre)
        self.kappa_hidden.backward(zhat, grad_kappa_pre)
        self.kappa_logvar.backward(zhat, grad_kappa_logvar)
        grad_zhat = torch.sub(grad_decoder_in[:, width:], grad_psi)
        grad_zhat.addmm_(grad_kappa_pre, self.kappa_hidden.weight).addmm_(grad_kappa_logvar, self.kappa_logvar.weight)
        # ẑ = μ + σ ⊙ t; the log q term adds −β/σ (per element, weighted) to σ's gradient
        grad_scale = torch.addcdiv(grad_zhat * draws, one, scale, value=-weight)
        grad_logvar = _bounded_scale_backward(grad_scale, scale, scale_free)
        self.shift_loc.backward(features, grad_zhat)
        self.shift_logvar.backward(features, grad_logvar)
        grad_features = torch.mm(grad_zhat, self.shift_loc.weight).addmm_(grad_logvar, self.shift_logvar.weight)
        grad_joint = self.shift_norm.backward(joint, grad_features, shift_mean, shift_invstd)
        grad_h = torch.add(grad_joint[:, :width], grad_decoder_in[:, :width])
        return grad_h, grad_joint[:, width:], values

    def _values_on_device(self, sums: torch.Tensor, tail_q_weight: float, tail_p_weight: float, n: int) -> torch.Tensor:
        """(total, reconstruction, latent) from the seven sums of :meth:`_latent_terms`, as the host
        arithmetic there computes them, without leaving the device."""
        recon, tail_q, tail_p, log_var, loc_sq, scale_sq, kappa_log_var = sums.unbind()
        shift_term = (tail_p * tail_p_weight - tail_q * tail_q_weight - log_var * 0.5) / n + (self.log_c - self.log_c0)
        kl = (scale_sq + loc_sq - n - kappa_log_var) * (0.5 / n)
        latent = shift_term + kl
        return torch.stack([recon + latent * self.beta, recon, latent])
