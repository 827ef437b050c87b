"""The KNN baseline's k: the paper's 5 against the authors' code's 10, on real multilabel data.

Protocol (the experiment runner's unsupervised setting): `lsnpc.data.paper_splits` of MULAN's training
portion, the paper's noise on all its labels, a base `MLPClassifier` trained on the noisy training
labels (epoch chosen on the noisy val0 labels), then `KNNCorrector(n_neighbors=k)` fitted on the
training features and the base model's probabilities, scored on the clean test split.

    python benchmarks/bench_knn.py --datasets scene yeast --seeds 0 1 2

Prints one row per (data set, noise): mean test micro / macro-F1 (×100) over the seeds of the base
model and of KNN at each k.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

DEFAULT_HOME = Path(__file__).resolve().parents[2] / "shared" / "data"
SETTINGS = (("symmetric", 0.0), ("symmetric", 0.3), ("pairflip", 0.3), ("symmetric", 0.5))


def scores(dataset: str, kind: str, rate: float, seed: int, ks: tuple[int, ...], home: str) -> dict:
    from lsnpc import KNNCorrector, MLPClassifier, simulate_noise
    from lsnpc.data import load_dataset, paper_splits
    from lsnpc.metrics import macro_f1, micro_f1

    train, test = load_dataset(dataset, "train", data_home=home), load_dataset(dataset, "test", data_home=home)
    X, Y = np.asarray(train.X, np.float32), np.asarray(train.Y)
    Xt, Yt = np.asarray(test.X, np.float32), np.asarray(test.Y)
    split = paper_splits(len(X), random_state=seed)
    tr, v0 = split["train"], split["val0"]
    Y_noisy = simulate_noise(Y, kind, rate, random_state=seed)[0] if rate else Y.copy()
    base = MLPClassifier(random_state=seed).fit(X[tr], Y_noisy[tr], X_val=X[v0], y_val=Y_noisy[v0])
    P, P_test = base.predict_proba(X[tr]), base.predict_proba(Xt)
    out = {"base": (micro_f1(Yt, P_test), macro_f1(Yt, P_test))}
    for k in ks:
        corrected = KNNCorrector(n_neighbors=k).fit(X[tr], P).predict_proba(Xt, P_test)
        out[k] = (micro_f1(Yt, corrected), macro_f1(Yt, corrected))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--k", nargs="+", type=int, default=[5, 10])
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    ks = tuple(args.k)
    print("| data set | noise | base micro / macro | " + " | ".join(f"KNN k={k} micro / macro" for k in ks) + " |")
    print("|---|---|---|" + "---|" * len(ks))
    for dataset in args.datasets:
        for kind, rate in SETTINGS:
            runs = [scores(dataset, kind, rate, seed, ks, args.data_home) for seed in args.seeds]

            def cell(key: object, runs: list[dict] = runs) -> str:
                return " / ".join(f"{100 * np.mean([r[key][i] for r in runs]):.1f}" for i in (0, 1))

            print(f"| {dataset} | {kind} {rate:.0%} | {cell('base')} | " + " | ".join(cell(k) for k in ks) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
