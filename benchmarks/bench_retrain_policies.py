"""How ``CorrectedLabelsClassifier`` chooses its output, against the policies it replaced: every candidate is
fitted once per setting and each policy is scored on the same fits (test micro/macro-F1).

The steps are the estimator's own (``lsnpc.retrain.estimator``: out-of-fold probabilities, ``correct_labels``,
a clone on the unchanged rows and one on the given labels, LSNPC on each, the choice on val0), with the same
seeds, so the "choice" column is what ``CorrectedLabelsClassifier(estimator, random_state=seed)`` predicts;
each LSNPC on out-of-fold probabilities is fitted twice, once with the noisy labels only and once with the val0
triple too.
Protocol, data and estimator as ``bench_retrain.py`` (scikit-learn's MLP, val0 the clean validation rows).
Columns (Δ against "noisy", as there):

  noisy            the model trained on the given labels, threshold chosen on val0
  lsnpc            ``LSNPC()`` post-hoc on it with the val0 triple (bench_retrain's column)
  retrained        the model retrained on the rows the correction left unchanged, threshold on val0
  noisy+L, retrained+L   each followed by LSNPC fitted with the labels it was trained on (no clean row)
  noisy+T, retrained+T   the same, LSNPC given the val0 triple too
  noisy+I          the "lsnpc" column's correction with the estimator's seed: LSNPC fitted on the noisy model's
                   probabilities on its own training rows, with the val0 triple, threshold on val0
  four-L           the mean of noisy, retrained, noisy+L, retrained+L, or one of them a standard error better
                   in both F1s on val0 (the first policy)
  four-T           the same with noisy+T and retrained+T
  two-T            the mean of noisy+T and retrained+T, or one of the two a standard error better in both
                   F1s, with at least 20 val0 rows (the policy before the current one)
  choice           the same with noisy+T, noisy+I and retrained+T, with at least 10 val0 rows (the current
                   policy; its test against the given-label model, fallback_se, is off by default)

    python benchmarks/bench_retrain_policies.py --configs scene@500 yeast@500 --seeds 0 1 \\
        --out policies.jsonl --jobs 2

Results are appended to ``--out`` and resumed; ``--report`` prints the tables of existing files
(``bench_retrain.print_tables``, with these columns).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from bench_quality import prepare_setting
from bench_retrain import add_run_options, print_tables, run_configs, wrapped_estimator

METHODS = ("noisy", "lsnpc", "retrained", "noisy+L", "retrained+L", "noisy+T", "retrained+T", "noisy+I", "four-L",
           "four-T", "two-T", "choice")


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str) -> list[dict]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning at max_iter, LSNPC's flat-base note
        return _run_setting(dataset, size, kind, rate, seed, home)


def _run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str) -> list[dict]:
    from sklearn.base import clone

    from lsnpc import LSNPC, correct_labels, cross_val_pred_probs, tune_threshold
    from lsnpc.corrector.threshold import AUTO
    from lsnpc.metrics import macro_f1, micro_f1
    from lsnpc.retrain.estimator import _probs
    from lsnpc.retrain.selection import choose

    started = time.perf_counter()
    s = prepare_setting(dataset, size, kind, rate, seed, home, 4000, None)
    X, Y, Xt, Yt, Yn = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"]
    tr, v0 = s["split"]["train"], s["split"]["val0"]
    Xtr, Xv, Yv, L = X[tr], X[v0], Y[v0], Y.shape[1]
    # the estimator's seeds, in its order
    fold_seed, correct_seed, lsnpc_seed, _, val_seed = (
        int(v) for v in np.random.default_rng(seed).integers(2**31 - 1, size=5))
    template = wrapped_estimator(seed)
    P = cross_val_pred_probs(template, Xtr, Yn, cv=5, random_state=fold_seed)
    corrected = correct_labels(Yn, P, features=Xtr, random_state=correct_seed, n_threads=1)
    rows = (corrected == Yn).all(axis=1)
    if rows.sum() < 5:
        rows[:] = True
    X_re, Y_re = Xtr[rows], corrected[rows]
    models = {"noisy": clone(template).fit(Xtr, Yn), "retrained": clone(template).fit(X_re, Y_re)}
    P_re = cross_val_pred_probs(template, X_re, Y_re, cv=5, random_state=fold_seed)
    val = {k: _probs(m, Xv, L) for k, m in models.items()}
    test = {k: _probs(m, Xt, L) for k, m in models.items()}
    for name, Xf, oof, labels in (("noisy", Xtr, P, Yn), ("retrained", X_re, P_re, Y_re)):
        for tag, triple in (("L", {}), ("T", {"X_val": Xv, "y_val": Yv, "pred_probs_val": val[name]})):
            corrector = LSNPC(random_state=lsnpc_seed, n_threads=1).fit(Xf, oof, labels=labels, **triple)
            val[f"{name}+{tag}"] = corrector.predict_proba(Xv, val[name])
            test[f"{name}+{tag}"] = corrector.predict_proba(Xt, test[name])
    in_sample = _probs(models["noisy"], Xtr, L)
    post_hoc = LSNPC(random_state=seed, n_threads=1).fit(Xtr, in_sample, X_val=Xv, y_val=Yv, pred_probs_val=val["noisy"])
    own = LSNPC(random_state=lsnpc_seed, n_threads=1).fit(Xtr, in_sample, X_val=Xv, y_val=Yv, pred_probs_val=val["noisy"])
    val["noisy+I"], test["noisy+I"] = own.predict_proba(Xv, val["noisy"]), own.predict_proba(Xt, test["noisy"])

    key = {"dataset": dataset, "requested": size, "size": len(X), "kind": kind, "rate": rate, "seed": seed,
           "val_rows": len(v0), "rows_trained": int(rows.sum())}
    out: list[dict] = []

    def record(method: str, predicted: np.ndarray, **extra) -> None:
        out.append(dict(key, method=method, micro=100 * micro_f1(Yt, predicted), macro=100 * macro_f1(Yt, predicted),
                        **extra))

    for name in ("noisy", "retrained", "noisy+L", "retrained+L", "noisy+T", "retrained+T", "noisy+I"):
        record(name, tune_threshold(Yv, val[name]).predict(test[name]))
    record("lsnpc", post_hoc.predict(Xt, test["noisy"]))
    policies = {"four-L": (("noisy", "retrained", "noisy+L", "retrained+L"), 0),
                "four-T": (("noisy", "retrained", "noisy+T", "retrained+T"), 0),
                "two-T": (("noisy+T", "retrained+T"), 20),
                "choice": (("noisy+T", "noisy+I", "retrained+T"), 10)}
    for method, (parts, min_rows) in policies.items():
        probs = {"mean": (np.mean([val[p] for p in parts], axis=0), np.mean([test[p] for p in parts], axis=0)),
                 **{p: (val[p], test[p]) for p in parts}}
        fallback = None  # the test against the given labels is off by default (docs/retrain.md)
        if fallback:
            probs["noisy"] = (val["noisy"], test["noisy"])
        kept, scores, _, given_test = choose(
            Yv, {k: v for k, (v, _) in probs.items()}, n_folds=5, random_state=val_seed, thresholds=AUTO,
            scoring="micro+macro", min_gain_se=1.0, eligible=parts if len(Yv) >= min_rows else (), fallback=fallback)
        threshold = next(sc.threshold for sc in scores if sc.name == kept)
        record(method, (probs[kept][1] >= threshold).astype(np.int64), kept=kept, threshold=threshold,
               fell_back=bool(given_test and given_test.fell_back))
    out[0]["seconds"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["scene@500", "yeast@500"], metavar="DATASET@SIZE")
    add_run_options(parser, seeds=[0, 1], choose=["scene", "yeast"], out_required=True)
    args = parser.parse_args()
    configs, rows = run_configs(parser, args, run_setting)
    wanted = None if args.report else {(d, str(size)) for d, size in configs}
    print_tables(rows, args.choose, wanted, methods=METHODS)


if __name__ == "__main__":
    main()
