"""The LSNPC generative model and its variational proposals (paper, section 4).

Generative story (section 4.1)::

    z        ~ Normal(0, I)                          the true-label latent, R^m
    ẑ | z    ~ Student(g_ψ(z), I, ν0)                 the shifted latent  (Normal for GAUSS)
    y | z, x ~ Bernoulli(g_φ(x, z))                    true labels
    ŷ | ẑ, x ~ Bernoulli(g_φ(x, ẑ))                    the base classifier's (noisy) labels

Proposals (section 4.2)::

    q(ẑ | x, ŷ) = Student(μ_θ(x, ŷ), diag σ²_θ(x, ŷ), ν)  (Normal for GAUSS; ν = ν_θ(x, ŷ) when learned)
    q(z | ẑ)    = Normal(μ_κ(ẑ), diag σ²_κ(ẑ))
    q(z | x, y) = Normal(μ_θ(x, y), diag σ²_θ(x, y))       the same θ-network, fed true labels

Each class below is one of these functions; :class:`LatentShiftModel` wires them together.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Distribution, Normal, StudentT

from .montecarlo import (
    expected_sigmoid,
    monte_carlo_design,
    normal_from_uniforms,
    standard_student_t,
    student_t_from_uniforms,
)

__all__ = [
    "LATENT_FAMILIES",
    "StandardizedMLPEncoder",
    "LabelEncoder",
    "ShiftEncoder",
    "TrueLatentEncoder",
    "ShiftDecoder",
    "LabelDecoder",
    "FastStudentT",
    "LatentShiftModel",
]

LATENT_FAMILIES = ("student", "gauss", "learned")

# log-variance cap of the encoders (as in the authors' model) and the smallest scale allowed
_LOGVAR_MAX = 5.0
_MIN_SCALE = 1e-4


class FastStudentT(StudentT):
    """Student-t with a fixed (non-learned) ν, built for the training loop's hot path.

    ``torch.distributions.StudentT`` builds a Chi2/Gamma pair in its constructor and its ``rsample``
    draws Gamma variates (slow on CPU, and only needed to differentiate through a learned ν). Here:

    - ``rsample`` uses Bailey's polar method: an exact standard Student-t from two uniforms,
      T = cos(2π U₁) · sqrt(ν (U₂^(−2/ν) − 1)); ẑ = loc + scale · T is reparameterised in loc and scale.
    - ``log_prob`` is the closed form with ν's normalising constant computed once per distribution.
    - no argument validation (the model's scales are clamped positive by construction).

    Parameters: df, a 0-d tensor ν > 0; loc and scale, tensors of one shape. ``mean``, ``variance`` and
    ``entropy`` are inherited.
    """

    def __init__(self, df: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> None:
        self._nu = df.detach()  # kept unexpanded: the arithmetic below broadcasts it
        self.df = self._nu.expand(loc.shape)
        self.loc, self.scale = loc, scale
        Distribution.__init__(self, loc.shape, validate_args=False)

    def rsample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008
        shape = self._extended_shape(sample_shape)
        draws = standard_student_t(shape, self._nu, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * draws

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        df = self._nu
        constant = torch.lgamma(0.5 * (df + 1.0)) - torch.lgamma(0.5 * df) - 0.5 * torch.log(df * math.pi)
        y = (value - self.loc) / self.scale
        return constant - torch.log(self.scale) - 0.5 * (df + 1.0) * torch.log1p(y * y / df)


def _mlp(sizes: list[int], *, dropout: float = 0.0, batch_norm: bool = True) -> nn.Sequential:
    """Linear → (BatchNorm) → GELU → (Dropout) blocks for each consecutive pair in ``sizes``."""
    layers: list[nn.Module] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers.append(nn.Linear(fan_in, fan_out))
        if batch_norm:
            layers.append(nn.BatchNorm1d(fan_out, momentum=0.01))
        layers.append(nn.GELU())
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class StandardizedMLPEncoder(nn.Module):
    """LSNPC's own data encoder for feature vectors: standardise x, then a two-layer GELU MLP.

    Maps x (batch, d) to an embedding (batch, hidden_dim). The standardisation statistics are buffers, so
    a saved model carries them.
    """

    def __init__(self, n_features: int, hidden_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("scale", torch.ones(n_features))
        self.net = _mlp([n_features, hidden_dim, hidden_dim], dropout=dropout, batch_norm=True)
        self.out_features = hidden_dim

    def set_standardization(self, mean: torch.Tensor, scale: torch.Tensor) -> None:
        self.mean.copy_(mean)
        self.scale.copy_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.scale)


class LabelEncoder(nn.Module):
    """Embeds a label vector (batch, L) — ŷ or y — into (batch, label_embedding_dim).

    A 4-layer GELU MLP, every layer ``embedding_dim`` wide (L → 128 → 128 → 128 → 128), with BatchNorm
    (momentum 0.01) and dropout 0.1 after each layer: the authors' code. Appendix D gives the hidden
    layers a width of 64 (L → 64 → 64 → 64 → 128); measured over 8 seeds on scene and yeast at 30%
    symmetric noise, those widths lost 0.6–0.7 micro-F1 of the unguarded correction on both and gained
    nothing (README, "How LSNPC() differs from the paper"), so the authors' widths stay.
    """

    def __init__(self, n_labels: int, embedding_dim: int, n_layers: int = 4) -> None:
        super().__init__()
        self.net = _mlp([n_labels] + [embedding_dim] * n_layers, dropout=0.1)

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        return self.net(labels)


class ShiftEncoder(nn.Module):
    """q_θ(· | x, labels): location, scale (and ν when learned) of the latent given data and labels.

    Fed (x, ŷ) it gives q(ẑ | x, ŷ); fed (x, y) it gives the location and scale of q(z | x, y).
    Inputs: the data embedding (batch, h) and the label embedding (batch, e). Outputs (batch, m).
    """

    def __init__(self, data_dim: int, label_dim: int, latent_dim: int, learn_df: bool) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(data_dim + label_dim, momentum=0.01)
        self.loc = nn.Linear(data_dim + label_dim, latent_dim)
        self.logvar = nn.Linear(data_dim + label_dim, latent_dim)
        # ν_θ(x, ŷ) = ReLU(Net(x, ŷ)) + 1  (sensitivity section); one ν per latent dimension
        self.df = nn.Linear(data_dim + label_dim, latent_dim) if learn_df else None

    def forward(
        self, data_embedding: torch.Tensor, label_embedding: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        features = self.norm(torch.cat([data_embedding, label_embedding], dim=-1))
        loc = self.loc(features)
        logvar = self.logvar(features).clamp(max=_LOGVAR_MAX)
        scale = torch.exp(0.5 * logvar).clamp(min=_MIN_SCALE)
        df = torch.relu(self.df(features)) + 1.0 if self.df is not None else None
        return loc, scale, df


class TrueLatentEncoder(nn.Module):
    """q_κ(z | ẑ) = Normal(μ_κ(ẑ), diag σ²_κ(ẑ)): the shift back from ẑ to the true-label latent z.

    Location from a small GELU MLP (m → hidden → m), log-variance from a linear layer.
    """

    def __init__(self, latent_dim: int, mlp_dim: int = 128) -> None:
        super().__init__()
        self.loc = nn.Sequential(nn.Linear(latent_dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, latent_dim))
        self.logvar = nn.Linear(latent_dim, latent_dim)

    def forward(self, zhat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.loc(zhat)
        scale = torch.exp(0.5 * self.logvar(zhat).clamp(max=_LOGVAR_MAX)).clamp(min=_MIN_SCALE)
        return loc, scale


class ShiftDecoder(nn.Module):
    """g_ψ(z): the location of p(ẑ | z) = Student(g_ψ(z), I, ν0) (Normal for GAUSS)."""

    def __init__(self, latent_dim: int, mlp_dim: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(latent_dim, mlp_dim),
            nn.GELU(),
            nn.Linear(mlp_dim, mlp_dim),
            nn.GELU(),
            nn.Linear(mlp_dim, latent_dim),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class LabelDecoder(nn.Module):
    """g_φ(x, latent): label probabilities (batch, L) from the data embedding and z or ẑ.

    Shared by y (from z) and ŷ (from ẑ), as the paper requires. Returns logits; the Bernoulli mean is
    their sigmoid.
    """

    def __init__(self, data_dim: int, latent_dim: int, n_labels: int) -> None:
        super().__init__()
        self.data_dim = data_dim
        self.norm = nn.BatchNorm1d(data_dim + latent_dim, momentum=0.01)
        self.out = nn.Linear(data_dim + latent_dim, n_labels)

    def forward(self, data_embedding: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(torch.cat([data_embedding, latent], dim=-1)))

    def latent_weight(self) -> torch.Tensor:
        """In eval mode the logits are linear in the latent: their weights on it (L, m), BatchNorm's
        scale folded into the output layer."""
        norm, columns = self.norm, slice(self.data_dim, None)
        scale = norm.weight[columns] / torch.sqrt(norm.running_var[columns] + norm.eps)
        return self.out.weight[:, columns] * scale


@dataclass
class LatentConfig:
    """What the model needs to know about its latent family."""

    family: str  # "student" | "gauss" | "learned"
    nu: float  # ν of q(ẑ | x, ŷ) (ignored when learned or gauss)
    nu0: float  # ν0 of p(ẑ | z) (ignored for gauss)


class LatentShiftModel(nn.Module):
    """All networks of LSNPC plus the distributions they parameterise.

    Parameters
    ----------
    data_encoder : nn.Module
        Maps x (batch, ...) to a data embedding (batch, h); ``data_dim`` = h.
    n_labels : int
        L.
    latent : LatentConfig
        Latent family and its degrees of freedom.
    latent_dim, label_embedding_dim, latent_mlp_dim : int
        m, the label-embedding width and the width of the latent MLPs (μ_κ, g_ψ).
    n_samples : int
        S, the Monte-Carlo samples of the correction (eq. 9). Their draws are fixed (the buffer
        ``monte_carlo_uniforms``, see :meth:`correct`), so a saved model carries them.
    """

    def __init__(
        self,
        data_encoder: nn.Module,
        data_dim: int,
        n_labels: int,
        latent: LatentConfig,
        *,
        latent_dim: int = 64,
        label_embedding_dim: int = 128,
        latent_mlp_dim: int = 128,
        n_samples: int = 5,
    ) -> None:
        super().__init__()
        if latent.family not in LATENT_FAMILIES:
            raise ValueError(f"latent must be one of {LATENT_FAMILIES}, got {latent.family!r}")
        self.latent = latent
        self.data_encoder = data_encoder
        self.label_encoder = LabelEncoder(n_labels, label_embedding_dim)
        self.shift_encoder = ShiftEncoder(
            data_dim, label_embedding_dim, latent_dim, learn_df=latent.family == "learned"
        )
        self.true_latent_encoder = TrueLatentEncoder(latent_dim, latent_mlp_dim)
        self.shift_decoder = ShiftDecoder(latent_dim, latent_mlp_dim)
        self.label_decoder = LabelDecoder(data_dim, latent_dim, n_labels)
        self.register_buffer("nu", torch.tensor(float(latent.nu)))
        self.register_buffer("nu0", torch.tensor(float(latent.nu0)))
        # placeholder draws until fit calls draw_monte_carlo (deterministic, so a fresh model predicts)
        self.register_buffer(
            "monte_carlo_uniforms",
            monte_carlo_design(n_samples, 2 * latent_dim + n_labels, torch.Generator().manual_seed(0)),
        )

    # -- the distributions of section 4 -------------------------------------------------------
    def q_latent(self, data_embedding: torch.Tensor, labels: torch.Tensor) -> Distribution:
        """q(ẑ | x, ŷ): Student-t(ν) — or Normal (GAUSS), or Student-t(ν_θ(x, ŷ)) (learned)."""
        loc, scale, df = self.shift_encoder(data_embedding, self.label_encoder(labels))
        if self.latent.family == "gauss":
            return Normal(loc, scale, validate_args=False)
        if self.latent.family == "learned":
            return StudentT(df, loc, scale, validate_args=False)
        return FastStudentT(self.nu, loc, scale)

    def q_true_given_labels(self, data_embedding: torch.Tensor, labels: torch.Tensor) -> Normal:
        """q(z | x, y) = Normal(μ_θ(x, y), σ²_θ(x, y)): the θ-network fed clean labels."""
        loc, scale, _ = self.shift_encoder(data_embedding, self.label_encoder(labels))
        return Normal(loc, scale, validate_args=False)

    def q_true_given_shifted(self, zhat: torch.Tensor) -> Normal:
        """q(z | ẑ) = Normal(μ_κ(ẑ), σ²_κ(ẑ))."""
        loc, scale = self.true_latent_encoder(zhat)
        return Normal(loc, scale, validate_args=False)

    def p_shifted_given_true(self, z: torch.Tensor) -> Distribution:
        """p(ẑ | z) = Student-t(ν0, g_ψ(z), I) — Normal(g_ψ(z), I) for GAUSS."""
        loc = self.shift_decoder(z)
        scale = torch.ones_like(loc)
        if self.latent.family == "gauss":
            return Normal(loc, scale, validate_args=False)
        return FastStudentT(self.nu0, loc, scale)

    def label_logits(self, data_embedding: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        """Logits of g_φ(x, latent) (batch, L)."""
        return self.label_decoder(data_embedding, latent)

    # -- the correction equation (eq. 9), by Monte Carlo with common random numbers ------------
    def draw_monte_carlo(self, generator: torch.Generator) -> None:
        """Draw the correction's fixed uniforms anew (fit calls it with the estimator's seed)."""
        u = self.monte_carlo_uniforms
        u.copy_(monte_carlo_design(u.shape[0], u.shape[1], generator))

    def monte_carlo_draws(
        self, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The fixed uniforms (or ``uniforms``), split: ẑ's angle and radius (S, m), the labels' (S, L)."""
        m = self.shift_encoder.loc.out_features
        u = self.monte_carlo_uniforms if uniforms is None else uniforms
        return u[:, :m], u[:, m : 2 * m], u[:, 2 * m :]

    def shift_standard_draws(
        self, angle: torch.Tensor, radius: torch.Tensor, df: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Standard draws of q(ẑ | x, ŷ) from uniforms: Student-t(ν) (ν_θ = ``df`` when learned),
        Normal for GAUSS."""
        if self.latent.family == "gauss":
            return normal_from_uniforms(angle, radius)
        return student_t_from_uniforms(angle, radius, df if self.latent.family == "learned" else self.nu)

    def correct(
        self, x: torch.Tensor, probs: torch.Tensor, *, feed: str = "probs", uniforms: torch.Tensor | None = None
    ) -> torch.Tensor:
        """E[y | x, h] (eq. 9): Monte Carlo over ŷ and ẑ, with z | ẑ integrated exactly.

        (1/S) Σ_s E_{z ~ q(z | ẑ_s)}[sigmoid(g_φ logits(x, z))] with ẑ_s ~ q(ẑ | x, ŷ_s). In eval mode the
        logits are linear in z, so given ẑ_s each label's logit is Normal with mean at z = μ_κ(ẑ_s) and
        variance Σ_j w_j² σ_κ,j²(ẑ_s), and :func:`~lsnpc.corrector.montecarlo.expected_sigmoid` takes
        its expectation. The draws of ŷ and ẑ are common random numbers: the S rows of
        ``monte_carlo_uniforms``, the same for every input row, so a row's answer depends only on that
        row and the model (alone, in any batch, in any order) and no random generator is read.
        ``feed``: ŷ_s = probs ("probs"), or a Bernoulli draw of them per Monte-Carlo sample ("sample":
        ŷ_s = 1[u_s < probs]).

        The reference computation, module by module and in eval mode; prediction runs the same
        function folded (:class:`lsnpc.corrector.inference.FoldedCorrector`), tested equal to this.
        It is differentiable (GradCAM differentiates it; wrap it in ``torch.no_grad()`` otherwise).
        x (B, ...), probs (B, L); ``uniforms`` (S', 2m + L) replaces the stored draws (e.g. another
        :func:`~lsnpc.corrector.montecarlo.monte_carlo_design`). Returns probabilities (B, L).
        """
        angle, radius, label_u = self.monte_carlo_draws(uniforms)
        n_samples, batch, m = angle.shape[0], x.shape[0], angle.shape[1]
        h = self.data_encoder(x)
        h = h.expand(n_samples, *h.shape).reshape(n_samples * batch, -1)
        if feed == "sample":
            noisy = (label_u[:, None, :] < probs).to(probs.dtype)
        else:
            noisy = probs.expand(n_samples, *probs.shape)
        loc, scale, df = self.shift_encoder(h, self.label_encoder(noisy.reshape(n_samples * batch, -1)))
        shape = (n_samples, batch, m)
        draws = self.shift_standard_draws(
            angle[:, None].expand(shape), radius[:, None].expand(shape), None if df is None else df.view(shape)
        )
        zhat = loc + scale * draws.reshape(-1, m)
        true_loc, true_scale = self.true_latent_encoder(zhat)
        mean = self.label_logits(h, true_loc)
        variance = true_scale.square() @ self.label_decoder.latent_weight().square().T
        return expected_sigmoid(mean, variance).view(n_samples, batch, -1).mean(0)


def clone_encoder(encoder: nn.Module) -> nn.Module:
    """A trainable deep copy of a user's encoder (the base classifier itself stays untouched)."""
    clone = copy.deepcopy(encoder)
    for p in clone.parameters():
        p.requires_grad_(True)
    return clone


def infer_output_dim(encoder: nn.Module, example: torch.Tensor) -> int:
    """Run ``encoder`` on one example batch (in eval mode) to learn its embedding width.

    The example is moved to the encoder's device; the encoder itself is left where it is, every submodule in the
    mode it was in.
    """
    device = next(iter(encoder.parameters()), example).device
    # every submodule's own mode, restored one by one: a caller's module may hold parts in eval mode (frozen
    # batch norm, say) inside a module in train mode, and train(was_training) would switch them all
    modes = [(module, module.training) for module in encoder.modules()]
    encoder.eval()
    try:
        with torch.no_grad():
            out = encoder(example.to(device))
    finally:
        for module, training in modes:
            module.training = training
    if out.ndim != 2:
        raise ValueError(
            f"encoder must map a batch of X to a 2-d (batch, embedding) tensor, got shape {tuple(out.shape)}"
        )
    return int(out.shape[1])
