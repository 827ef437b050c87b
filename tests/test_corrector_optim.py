"""The training step without host round trips (the GPU's path), checked on the CPU where it can be:
the on-device clipping and tensor learning rate against the host ones, the step's bookkeeping, the
hand-written gradient's on-device loss values, and prediction from tensors."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lsnpc.corrector.optim import FlatAdamW, TrainStep, autograd_gradient


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("clip", [None, 0.5, 1e6])  # none, clipping, a bound never reached
def test_tensor_learning_rate_and_device_clipping_give_the_host_update(clip) -> None:
    """apply(lr=tensor) computes the clipping factor on the device and always passes it (dividing by 1
    where it does not clip); the weights are the host path's to float rounding."""
    host_net, device_net = _net(), _net()
    x, target = torch.randn(16, 6), torch.randn(16, 3)
    host, device = FlatAdamW([host_net], weight_decay=0.01), FlatAdamW([device_net], weight_decay=0.01)
    with host, device:
        for lr in (0.1, 0.05, 0.02):
            host.step(F.mse_loss(host_net(x), target).mul(50), lr=lr, clip=clip)
            device.step(F.mse_loss(device_net(x), target).mul(50), lr=torch.tensor(lr), clip=clip)
    moved = [not torch.equal(a, b) for a, b in zip(_net().parameters(), host_net.parameters(), strict=True)]
    assert all(moved)
    for a, b in zip(host_net.parameters(), device_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("views", [3, 7, 1000])  # uneven pieces; more pieces than parameters (53)
def test_the_update_in_pieces_is_the_update_in_one_piece(views) -> None:
    """FlatAdamW(views=k) hands the fused kernel k views of its buffers (the GPU's default, 32): the
    arithmetic is elementwise, so the weights and moments are the one-piece update's — to float rounding
    on the CPU, whose kernel rounds its vector loop and its scalar tail differently (bit for bit on a GPU:
    tests/test_gpu.py)."""
    one_net, split_net = _net(), _net()
    x, target = torch.randn(16, 6), torch.randn(16, 3)
    one, split = FlatAdamW([one_net], weight_decay=0.01), FlatAdamW([split_net], weight_decay=0.01, views=views)
    assert len(split._pieces[0]) == min(views, one.flat.numel())
    with one, split:
        for lr in (0.1, 0.05, 0.02):
            one.step(F.mse_loss(one_net(x), target).mul(50), lr=torch.tensor(lr), clip=0.5)
            split.step(F.mse_loss(split_net(x), target).mul(50), lr=torch.tensor(lr), clip=0.5)
    assert not torch.equal(one.flat, FlatAdamW([_net()], weight_decay=0.01).flat)
    for a, b in ((one.flat, split.flat), (one.exp_avg, split.exp_avg), (one.exp_avg_sq, split.exp_avg_sq)):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7)
    assert float(split.steps) == 3


@pytest.mark.parametrize("views", [0, -1, 2.0, True])
def test_views_must_be_a_positive_integer(views) -> None:
    with pytest.raises(ValueError, match="views must be a positive integer"):
        FlatAdamW([_net()], weight_decay=0.01, views=views)


def test_train_step_runs_the_optimiser_step_and_adds_up_its_values() -> None:
    """TrainStep(autograd_gradient) makes the updates FlatAdamW.step makes, and reports the values of
    each step: their sum since the last take_sums() (then reset) and the last step's."""
    X, Y = torch.randn(40, 6), torch.randn(40, 3)
    ours_net, reference_net = _net(), _net()
    ours, reference = FlatAdamW([ours_net], weight_decay=0.01), FlatAdamW([reference_net], weight_decay=0.01)
    batches = [torch.arange(0, 16), torch.arange(16, 32), torch.arange(32, 40)]

    def loss_fn(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loss = F.mse_loss(ours_net(X.index_select(0, idx)), Y.index_select(0, idx))
        return loss, torch.stack([loss.detach(), 2 * loss.detach()])

    losses = []
    with ours, reference:
        step = TrainStep(ours, autograd_gradient(ours, loss_fn), clip=1.0, n_values=2, device=torch.device("cpu"))
        for idx in batches:
            loss = F.mse_loss(reference_net(X[idx]), Y[idx])
            losses.append(float(loss.detach()))
            reference.step(loss, lr=0.05, clip=1.0)
            step(idx, lr=0.05)
        assert step.calls == 3 and step.captures == 0
        np.testing.assert_allclose(step.last_values(), [losses[-1], 2 * losses[-1]], rtol=1e-6)
        np.testing.assert_allclose(step.take_sums(), [sum(losses), 2 * sum(losses)], rtol=1e-6)
        np.testing.assert_array_equal(step.take_sums(), [0.0, 0.0])
    for a, b in zip(reference_net.parameters(), ours_net.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_step_without_autograd_runs_in_inference_mode_with_the_same_numbers() -> None:
    """TrainStep(autograd=False) on the CPU runs the gradient and the update in inference mode (each
    operation skips autograd's dispatch layers) and trains bit for bit as the same step under no_grad;
    the training loop asks for it exactly when the hand-written gradient needs no autograd (LSNPC's own
    encoder, not a user's)."""
    from lsnpc.corrector.backprop import NoisyBatchStep, aten_kernels
    from lsnpc.corrector.model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder
    from lsnpc.corrector.training import _HandwrittenRows

    def model(encoder: nn.Module | None = None) -> LatentShiftModel:
        torch.manual_seed(0)
        return LatentShiftModel(encoder or StandardizedMLPEncoder(5, 16), 16, 3, LatentConfig("student", 2.5, 3.0),
                                latent_dim=4, label_embedding_dim=8, latent_mlp_dim=6).train()

    X, P = torch.randn(40, 5), torch.rand(40, 3)
    results, modes = [], []
    for autograd in (True, False):
        net = model()
        optimizer = FlatAdamW([net], weight_decay=1e-5)
        with optimizer:
            rows = _HandwrittenRows(NoisyBatchStep(net, beta=0.3, feed="sample"), X, P)
            assert rows.needs_autograd is False

            def gradient(idx: torch.Tensor, rows: _HandwrittenRows = rows) -> tuple[float, float, float]:
                modes.append(torch.is_inference_mode_enabled())
                return rows(idx)

            step = TrainStep(optimizer, gradient, clip=2.0, n_values=3, device=torch.device("cpu"), autograd=autograd)
            torch.manual_seed(1)
            with aten_kernels():
                for idx in (torch.arange(0, 20), torch.arange(20, 40), torch.arange(0, 40, 2)):
                    step(idx, lr=0.01)
            results.append((optimizer.flat.clone(), step.take_sums()))
        assert not torch.is_inference_mode_enabled()
    assert modes == [False] * 3 + [True] * 3
    torch.testing.assert_close(results[1][0], results[0][0], rtol=0, atol=0)
    np.testing.assert_array_equal(results[1][1], results[0][1])
    user = model(nn.Sequential(nn.Linear(5, 16), nn.Tanh()))
    with FlatAdamW([user], weight_decay=0.0):
        assert NoisyBatchStep(user, beta=0.3, feed="sample").needs_autograd is True


@pytest.mark.parametrize("family", ["student", "gauss"])
def test_handwritten_step_loss_values_on_the_device_equal_the_host_ones(family) -> None:
    """NoisyBatchStep computes its loss values on the host on the CPU and as a tensor elsewhere; the
    two arithmetic paths agree (the tensor path forced here on the CPU)."""
    from lsnpc.corrector.backprop import NoisyBatchStep
    from lsnpc.corrector.model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder

    torch.manual_seed(0)
    model = LatentShiftModel(StandardizedMLPEncoder(5, 16), 16, 3, LatentConfig(family, 2.5, 3.0), latent_dim=4,
                             label_embedding_dim=8, latent_mlp_dim=6).train()
    twin = copy.deepcopy(model)
    x, probs = torch.randn(12, 5), torch.rand(12, 3)
    with FlatAdamW([model], weight_decay=0.0), FlatAdamW([twin], weight_decay=0.0):
        host, device = NoisyBatchStep(model, beta=0.3, feed="sample"), NoisyBatchStep(twin, beta=0.3, feed="sample")
        assert host.device_values is False
        device.device_values = True
        torch.manual_seed(1)
        expected = host(x, probs)
        torch.manual_seed(1)
        got = device(x, probs)
    assert isinstance(expected, tuple) and isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.tolist(), expected, rtol=1e-5, atol=1e-6)


def test_predict_corrected_takes_tensors_or_arrays() -> None:
    from lsnpc import LSNPC
    from lsnpc.corrector.inference import predict_corrected

    rng = np.random.default_rng(0)
    X, P = rng.normal(size=(60, 5)).astype(np.float32), rng.uniform(size=(60, 3)).astype(np.float32)
    model = LSNPC(epochs=1, hidden_dim=8, latent_dim=4, label_embedding_dim=8, random_state=0).fit(X, P)
    cpu = torch.device("cpu")
    from_arrays = predict_corrected(model.model_, X, P, feed="probs", device=cpu)
    from_tensors = predict_corrected(model.model_, torch.as_tensor(X), torch.as_tensor(P), feed="probs", device=cpu)
    assert from_tensors.dtype == np.float32 and from_tensors.shape == (60, 3)
    np.testing.assert_array_equal(from_arrays, from_tensors)
