"""The hand-written gradient of a noisy batch against autograd on the objective it replaces."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from lsnpc.corrector.backprop import NoisyBatchStep
from lsnpc.corrector.model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder
from lsnpc.corrector.objective import unsupervised_loss
from lsnpc.corrector.backprop import aten_kernels
from lsnpc.corrector.optim import FlatAdamW
from lsnpc.corrector.training import _feed


def _model(family: str, user_encoder: bool) -> LatentShiftModel:
    torch.manual_seed(0)
    if user_encoder:  # with its own dropout: its random draws come first, as in the training loop
        encoder: nn.Module = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.2), nn.Tanh())
    else:
        encoder = StandardizedMLPEncoder(5, 16)
        encoder.set_standardization(torch.linspace(-1, 1, 5), torch.linspace(0.5, 2, 5))
    return LatentShiftModel(encoder, 16, 3, LatentConfig(family, 2.5, 3.0), latent_dim=4,
                            label_embedding_dim=8, latent_mlp_dim=6).train()


def _pre_norm_biases(model: nn.Module) -> set[str]:
    """Biases of Linear layers followed by a training-mode BatchNorm: the loss does not depend on them
    (BatchNorm subtracts the batch mean), so their gradient is float rounding in both computations and
    AdamW, which normalises it, moves them apart."""
    names = set()
    for prefix, module in model.named_modules():
        children = list(module.children()) if isinstance(module, nn.Sequential) else []
        for i, (first, second) in enumerate(zip(children, children[1:])):
            if isinstance(first, nn.Linear) and isinstance(second, nn.BatchNorm1d):
                names.add(f"{prefix}.{i}.bias")
    return names


@pytest.mark.parametrize("family", ["student", "gauss"])
@pytest.mark.parametrize("user_encoder", [False, True])
@pytest.mark.parametrize("feed", ["sample", "probs"])
@pytest.mark.parametrize("gpu_kernels", [False, True])
def test_noisy_batch_step_equals_autograd(family, user_encoder, feed, gpu_kernels) -> None:
    """Same seed, same model: the same loss, gradients, running statistics, and after AdamW steps the
    same training — the random draws are taken in the same order as the autograd path takes them. The
    step runs with oneDNN off, as the training loop runs it; the autograd reference with it on. The
    linear layers' GPU formulation (mm, then the bias; bias gradients as ones-vector products) is
    checked here too, on the CPU."""
    reference = _model(family, user_encoder)
    manual = copy.deepcopy(reference)
    x, probs = torch.randn(12, 5), torch.rand(12, 3)
    ours, theirs = FlatAdamW([manual], weight_decay=1e-5), FlatAdamW([reference], weight_decay=1e-5)
    noise_only = _pre_norm_biases(reference)
    with ours, theirs:
        step = NoisyBatchStep(manual, beta=0.3, feed=feed, gpu_kernels=gpu_kernels)
        assert (step.label_blocks[0].linear.ones is not None) == gpu_kernels
        for k in range(4):
            torch.manual_seed(k)
            loss, parts = unsupervised_loss(reference, reference.data_encoder(x), _feed(probs, feed), 0.3)
            theirs.grad.zero_()
            loss.backward()
            torch.manual_seed(k)
            with aten_kernels():
                values = step(x, probs)
            assert values == pytest.approx((parts.total, parts.reconstruction, parts.latent), rel=1e-5, abs=1e-6)
            for (name, a), b in zip(reference.named_parameters(), manual.parameters(), strict=True):
                if k == 0 or name not in noise_only:
                    torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)
            theirs.apply(lr=0.01, clip=2.0)
            ours.apply(lr=0.01, clip=2.0)
    for (name, a), b in zip(reference.named_parameters(), manual.parameters(), strict=True):
        if name not in noise_only:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
    for (name, a), b in zip(reference.named_buffers(), manual.buffers(), strict=True):
        if "running_mean" not in name:  # running means track the noise-only biases above
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


def test_noisy_batch_step_refuses_learned_nu() -> None:
    model = _model("learned", False)
    assert not NoisyBatchStep.supports(model)
    with pytest.raises(ValueError, match="learned"):
        NoisyBatchStep(model, beta=0.1, feed="sample")


@pytest.mark.parametrize("enabled", [True, False])
def test_training_leaves_the_onednn_switch_as_it_found_it(enabled) -> None:
    from lsnpc import LSNPC

    rng = np.random.default_rng(0)
    X, P = rng.normal(size=(80, 5)).astype(np.float32), rng.uniform(size=(80, 3)).astype(np.float32)
    previous = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = enabled
    try:
        LSNPC(epochs=1, n_threads=1, hidden_dim=8, latent_dim=4, label_embedding_dim=8, random_state=0).fit(X, P)
        assert torch.backends.mkldnn.enabled is enabled
    finally:
        torch.backends.mkldnn.enabled = previous


def test_a_users_encoder_keeps_onednn() -> None:
    """ATen's kernels replace oneDNN only in LSNPC's own networks: a user's encoder (a CNN, typically)
    runs with the switch as the user set it, in the hand-written step and in autograd's clean batches."""
    from lsnpc import LSNPC

    seen: list[bool] = []

    class Recording(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(5, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(torch.backends.mkldnn.enabled)
            return self.linear(x)

    rng = np.random.default_rng(0)
    X, P = rng.normal(size=(80, 5)).astype(np.float32), rng.uniform(size=(80, 3)).astype(np.float32)
    Y = (P > 0.5).astype(np.int64)
    assert torch.backends.mkldnn.enabled
    LSNPC(encoder=Recording(), epochs=1, n_threads=1, latent_dim=4, label_embedding_dim=8, random_state=0).fit(
        X[:60], P[:60], X_clean=X[60:], y_clean=Y[60:], pred_probs_clean=P[60:]
    )
    assert len(seen) > 3 and all(seen)


def test_the_training_loops_gradient_is_the_kind_asked_for() -> None:
    """training._noisy_gradient(kind=...) — what the loop, bench_gpu.py and the GPU tests build their
    noisy-batch gradient with: the hand-written and autograd kinds give one gradient from one seed; an
    unknown kind is refused with its name."""
    from lsnpc import LSNPC
    from lsnpc.corrector.config import TrainingConfig
    from lsnpc.corrector.training import _noisy_gradient

    config = TrainingConfig.from_params(LSNPC().get_params())
    X, P = torch.randn(40, 5), torch.rand(40, 3)
    idx = torch.arange(0, 40, 2)
    grads = []
    for kind in ("handwritten", "autograd"):
        model = _model("student", False)
        optimizer = FlatAdamW([model], weight_decay=1e-5)
        with optimizer:
            gradient = _noisy_gradient(model, optimizer, X, P, config, torch.device("cpu"), kind=kind)
            torch.manual_seed(3)
            with aten_kernels():
                values = gradient(idx)
            # the hand-written step reports host floats on the CPU, autograd's a detached tensor
            assert isinstance(values, tuple if kind == "handwritten" else torch.Tensor)
            grads.append(optimizer.grad.clone())
    noise_only = _pre_norm_biases(_model("student", False))
    keep = torch.cat([torch.full((p.numel(),), name not in noise_only)
                      for name, p in _model("student", False).named_parameters()])
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0][keep], grads[1][keep], rtol=1e-4, atol=1e-6)
    model = _model("student", False)
    optimizer = FlatAdamW([model], weight_decay=1e-5)
    with optimizer, pytest.raises(ValueError, match="kind must be 'handwritten', 'autograd' or None"):
        _noisy_gradient(model, optimizer, X, P, config, torch.device("cpu"), kind="fused")
