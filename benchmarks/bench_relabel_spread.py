"""How far the estimator's own seed moves the model retrained on corrected labels against the model trained on the
given ones: is one run's difference a measurement, or the seed?

Protocol, data and estimator as ``bench_retrain.py`` (scikit-learn's MLP trained to convergence; val0 the clean
validation rows). Per setting the corrected labels are computed once, as ``CorrectedLabelsClassifier`` computes
them (``labels_``: ``correct_labels`` on out-of-fold probabilities, no label left with fewer positives than it was
given); then, for each seed s of ``--estimator-seeds``, the estimator with ``random_state=s`` is trained on the
given labels ("noisy") and on the corrected ones ("relabelled"), each at the threshold ``tune_threshold`` chooses
for it on val0. Only the estimator's seed changes between a setting's runs: the data, the noise, the corrected
labels and val0 stay. Rows: test micro / macro-F1 ×100, with ``estimator_seed``.

Prints, per setting, the noisy model's macro-F1 over the seeds (mean, lowest, highest) and relabelled − noisy in
macro-F1 (mean over the seeds, its standard deviation, the lowest single run) and micro-F1 (mean); then, per noise
rate, the means over settings and how many single runs and how many seed means fall more than 0.5 macro-F1 below
"noisy".

    python benchmarks/bench_relabel_spread.py \\
        --configs "synthetic[n_labels=35,max_frequency=0.25,tail_exponent=1.0,n_features=400]@450" \\
        --noise symmetric:0.0 pairflip:0.5 --seeds 0 1 --estimator-seeds 1000 1001 1002 1003 1004 --out spread.jsonl

Results are appended to ``--out`` and resumed; ``--report`` prints the tables of existing files.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from bench_quality import prepare_setting
from bench_retrain import add_run_options, rows_by_setting, run_configs, wrapped_estimator

#: how far below the noisy model in macro-F1 the relabelled one may fall (the bar docs/retrain.md measures against)
MACRO_BAR = 0.5


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str,
                estimator_seeds: list[int]) -> list[dict]:
    """The rows of one setting: a "noisy" and a "relabelled" row per seed of ``estimator_seeds``."""
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    from lsnpc import CorrectedLabelsClassifier, tune_threshold
    from lsnpc.metrics import macro_f1, micro_f1

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning at max_iter
        started = time.perf_counter()
        s = prepare_setting(dataset, size, kind, rate, seed, home, 4000, None)
        X, Y, Xt, Yt, Yn = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"]
        tr, v0 = s["split"]["train"], s["split"]["val0"]
        Xtr, Xv, Yv = X[tr], X[v0], Y[v0]
        # the estimator's corrected labels, as bench_retrain's "relabelled" row trains on (no validation rows needed)
        labels = CorrectedLabelsClassifier(wrapped_estimator(seed), random_state=seed, n_threads=1,
                                           post_hoc=False).fit(Xtr, Yn).labels_
        key = {"dataset": dataset, "requested": size, "kind": kind, "rate": rate, "seed": seed, "val_rows": len(v0),
               "labels_changed": int((labels != Yn).sum())}
        rows = []
        for estimator_seed in estimator_seeds:
            for method, target in (("noisy", Yn), ("relabelled", labels)):
                model = clone(wrapped_estimator(estimator_seed)).fit(Xtr, target)
                predicted = tune_threshold(Yv, model.predict_proba(Xv)).predict(model.predict_proba(Xt))
                rows.append(dict(key, method=method, estimator_seed=estimator_seed, micro=100 * micro_f1(Yt, predicted),
                                 macro=100 * macro_f1(Yt, predicted)))
        rows[0]["seconds"] = time.perf_counter() - started
        return rows


def _paired(methods: dict[str, list[dict]]) -> np.ndarray:
    """(seeds, 4): noisy micro, noisy macro, relabelled micro, relabelled macro, by estimator seed."""
    by_seed = {m: {r["estimator_seed"]: r for r in rows} for m, rows in methods.items()}
    seeds = sorted(set(by_seed.get("noisy", {})) & set(by_seed.get("relabelled", {})))
    return np.array([[by_seed[m][s][k] for m in ("noisy", "relabelled") for k in ("micro", "macro")] for s in seeds])


def print_tables(rows: list[dict]) -> None:
    """Per setting, then per noise rate (see the module's docstring)."""
    settings = rows_by_setting(rows)
    if not settings:
        print("No results to print.")
        return
    print("\n| data set | noise | seed | estimator seeds | noisy macro: mean (lowest, highest) "
          "| relabelled − noisy macro: mean | its SD | lowest run | relabelled − noisy micro: mean |")
    print("|---|---|---|---|---|---|---|---|---|")
    by_rate: dict[float, list[tuple[float, float, float, int, int]]] = {}
    for (dataset, size, kind, rate, seed), methods in settings.items():
        pairs = _paired(methods)
        if len(pairs) < 2:
            continue
        macro, micro = pairs[:, 3] - pairs[:, 1], pairs[:, 2] - pairs[:, 0]
        print(f"| {dataset}@{size} | {kind} {rate:.0%} | {seed} | {len(pairs)} | {pairs[:, 1].mean():.1f} "
              f"({pairs[:, 1].min():.1f}, {pairs[:, 1].max():.1f}) | {macro.mean():+.2f} | {macro.std(ddof=1):.2f} "
              f"| {macro.min():+.2f} | {micro.mean():+.2f} |")
        by_rate.setdefault(rate, []).append((macro.mean(), macro.std(ddof=1), micro.mean(),
                                             int((macro < -MACRO_BAR).sum()), len(macro)))
    print(f"\nPer noise rate: means over settings, and the single runs and the seed means more than {MACRO_BAR} "
          "macro-F1 below noisy")
    print("| noise rate | settings | relabelled − noisy macro | SD over seeds | relabelled − noisy micro "
          f"| runs below −{MACRO_BAR} | seed means below −{MACRO_BAR} |")
    print("|---|---|---|---|---|---|---|")
    for rate in sorted(by_rate):
        d = by_rate[rate]
        means = np.array([x[0] for x in d])
        print(f"| {rate:.0%} | {len(d)} | {means.mean():+.2f} | {np.mean([x[1] for x in d]):.2f} "
              f"| {np.mean([x[2] for x in d]):+.2f} | {sum(x[3] for x in d)} of {sum(x[4] for x in d)} "
              f"| {int((means < -MACRO_BAR).sum())} of {len(d)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", required=True, metavar="DATASET@SIZE")
    parser.add_argument("--estimator-seeds", nargs="+", type=int, default=[1000, 1001, 1002, 1003, 1004])
    add_run_options(parser, seeds=[0, 1], choose=[], out_required=True)
    args = parser.parse_args()
    if len(args.estimator_seeds) < 2 or len(set(args.estimator_seeds)) != len(args.estimator_seeds):
        parser.error(f"--estimator-seeds needs at least two different seeds to measure a spread, "
                     f"got {args.estimator_seeds}")
    _, rows = run_configs(parser, args, run_setting, args.estimator_seeds)
    print_tables(rows)


if __name__ == "__main__":
    main()
