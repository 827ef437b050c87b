"""How far the seed of one ``LSNPC()`` fit moves its test scores, and what the mean of several fits gives.

Protocol, data and base model as ``bench_retrain.py`` (scikit-learn's MLP trained on the noisy labels, val0 the
clean validation triple). Per setting, ``LSNPC(random_state=s)`` is fitted post-hoc on that model's probabilities
on its own training rows with the val0 triple, once for each s of ``--lsnpc-seeds``; each fit predicts at its own
threshold. Rows (test micro / macro-F1 ×100):

  base-threshold   the model at the threshold ``tune_threshold`` chooses on val0
  lsnpc            one row per LSNPC seed (``lsnpc_seed``)
  lsnpc-mean       the mean of those fits' probabilities, at the threshold ``tune_threshold`` chooses on val0
                   (each fit chose its epoch and blend on val0 too, as a single fit does)
  lsnpc-mean-guarded  the mean of the fits' outputs before their blends, then LSNPC's guard on val0 (its
                   candidates, confidence and folds; ``lsnpc.corrector.blend.test_on_validation``) and the
                   threshold tuned on val0 for the blend it keeps: what one fit of five networks would do
  lsnpc-n-fits     that fit as the library does it: ``LSNPC(n_fits=len(seeds), random_state=seeds[0])`` (its
                   first network is the first seed's; the others have seeds of its own), at its own threshold

Prints, per setting, the base model's scores, the single fits' mean, lowest and highest, and both means of the
fits; then, per noise rate, the mean over settings of the single fits' spread (highest minus lowest) and of each
row against base-threshold.

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
from bench_retrain import add_run_options, rows_by_setting, run_configs, wrapped_estimator


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str,
                lsnpc_seeds: list[int]) -> list[dict]:
    """The rows of one setting: base-threshold, one lsnpc row per seed of ``lsnpc_seeds``, lsnpc-mean,
    lsnpc-mean-guarded, lsnpc-n-fits."""
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    from lsnpc import LSNPC, tune_threshold
    from lsnpc.corrector.blend import test_on_validation
    from lsnpc.metrics import macro_f1, micro_f1
    from lsnpc.model_selection import multilabel_folds
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
        blended, outputs = ([], []), ([], [])  # (on val0, on the test rows)
        for lsnpc_seed in lsnpc_seeds:
            fit = LSNPC(random_state=lsnpc_seed, n_threads=1).fit(Xtr, P_in, X_val=Xv, y_val=Yv, pred_probs_val=P_val)
            for side, (X_, P_) in enumerate(((Xv, P_val), (Xt, P_test))):
                blended[side].append(fit.predict_proba(X_, P_))
                outputs[side].append(fit._output(X_, P_))
            # fit.predict, from the probabilities just computed
            rows.append(row("lsnpc", (blended[1][-1] >= fit.threshold_).astype(np.int64), lsnpc_seed=lsnpc_seed,
                            base_weight=fit.base_weight_))
        mean_val, mean_test = np.mean(blended[0], axis=0), np.mean(blended[1], axis=0)
        rows.append(row("lsnpc-mean", tune_threshold(Yv, mean_val).predict(mean_test), n_fits=len(lsnpc_seeds)))
        out_val, out_test = np.mean(outputs[0], axis=0), np.mean(outputs[1], axis=0)
        rng = np.random.default_rng(seed)
        w, _ = test_on_validation(Yv, out_val, P_val, candidates=tuple(fit.blend_candidates),
                                  confidence=float(fit.blend_confidence),
                                  folds=multilabel_folds(Yv, int(fit.val_folds), rng), rng=rng)
        guarded_val, guarded_test = (1 - w) * out_val + w * P_val, (1 - w) * out_test + w * P_test
        rows.append(row("lsnpc-mean-guarded", tune_threshold(Yv, guarded_val).predict(guarded_test),
                        n_fits=len(lsnpc_seeds), base_weight=w))
        several = LSNPC(random_state=lsnpc_seeds[0], n_fits=len(lsnpc_seeds), n_threads=1).fit(
            Xtr, P_in, X_val=Xv, y_val=Yv, pred_probs_val=P_val)
        rows.append(row("lsnpc-n-fits", several.predict(Xt, P_test), n_fits=len(lsnpc_seeds),
                        base_weight=several.base_weight_))
        rows[0]["seconds"] = time.perf_counter() - started
        return rows


def print_tables(rows: list[dict]) -> None:
    """Per setting, then per noise rate (see the module's docstring); lsnpc-mean-guarded and lsnpc-n-fits where the
    rows hold them ("–" in files written before them)."""
    settings = rows_by_setting(rows)
    if not settings:
        print("No results to print.")
        return
    print("\n| data set | noise | seed | base-threshold | single fits: mean | lowest | highest | lsnpc-mean "
          "| lsnpc-mean-guarded | lsnpc-n-fits |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by_rate: dict[float, list[np.ndarray]] = {}
    for (dataset, size, kind, rate, seed), methods in settings.items():
        if not {"base-threshold", "lsnpc", "lsnpc-mean"} <= set(methods):
            continue
        scores = {m: np.array([methods[m][-1][k] for k in ("micro", "macro")]) if m in methods else np.full(2, np.nan)
                  for m in ("base-threshold", "lsnpc-mean", "lsnpc-mean-guarded", "lsnpc-n-fits")}
        base = scores["base-threshold"]
        single = np.array([[r["micro"], r["macro"]] for r in methods["lsnpc"]])
        cells = [base, single.mean(0), single.min(0), single.max(0), scores["lsnpc-mean"], scores["lsnpc-mean-guarded"],
                 scores["lsnpc-n-fits"]]
        print(f"| {dataset}@{size} | {kind} {rate:.0%} | {seed} | "
              + " | ".join("–" if np.isnan(c).any() else f"{c[0]:.1f} / {c[1]:.1f}" for c in cells) + " |")
        by_rate.setdefault(rate, []).append(np.concatenate([
            single.max(0) - single.min(0), single.mean(0) - base, single.min(0) - base,
            scores["lsnpc-mean"] - base, scores["lsnpc-mean-guarded"] - base, scores["lsnpc-n-fits"] - base]))
    print("\nMeans over settings (micro / macro): the single fits' spread (highest − lowest), and against "
          "base-threshold the single fits' mean, their lowest, lsnpc-mean, lsnpc-mean-guarded and lsnpc-n-fits (each "
          "with its worst setting)")
    print("| noise rate | settings | spread | single fits − base | lowest − base | lsnpc-mean − base "
          "| lsnpc-mean-guarded − base | its worst | lsnpc-n-fits − base | its worst |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate in sorted(by_rate):
        d = np.array(by_rate[rate])
        m = d.mean(0)
        late = ["– | –" if np.isnan(m[k:k + 2]).any() else f"{m[k]:+.2f} / {m[k + 1]:+.2f} | {d[:, k:k + 2].min():+.1f}"
                for k in (8, 10)]  # rows written before lsnpc-mean-guarded, or before lsnpc-n-fits, lack them
        print(f"| {rate:.0%} | {len(d)} | {m[0]:.2f} / {m[1]:.2f} | "
              + " | ".join(f"{m[k]:+.2f} / {m[k + 1]:+.2f}" for k in (2, 4, 6)) + f" | {late[0]} | {late[1]} |")


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
