"""Speed of the LSNPC corrector on the CPU: training epochs against the authors'-style loop, the
default fit, and prediction throughput.

    python benchmarks/bench_corrector.py                       # both tables, the three standard sizes
    python benchmarks/bench_corrector.py --sizes 10000x512x20 --threads 1
    python benchmarks/bench_corrector.py --threads 1 --skip epochs fit --step-runs 15   # steps alone

Table 1 trains the same networks (``build_model`` at LSNPC's defaults) on 10k × 512 × 20 for
``--epochs`` epochs of batch 32, twice: with LSNPC's training loop (``LSNPC(epochs=E, selection="last",
warm_start=False)``, the seconds of each epoch from ``history_``) and with ``reference_loop.py`` (the
authors' way: DataLoader, torch.optim.AdamW, torch.distributions.StudentT); the ratio is the
reference's median epoch over ours. Both run in this process, one after the other, so they see the same
machine. Table 2: the default ``LSNPC().fit`` (no validation triple: 600 steps, ELBO selection) and
``predict_proba`` on 100k samples (after one warm-up call) ``--repeats`` times, median and best
(this shared virtual machine's speed drifts by up to 1.5x). Data: random features with
probabilities from a random linear model (speed does not depend on their meaning).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SIZES = ("2000x100x10", "10000x512x20", "50000x2048x80")
TARGETS = {"10000x512x20": "fit ≤ 20 s, predict ≥ 100,000/s"}


def make_data(n: int, d: int, n_labels: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    W = rng.normal(size=(d, n_labels)).astype(np.float32) / np.sqrt(d)
    P = (1 / (1 + np.exp(-(X @ W) * 2 + 1.5))).astype(np.float32)
    return X, P


def bench_epochs(size: str, epochs: int, threads: int | None) -> dict[str, float]:
    """Median seconds per epoch of batch 32: LSNPC's loop and the reference loop, same data and model."""
    import torch

    from lsnpc import LSNPC
    from lsnpc._torch import num_threads
    from lsnpc.corrector.config import ModelSpec, build_model
    from reference_loop import reference_epochs

    n, d, n_labels = (int(v) for v in size.split("x"))
    X, P = make_data(n, d, n_labels)
    ours = LSNPC(epochs=epochs, selection="last", warm_start=False, random_state=0, n_threads=threads).fit(X, P)
    our_epochs = [h["seconds"] for h in ours.history_ if h["phase"] == "train"]
    params = LSNPC().get_params()
    with num_threads(threads):
        torch.manual_seed(0)
        model = build_model(ModelSpec.from_params(params), n_features=d, n_labels=n_labels)
        ref_epochs = reference_epochs(model, torch.as_tensor(X), torch.as_tensor(P), epochs=epochs)
    steps = n // 32
    ours_s, ref_s = statistics.median(our_epochs), statistics.median(ref_epochs)
    return {"ours": ours_s, "reference": ref_s, "ours_ms": 1000 * ours_s / steps, "ref_ms": 1000 * ref_s / steps}


def bench_steps(size: str, threads: int | None, runs: int, steps: int) -> dict[str, float]:
    """Best of ``runs`` timings of ``steps`` consecutive batch-32 steps (ms per step): LSNPC's step as its
    training loop runs it (a TrainStep of NoisyBatchStep + FlatAdamW, oneDNN off, inference mode) and the
    reference loop's step, on the same data and networks, alternating. The best run is the one least
    disturbed by other processes."""
    import torch

    from lsnpc import LSNPC
    from lsnpc._numerics import minibatches
    from lsnpc._torch import num_threads
    from lsnpc.corrector.backprop import NoisyBatchStep, aten_kernels
    from lsnpc.corrector.config import ModelSpec, build_model
    from lsnpc.corrector.optim import FlatAdamW, TrainStep
    from lsnpc.corrector.training import _HandwrittenRows
    from reference_loop import reference_step

    n, d, n_labels = (int(v) for v in size.split("x"))
    X, P = (torch.as_tensor(a) for a in make_data(n, d, n_labels))
    spec = ModelSpec.from_params(LSNPC().get_params())
    with num_threads(threads):
        torch.manual_seed(0)
        ours, theirs = (build_model(spec, n_features=d, n_labels=n_labels).train() for _ in range(2))
        batches = minibatches(n, 32)
        optimizer = FlatAdamW([ours], weight_decay=1e-5)
        reference_optimizer = torch.optim.AdamW(theirs.parameters(), lr=2e-4, weight_decay=1e-5)

        def our_step(idx: torch.Tensor) -> None:
            with aten_kernels():
                step(idx, lr=2e-4)

        def their_step(idx: torch.Tensor) -> None:
            reference_step(theirs, reference_optimizer, X[idx], P[idx], 0.01)

        best = {"ours": float("inf"), "reference": float("inf")}
        with optimizer:
            gradient = _HandwrittenRows(NoisyBatchStep(ours, beta=0.01, feed="sample"), X, P)
            step = TrainStep(optimizer, gradient, clip=2.0, n_values=3, device=X.device, autograd=False)
            for run in range(runs + 1):  # the first run warms up
                for name, one_step in (("ours", our_step), ("reference", their_step)):
                    started = time.perf_counter()
                    for k in range(steps):
                        one_step(batches[(run * steps + k) % len(batches)])
                    if run:
                        best[name] = min(best[name], 1000 * (time.perf_counter() - started) / steps)
    return best


def bench_fit_predict(size: str, threads: int | None, predict_n: int, repeats: int) -> dict[str, float | str]:
    from lsnpc import LSNPC

    n, d, n_labels = (int(v) for v in size.split("x"))
    X, P = make_data(n, d, n_labels)
    started = time.perf_counter()
    model = LSNPC(random_state=0, n_threads=threads).fit(X, P)
    fit_seconds = time.perf_counter() - started
    Xp, Pp = make_data(predict_n, d, n_labels, seed=1)
    model.predict_proba(Xp[:1000], Pp[:1000])
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        model.predict_proba(Xp, Pp)
        rates.append(predict_n / (time.perf_counter() - started))
    return {
        "size": size,
        "epochs": model.epochs_,
        "fit_s": fit_seconds,
        "predict_median": float(np.median(rates)),
        "predict_best": max(rates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help="n x d x L (table 2)")
    parser.add_argument("--epoch-size", default="10000x512x20", help="n x d x L of table 1")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of table 1, per loop")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--predict-n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="prediction timings per size")
    parser.add_argument("--skip", nargs="+", choices=("epochs", "fit"), default=[], help="tables to leave out")
    parser.add_argument("--step-runs", type=int, default=0,
                        help="also time steps alone: the best of this many runs of 40 steps (0: not)")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, threads {args.threads or torch.get_num_threads()}")
    if args.step_runs:
        best = bench_steps(args.epoch_size, args.threads, args.step_runs, 40)
        print(f"\nSteps alone, {args.epoch_size.replace('x', ' × ')}, best of {args.step_runs} runs of 40: "
              f"LSNPC {best['ours']:.2f} ms, reference {best['reference']:.2f} ms, "
              f"{best['reference'] / best['ours']:.2f}×", flush=True)
    if "epochs" not in args.skip:
        row = bench_epochs(args.epoch_size, args.epochs, args.threads)
        print(f"\nTraining, {args.epoch_size.replace('x', ' × ')}, batch 32, median of {args.epochs} epochs")
        print("| loop | s/epoch | ms/step | speed-up vs reference |")
        print("|---|---|---|---|")
        print(f"| reference (authors' style) | {row['reference']:.2f} | {row['ref_ms']:.2f} | 1.0× |")
        print(f"| LSNPC | {row['ours']:.2f} | {row['ours_ms']:.2f} | {row['reference'] / row['ours']:.1f}× |",
              flush=True)
    if "fit" not in args.skip:
        print("\nDefault fit and prediction (5 Monte-Carlo samples)")
        print("| n × d × L | epochs | fit (s) | predict, median (samples/s) | predict, best | target |")
        print("|---|---|---|---|---|---|")
        for size in args.sizes:
            row = bench_fit_predict(size, args.threads, args.predict_n, args.repeats)
            print(f"| {size.replace('x', ' × ')} | {row['epochs']} | {row['fit_s']:.1f} | "
                  f"{row['predict_median']:,.0f} | {row['predict_best']:,.0f} | "
                  f"{TARGETS.get(size, '—')} |", flush=True)


if __name__ == "__main__":
    main()
