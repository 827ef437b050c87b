"""Speed of the LSNPC corrector at default settings: fit seconds and prediction throughput.

    python benchmarks/bench_corrector.py                 # the three standard sizes
    python benchmarks/bench_corrector.py --sizes 10000x512x20 --threads 2

Targets on the project's 2-core CPU: (10k, 512, 20) fits in ≤ 20 s; prediction ≥ 100k samples/s with
5 Monte-Carlo samples. Data are random features with probabilities from a random linear model (speed
does not depend on their meaning). Prediction is timed on 100k samples (after one warm-up call),
``--repeats`` times; the table gives the median and the best (this shared virtual machine's speed
varies by up to 1.5x between runs of the same code).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SIZES = ("2000x100x10", "10000x512x20", "50000x2048x80")
TARGETS = {"10000x512x20": "fit ≤ 20 s"}


def make_data(n: int, d: int, n_labels: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    W = rng.normal(size=(d, n_labels)).astype(np.float32) / np.sqrt(d)
    P = (1 / (1 + np.exp(-(X @ W) * 2 + 1.5))).astype(np.float32)
    return X, P


def bench(size: str, threads: int | None, predict_n: int, repeats: int) -> dict[str, float | str]:
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
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help="n x d x L")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--predict-n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="prediction timings per size")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, threads {args.threads or torch.get_num_threads()}")
    print("| n × d × L | epochs | fit (s) | predict, median (samples/s, 5 MC) | predict, best | target |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        row = bench(size, args.threads, args.predict_n, args.repeats)
        print(f"| {size.replace('x', ' × ')} | {row['epochs']} | {row['fit_s']:.1f} | "
              f"{row['predict_median']:,.0f} | {row['predict_best']:,.0f} | "
              f"{TARGETS.get(size, 'predict ≥ 100,000/s')} |", flush=True)


if __name__ == "__main__":
    main()
