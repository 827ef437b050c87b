"""The CUDA path: training steps captured as CUDA graphs against eager ones, a fit on the GPU, and
prediction there against the CPU's. These need a CUDA device and skip without one (CI has none);
benchmarks/bench_gpu.py measures the same path's speed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine): the GPU path is not tested here"
)


def _model(device: torch.device):
    from lsnpc import LSNPC
    from lsnpc.corrector.config import ModelSpec, build_model

    torch.manual_seed(0)
    return build_model(ModelSpec.from_params(LSNPC().get_params()), n_features=12, n_labels=5).to(device).train()


@pytest.mark.parametrize("gradient", ["autograd", "handwritten"])
def test_graphed_steps_train_as_eager_steps(monkeypatch, gradient) -> None:
    """60 noisy-batch steps, the last of each shape replayed from a CUDA graph, reach the parameters
    that 60 eager steps reach from the same weights and seed (float rounding apart)."""
    from lsnpc import LSNPC
    from lsnpc.corrector import optim, training
    from lsnpc.corrector.config import TrainingConfig

    config = TrainingConfig.from_params(LSNPC().get_params())
    device = torch.device("cuda")
    X, P = torch.randn(300, 12, device=device), torch.rand(300, 5, device=device)
    batches = list(torch.randperm(300, device=device).split(32)) * 6  # 10 batches, the last of 12 rows
    finals, captures = [], []
    for graphs in (False, True):
        monkeypatch.setattr(optim, "USE_CUDA_GRAPHS", graphs)
        model = _model(device)
        flat = optim.FlatAdamW([model], weight_decay=1e-5)
        with flat:
            grad = training._noisy_gradient(model, flat, X, P, config, device, kind=gradient)
            step = optim.TrainStep(flat, grad, clip=2.0, n_values=3, device=device)
            torch.cuda.manual_seed(7)
            for idx in batches:
                step(idx, lr=1e-3)
            sums = step.take_sums()
        captures.append(step.captures)
        finals.append((torch.cat([p.detach().reshape(-1) for p in model.parameters()]), sums))
    assert captures == [0, 2]  # the full batches' shape and the last batch's
    torch.testing.assert_close(finals[1][0], finals[0][0], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(finals[1][1], finals[0][1], rtol=1e-3)


def test_fit_on_cuda_matches_the_cpu_in_quality_and_predicts_like_the_cpu() -> None:
    """LSNPC(device="cuda") trains (graphs), and its fitted model predicts on the CPU what it predicts
    on the GPU; the GPU fit corrects about as well as the CPU fit."""
    from lsnpc import LSNPC
    from lsnpc.metrics import micro_f1

    from tests.conftest import make_noisy_problem

    data = make_noisy_problem(600, 0.25)
    X, Y, P = data["X"], data["Y"], data["P"]
    gpu = LSNPC(device="cuda", random_state=0).fit(X[:400], P[:400])
    cpu = LSNPC(random_state=0).fit(X[:400], P[:400])
    Q_gpu = gpu.predict_proba(X[400:], P[400:])
    assert np.isfinite(Q_gpu).all()
    gain_gpu = micro_f1(Y[400:], Q_gpu) - micro_f1(Y[400:], P[400:])
    gain_cpu = micro_f1(Y[400:], cpu.predict_proba(X[400:], P[400:])) - micro_f1(Y[400:], P[400:])
    assert gain_gpu > gain_cpu - 0.05
    from lsnpc.corrector.inference import predict_corrected

    on_cpu = predict_corrected(gpu.model_.cpu(), X[400:], P[400:], feed="probs", device=torch.device("cpu"))
    on_gpu = predict_corrected(gpu.model_.cuda(), X[400:], P[400:], feed="probs", device=torch.device("cuda"))
    np.testing.assert_allclose(on_gpu, on_cpu, atol=1e-5)


def test_student_fit_on_cuda_captures_and_lowers_its_loss() -> None:
    from lsnpc.corrector.student import LabelStudent, fit_student
    from lsnpc.corrector.model import StandardizedMLPEncoder

    device = torch.device("cuda")
    torch.manual_seed(0)
    X = torch.randn(500, 12, device=device)
    targets = torch.sigmoid(X[:, :4] * 2)
    student = LabelStudent(StandardizedMLPEncoder(12, 32), 32, 4).to(device)
    with torch.no_grad():
        before = float(F.binary_cross_entropy_with_logits(student.eval()(X), targets))
    result = fit_student(student, X, targets)
    with torch.no_grad():
        after = float(F.binary_cross_entropy_with_logits(student(X), targets))
    assert result.epochs >= 3 and after < before - 0.05


@pytest.mark.parametrize("setting", ["users_encoder", "clean_set", "gauss_autograd"])
def test_every_training_loop_is_captured_on_cuda(setting, monkeypatch) -> None:
    """A user's encoder (autograd runs its backward inside the graph), clean batches (eq. 13) and the
    autograd noisy step all train as CUDA graphs: no capture falls back to eager steps."""
    import warnings

    from torch import nn

    from lsnpc import LSNPC
    from lsnpc.corrector import training
    from tests.conftest import make_noisy_problem

    data = make_noisy_problem(500, 0.25)
    X, Y, P = data["X"], data["Y"], data["P"]
    kwargs, fit_kwargs = {}, {}
    if setting == "users_encoder":
        torch.manual_seed(0)
        kwargs["encoder"] = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.GELU(), nn.Dropout(0.1))
    elif setting == "clean_set":
        fit_kwargs = dict(X_clean=X[400:], y_clean=Y[400:], pred_probs_clean=P[400:])
    else:
        monkeypatch.setattr(training, "GPU_NOISY_GRADIENT", "autograd")
        kwargs["latent"] = "gauss"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*CUDA graph.*")
        model = LSNPC(device="cuda", random_state=0, epochs=4, **kwargs).fit(X[:400], P[:400], **fit_kwargs)
    Q = model.predict_proba(X[:400], P[:400])
    assert Q.shape == (400, 4) and np.isfinite(Q).all()
    assert all(np.isfinite(h["loss"]) for h in model.history_ if h["phase"] == "train")


def test_grad_cam_runs_a_network_on_the_gpu_from_images_in_host_memory() -> None:
    """grad_cam hands ``score`` the images on the layer's device (they were left on the CPU: a
    device-mismatch error for any network on a GPU)."""
    from torch import nn

    from lsnpc.explain import grad_cam

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 2)).cuda().eval()
    images = np.random.default_rng(0).normal(size=(3, 3, 16, 16)).astype(np.float32)
    maps = grad_cam(lambda x: torch.sigmoid(net(x)), net[0], images, [0, 1])
    on_cpu = grad_cam(lambda x: torch.sigmoid(net.cpu()(x)), net[0].cpu(), images, [0, 1])
    assert maps.shape == (3, 2, 16, 16) and np.isfinite(maps).all()
    np.testing.assert_allclose(maps, on_cpu, atol=1e-4)


def test_label_scores_find_neighbours_in_a_users_encoder_embedding_on_the_gpu() -> None:
    """With a user's encoder on the GPU, the neighbour search runs in its embedding, computed there in
    chunks of 1,024 rows (2,100 rows: three chunks, the last short); the embedding equals the CPU's."""
    from torch import nn

    from lsnpc import LSNPC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2100, 3, 4, 4)).astype(np.float32)
    Y = (rng.random((2100, 3)) < 0.4).astype(np.int64)
    P = np.clip(Y * 0.6 + 0.2, 0, 1).astype(np.float32)
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(64, 6))
    corrector = LSNPC(encoder=encoder, device="cuda", random_state=0, student=False, guard=False, epochs=2,
                      warm_start=False).fit(X, P)
    space = corrector._neighbour_space(X)
    with torch.no_grad():
        expected = corrector.model_.data_encoder.cpu().eval()(torch.as_tensor(X)).numpy()
    corrector.model_.data_encoder.cuda()
    np.testing.assert_allclose(space, expected, rtol=1e-4, atol=1e-5)
    scores = corrector.label_quality_scores(X, Y, P)
    assert scores.shape == (2100, 3) and np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()


def test_the_gpu_update_in_32_pieces_is_the_one_piece_update_bit_for_bit() -> None:
    from lsnpc.corrector.optim import FlatAdamW

    device = torch.device("cuda")
    nets = [_model(device), _model(device)]
    x = torch.randn(32, 12, device=device)
    one, split = FlatAdamW([nets[0]], weight_decay=1e-5, views=1), FlatAdamW([nets[1]], weight_decay=1e-5)
    assert len(split._pieces[0]) == 32
    with one, split:
        for opt, net in ((one, nets[0]), (split, nets[1])):
            torch.manual_seed(1)  # the same dropout masks for both
            for lr in (1e-3, 5e-4):
                opt.step(net.data_encoder(x).square().mean(), lr=torch.tensor(lr, device=device), clip=2.0)
    assert not torch.equal(one.flat, FlatAdamW([_model(device)], weight_decay=1e-5).flat)
    for a, b in ((one.flat, split.flat), (one.exp_avg, split.exp_avg), (one.exp_avg_sq, split.exp_avg_sq)):
        assert torch.equal(a, b)


def test_the_neighbour_search_on_the_gpu_finds_the_cpus_neighbours() -> None:
    """neighbour_label_rates(device="cuda") (float32 similarities, topk on the device) gives the CPU's
    rates but where a near-tie at the 50th neighbour falls the other way: then by one neighbour's 1/52."""
    from lsnpc.corrector.label_posterior import neighbour_label_rates

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(3000, 32)).astype(np.float32), (rng.random((3000, 6)) < 0.2).astype(np.int64)
    on_gpu, on_cpu = neighbour_label_rates(X, Y, device="cuda"), neighbour_label_rates(X, Y)
    differ = (np.abs(on_gpu - on_cpu) > 1e-12).any(1)
    assert differ.mean() < 0.01
    assert np.abs(on_gpu - on_cpu).max() <= 1 / 52 + 1e-12


def test_noisy_labels_choose_the_epoch_on_cuda_as_on_the_cpu() -> None:
    """``fit(labels=...)`` on a GPU: the held-out rows' noisy labels are scored against the correction
    computed on the device, every step is captured (no fallback warning), the chosen epoch is the
    argmax of the recorded scores, and the GPU fit corrects about as well as the CPU fit."""
    import warnings

    from lsnpc import LSNPC, simulate_noise
    from lsnpc.metrics import micro_f1

    from tests.conftest import make_noisy_problem

    data = make_noisy_problem(600, 0.25)
    X, Y, P = data["X"], data["Y"], data["P"]
    noisy = simulate_noise(Y[:400], "symmetric", 0.2, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*CUDA graph.*")
        gpu = LSNPC(device="cuda", random_state=0).fit(X[:400], P[:400], labels=noisy)
    cpu = LSNPC(random_state=0).fit(X[:400], P[:400], labels=noisy)
    for model in (gpu, cpu):
        assert model.selection_.startswith("noisy_f1")
        trained = [h for h in model.history_ if h["phase"] == "train"]
        scores = [h["holdout_noisy_micro_f1"] + h["holdout_noisy_macro_f1"] for h in trained]
        assert model.best_epoch_ == trained[int(np.argmax(scores))]["epoch"]
    base = micro_f1(Y[400:], P[400:])
    gain_gpu = micro_f1(Y[400:], gpu.predict_proba(X[400:], P[400:])) - base
    gain_cpu = micro_f1(Y[400:], cpu.predict_proba(X[400:], P[400:])) - base
    assert gain_gpu > gain_cpu - 0.05
    # beside a validation triple of 15 rows the noisy labels choose on the GPU too, and the triple is trained on
    small = LSNPC(device="cuda", random_state=0, epochs=3).fit(
        X[:400], P[:400], labels=noisy, X_val=X[400:415], y_val=Y[400:415], pred_probs_val=P[400:415])
    assert small.selection_ == "noisy_f1" and small.report_.plan.val_trained_on
