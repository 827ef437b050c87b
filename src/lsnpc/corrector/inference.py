"""The correction equation (eq. 9) for a trained model, compiled down to a few matrix products.

In eval mode every BatchNorm is an affine map and every Dropout the identity, so each
Linear → BatchNorm (or BatchNorm → Linear) pair folds into one Linear, the data standardisation folds
into the first layer, the location and log-variance heads of q(ẑ | x, ŷ) share one product, and
heads that read a concatenation become a sum of per-block products (no concatenation is built).
With fewer labels than latent dimensions the last layer of μ_κ also folds into g_φ's latent part: the
Monte-Carlo passes then never materialise z, only its logits.

Random numbers are the other large cost (three per latent dimension and Monte-Carlo sample: ~40% of
a prediction pass on CPU). For a large batch the standard draws are therefore taken, by uniformly
random index, from a pool of ``POOL_ROWS`` exact draws made once per corrector: every draw is still
exactly Student-t (or Normal) and the estimate unbiased; the variance grows by a factor
1 + (S−1)/R ≈ 1.0002 (S = 5 samples, R = 16,384 rows). Small batches draw directly.

:class:`FoldedCorrector` computes exactly what :meth:`LatentShiftModel.correct` computes with the
modules, given the same draws (tested to float tolerance); only the number of operations changes.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .model import _LOGVAR_MAX, _MIN_SCALE, LatentShiftModel, StandardizedMLPEncoder, standard_student_t

__all__ = ["POOL_ROWS", "FoldedCorrector"]

# exp(min(v, c)) == min(exp(v), exp(c)): the log-variance cap becomes a cap on σ, one pass fewer
_MAX_SCALE = math.exp(_LOGVAR_MAX / 2)

POOL_ROWS = 16_384

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
    """E[y | x, h] ≈ (1/S) Σ_s sigmoid(g_φ(x, z_s)), z_s ~ q(z | ẑ_s), ẑ_s ~ q(ẑ | x, ŷ), with folded weights.

    Built from a model in eval mode; the folded weights are copies (a user's own data encoder, which is
    run as it is, is not). Call with x (B, ...) and the fed labels ŷ (B, L); returns probabilities (B, L).
    """

    @torch.no_grad()
    def __init__(self, model: LatentShiftModel) -> None:
        if model.training:
            raise RuntimeError("FoldedCorrector needs a model in eval mode (BatchNorm running statistics)")
        self.family = model.latent.family
        self.nu = model.nu.detach().clone()
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

        # q(z | ẑ): μ_κ's hidden layer, and the log-variance head halved as above
        kappa = model.true_latent_encoder
        first, second = kappa.loc[0], kappa.loc[2]
        self.kappa_hidden_layer = (first.weight.clone(), first.bias.clone())
        self.kappa_logstd = (0.5 * kappa.logvar.weight, 0.5 * kappa.logvar.bias)

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
        self._pools: tuple[torch.Tensor, torch.Tensor] | None = None
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
        self.kappa_logstd = (t(self.kappa_logstd[0]), self.kappa_logstd[1])
        self.decoder_data_w, self.decoder_latent_w = t(self.decoder_data_w), t(self.decoder_latent_w)
        if self.fold_kappa:
            self.hidden_to_logits = t(self.hidden_to_logits)
        else:
            self.kappa_out = (t(self.kappa_out[0]), self.kappa_out[1])

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, noisy: torch.Tensor, n_samples: int) -> torch.Tensor:
        """Corrected probabilities (B, L) from ``n_samples`` Monte-Carlo draws per row, with standard
        draws from torch's generator (Student-t(ν) or Normal for ẑ, Normal for z).

        Large intermediates are written into buffers kept for the next call with the same shapes
        (``out=`` and in-place operations): allocating them afresh costs page faults on first touch,
        which measured as large as the arithmetic itself.
        """
        m, batch, S = self.latent_dim, x.shape[0], n_samples
        if self.data_layers is not None:
            h = self._gelu_mlp(x, self.data_layers, "data")
        else:
            h = self.data_encoder(x)  # type: ignore[misc]
        e = self._gelu_mlp(noisy, self.label_layers, "label")
        heads = self._buffer("heads", (batch, self.shift_bias.shape[0]), h)
        torch.addmm(self.shift_bias, h, self.shift_data_w, out=heads).addmm_(e, self.shift_label_w)
        loc = heads[:, :m]
        # the log-variance rows were halved at folding: exp of them is the standard deviation
        scale = heads[:, m : 2 * m].exp_().clamp_(min=_MIN_SCALE, max=_MAX_SCALE)

        shape = (S, batch, m)
        noise = self._noise(shape, heads)
        zhat = torch.addcmul(loc, noise[0], scale, out=self._buffer("zhat", shape, h)).view(-1, m)

        # two products rather than one stacked: the elementwise passes then run on contiguous memory
        (w1, b1), (w2, b2) = self.kappa_hidden_layer, self.kappa_logstd
        hidden = self._buffer("hidden", (S * batch, w1.shape[1]), h)
        torch.ops.aten.gelu_(torch.addmm(b1, zhat, w1, out=hidden))
        spread = torch.addmm(b2, zhat, w2, out=self._buffer("spread", (S * batch, m), h))
        spread.exp_().clamp_(min=_MIN_SCALE, max=_MAX_SCALE).mul_(noise[1].reshape(-1, m))  # σ_κ ⊙ ξ

        data_logits = torch.addmm(self.decoder_bias, h, self.decoder_data_w)  # (B, L), bias included
        logits = self._buffer("logits", (S * batch, self.decoder_bias.shape[0]), h)
        if self.fold_kappa:
            torch.mm(hidden, self.hidden_to_logits, out=logits)
        else:
            z = self._buffer("z", (S * batch, m), h)
            torch.addmm(self.kappa_out[1], hidden, self.kappa_out[0], out=z)
            torch.mm(z, self.decoder_latent_w, out=logits)
        logits.addmm_(spread, self.decoder_latent_w)
        return logits.view(S, batch, -1).add_(data_logits).sigmoid_().mean(0)

    def _buffer(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        key = (name, shape)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buffer

    def _gelu_mlp(self, x: torch.Tensor, layers: list[Affine], name: str) -> torch.Tensor:
        for i, (w, b) in enumerate(layers):
            out = self._buffer(f"{name}{i}", (x.shape[0], w.shape[1]), x)
            x = torch.ops.aten.gelu_(torch.addmm(b, x, w, out=out))
        return x

    def _noise(self, shape: tuple[int, int, int], heads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Standard draws for ẑ (Student-t(ν), Normal for GAUSS) and for z (Normal), each (S, B, m)."""
        dtype, device = heads.dtype, heads.device
        if self.family == "learned":  # ν_θ(x, ŷ) differs per element: Gamma-based draws, no pool
            df = torch.relu(heads[:, 2 * self.latent_dim :]) + 1.0
            zhat = torch.distributions.StudentT(df, validate_args=False).sample((shape[0],))
            return zhat, torch.randn(shape, dtype=dtype, device=device)
        n_draws = shape[0] * shape[1]
        if n_draws <= POOL_ROWS:
            return self._shift_draws(shape, dtype, device), torch.randn(shape, dtype=dtype, device=device)
        if self._pools is None:
            pool_shape = (POOL_ROWS, shape[2])
            self._pools = (
                self._shift_draws(pool_shape, dtype, device),
                torch.randn(pool_shape, dtype=dtype, device=device),
            )
        rows = torch.randint(POOL_ROWS, (2, n_draws), device=device)
        out = (self._buffer("noise0", (n_draws, shape[2]), heads), self._buffer("noise1", (n_draws, shape[2]), heads))
        torch.index_select(self._pools[0], 0, rows[0], out=out[0])
        torch.index_select(self._pools[1], 0, rows[1], out=out[1])
        return out[0].view(shape), out[1].view(shape)

    def _shift_draws(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if self.family == "gauss":
            return torch.randn(shape, dtype=dtype, device=device)
        return standard_student_t(shape, self.nu, dtype=dtype, device=device)
