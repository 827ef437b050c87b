"""Speed of LSNPC on a CUDA GPU: training steps (eager as before, and captured as CUDA graphs), whole
fits at COCO scale, prediction, and the quality of a GPU fit against the CPU's.

    # on a machine with the shared data (CPU): the scene problem and its CPU results, once
    python benchmarks/bench_gpu.py --prepare-scene scene_sym30.npz
    # on the GPU machine
    python benchmarks/bench_gpu.py --scene scene_sym30.npz --out gpu.json

Tables (every time from ``torch.cuda.synchronize`` to ``torch.cuda.synchronize``):

1. ms per batch-32 training step on 10k × 512 × 20 and 82,081 × 2,048 × 80 (COCO's size with
   ResNet-50 features) random data, the same networks (``build_model`` at LSNPC's defaults):
   the reference loop's step (``reference_loop.py``: ``torch.optim.AdamW``, ``torch.distributions``,
   ``clip_grad_norm_``; its batches already indexed on the device, which spares it the DataLoader),
   LSNPC's step as it ran before this change (autograd, the clipping norm read on the host),
   the same without host reads but launched eagerly, and captured as a CUDA graph, with autograd's
   gradient and with the hand-written one (``NoisyBatchStep``); "handwritten-graphs-previous" is the
   graphed hand-written step with the CPU's kernel choices (``addmm``, column sums, AdamW in one
   piece), as it was before the GPU got its own.
2. How far a graphed run is from an eager one: max |Δ| of the parameters after 200 steps from the same
   weights and seed.
3. Whole fits at COCO scale: ``LSNPC(device="cuda")`` (no validation triple), the same given the
   training rows' observed labels (``labels=``: 10% held out, the epoch chosen by F1 against them) and
   ``LSNPC.paper`` (20 epochs of batch 32), with graphs; the eager default fit for comparison (``--eager-fit``).
4. Prediction throughput at COCO scale (5 Monte-Carlo samples): the old chunking (1,024 rows, each
   chunk copied back to the host) and ``predict_corrected``'s GPU chunks, inputs resident on the device.
5. Scene, 30% symmetric noise (``--scene``): test micro/macro-F1 and fit time of ``LSNPC()`` with the
   validation triple, without any label, and with the noisy training labels alone (files made before
   that mode have no such row), on the GPU eager and graphed, beside the CPU's numbers stored in the file.
6. ResNet-50 with random weights: spatial features of generated images (``lsnpc.features.ImageEncoder``)
   and GradCAM maps (``lsnpc.explain.grad_cam``), images per second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS: dict[str, object] = {}
DEVICE = "cuda"  # --device cpu: a dry run of this script's code on a machine without a GPU
COCO = "82081x2048x80"


def make_data(n: int, d: int, n_labels: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random features and probabilities from a random linear model (speed does not depend on meaning)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    W = rng.standard_normal((d, n_labels), dtype=np.float32) / np.sqrt(d)
    P = (1 / (1 + np.exp(-(X @ W) * 2 + 1.5))).astype(np.float32)
    return X, P


def section(name: str):
    def wrap(fn):
        def run(*args, **kwargs):
            print(f"\n## {name}", flush=True)
            started = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            except Exception:  # noqa: BLE001 - report and go on to the next table
                traceback.print_exc()
                out = {"error": traceback.format_exc(limit=3)}
            print(f"({time.perf_counter() - started:.1f} s)", flush=True)
            RESULTS[name] = out
            return out

        return run

    return wrap


def _sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _sync_time(fn, *args) -> float:
    _sync()
    started = time.perf_counter()
    fn(*args)
    _sync()
    return time.perf_counter() - started


def _step_runner(variant: str, model, X, P, device):
    """(enter, step(idx), exit) of one way of training ``model`` on rows ``idx`` of (X, P)."""
    import torch

    from lsnpc import LSNPC
    from lsnpc.corrector import optim, training
    from lsnpc.corrector.backprop import NoisyBatchStep
    from lsnpc.corrector.config import TrainingConfig
    from lsnpc.corrector.objective import unsupervised_loss
    from reference_loop import reference_step

    if variant == "reference":
        opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=1e-5)
        return (lambda: None), (lambda idx: reference_step(model, opt, X[idx], P[idx], 0.01)), (lambda: None)
    previous = variant == "handwritten-graphs-previous"  # the step before the GPU's own kernel choices
    flat = optim.FlatAdamW([model], weight_decay=1e-5, views=1 if previous else None)
    if variant == "before":  # autograd, clipping norm read on the host, float lr: the code before graphs
        def step(idx):
            h = model.data_encoder(X[idx])
            loss, _ = unsupervised_loss(model, h, torch.bernoulli(P[idx]), 0.01)
            flat.step(loss, lr=2e-4, clip=2.0)

        return flat.__enter__, step, (lambda: flat.__exit__(None, None, None))
    graphs = "graphs" in variant
    holder = {}
    config = TrainingConfig.from_params(LSNPC().get_params())  # β = 0.01, ŷ sampled: the training loop's

    def enter():
        flat.__enter__()
        optim.USE_CUDA_GRAPHS = graphs
        if previous:  # addmm and column sums, as on the CPU
            by_hand = NoisyBatchStep(model, beta=config.beta, feed=config.train_feed, gpu_kernels=False)
            gradient = lambda idx: by_hand(X.index_select(0, idx), P.index_select(0, idx))  # noqa: E731
        else:
            gradient = training._noisy_gradient(model, flat, X, P, config, device, kind=variant.split("-")[0])
        holder["step"] = optim.TrainStep(flat, gradient, clip=2.0, n_values=3, device=device)
        optim.USE_CUDA_GRAPHS = True

    return enter, (lambda idx: holder["step"](idx, lr=2e-4)), (lambda: flat.__exit__(None, None, None))


VARIANTS = ("reference", "before", "autograd-eager", "autograd-graphs", "handwritten-eager",
            "handwritten-graphs-previous", "handwritten-graphs")


@section("1. training step, ms (batch 32)")
def bench_steps(sizes: list[str], steps: int) -> dict:
    import torch

    from lsnpc import LSNPC
    from lsnpc.corrector.config import ModelSpec, build_model

    device = torch.device(DEVICE)
    spec = ModelSpec.from_params(LSNPC().get_params())
    out: dict[str, dict[str, float]] = {}
    for size in sizes:
        n, d, n_labels = (int(v) for v in size.split("x"))
        Xn, Pn = make_data(n, d, n_labels)
        X, P = torch.as_tensor(Xn, device=device), torch.as_tensor(Pn, device=device)
        gen = torch.Generator().manual_seed(0)
        order = torch.randperm(n, generator=gen)[: 32 * (steps + 60)].to(device).split(32)
        row: dict[str, float] = {}
        for variant in VARIANTS:
            torch.manual_seed(0)
            model = build_model(spec, n_features=d, n_labels=n_labels).to(device).train()
            model.data_encoder.set_standardization(X.mean(0), X.std(0))
            enter, step, leave = _step_runner(variant, model, X, P, device)
            enter()
            try:
                for idx in order[:60]:  # warm-up (captures happen here)
                    step(idx)

                def timed():
                    for idx in order[60 : 60 + steps]:
                        step(idx)

                row[variant] = 1000 * _sync_time(timed) / steps
            except Exception as exc:  # noqa: BLE001
                row[variant] = float("nan")
                print(f"{size} {variant}: {type(exc).__name__}: {exc}", flush=True)
            finally:
                leave()
        out[size] = row
        ref = row["reference"]
        print(f"\n{size.replace('x', ' × ')}, {steps} steps")
        print("| step | ms/step | vs reference | vs before |")
        print("|---|---|---|---|")
        for variant in VARIANTS:
            ms = row[variant]
            print(f"| {variant} | {ms:.3f} | {ref / ms:.1f}× | {row['before'] / ms:.1f}× |", flush=True)
    return out


@section("2. graphs against eager: max |Δ parameter| after 200 steps")
def bench_equality() -> dict:
    import torch

    from lsnpc import LSNPC
    from lsnpc.corrector.config import ModelSpec, build_model

    device = torch.device(DEVICE)
    spec = ModelSpec.from_params(LSNPC().get_params())
    Xn, Pn = make_data(4000, 64, 10)
    X, P = torch.as_tensor(Xn, device=device), torch.as_tensor(Pn, device=device)
    order = torch.randperm(4000, generator=torch.Generator().manual_seed(1))[: 32 * 200].to(device).split(32)
    out = {}
    for kind in ("autograd", "handwritten"):
        finals = []
        for graphs in (False, True):
            torch.manual_seed(0)
            model = build_model(spec, n_features=64, n_labels=10).to(device).train()
            enter, step, leave = _step_runner(f"{kind}-{'graphs' if graphs else 'eager'}", model, X, P, device)
            enter()
            torch.cuda.manual_seed(123)
            for idx in order:
                step(idx)
            leave()
            finals.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
        diff = float((finals[0] - finals[1]).abs().max())
        scale = float(finals[0].abs().max())
        out[kind] = {"max_abs_diff": diff, "max_abs_param": scale}
        print(f"{kind}: max |Δ| = {diff:.3g} (largest |parameter| {scale:.3g})", flush=True)
    return out


def _fit(kind: str, X, P, labels=None, **kwargs) -> tuple[float, object]:
    """Time ``LSNPC(device=DEVICE)`` ("default", "labels": given ``labels``) or ``LSNPC.paper`` ("paper")."""
    from lsnpc import LSNPC

    model = LSNPC.paper(device=DEVICE, random_state=0) if kind == "paper" else LSNPC(device=DEVICE, random_state=0)
    model.set_params(**kwargs)
    _sync()
    started = time.perf_counter()
    model.fit(X, P, labels=labels if kind == "labels" else None)
    _sync()
    return time.perf_counter() - started, model


@section("3. fits at COCO scale")
def bench_fits(eager_fit: bool, noisy_gradients: list[str], size: str) -> dict:
    from lsnpc.corrector import optim, training

    print(size.replace("x", " × "))
    X, P = make_data(*(int(v) for v in size.split("x")))
    # observed labels for the "labels" fit: each drawn from its probability (their meaning does not matter)
    labels = (np.random.default_rng(1).random(P.shape, dtype=np.float32) < P).astype(np.int8)
    _fit("default", X[:2000], P[:2000], epochs=1)  # CUDA context, kernels, cuBLAS: out of the timings
    out = {}
    chosen = training.GPU_NOISY_GRADIENT
    for gradient in noisy_gradients:
        training.GPU_NOISY_GRADIENT = gradient
        for kind in ("default", "labels", "paper"):
            seconds, model = _fit(kind, X, P, labels)
            steps = sum(1 for h in model.history_ if h["phase"] == "train")
            key = f"{kind} ({gradient}, graphs)"
            out[key] = {"seconds": seconds, "epochs": steps}
            print(f"| {key} | {seconds:.1f} s | {steps} epochs |", flush=True)
    training.GPU_NOISY_GRADIENT = chosen
    if eager_fit:
        optim.USE_CUDA_GRAPHS = False
        try:
            seconds, model = _fit("default", X, P)
        finally:
            optim.USE_CUDA_GRAPHS = True
        out["default (autograd, eager)"] = {"seconds": seconds}
        print(f"| default (autograd, eager) | {seconds:.1f} s |", flush=True)
    RESULTS["_model"] = model
    return out


@section("4. prediction at COCO scale, samples/s (inputs on the device, 5 Monte-Carlo samples)")
def bench_predict(repeats: int, size: str) -> dict:
    import torch

    from lsnpc import LSNPC
    from lsnpc.corrector.inference import FoldedCorrector, predict_corrected

    device = torch.device(DEVICE)
    model = RESULTS.get("_model")
    n, d, n_labels = (int(v) for v in size.split("x"))
    if model is None:
        X, P = make_data(4000, d, n_labels)
        model = LSNPC(device=DEVICE, random_state=0, epochs=1).fit(X, P)
    Xn, Pn = make_data(n, d, n_labels, seed=1)
    X, P = torch.as_tensor(Xn, device=device), torch.as_tensor(Pn, device=device)
    net = model.model_

    def old():  # the chunking before: 1,024 rows, each chunk's answer copied to the host
        correct = FoldedCorrector(net)
        out = np.empty(Pn.shape, dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(X), 1024):
                out[start : start + 1024] = correct(X[start : start + 1024], P[start : start + 1024]).cpu().numpy()
        return out

    def new():
        return predict_corrected(net, X, P, feed="probs", device=device)

    a, b = old(), new()
    out = {"max_abs_diff_old_new": float(np.abs(a - b).max())}
    for name, fn in (("old chunks", old), ("predict_corrected", new)):
        best = min(_sync_time(fn) for _ in range(repeats))
        out[name] = len(Xn) / best
        print(f"| {name} | {len(Xn) / best:,.0f} samples/s |", flush=True)
    Q = model.predict_proba(Xn, Pn)  # whole estimator, numpy in and out (student + guard, host copies)
    best = min(_sync_time(model.predict_proba, Xn, Pn) for _ in range(repeats))
    out["LSNPC.predict_proba (numpy in/out)"] = len(Xn) / best
    print(f"| LSNPC.predict_proba, numpy in and out | {len(Xn) / best:,.0f} samples/s |", flush=True)
    print(f"old vs new chunks: max |Δ| {out['max_abs_diff_old_new']:.2g}; output finite: {np.isfinite(Q).all()}")
    return out


def _scene_fit_kwargs(mode: str, data) -> dict:
    """fit's keywords for table 5's modes: "val" the clean validation triple, "noval" nothing, "labels"
    the training rows' noisy labels alone."""
    if mode == "val":
        return dict(X_val=data["X_val"], y_val=data["y_val"], pred_probs_val=data["P_val"])
    if mode == "labels":
        return dict(labels=data["y_noisy"])
    return {}


@section("5. scene, 30% symmetric noise: GPU against CPU")
def bench_scene(path: str, runs: list[str]) -> dict:
    from lsnpc import LSNPC
    from lsnpc.corrector import optim, training
    from lsnpc.metrics import macro_f1, micro_f1

    data = np.load(path)
    out = {"base": [float(data["base"][0]), float(data["base"][1])]}
    print(f"base: micro {100 * data['base'][0]:.1f}, macro {100 * data['base'][1]:.1f}")
    print(f"noisy-batch gradient on the GPU: {training.GPU_NOISY_GRADIENT}")
    print("| run | micro | macro | fit s | CPU micro | CPU macro |")
    print("|---|---|---|---|---|---|")
    for mode in ("val", "noval", "labels"):
        if f"cpu_{mode}" not in data:  # a file from before the labels mode
            continue
        cpu = data[f"cpu_{mode}"]
        for graphs in (run == "graphs" for run in runs):
            optim.USE_CUDA_GRAPHS = graphs
            kwargs = _scene_fit_kwargs(mode, data)
            started = time.perf_counter()
            model = LSNPC(device=DEVICE, random_state=0).fit(data["X"], data["P"], **kwargs)
            seconds = time.perf_counter() - started
            Q = model.predict_proba(data["X_test"], data["P_test"])
            mi, ma = micro_f1(data["y_test"], Q), macro_f1(data["y_test"], Q)
            name = f"{mode}, {'graphs' if graphs else 'eager'}"
            out[name] = {"micro": mi, "macro": ma, "seconds": seconds}
            print(f"| {name} | {100 * mi:.1f} | {100 * ma:.1f} | {seconds:.1f} | {100 * cpu[0]:.1f} | "
                  f"{100 * cpu[1]:.1f} |", flush=True)
    optim.USE_CUDA_GRAPHS = True
    return out


@section("6. ResNet-50 (random weights): spatial features and GradCAM, images/s")
def bench_vision(n_images: int) -> dict:
    import torch
    import torchvision
    from PIL import Image

    from lsnpc.explain import grad_cam, resnet_backbone
    from lsnpc.features import ImageEncoder

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)) for _ in range(n_images)]
    encoder = ImageEncoder("resnet50", weights=None, output="spatial", progress=False)
    encoder.encode(images[:64], batch_size=64, device=DEVICE)  # weights on the device, cuDNN warmed up
    seconds = _sync_time(lambda: encoder.encode(images, batch_size=64, device=DEVICE))
    shape = encoder.encode(images[:2], batch_size=2, device=DEVICE).shape
    out = {"features_images_per_s": n_images / seconds, "feature_shape": list(shape)}
    print(f"| spatial features, {n_images} generated 256² images, batch 64 | {n_images / seconds:,.0f} images/s | "
          f"{tuple(shape[1:])} |", flush=True)

    torch.manual_seed(0)
    backbone = resnet_backbone(torchvision.models.resnet50(weights=None)).to(DEVICE).eval()
    head = torch.nn.Linear(2048, 20).to(DEVICE).eval()
    x = torch.randn(min(n_images, 64), 3, 224, 224, device=DEVICE)

    def cams():
        return grad_cam(lambda v: torch.sigmoid(head(backbone(v))), backbone.layer4, x, [0, 1, 2, 3])

    maps = cams()
    seconds = min(_sync_time(cams) for _ in range(3))
    out["gradcam_images_per_s"] = len(x) / seconds
    out["gradcam_maps_finite"] = bool(np.isfinite(maps).all())
    print(f"| GradCAM, 4 labels, {len(x)} images of 224² | {len(x) / seconds:,.0f} images/s | maps {maps.shape}, "
          f"finite {np.isfinite(maps).all()} |", flush=True)
    return out


def prepare_scene(path: str, home: str | None) -> None:
    """Scene's canonical splits, 30% symmetric noise (seed 0), the base MLP's probabilities, and
    LSNPC()'s CPU test F1 with the validation triple, without labels and with the noisy labels alone, saved to
    ``path`` (npz)."""
    from bench_quality import DEFAULT_HOME, load_arrays

    from lsnpc import LSNPC, MLPClassifier, simulate_noise
    from lsnpc.data import paper_splits
    from lsnpc.metrics import macro_f1, micro_f1

    X, Y, Xt, Yt = load_arrays("scene", home or str(DEFAULT_HOME), 0, None)
    split = paper_splits(len(X), random_state=0)
    tr, v0 = split["train"], split["val0"]
    Y_noisy = simulate_noise(Y[tr], "symmetric", 0.3, random_state=0)[0]
    base = MLPClassifier(random_state=0, n_threads=1).fit(X[tr], Y_noisy, X_val=X[v0], y_val=Y[v0])
    P, P_val, P_test = (base.predict_proba(a) for a in (X[tr], X[v0], Xt))
    arrays = dict(X=X[tr], P=P, X_val=X[v0], y_val=Y[v0], P_val=P_val, X_test=Xt, P_test=P_test, y_test=Yt,
                  y_noisy=Y_noisy, base=np.array([micro_f1(Yt, P_test), macro_f1(Yt, P_test)]))
    for mode in ("val", "noval", "labels"):
        kwargs = _scene_fit_kwargs(mode, arrays)
        Q = LSNPC(random_state=0, n_threads=1).fit(X[tr], P, **kwargs).predict_proba(Xt, P_test)
        arrays[f"cpu_{mode}"] = np.array([micro_f1(Yt, Q), macro_f1(Yt, Q)])
        print(mode, arrays[f"cpu_{mode}"])
    tmp = Path(path).with_suffix(".part.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare-scene", metavar="NPZ", help="write the scene problem and its CPU results, then stop")
    parser.add_argument("--data-home", default=None, help="the shared data folder (with --prepare-scene)")
    parser.add_argument("--scene", metavar="NPZ", help="table 5 from this file (made by --prepare-scene)")
    parser.add_argument("--scene-runs", nargs="+", default=["eager", "graphs"], choices=("eager", "graphs"))
    parser.add_argument("--gpu-gradient", choices=("autograd", "handwritten"), default=None,
                        help="the noisy-batch gradient of tables 4 and 5 (default: the library's)")
    parser.add_argument("--steps", type=int, default=300, help="timed steps per variant in table 1")
    parser.add_argument("--sizes", nargs="+", default=["10000x512x20", "82081x2048x80"])
    parser.add_argument("--eager-fit", action="store_true", help="also the eager default fit at COCO scale")
    parser.add_argument("--fit-gradients", nargs="+", default=["autograd", "handwritten"],
                        choices=("autograd", "handwritten"), help="noisy-batch gradients of table 3")
    parser.add_argument("--skip", nargs="+", default=[], choices=("steps", "equality", "fits", "predict", "vision"))
    parser.add_argument("--images", type=int, default=1024, help="generated images of table 6")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit-size", default=COCO, help="n x d x L of tables 3 and 4")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the script (timings meaningless)")
    parser.add_argument("--out", help="write every number here (JSON)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    for path in (args.prepare_scene, args.out):
        if path and Path(path).exists():
            parser.error(f"{path} exists; this script writes only new files (remove it or name another)")
    if args.prepare_scene:
        prepare_scene(args.prepare_scene, args.data_home)
        return
    import torch

    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA device (or --device cpu for a dry run)")
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (dry run)"
    print(f"torch {torch.__version__}, {name}", flush=True)
    if "steps" not in args.skip:
        bench_steps(args.sizes, args.steps)
    if "equality" not in args.skip:
        bench_equality()
    if "fits" not in args.skip:
        bench_fits(args.eager_fit, args.fit_gradients, args.fit_size)
    if "predict" not in args.skip:
        bench_predict(args.repeats, args.fit_size)
    if args.gpu_gradient:
        from lsnpc.corrector import training

        training.GPU_NOISY_GRADIENT = args.gpu_gradient
    if args.scene:
        bench_scene(args.scene, args.scene_runs)
    if "vision" not in args.skip:
        bench_vision(args.images)
    if args.out:
        RESULTS.pop("_model", None)
        tmp = Path(args.out).with_name(Path(args.out).name + ".part")
        tmp.write_text(json.dumps(RESULTS, indent=1, default=str))
        tmp.replace(args.out)


if __name__ == "__main__":
    main()
