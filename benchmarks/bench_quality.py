"""Correction quality of LSNPC on real multilabel data: test micro/macro-F1 against the base model.

Protocol (the paper's, on MULAN's canonical train/test splits): hold out 10% of the training portion
(half val0 for model selection, half val1 the clean set — `lsnpc.data.paper_splits`), inject noise into
the remaining training labels (`lsnpc.simulate_noise`, the paper's scheme), train the base MLP on the
noisy labels (checkpoint by val0 micro-F1, as the paper does for every model), then fit each
post-processor on the training features and the base model's probabilities and score on the test split.

    python benchmarks/bench_quality.py --datasets scene yeast --noise symmetric:0.3 pairflip:0.5 --seeds 0 1 2

Prints one row per (data set, noise, method) with mean test F1 over seeds and the change against the
base model, in points (×100).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

DEFAULT_HOME = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ("lsnpc", "lsnpc-trunk", "lsnpc-semi", "lsnpc-paper", "lsnpc-noguard")


def make_corrector(method: str, seed: int, trunk):
    from lsnpc import LSNPC

    if method == "lsnpc":
        return LSNPC(random_state=seed)
    if method == "lsnpc-trunk":
        return LSNPC(random_state=seed, encoder=trunk)
    if method == "lsnpc-semi":
        return LSNPC(random_state=seed)
    if method == "lsnpc-noguard":
        return LSNPC(random_state=seed, guard=False)
    if method == "lsnpc-paper":
        return LSNPC.paper(random_state=seed, encoder=trunk)
    raise ValueError(f"unknown method {method!r}")


def run_setting(dataset: str, kind: str, rate: float, seed: int, methods: tuple[str, ...], home: str,
                max_train: int | None) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    from lsnpc import MLPClassifier, simulate_noise
    from lsnpc.data import load_dataset, paper_splits
    from lsnpc.metrics import macro_f1, micro_f1

    train = load_dataset(dataset, "train", data_home=home)
    test = load_dataset(dataset, "test", data_home=home)
    X, Y = np.asarray(train.X, dtype=np.float32), train.Y
    if max_train is not None and len(X) > max_train:
        keep = np.random.default_rng(1234).choice(len(X), max_train, replace=False)
        X, Y = X[keep], Y[keep]
    Xt, Yt = np.asarray(test.X, dtype=np.float32), test.Y
    split = paper_splits(len(X), random_state=seed)
    tr, v0, v1 = split["train"], split["val0"], split["val1"]
    if rate > 0:
        Y_noisy, _ = simulate_noise(Y[tr], kind, rate, random_state=seed)
    else:
        Y_noisy = Y[tr].copy()
    base = MLPClassifier(random_state=seed).fit(X[tr], Y_noisy, X_val=X[v0], y_val=Y[v0])
    P_tr, P_v0, P_v1, P_te = (base.predict_proba(a) for a in (X[tr], X[v0], X[v1], Xt))
    rows = [dict(dataset=dataset, kind=kind, rate=rate, seed=seed, method="base",
                 micro=micro_f1(Yt, P_te), macro=macro_f1(Yt, P_te), seconds=0.0)]
    for method in methods:
        started = time.perf_counter()
        corrector = make_corrector(method, seed, base.trunk_)
        kwargs = dict(X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
        if method == "lsnpc-semi":
            kwargs.update(X_clean=X[v1], y_clean=Y[v1], pred_probs_clean=P_v1)
        corrector.fit(X[tr], P_tr, **kwargs)
        Q = corrector.predict_proba(Xt, P_te)
        rows.append(dict(dataset=dataset, kind=kind, rate=rate, seed=seed, method=method,
                         micro=micro_f1(Yt, Q), macro=macro_f1(Yt, Q),
                         seconds=time.perf_counter() - started,
                         blend=corrector.guard_.blend, epoch=corrector.best_epoch_,
                         epochs=corrector.epochs_))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["scene"])
    parser.add_argument("--noise", nargs="+", default=["symmetric:0.0", "symmetric:0.3", "pairflip:0.3",
                                                       "symmetric:0.5", "pairflip:0.5"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["lsnpc"], choices=METHODS)
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--max-train", type=int, default=None, help="subsample large training sets")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    tasks = []
    for dataset in args.datasets:
        for spec in args.noise:
            kind, rate = spec.split(":")
            for seed in args.seeds:
                tasks.append((dataset, kind, float(rate), seed, tuple(args.methods), args.data_home, args.max_train))
    started = time.perf_counter()
    rows: list[dict] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for result in pool.map(run_setting, *zip(*tasks)):
            rows.extend(result)
            r0 = result[0]
            print(f"  done {r0['dataset']} {r0['kind']}:{r0['rate']} seed {r0['seed']}: "
                  + ", ".join(f"{r['method']} {100*r['micro']:.1f}/{100*r['macro']:.1f}" for r in result),
                  flush=True)
    print_table(rows)
    print(f"\n{len(tasks)} settings in {time.perf_counter() - started:.0f} s")


def print_table(rows: list[dict]) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    base = df[df.method == "base"].set_index(["dataset", "kind", "rate", "seed"])[["micro", "macro"]]
    df = df.merge(base.add_suffix("_base"), left_on=["dataset", "kind", "rate", "seed"], right_index=True)
    df["d_micro"] = 100 * (df.micro - df.micro_base)
    df["d_macro"] = 100 * (df.macro - df.macro_base)
    summary = df.groupby(["dataset", "kind", "rate", "method"], sort=False).agg(
        micro=("micro", "mean"), macro=("macro", "mean"), d_micro=("d_micro", "mean"),
        d_macro=("d_macro", "mean"), seconds=("seconds", "mean"))
    summary[["micro", "macro"]] *= 100
    print("\n| data set | noise | method | micro-F1 | macro-F1 | Δ micro | Δ macro | fit s |")
    print("|---|---|---|---|---|---|---|---|")
    for (dataset, kind, rate, method), r in summary.iterrows():
        print(f"| {dataset} | {kind} {rate:.0%} | {method} | {r.micro:.1f} | {r.macro:.1f} | "
              f"{r.d_micro:+.1f} | {r.d_macro:+.1f} | {r.seconds:.1f} |")


if __name__ == "__main__":
    main()
