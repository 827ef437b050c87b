"""The correction equation (eq. 9) for a trained model, compiled down to a few matrix products.

In eval mode every BatchNorm is an affine map and every Dropout the identity, so each
Linear → BatchNorm (or BatchNorm → Linear) pair folds into one Linear, the data standardisation folds
into the first layer, the location and log-variance heads of q(ẑ | x, ŷ) share one product, and
heads that read a concatenation become a sum of per-block products (no concatenation is built).
With fewer labels than latent dimensions the last layer of μ_κ also folds into g_φ's latent part: the
Monte-Carlo passes then never materialise z, only its logits.

The Monte-Carlo draws are the model's common random numbers (``monte_carlo_uniforms``, fixed at
fit): the standard draws of ẑ are computed from them once per corrector, the same for every row, so no
random generator is read and a row's answer depends only on that row and the model. z | ẑ is not
drawn: the logits' mean and variance under it give the expected sigmoid in closed form.

:class:`FoldedCorrector` computes exactly what :meth:`LatentShiftModel.correct` computes with the
modules (tested to float tolerance); only the number of operations changes. :func:`predict_corrected`
runs it over arrays in chunks: the one prediction function of fit's validation scoring, the guard and
``predict_proba``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .._torch import as_tensor
from .model import _LOGVAR_MAX, _MIN_SCALE, LatentShiftModel, StandardizedMLPEncoder
from .montecarlo import expected_sigmoid_into, student_t_from_uniforms

__all__ = ["FoldedCorrector", "predict_corrected"]

# exp(min(v, c)) == min(exp(v), exp(c)): the log-variance cap becomes a cap on σ (σ²), one pass fewer
_MAX_SCALE, _MAX_VARIANCE, _MIN_VARIANCE = math.exp(_LOGVAR_MAX / 2), math.exp(_LOGVAR_MAX), _MIN_SCALE**2
# rows per chunk of predict_corrected: on the CPU the intermediates of a chunk stay in a core's cache
# (measured); on a GPU a chunk must fill the device (a 1,024-row chunk is launch-bound), so chunks grow
# until the largest intermediate, (S · rows, max(L, width)) floats, reaches GPU_CHUNK_ELEMENTS (128 MB)
CHUNK_ROWS = 1024
GPU_CHUNK_ELEMENTS = 2**25

Affine = tuple[torch.Tensor, torch.Tensor]  # (weight, bias): weight (out, in) while folding, (in, out) after


def _bn_affine(bn: nn.BatchNorm1d) -> Affine:
    """Eval-mode BatchNorm as y = a ⊙ x + c: returns (a, c)."""
    a = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return a, bn.bias - a * bn.running_mean


def _then_bn(linear: Affine, bn: nn.BatchNorm1d) -> Affine:
    """BatchNorm(Linear(x)) as one Linear."""
    (w, b), (a, c) = linear, _bn_affine(bn)
    return a[:, None] * w, a * b + c


def _bn_then(bn_affine: tuple[torch.Tensor, torch.Tensor], linear: Affine) -> Affine:
    """Linear(a ⊙ x + c) as one Linear."""
    (a, c), (w, b) = bn_affine, linear
    return w * a[None, :], b + w @ c


def _fold_sequential(net: nn.Sequential, input_affine: tuple[torch.Tensor, torch.Tensor] | None = None) -> list[Affine]:
    """Fold a Linear/BatchNorm1d/GELU/Dropout stack (as ``model._mlp`` builds it) into Linear layers,
    each followed by GELU. ``input_affine`` (a, c) is applied to the input first (standardisation)."""
    layers: list[Affine] = []
    pending = input_affine
    for module in net:
        if isinstance(module, nn.Linear):
            affine: Affine = (module.weight.clone(), module.bias.clone())
            if pending is not None:
                affine, pending = _bn_then(pending, affine), None
            layers.append(affine)
        elif isinstance(module, nn.BatchNorm1d):
            layers[-1] = _then_bn(layers[-1], module)
        elif isinstance(module, nn.GELU) and module.approximate == "none":
            if not layers:
                raise TypeError("GELU before the first Linear cannot be folded")
        elif not isinstance(module, nn.Dropout):
            raise TypeError(f"cannot fold a {type(module).__name__}")
    return layers


class FoldedCorrector:
    """E[y | x, h] ≈ (1/S) Σ_s sigmoid(g_φ(x, z_s)), z_s ~ q(z | ẑ_s), ẑ_s ~ q(ẑ | x, ŷ_s), with folded
    weights and the model's fixed Monte-Carlo draws.

    Built from a model in eval mode; the folded weights and draws are copies (a user's own data
    encoder, which is run as it is, is not). Call with x (B, ...) and the base probabilities (B, L);
    returns probabilities (B, L).
    """

    @torch.no_grad()
    def __init__(self, model: LatentShiftModel) -> None:
        if model.training:
            raise RuntimeError("FoldedCorrector needs a model in eval mode (BatchNorm running statistics)")
        self.family = model.latent.family
        encoder = model.data_encoder
        if isinstance(encoder, StandardizedMLPEncoder):
            self.data_layers: list[Affine] | None = _fold_sequential(
                encoder.net, (1.0 / encoder.scale, -encoder.mean / encoder.scale)
            )
            self.data_encoder: nn.Module | None = None
        else:  # a user's encoder runs as it is
            self.data_layers, self.data_encoder = None, encoder
        self.label_layers = _fold_sequential(model.label_encoder.net)

        # q(ẑ | x, ŷ): BatchNorm over [h; e] folded into the stacked loc / log-var (/ df) heads, then
        # split by input block so that [h; e] is never built
        shift = model.shift_encoder
        heads = [shift.loc, shift.logvar] + ([shift.df] if shift.df is not None else [])
        stacked = (torch.cat([h.weight for h in heads]), torch.cat([h.bias for h in heads]))
        w, self.shift_bias = _bn_then(_bn_affine(shift.norm), stacked)
        self.latent_dim = m = shift.loc.out_features
        w[m : 2 * m] *= 0.5  # log σ² → log σ: the exp then gives σ directly
        self.shift_bias[m : 2 * m] *= 0.5
        data_dim = model.label_decoder.data_dim
        self.shift_data_w, self.shift_label_w = w[:, :data_dim], w[:, data_dim:]

        # q(z | ẑ): μ_κ's hidden layer, and the log-variance head
        kappa = model.true_latent_encoder
        first, second = kappa.loc[0], kappa.loc[2]
        self.kappa_hidden_layer = (first.weight.clone(), first.bias.clone())
        self.kappa_logvar = (kappa.logvar.weight.clone(), kappa.logvar.bias.clone())

        # g_φ: BatchNorm over [h; latent] folded into the output layer, split into data and latent parts
        decoder = model.label_decoder
        w, b = _bn_then(_bn_affine(decoder.norm), (decoder.out.weight, decoder.out.bias))
        self.decoder_data_w, self.decoder_bias = w[:, :data_dim], b
        decoder_latent_w = w[:, data_dim:]
        # with L < m, fold μ_κ's last layer into the decoder: logits of μ_κ come straight from its hidden layer
        self.fold_kappa = decoder_latent_w.shape[0] < self.latent_dim
        if self.fold_kappa:
            self.hidden_to_logits = decoder_latent_w @ second.weight
            self.decoder_bias = self.decoder_bias + decoder_latent_w @ second.bias
        else:
            self.kappa_out = (second.weight.clone(), second.bias.clone())
        self.decoder_latent_w = decoder_latent_w
        self._transpose_weights()
        self.decoder_latent_w_sq = self.decoder_latent_w.square()  # the logits' variance under z | ẑ
        # the expected sigmoid reads the logits' mean divided by √2: fold that factor into their weights
        half = math.sqrt(0.5)
        self.decoder_data_w, self.decoder_bias = self.decoder_data_w * half, self.decoder_bias * half
        if self.fold_kappa:
            self.hidden_to_logits = self.hidden_to_logits * half
        else:
            self.decoder_latent_w = self.decoder_latent_w * half

        # the common random numbers, as standard draws (S, 1, ·) that broadcast over the rows
        angle, radius, label_uniforms = (u.clone().unsqueeze(1) for u in model.monte_carlo_draws())
        self.n_samples = angle.shape[0]
        self.shift_uniforms = (angle, radius)  # learned ν: ν_θ(x, ŷ) differs per row, transformed per call
        self.shift_draws = None if self.family == "learned" else model.shift_standard_draws(angle, radius)
        self.label_uniforms = label_uniforms
        self._buffers: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}

    def _transpose_weights(self) -> None:
        """Every weight as a contiguous (in, out) matrix: x @ W then needs no transposed operand
        (a few per cent faster in the products, measured)."""

        def t(w: torch.Tensor) -> torch.Tensor:
            return w.T.contiguous()

        if self.data_layers is not None:
            self.data_layers = [(t(w), b) for w, b in self.data_layers]
        self.label_layers = [(t(w), b) for w, b in self.label_layers]
        self.shift_data_w, self.shift_label_w = t(self.shift_data_w), t(self.shift_label_w)
        self.kappa_hidden_layer = (t(self.kappa_hidden_layer[0]), self.kappa_hidden_layer[1])
        self.kappa_logvar = (t(self.kappa_logvar[0]), self.kappa_logvar[1])
        self.decoder_data_w, self.decoder_latent_w = t(self.decoder_data_w), t(self.decoder_latent_w)
        if self.fold_kappa:
            self.hidden_to_logits = t(self.hidden_to_logits)
        else:
            self.kappa_out = (t(self.kappa_out[0]), self.kappa_out[1])

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, probs: torch.Tensor, *, feed: str = "probs") -> torch.Tensor:
        """Corrected probabilities (B, L) of x (B, ...) given the base probabilities (B, L); ``feed`` as
        in :meth:`LatentShiftModel.correct`.

        Large intermediates are written into buffers kept for the next call with the same shapes
        (``out=`` and in-place operations): allocating them afresh costs page faults on first touch,
        which measured as large as the arithmetic itself.
        """
        m, batch, S = self.latent_dim, x.shape[0], self.n_samples
        if self.data_layers is not None:
            h = self._gelu_mlp(x, self.data_layers, "data")
        else:
            h = self.data_encoder(x)  # type: ignore[misc]
        n_heads = self.shift_bias.shape[0]
        if feed == "sample":  # ŷ_s = 1[u_s < p] per Monte-Carlo sample: the label side runs S times
            noisy = self._buffer("noisy", (S, batch, probs.shape[1]), probs, torch.bool)
            torch.lt(self.label_uniforms, probs, out=noisy)
            e = self._gelu_mlp(noisy.view(S * batch, -1).to(probs.dtype), self.label_layers, "label")
            heads = self._buffer("heads", (S * batch, n_heads), h)
            heads = torch.mm(e, self.shift_label_w, out=heads).view(S, batch, -1)
            heads.add_(torch.addmm(self.shift_bias, h, self.shift_data_w))
        else:
            e = self._gelu_mlp(probs, self.label_layers, "label")
            heads = self._buffer("heads", (batch, n_heads), h)
            torch.addmm(self.shift_bias, h, self.shift_data_w, out=heads).addmm_(e, self.shift_label_w)
        loc = heads[..., :m]
        # the log-variance rows were halved at folding: exp of them is the standard deviation
        scale = heads[..., m : 2 * m].exp_().clamp_(min=_MIN_SCALE, max=_MAX_SCALE)
        draws = self.shift_draws
        if draws is None:  # learned ν_θ(x, ŷ) = ReLU(·) + 1, per row
            draws = student_t_from_uniforms(*self.shift_uniforms, heads[..., 2 * m :].relu() + 1.0)
        shape = (S, batch, m)
        zhat = torch.addcmul(loc, scale, draws, out=self._buffer("zhat", shape, h)).view(-1, m)

        # two products rather than one stacked: the elementwise passes then run on contiguous memory
        (w1, b1), (w2, b2) = self.kappa_hidden_layer, self.kappa_logvar
        hidden = self._buffer("hidden", (S * batch, w1.shape[1]), h)
        torch.ops.aten.gelu_(torch.addmm(b1, zhat, w1, out=hidden))
        variance = torch.addmm(b2, zhat, w2, out=self._buffer("variance", (S * batch, m), h))
        variance.exp_().clamp_(min=_MIN_VARIANCE, max=_MAX_VARIANCE)  # σ_κ²

        # the logits given ẑ_s are Normal: mean at z = μ_κ(ẑ_s) (computed divided by √2, the weights
        # were scaled at folding), variance Σ_j w_j² σ_κ,j²
        data_logits = torch.addmm(self.decoder_bias, h, self.decoder_data_w)  # (B, L), bias included
        n_labels = self.decoder_bias.shape[0]
        mean = self._buffer("mean", (S * batch, n_labels), h)
        if self.fold_kappa:
            torch.mm(hidden, self.hidden_to_logits, out=mean)
        else:
            z = self._buffer("z", (S * batch, m), h)
            torch.addmm(self.kappa_out[1], hidden, self.kappa_out[0], out=z)
            torch.mm(z, self.decoder_latent_w, out=mean)
        mean.view(S, batch, -1).add_(data_logits)
        logit_variance = self._buffer("logit_variance", mean.shape, h)
        torch.mm(variance, self.decoder_latent_w_sq, out=logit_variance)
        expected = expected_sigmoid_into(
            mean, logit_variance, out=self._buffer("expected", mean.shape, h), work=self._buffer("work", mean.shape, h)
        )
        return expected.view(S, batch, -1).mean(0)

    def _buffer(
        self, name: str, shape: tuple[int, ...], like: torch.Tensor, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        key = (name, shape)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = torch.empty(shape, dtype=dtype or like.dtype, device=like.device)
        return buffer

    def _gelu_mlp(self, x: torch.Tensor, layers: list[Affine], name: str) -> torch.Tensor:
        for i, (w, b) in enumerate(layers):
            out = self._buffer(f"{name}{i}", (x.shape[0], w.shape[1]), x)
            x = torch.ops.aten.gelu_(torch.addmm(b, x, w, out=out))
        return x


def chunk_rows(model: LatentShiftModel, device: torch.device) -> int:
    """Rows per chunk of :func:`predict_corrected` on ``device`` (see ``CHUNK_ROWS``); a user's data
    encoder (a CNN, say) keeps ``CHUNK_ROWS`` everywhere: its activations are not ours to size."""
    if device.type == "cpu" or not isinstance(model.data_encoder, StandardizedMLPEncoder):
        return CHUNK_ROWS
    widest = max(model.label_decoder.out.out_features, model.true_latent_encoder.loc[0].out_features,
                 model.label_decoder.data_dim)
    samples = int(model.monte_carlo_uniforms.shape[0])
    return int(np.clip(GPU_CHUNK_ELEMENTS // (samples * widest), CHUNK_ROWS, 2**20))


def predict_corrected(
    model: LatentShiftModel,
    X: np.ndarray | torch.Tensor,
    probs: np.ndarray | torch.Tensor,
    *,
    feed: str,
    device: torch.device,
) -> np.ndarray:
    """The corrected probabilities (n, L) float32 of X (n, ...) given the base probabilities (n, L),
    computed by a :class:`FoldedCorrector` of ``model`` (in eval mode) in chunks (:func:`chunk_rows`).

    X and probs may be arrays or tensors (tensors already on ``device`` are not copied). On a GPU the
    chunks' answers stay on the device and come back in one copy at the end: no chunk waits for the host.
    """
    correct = FoldedCorrector(model)
    rows = chunk_rows(model, device)
    on_host = device.type == "cpu"
    shape = tuple(probs.shape)
    out = np.empty(shape, dtype=np.float32) if on_host else torch.empty(shape, dtype=torch.float32, device=device)
    with torch.inference_mode():
        for start in range(0, len(X), rows):
            stop = start + rows
            xb = as_tensor(X[start:stop], dtype=torch.float32, device=device)
            pb = as_tensor(probs[start:stop], dtype=torch.float32, device=device)
            answer = correct(xb, pb, feed=feed)
            out[start:stop] = answer.numpy() if on_host else answer
    return out if on_host else out.cpu().numpy()
