"""Time and memory of the label scores' neighbour search (``label_posterior.neighbour_label_rates``).

    python benchmarks/bench_neighbours.py                                  # the CPU, three sizes
    python benchmarks/bench_neighbours.py --device cuda --sizes 100000x512x100 1000000x512x100
    python benchmarks/bench_neighbours.py --compare-cpu 20000x512x100       # also check the GPU against the CPU

Random features (n × d, standard normal) and labels (L columns, 5% positive); 50 neighbours. Prints, per
size: seconds for the whole call (standardising, the exact search, the rates), the process's peak
resident memory so far (the CPU's) and the GPU's peak allocation. ``--compare-cpu N`` runs one size on
both and prints the share of rows whose rates differ (near-ties in float32) and the largest difference.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def problem(size: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n, d, n_labels = (int(v) for v in size.split("x"))
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d), dtype=np.float32), (rng.random((n, n_labels)) < 0.05).astype(np.int8)


def timed(X: np.ndarray, Y: np.ndarray, device: str | None) -> tuple[np.ndarray, float]:
    import torch

    from lsnpc.corrector.label_posterior import neighbour_label_rates

    if device and device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    rates = neighbour_label_rates(X, Y, device=device)  # returns host arrays: nothing left in flight
    return rates, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["4000x500x20", "20000x512x100", "50000x512x100"],
                        help="n x d x L")
    parser.add_argument("--device", default=None, help="None (the CPU, scikit-learn's search) or cuda")
    parser.add_argument("--compare-cpu", metavar="SIZE", help="also run this size on the CPU and compare")
    args = parser.parse_args()
    import torch

    gpu = bool(args.device and args.device.startswith("cuda"))
    name = torch.cuda.get_device_name() if gpu else "CPU"
    print(f"torch {torch.__version__}; {name}; {torch.get_num_threads()} CPU threads")
    print("| n × d × L | device | seconds | peak RSS (GB, process so far) | GPU peak (GB) |")
    print("|---|---|---|---|---|")
    if gpu:
        timed(*problem("2000x64x5"), args.device)  # CUDA context and cuBLAS out of the timings
    for size in args.sizes:
        X, Y = problem(size)
        _, seconds = timed(X, Y, args.device)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        peak = f"{torch.cuda.max_memory_allocated() / 2**30:.2f}" if gpu else ""
        print(f"| {size.replace('x', ' × ')} | {args.device or 'cpu'} | {seconds:.2f} | {rss:.2f} | {peak} |", flush=True)
    if args.compare_cpu:
        X, Y = problem(args.compare_cpu)
        ours, seconds = timed(X, Y, args.device)
        cpu, cpu_seconds = timed(X, Y, None)
        differ = (np.abs(ours - cpu) > 1e-12).any(1)
        print(f"\n{args.compare_cpu}: {args.device or 'cpu'} {seconds:.2f} s, CPU {cpu_seconds:.2f} s; rows whose "
              f"rates differ {differ.mean():.3%}; largest difference {np.abs(ours - cpu).max():.4f} "
              f"(one neighbour of 50 swapped moves a rate by 1/52 = {1 / 52:.4f})")


if __name__ == "__main__":
    main()
