"""How far the seed of one ``LSNPC()`` fit moves its test scores, and what the mean of several fits gives.

Protocol, data and base model as ``bench_retrain.py`` (scikit-learn's MLP trained on the noisy labels, val0 the
clean validation triple). Per setting, ``LSNPC(random_state=s)`` is fitted post-hoc on that model's probabilities
on its own training rows with the val0 triple, once for each s of ``--lsnpc-seeds``; each fit predicts at its own
threshold. Rows (test micro / macro-F1 ×100):

  base-threshold   the model at the threshold ``tune_threshold`` chooses on val0
  lsnpc            one row per LSNPC seed (``lsnpc_seed``)
  lsnpc-mean       the mean of those fits' probabilities, at the threshold ``tune_threshold`` chooses on val0
                   (each fit chose its epoch and blend on val0 too, as a single fit does)

Prints, per setting, the base model's scores, the single fits' mean, lowest and highest, and the mean of the fits;
then, per noise rate, the mean over settings of the single fits' spread (highest minus lowest) and of each row
against base-threshold.

    python benchmarks/bench_seed_spread.py --configs "bibtex[top=48]@700" --noise symmetric:0.0 symmetric:0.3 \\
        --seeds 0 1 --lsnpc-seeds 11 12 13 14 15 --out spread.jsonl

Results are appended to ``--out`` and resumed; ``--report`` prints the tables of existing files.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from bench_quality import prepare_setting
from bench_retrain import add_run_options, run_configs, setting_key, wrapped_estimator


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str,
                lsnpc_seeds: list[int]) -> list[dict]:
    """The rows of one setting: base-threshold, one lsnpc row per seed of ``lsnpc_seeds``, lsnpc-mean."""
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    from lsnpc import LSNPC, tune_threshold
    from lsnpc.metrics import macro_f1, micro_f1
    from lsnpc.retrain.estimator import _probs

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning at max_iter, LSNPC's memorisation note
        started = time.perf_counter()
        s = prepare_setting(dataset, size, kind, rate, seed, home, 4000, None)
        X, Y, Xt, Yt, Yn = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"]
        tr, v0 = s["split"]["train"], s["split"]["val0"]
        Xtr, Xv, Yv, L = X[tr], X[v0], Y[v0], Y.shape[1]
        model = clone(wrapped_estimator(seed)).fit(Xtr, Yn)
        P_in, P_val, P_test = _probs(model, Xtr, L), _probs(model, Xv, L), _probs(model, Xt, L)
        key = {"dataset": dataset, "requested": size, "kind": kind, "rate": rate, "seed": seed, "val_rows": len(v0)}

        def row(method: str, predicted: np.ndarray, **extra) -> dict:
            return dict(key, method=method, micro=100 * micro_f1(Yt, predicted), macro=100 * macro_f1(Yt, predicted),
                        **extra)

        rows = [row("base-threshold", tune_threshold(Yv, P_val).predict(P_test))]
        on_val, on_test = [], []
        for lsnpc_seed in lsnpc_seeds:
            fit = LSNPC(random_state=lsnpc_seed, n_threads=1).fit(Xtr, P_in, X_val=Xv, y_val=Yv, pred_probs_val=P_val)
            rows.append(row("lsnpc", fit.predict(Xt, P_test), lsnpc_seed=lsnpc_seed, base_weight=fit.base_weight_))
            on_val.append(fit.predict_proba(Xv, P_val))
            on_test.append(fit.predict_proba(Xt, P_test))
        mean_val, mean_test = np.mean(on_val, axis=0), np.mean(on_test, axis=0)
        rows.append(row("lsnpc-mean", tune_threshold(Yv, mean_val).predict(mean_test), n_fits=len(lsnpc_seeds)))
        rows[0]["seconds"] = time.perf_counter() - started
        return rows


def print_tables(rows: list[dict]) -> None:
    """Per setting, then per noise rate (see the module's docstring)."""
    settings: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        settings.setdefault(setting_key(r), {}).setdefault(r["method"], []).append(r)
    if not settings:
        print("No results to print.")
        return
    print("\n| data set | noise | seed | base-threshold | single fits: mean | lowest | highest | lsnpc-mean |")
    print("|---|---|---|---|---|---|---|---|")
    by_rate: dict[float, list[np.ndarray]] = {}
    for (dataset, size, kind, rate, seed), methods in settings.items():
        if not {"base-threshold", "lsnpc", "lsnpc-mean"} <= set(methods):
            continue
        base = np.array([methods["base-threshold"][-1][k] for k in ("micro", "macro")])
        single = np.array([[r["micro"], r["macro"]] for r in methods["lsnpc"]])
        mean = np.array([methods["lsnpc-mean"][-1][k] for k in ("micro", "macro")])
        cells = [base, single.mean(0), single.min(0), single.max(0), mean]
        print(f"| {dataset}@{size} | {kind} {rate:.0%} | {seed} | "
              + " | ".join(f"{c[0]:.1f} / {c[1]:.1f}" for c in cells) + " |")
        by_rate.setdefault(rate, []).append(np.concatenate([single.max(0) - single.min(0), single.mean(0) - base,
                                                            single.min(0) - base, mean - base]))
    print("\nMeans over settings (micro / macro): the single fits' spread (highest − lowest), and against "
          "base-threshold the single fits' mean, their lowest, and lsnpc-mean")
    print("| noise rate | settings | spread | single fits − base | lowest − base | lsnpc-mean − base |")
    print("|---|---|---|---|---|---|")
    for rate in sorted(by_rate):
        m = np.mean(by_rate[rate], axis=0)
        print(f"| {rate:.0%} | {len(by_rate[rate])} | {m[0]:.2f} / {m[1]:.2f} | "
              + " | ".join(f"{m[k]:+.2f} / {m[k + 1]:+.2f}" for k in (2, 4, 6)) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", required=True, metavar="DATASET@SIZE")
    parser.add_argument("--lsnpc-seeds", nargs="+", type=int, default=[11, 12, 13, 14, 15])
    add_run_options(parser, seeds=[0, 1], choose=[], out_required=True)
    args = parser.parse_args()
    if len(args.lsnpc_seeds) < 2:
        parser.error(f"--lsnpc-seeds needs at least two seeds to measure a spread, got {args.lsnpc_seeds}")
    _, rows = run_configs(parser, args, run_setting, args.lsnpc_seeds)
    print_tables(rows)


if __name__ == "__main__":
    main()
