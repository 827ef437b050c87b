"""The densities and ELBO terms of the LSNPC model against closed forms and scipy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy import stats
from torch.distributions import Normal, kl_divergence

from lsnpc.corrector.model import FastStudentT, LatentConfig, LatentShiftModel, StandardizedMLPEncoder
from lsnpc.corrector.objective import reconstruction_nll, shift_divergence, standard_normal_kl, unsupervised_loss


def _model(family: str, nu: float = 2.01, nu0: float = 2.01, latent_dim: int = 4) -> LatentShiftModel:
    torch.manual_seed(0)
    encoder = StandardizedMLPEncoder(3, 8)
    return LatentShiftModel(encoder, 8, 2, LatentConfig(family, nu, nu0), latent_dim=latent_dim,
                            label_embedding_dim=8)


@pytest.mark.parametrize("df", [2.01, 3.0, 10.0])
def test_fast_student_log_prob_matches_scipy(df: float) -> None:
    loc, scale = torch.tensor([0.5, -1.0]), torch.tensor([2.0, 0.3])
    x = torch.tensor([[1.3, -0.2], [-4.0, 7.0]])
    ours = FastStudentT(torch.tensor(df), loc, scale).log_prob(x).numpy()
    ref = stats.t.logpdf(x.numpy(), df, loc=loc.numpy(), scale=scale.numpy())
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_fast_student_rsample_has_the_student_distribution_and_gradients() -> None:
    torch.manual_seed(1)
    loc = torch.tensor(1.5, requires_grad=True)
    scale = torch.tensor(0.7, requires_grad=True)
    draws = FastStudentT(torch.tensor(3.0), loc, scale).rsample((40_000,))
    ks = stats.kstest(draws.detach().numpy(), stats.t(3.0, loc=1.5, scale=0.7).cdf)
    assert ks.pvalue > 1e-3
    draws.mean().backward()
    assert loc.grad is not None and torch.isclose(loc.grad, torch.tensor(1.0))
    assert scale.grad is not None and torch.isfinite(scale.grad)


def test_standard_normal_kl_matches_closed_form_and_torch() -> None:
    q = Normal(torch.tensor([0.0, 1.0, -2.0]), torch.tensor([1.0, 0.5, 3.0]))
    ours = standard_normal_kl(q)
    reference = kl_divergence(q, Normal(torch.zeros(3), torch.ones(3)))
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-6)
    # closed form 0.5 (σ² + μ² − 1 − log σ²), written out for the second entry
    assert ours[1].item() == pytest.approx(0.5 * (0.25 + 1.0 - 1.0 - np.log(0.25)), rel=1e-6)
    assert ours[0].item() == pytest.approx(0.0, abs=1e-7)


def test_reconstruction_nll_is_bernoulli_cross_entropy() -> None:
    logits = torch.tensor([[0.3, -2.0], [4.0, 0.0]])
    labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = 1 / (1 + np.exp(-logits.numpy()))
    expected = -np.mean(labels.numpy() * np.log(p) + (1 - labels.numpy()) * np.log(1 - p))
    assert reconstruction_nll(logits, labels).item() == pytest.approx(expected, rel=1e-6)


def test_shift_divergence_is_the_log_ratio_mean() -> None:
    q = Normal(torch.zeros(2, 3), torch.ones(2, 3))
    p = Normal(torch.ones(2, 3), 2 * torch.ones(2, 3))
    x = torch.randn(2, 3)
    expected = (q.log_prob(x) - p.log_prob(x)).mean()
    assert shift_divergence(q, x, p).item() == pytest.approx(expected.item())


def test_nu_and_nu0_reach_their_densities() -> None:
    """ν parameterises q(ẑ | x, ŷ) and ν0 parameterises p(ẑ | z) — the authors' code ignored both."""
    model = _model("student", nu=3.0, nu0=7.0)
    h = torch.randn(5, 8)
    labels = torch.bernoulli(torch.full((5, 2), 0.5))
    q = model.q_latent(h, labels)
    p = model.p_shifted_given_true(torch.randn(5, 4))
    assert torch.allclose(q.df, torch.tensor(3.0))
    assert torch.allclose(p.df, torch.tensor(7.0))
    x = torch.randn(5, 4)
    np.testing.assert_allclose(
        p.log_prob(x).detach().numpy(),
        stats.t.logpdf(x.numpy(), 7.0, loc=p.loc.detach().numpy(), scale=1.0),
        rtol=1e-5, atol=1e-5,
    )
    # and they change the loss: the same weights with another ν0 give another ELBO
    losses = []
    for nu0 in (2.01, 50.0):
        other = _model("student", nu=3.0, nu0=nu0)
        other.load_state_dict({**model.state_dict(), "nu0": torch.tensor(nu0)})
        torch.manual_seed(3)
        losses.append(unsupervised_loss(other, h, labels, beta=1.0)[0].item())
    assert losses[0] != pytest.approx(losses[1])


def test_gauss_family_uses_normal_densities() -> None:
    model = _model("gauss")
    h = torch.randn(4, 8)
    q = model.q_latent(h, torch.ones(4, 2))
    p = model.p_shifted_given_true(torch.randn(4, 4))
    assert type(q) is Normal and type(p) is Normal
    assert torch.allclose(p.scale, torch.ones_like(p.scale))


def test_learned_nu_is_at_least_one_and_differentiable() -> None:
    model = _model("learned")
    h = torch.randn(6, 8)
    q = model.q_latent(h, torch.bernoulli(torch.full((6, 2), 0.5)))
    assert torch.all(q.df >= 1.0)
    loss, _ = unsupervised_loss(model, h, torch.ones(6, 2), beta=1.0)
    loss.backward()
    assert model.shift_encoder.df.weight.grad is not None
    assert torch.isfinite(model.shift_encoder.df.weight.grad).all()


def test_correction_averages_its_fixed_monte_carlo_samples() -> None:
    """eq. 9 with ŷ sampled: the S-sample correction is the mean of S one-sample corrections, sample s
    fed ŷ_s = 1[u_s < p] (one Bernoulli draw of ŷ per Monte-Carlo sample, not one per row)."""
    model = _model("student").eval()
    x, probs = torch.randn(7, 3), torch.full((7, 2), 0.5)
    corrected = model.correct(x, probs, feed="sample")
    assert corrected.shape == (7, 2) and torch.all((corrected > 0) & (corrected < 1))
    single = _model("student").eval()
    per_sample = []
    for row in model.monte_carlo_uniforms:
        single.monte_carlo_uniforms = row[None].clone()
        fed = (single.monte_carlo_draws()[2] < probs).float()
        per_sample.append(single.correct(x, fed, feed="probs"))
    torch.testing.assert_close(corrected, torch.stack(per_sample).mean(0))
    # the label uniforms of different samples give different ŷ for the same row
    fed = (model.monte_carlo_draws()[2][:, None, :] < probs).float()
    assert len({tuple(f.flatten().tolist()) for f in fed[:, 0]}) > 1


@pytest.mark.parametrize("clip", [None, 0.5, 1e6])  # none, clipping, a bound never reached
def test_flat_adamw_matches_torch_adamw(clip):
    """FlatAdamW's steps (with or without norm clipping) give torch.optim.AdamW's weights."""
    from lsnpc.corrector.optim import FlatAdamW

    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.Linear(5, 3))
    flat_model = copy.deepcopy(reference)
    x, target = torch.randn(16, 6), torch.randn(16, 3)
    rates = [0.1, 0.05, 0.02]

    opt = torch.optim.AdamW(reference.parameters(), lr=rates[0], weight_decay=0.01)
    for lr in rates:
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), target).mul(50).backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)
        opt.step()

    flat = FlatAdamW([flat_model], weight_decay=0.01)
    with flat:
        for lr in rates:
            flat.step(torch.nn.functional.mse_loss(flat_model(x), target).mul(50), lr=lr, clip=clip)
    flat.flat.add_(1.0)  # after the context the parameters own their storage again
    for a, b in zip(reference.parameters(), flat_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert b.grad is None


def test_paper_schedule_is_torch_cosine_annealing_with_a_ten_epoch_period():
    from lsnpc.corrector.training import learning_rate

    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=2e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for epoch in range(25):  # the rate climbs again after epoch 10, as in the authors' code
        assert learning_rate("paper", 2e-4, 0, epoch, 100) == pytest.approx(opt.param_groups[0]["lr"], abs=1e-12)
        opt.step()
        sched.step()


def test_cosine_schedule_warms_up_then_decays_to_five_percent():
    from lsnpc.corrector.training import learning_rate

    rates = [learning_rate("cosine", 1.0, step, 0, 1000) for step in range(1000)]
    assert rates[0] == pytest.approx(1 / 30) and rates[29] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(rates[29:], rates[30:], strict=False))
    assert rates[-1] == pytest.approx(0.05, abs=1e-4)
    assert learning_rate("constant", 0.3, 500, 7, 1000) == 0.3


def _folded_test_model(family: str, n_labels: int, n_samples: int = 4) -> LatentShiftModel:
    """A small model with non-trivial standardisation, running statistics and affine parameters."""
    torch.manual_seed(0)
    encoder = StandardizedMLPEncoder(3, 8)
    encoder.set_standardization(torch.tensor([0.5, -1.0, 2.0]), torch.tensor([2.0, 0.5, 3.0]))
    model = LatentShiftModel(encoder, 8, n_labels, LatentConfig(family, 2.5, 3.0), latent_dim=4,
                             label_embedding_dim=5, latent_mlp_dim=6, n_samples=n_samples)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    model.draw_monte_carlo(torch.Generator().manual_seed(5))
    return model.eval()


@pytest.mark.parametrize("family", ["student", "gauss", "learned"])
@pytest.mark.parametrize("n_labels", [2, 6])  # fewer and more labels than latent dims (μ_κ folded or not)
@pytest.mark.parametrize("feed", ["probs", "sample"])
def test_folded_correction_equals_the_module_computation(family, n_labels, feed) -> None:
    """FoldedCorrector (BatchNorm folded, heads stacked, draws precomputed) computes what the modules compute."""
    from lsnpc.corrector.inference import FoldedCorrector

    model = _folded_test_model(family, n_labels)
    x, probs = torch.randn(9, 3), torch.rand(9, n_labels)
    reference = model.correct(x, probs, feed=feed)
    folded = FoldedCorrector(model)(x, probs, feed=feed)
    torch.testing.assert_close(folded, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["student", "learned"])
@pytest.mark.parametrize("feed", ["probs", "sample"])
def test_a_rows_correction_depends_only_on_the_row(family, feed) -> None:
    """Alone, in a batch, shuffled or repeated, a row gets the same answer (common random numbers)."""
    from lsnpc.corrector.inference import FoldedCorrector

    model = _folded_test_model(family, 3, n_samples=5)
    correct = FoldedCorrector(model)
    x, probs = torch.randn(40, 3), torch.rand(40, 3)
    batch = correct(x, probs, feed=feed)
    alone = torch.cat([correct(x[i : i + 1], probs[i : i + 1], feed=feed) for i in range(40)])
    order = torch.randperm(40, generator=torch.Generator().manual_seed(0))
    shuffled = correct(x[order], probs[order], feed=feed)[torch.argsort(order)]
    repeated = correct(x[:1].expand(64, 3), probs[:1].expand(64, 3), feed=feed)
    assert float((alone - batch).abs().max()) <= 1e-5
    assert float((shuffled - batch).abs().max()) <= 1e-5
    assert float((repeated - batch[:1]).abs().max()) <= 1e-5
    torch.manual_seed(123)  # no random generator is read: reseeding changes nothing
    torch.testing.assert_close(FoldedCorrector(model)(x, probs, feed=feed), batch)


def test_monte_carlo_draws_are_a_buffer_that_fit_redraws() -> None:
    model = _folded_test_model("student", 2, n_samples=6)
    assert "monte_carlo_uniforms" in model.state_dict()
    u = model.monte_carlo_uniforms
    assert u.shape == (6, 2 * 4 + 2) and float(u.min()) > 0 and float(u.max()) < 1
    before = u.clone()
    model.draw_monte_carlo(torch.Generator().manual_seed(6))
    assert not torch.equal(before, model.monte_carlo_uniforms)
    model.draw_monte_carlo(torch.Generator().manual_seed(5))
    torch.testing.assert_close(before, model.monte_carlo_uniforms)


def test_draw_transforms_give_their_distributions() -> None:
    """Bailey's transform gives Student-t(ν); Box–Muller gives Normal(0, 1)."""
    from lsnpc.corrector.montecarlo import normal_from_uniforms, student_t_from_uniforms

    g = torch.Generator().manual_seed(0)
    angle, radius = (torch.rand(20_000, generator=g).clamp_(1e-7, 1 - 1e-7) for _ in range(2))
    assert stats.kstest(student_t_from_uniforms(angle, radius, 2.5).numpy(), stats.t(2.5).cdf).pvalue > 1e-3
    assert stats.kstest(normal_from_uniforms(angle, radius).numpy(), stats.norm.cdf).pvalue > 1e-3


def test_monte_carlo_design_is_a_latin_hypercube_of_uniforms() -> None:
    from lsnpc.corrector.montecarlo import monte_carlo_design

    u = monte_carlo_design(7, 500, torch.Generator().manual_seed(0))
    strata = torch.sort(torch.floor(u * 7), dim=0).values
    assert torch.equal(strata, torch.arange(7.0)[:, None].expand(7, 500))  # one value per stratum per column
    assert stats.kstest(u.flatten().numpy(), stats.uniform.cdf).pvalue > 1e-3  # each value uniform
    assert not torch.equal(u[:, 0].argsort(), u[:, 1].argsort())  # strata shuffled per column


def test_expected_sigmoid_is_the_gaussian_integral() -> None:
    """E[sigmoid(a + s Z)] against numerical integration, within the 7.3e-7 bound of the mixture."""
    from scipy import integrate
    from scipy.special import expit

    from lsnpc.corrector.montecarlo import expected_sigmoid

    rng = np.random.default_rng(0)
    mean = np.concatenate([rng.uniform(-15, 15, 150), [0.0, 11.8, -11.8, 40.0]])
    sd = np.concatenate([np.exp(rng.uniform(-6, 4, 150)), [0.0, 0.0, 1e-3, 30.0]])
    exact = [integrate.quad(lambda z, a=a, s=s: expit(a + s * z) * stats.norm.pdf(z), -np.inf, np.inf,
                            epsabs=1e-12, limit=500)[0] for a, s in zip(mean, sd)]
    ours = expected_sigmoid(torch.tensor(mean), torch.tensor(sd**2)).numpy()
    np.testing.assert_allclose(ours, exact, rtol=0, atol=7.5e-7)
    single = expected_sigmoid(torch.tensor(mean, dtype=torch.float32), torch.tensor(sd**2, dtype=torch.float32))
    np.testing.assert_allclose(single.numpy(), exact, rtol=0, atol=2e-6)


def test_integrating_z_equals_averaging_over_its_draws() -> None:
    """The closed-form step over z | ẑ equals many Normal draws of z pushed through g_φ (and clamped σ_κ)."""
    model = _folded_test_model("student", 3, n_samples=2)
    x, probs = torch.randn(4, 3), torch.rand(4, 3)
    closed_form = model.correct(x, probs)
    angle, radius, _ = model.monte_carlo_draws()
    with torch.no_grad():
        h = model.data_encoder(x)
        loc, scale, _ = model.shift_encoder(h, model.label_encoder(probs))
        zhat = loc + scale * model.shift_standard_draws(angle[:, None], radius[:, None])  # (S, B, m)
        true_loc, true_scale = model.true_latent_encoder(zhat)
        g = torch.Generator().manual_seed(0)
        xi = torch.randn((20_000, *true_loc.shape), generator=g)
        z = (true_loc + true_scale * xi).reshape(-1, 4)
        logits = model.label_logits(h.expand(20_000, 2, 4, 8).reshape(-1, 8), z)
        draws = torch.sigmoid(logits).view(20_000, 2, 4, 3).mean(1)  # average over S
    torch.testing.assert_close(draws.mean(0), closed_form, rtol=0, atol=4 * float(draws.std(0).max()) / 140)


def test_folded_corrector_is_a_snapshot_of_the_weights():
    """Training the model after building the corrector does not change the corrector's output."""
    from lsnpc.corrector.inference import FoldedCorrector

    model = _folded_test_model("student", 2)
    corrector = FoldedCorrector(model)
    x, probs = torch.randn(6, 3), torch.rand(6, 2)
    before = corrector(x, probs)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
        model.monte_carlo_uniforms.mul_(0.5)
    torch.testing.assert_close(corrector(x, probs), before)
    assert not torch.allclose(FoldedCorrector(model)(x, probs), before)
