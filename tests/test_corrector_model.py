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


def test_correction_averages_monte_carlo_samples_in_one_pass() -> None:
    model = _model("student").eval()
    x, noisy = torch.randn(7, 3), torch.rand(7, 2)
    torch.manual_seed(0)
    probs = model.correct(x, noisy, n_samples=5)
    assert probs.shape == (7, 2)
    assert torch.all((probs >= 0) & (probs <= 1))
    # the estimate is the mean of sigmoid(g_φ(x, z)): with one sample it is a single draw
    torch.manual_seed(0)
    single = model.correct(x, noisy, n_samples=1)
    assert not torch.allclose(single, probs)


def test_split_decoder_equals_the_concatenated_decoder() -> None:
    model = _model("student").eval()
    with torch.no_grad():
        model.label_decoder.norm.running_mean.uniform_(-1, 1)
        model.label_decoder.norm.running_var.uniform_(0.5, 2)
    h, z = torch.randn(6, 8), torch.randn(6, 4)
    full = model.label_logits(h, z)
    split = model.label_decoder.data_logits(h) + model.label_decoder.latent_logits(z)
    torch.testing.assert_close(full, split)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_flat_adamw_matches_torch_adamw(clip):
    """FlatAdamW's steps (with or without norm clipping) give torch.optim.AdamW's weights."""
    from lsnpc.corrector.training import FlatAdamW

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


@pytest.mark.parametrize("family", ["student", "gauss", "learned"])
@pytest.mark.parametrize("n_labels", [2, 6])  # fewer and more labels than latent dims (μ_κ folded or not)
def test_folded_correction_equals_the_module_computation(family, n_labels) -> None:
    """FoldedCorrector (BatchNorm folded, heads stacked) computes what the modules compute."""
    from lsnpc.corrector.inference import FoldedCorrector
    from lsnpc.corrector.model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder

    torch.manual_seed(0)
    encoder = StandardizedMLPEncoder(3, 8)
    encoder.set_standardization(torch.tensor([0.5, -1.0, 2.0]), torch.tensor([2.0, 0.5, 3.0]))
    model = LatentShiftModel(encoder, 8, n_labels, LatentConfig(family, 2.5, 3.0), latent_dim=4, label_embedding_dim=5, latent_mlp_dim=6)
    with torch.no_grad():  # non-trivial running statistics and affine parameters everywhere
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    model.eval()
    x, noisy = torch.randn(9, 3), torch.rand(9, n_labels)
    torch.manual_seed(1)
    reference = model.correct(x, noisy, n_samples=4)
    torch.manual_seed(1)
    folded = FoldedCorrector(model)(x, noisy, n_samples=4)
    torch.testing.assert_close(folded, reference, rtol=1e-5, atol=1e-6)


def _folded_toy_model(family: str = "student"):
    from lsnpc.corrector.model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder

    torch.manual_seed(0)
    model = LatentShiftModel(StandardizedMLPEncoder(3, 8), 8, 2, LatentConfig(family, 2.5, 3.0), latent_dim=4)
    return model.eval()


def test_pooled_draws_are_exactly_distributed():
    """Large batches take their standard draws from a pool: marginally still Student-t(ν) and Normal."""
    from lsnpc.corrector.inference import POOL_ROWS, FoldedCorrector

    corrector = FoldedCorrector(_folded_toy_model())
    shape = (5, POOL_ROWS, 4)  # more draws than the pool has rows: pooled
    torch.manual_seed(2)
    shifted, true = corrector._noise(shape, torch.zeros(POOL_ROWS, 8))
    assert corrector._pools is not None and shifted.shape == true.shape == shape
    pool_shifted, pool_true = corrector._pools
    assert stats.kstest(pool_shifted[:, 0].numpy(), stats.t(df=2.5).cdf).pvalue > 1e-3
    assert stats.kstest(pool_true[:, 1].numpy(), stats.norm.cdf).pvalue > 1e-3
    # every draw is a whole row of the pool, taken uniformly (a few thousand look like the distribution)
    rows = shifted.reshape(-1, 4)[:2000]
    assert (rows[:300, None, :] == pool_shifted[None, :, :]).all(-1).any(-1).all()
    assert stats.kstest(rows[:, 0].numpy(), stats.t(df=2.5).cdf).pvalue > 1e-3
    # rows are drawn independently for ẑ and z, and differ between Monte-Carlo samples
    assert not torch.equal(shifted[0], shifted[1])


def test_pooled_and_direct_monte_carlo_agree_on_average():
    """One input repeated 8192 times: the mean correction over the copies estimates E[y | x, h] — by the
    pooled path (one big batch) and the direct path (small batches) alike."""
    from lsnpc.corrector.inference import FoldedCorrector

    model = _folded_toy_model()
    x, noisy = torch.randn(1, 3).expand(8192, 3), torch.rand(1, 2).expand(8192, 2)
    torch.manual_seed(3)
    pooled = FoldedCorrector(model)(x, noisy, 5)
    direct = torch.cat([FoldedCorrector(model)(x[:1024], noisy[:1024], 5) for _ in range(8)])
    assert pooled.std(0).min() > 0  # really Monte Carlo
    torch.testing.assert_close(pooled.mean(0), direct.mean(0), atol=4 * float(direct.std(0).max()) / 90, rtol=0)


def test_folded_corrector_is_a_snapshot_of_the_weights():
    """Training the model after building the corrector does not change the corrector's output."""
    from lsnpc.corrector.inference import FoldedCorrector

    model = _folded_toy_model()
    corrector = FoldedCorrector(model)
    x, noisy = torch.randn(6, 3), torch.rand(6, 2)
    torch.manual_seed(4)
    before = corrector(x, noisy, 3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    torch.manual_seed(4)
    torch.testing.assert_close(corrector(x, noisy, 3), before)
    torch.manual_seed(4)
    assert not torch.allclose(FoldedCorrector(model)(x, noisy, 3), before)
