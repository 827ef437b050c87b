"""Where a graphed training step's GPU time goes, and the kernel choices that decided LSNPC's GPU step.

    python benchmarks/bench_gpu_kernels.py                 # on a CUDA machine
    python benchmarks/bench_gpu_kernels.py --device cpu    # a dry run of the code (no timings)

Inside a CUDA graph the launch cost is gone and a step's time is its kernels' own. Three tables:

1. The kernels of one batch-32 step of the hand-written noisy-batch gradient (``NoisyBatchStep`` with
   ``TrainStep``, run eagerly under ``torch.profiler``): count per step, microseconds per step and per
   call, the largest first; for 10k × 512 × 20 and 82,081 × 2,048 × 80 (COCO with ResNet-50 features),
   with the default kernels and with the CPU's (``gpu_kernels=False``, AdamW in one piece).
2. For each Linear shape of the COCO-scale model at batch 32: the forward (``addmm`` with the bias;
   ``mm`` then the bias added), the input and weight gradients, the bias gradient (a column sum; a
   product with a ones vector), each timed as 20 calls captured in one CUDA graph and replayed, with
   the kernels each launches; then the sum over the step's layers.
3. The fused AdamW update of the flat buffer handed to ATen's kernel in k views (k = 1 … 128), timed in
   a CUDA graph, and whether 5 updates equal the one-piece update bit for bit.

docs/speed.md, "On a GPU" holds the numbers of one run on an H100.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEVICE = torch.device("cuda")
REPEATS = 20  # calls captured per graph in table 2


def _on_gpu() -> bool:
    return DEVICE.type == "cuda"


def _sync() -> None:
    if _on_gpu():
        torch.cuda.synchronize()


def _spec():
    from lsnpc import LSNPC
    from lsnpc.corrector.config import ModelSpec

    return ModelSpec.from_params(LSNPC().get_params())


def _kernels(fn) -> list[tuple[str, float]]:
    """(name, µs) of each GPU kernel ``fn`` launches (empty on the CPU)."""
    if not _on_gpu():
        fn()
        return []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        _sync()
    return [(e.name, e.device_time) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _short(name: str) -> str:
    return name.split("(")[0].split("<")[0][-30:]


def _graph_us(fn) -> float:
    """Microseconds per call of ``fn``: REPEATS calls captured in a CUDA graph, replayed 50 times (nan on the
    CPU, where ``fn`` runs once to check that it runs)."""
    if not _on_gpu():
        fn()
        return float("nan")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    _sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPEATS):
            fn()
    graph.replay()
    _sync()
    started = time.perf_counter()
    for _ in range(50):
        graph.replay()
    _sync()
    return 1e6 * (time.perf_counter() - started) / (50 * REPEATS)


def profile_step(size: str, gpu_kernels: bool, warmup: int = 30, steps: int = 20) -> None:
    """Table 1 for one size and one kernel choice."""
    from bench_gpu import make_data

    from lsnpc.corrector import optim
    from lsnpc.corrector.backprop import NoisyBatchStep
    from lsnpc.corrector.config import build_model

    n, d, n_labels = (int(v) for v in size.split("x"))
    Xn, Pn = make_data(n, d, n_labels)
    X, P = torch.as_tensor(Xn, device=DEVICE), torch.as_tensor(Pn, device=DEVICE)
    torch.manual_seed(0)
    model = build_model(_spec(), n_features=d, n_labels=n_labels).to(DEVICE).train()
    model.data_encoder.set_standardization(X.mean(0), X.std(0))
    flat = optim.FlatAdamW([model], weight_decay=1e-5, views=None if gpu_kernels else 1)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))[: 32 * (warmup + steps)].to(DEVICE)
    batches = order.split(32)
    graphs, optim.USE_CUDA_GRAPHS = optim.USE_CUDA_GRAPHS, False  # eager: the profiler sees each kernel
    try:
        with flat:
            by_hand = NoisyBatchStep(model, beta=0.01, feed="sample", gpu_kernels=gpu_kernels)
            step = optim.TrainStep(flat, lambda idx: by_hand(X.index_select(0, idx), P.index_select(0, idx)),
                                   clip=2.0, n_values=3, device=DEVICE)
            for idx in batches[:warmup]:
                step(idx, lr=2e-4)

            def run() -> None:
                for idx in batches[warmup:]:
                    step(idx, lr=2e-4)

            kernels = _kernels(run)
    finally:
        optim.USE_CUDA_GRAPHS = graphs
    label = "the GPU's kernels (default)" if gpu_kernels else "the CPU's kernels"
    total = sum(us for _, us in kernels) / steps
    print(f"\n### {size.replace('x', ' × ')}, {label}: {len(kernels) / steps:.0f} kernels and "
          f"{total:.0f} µs of kernel time per step")
    by_name: dict[str, list[float]] = {}
    for name, us in kernels:
        by_name.setdefault(name, []).append(us)
    print("| kernel | per step | µs per step | µs per call |")
    print("|---|---|---|---|")
    for name, times in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:15]:
        print(f"| {_short(name)} | {len(times) / steps:.0f} | {sum(times) / steps:.1f} | "
              f"{sum(times) / len(times):.2f} |", flush=True)


def linear_layers(size: str = "82081x2048x80", batch: int = 32) -> None:
    """Table 2."""
    from lsnpc.corrector.config import build_model

    _, d, n_labels = (int(v) for v in size.split("x"))
    model = build_model(_spec(), n_features=d, n_labels=n_labels)
    shapes: dict[tuple[int, int], int] = {}
    for m in model.modules():
        if isinstance(m, nn.Linear):
            shapes[(m.out_features, m.in_features)] = shapes.get((m.out_features, m.in_features), 0) + 1
    totals: dict[str, float] = {}
    print(f"\n### Linear layers of the {size.replace('x', ' × ')} model, batch {batch}: µs per call in a CUDA graph")
    print("| layer (out × in, count) | computation | µs | kernels (µs each, profiled once) |")
    print("|---|---|---|---|")
    for (out, inn), count in sorted(shapes.items()):
        g, x = torch.randn(batch, out, device=DEVICE), torch.randn(batch, inn, device=DEVICE)
        weight, bias = torch.randn(out, inn, device=DEVICE), torch.randn(out, device=DEVICE)
        grad_w, grad_b, ones = torch.empty(out, inn, device=DEVICE), torch.empty(out, device=DEVICE), torch.ones(
            batch, device=DEVICE)
        weight_t = weight.t()
        ways = {
            "forward: addmm(b, x, Wᵀ) (the CPU's)": lambda: torch.addmm(bias, x, weight_t),
            "forward: mm(x, Wᵀ).add_(b) (the GPU's)": lambda: torch.mm(x, weight_t).add_(bias),
            "∂x: mm(g, W)": lambda: torch.mm(g, weight),
            "∂W: mm(gᵀ, x, out=∂W)": lambda: torch.mm(g.t(), x, out=grad_w),
            "∂b: sum(g, 0, out=∂b) (the CPU's)": lambda: torch.sum(g, 0, out=grad_b),
            "∂b: mv(gᵀ, ones, out=∂b) (the GPU's)": lambda: torch.mv(g.t(), ones, out=grad_b),
        }
        for name, fn in ways.items():
            us = _graph_us(fn)
            totals[name] = totals.get(name, 0.0) + us * count
            kernels = " + ".join(f"{_short(k)} {t:.1f}" for k, t in _kernels(fn))
            print(f"| {out} × {inn} (×{count}) | {name} | {us:.2f} | {kernels} |", flush=True)
    print("\n| computation, all the step's layers | µs per step |")
    print("|---|---|")
    for name, us in totals.items():
        print(f"| {name} | {us:.1f} |")


def adamw_pieces() -> None:
    """Table 3."""
    from lsnpc.corrector.config import build_model

    print("\n### fused AdamW over the flat buffer in k views: µs per update in a CUDA graph")
    print("| model | parameters | k | µs | equal to k = 1 after 5 updates |")
    print("|---|---|---|---|---|")
    for size in ("10000x512x20", "82081x2048x80"):
        _, d, n_labels = (int(v) for v in size.split("x"))
        model = build_model(_spec(), n_features=d, n_labels=n_labels)
        n = sum(p.numel() for p in model.parameters() if p.requires_grad)
        generator = torch.Generator(device=DEVICE).manual_seed(0)
        start = [torch.randn(n, device=DEVICE, generator=generator) for _ in range(4)]
        start[3].abs_()  # the second moment
        lr = torch.tensor(2e-4, device=DEVICE)
        one_piece = None
        for k in (1, 4, 16, 32, 64, 128):
            def updater(k=k):
                buffers = [t.clone() for t in start]
                step = torch.zeros((), device=DEVICE)
                pieces = [list(t.tensor_split(k)) for t in buffers]

                def update() -> None:
                    step.add_(1)
                    torch._fused_adamw_(*pieces, [], [step] * k, lr=lr, beta1=0.9, beta2=0.999, weight_decay=1e-5,
                                        eps=1e-8, amsgrad=False, maximize=False, grad_scale=None)

                return buffers, update

            us = _graph_us(updater()[1])
            buffers, update = updater()
            for _ in range(5):
                update()
            if one_piece is None:
                one_piece = buffers[0]
            same = bool(torch.equal(buffers[0], one_piece))
            print(f"| {size.replace('x', ' × ')} | {n:,} | {k} | {us:.2f} | {same} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of this script's code (no timings)")
    parser.add_argument("--skip", nargs="+", default=[], choices=("profile", "linear", "adamw"))
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    if _on_gpu() and not torch.cuda.is_available():
        raise SystemExit("bench_gpu_kernels.py needs a CUDA device (or --device cpu for a dry run)")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if _on_gpu() else 'CPU (dry run)'}", flush=True)
    if "profile" not in args.skip:
        for size in ("10000x512x20", "82081x2048x80"):
            for gpu_kernels in (False, True):
                profile_step(size, gpu_kernels)
    if "linear" not in args.skip:
        linear_layers()
    if "adamw" not in args.skip:
        adamw_pieces()


if __name__ == "__main__":
    main()
