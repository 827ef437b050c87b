"""LSNPC's speed by torch thread count, on an idle and on a busy machine.

    python benchmarks/bench_threads.py                       # default sizes, threads 1, 2 and the default
    python benchmarks/bench_threads.py --sizes 600x12x5 --threads default 1 --repeats 3

Each cell runs in a fresh Python process (so no thread setting leaks between cells) with
OMP_NUM_THREADS / MKL_NUM_THREADS unset, and times ``LSNPC(random_state=0, n_threads=T).fit(X, P)``
(epochs="auto", no validation triple) and one ``predict_proba`` on 20,000 rows. "busy" starts one
pure-Python spinning process per CPU core first (another user's work on every core) and stops them
after the cell. The table gives the median over ``--repeats`` processes and the ratio to one thread
in the same condition; the question it answers is whether the default ever falls far behind one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = ("600x12x5", "2000x100x10", "10000x512x20")
CELL = r"""
import json, sys, time
import numpy as np
from lsnpc import LSNPC
n, d, L = (int(v) for v in sys.argv[1].split("x"))
threads = None if sys.argv[2] == "default" else int(sys.argv[2])
rng = np.random.default_rng(0)
def data(n, seed):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d)).astype(np.float32)
    W = np.random.default_rng(99).normal(size=(d, L)).astype(np.float32) / np.sqrt(d)
    return X, (1 / (1 + np.exp(-(X @ W) * 2 + 1.5))).astype(np.float32)
X, P = data(n, 0)
Xp, Pp = data(20000, 1)
kwargs = {} if threads is None else {"n_threads": threads}
t = time.perf_counter()
model = LSNPC(random_state=0, **kwargs).fit(X, P)
fit_s = time.perf_counter() - t
t = time.perf_counter()
model.predict_proba(Xp, Pp)
print(json.dumps({"fit_s": fit_s, "predict_s": time.perf_counter() - t, "epochs": model.epochs_}))
"""


def _spinners(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run_cell(size: str, threads: str, busy: bool) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    src = Path(__file__).resolve().parents[1] / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    spinners = _spinners(os.cpu_count() or 1) if busy else []
    try:
        time.sleep(0.5 if busy else 0)
        done = subprocess.run([sys.executable, "-c", CELL, size, threads], env=env, capture_output=True,
                              text=True, check=True)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help="n x d x L")
    parser.add_argument("--threads", nargs="+", default=["1", "2", "default"],
                        help="thread counts to compare ('default': leave n_threads at its default)")
    parser.add_argument("--conditions", nargs="+", default=["idle", "busy"], choices=["idle", "busy"])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if "1" not in args.threads:
        args.threads.insert(0, "1")  # the reference every ratio is taken against

    print(f"torch threads by default: {os.cpu_count()} cores; {args.repeats} process(es) per cell, median")
    print("| size | condition | n_threads | epochs | fit (s) | fit / 1 thread | predict 20k (s) | predict / 1 thread |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for condition in args.conditions:
            cells = {}
            for threads in args.threads:
                runs = [run_cell(size, threads, condition == "busy") for _ in range(args.repeats)]
                cells[threads] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            ref = cells["1"]
            for threads, cell in cells.items():
                print(f"| {size} | {condition} | {threads} | {cell['epochs']:.0f} | {cell['fit_s']:.1f} | "
                      f"{cell['fit_s'] / ref['fit_s']:.2f} | {cell['predict_s']:.2f} | "
                      f"{cell['predict_s'] / ref['predict_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
