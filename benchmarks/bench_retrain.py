"""Retraining on corrected labels (``lsnpc.CorrectedLabelsClassifier``) against the other ways to use noisy
labels, with scikit-learn's MLPClassifier as the wrapped estimator: test micro/macro-F1.

Protocol: ``bench_quality.prepare_setting``'s (n rows drawn from the canonical training split, the paper's
split into train / val0 / val1, the paper's noise on the train rows, the same seeds); val0 (≈5% of the rows)
is the clean validation set every method is given; val1 is not used. The wrapped estimator is
``sklearn.neural_network.MLPClassifier(hidden_layer_sizes=(256,), max_iter=500)`` seeded with the setting's
seed: trained to convergence, it memorises the noise. Columns:

  noisy       the estimator on the noisy labels, at the threshold ``lsnpc.tune_threshold`` chooses on val0
              (the reference every Δ is taken against)
  lsnpc       ``LSNPC()`` post-hoc on it, given the val0 triple, scored as its ``predict`` decides
  relabelled  the estimator retrained on the corrected labels (``CorrectedLabelsClassifier.labels_``, every
              row: no label left with fewer positives than it was given, ``min_positive_fraction=1``),
              threshold on val0
  relabelled-raw  the same on ``lsnpc.correct_labels``' labels as they come (the same seed; no floor)
  kept-rows   the estimator retrained on the rows the correction left unchanged (``train_rows_``: the
              meta-estimator's retrained model), threshold on val0
  cleanlab    the estimator retrained on the rows cleanlab's multilabel ``find_label_issues`` keeps (the same
              out-of-fold probabilities: ``oof_probs_``), threshold on val0 (cleanlab: the ``bench`` extra)
  path        what the retraining path keeps before the test against the given-label model (the choice where
              that test kept it; else the same estimator refitted with ``fallback_se=1e9``)
  choice      ``CorrectedLabelsClassifier(estimator, random_state=seed, fallback_se=1.0)`` given val0, as its ``predict`` decides
  true        the estimator on the true labels, threshold on val0: the headroom

    python benchmarks/bench_retrain.py --datasets scene yeast synthetic --train-sizes 500 1500 \\
        --out retrain.jsonl --jobs 1

Stand-ins of sets we do not have run as ``--configs DATASET@SIZE`` (``bench_quality``'s variants). Each
finished setting is appended to ``--out`` (JSON lines) and a run skips the settings already there, so it
resumes; ``--report`` prints the tables of existing files. The summary compares the choice with the bar the
retraining was built to meet (below), per group of sets (``--choose`` names the sets the policy was chosen on; the others are the
confirming ones): mean Δ at 30–50% noise, the same minus LSNPC's, the worst Δ at 0% noise and the worst
setting (Δ = mean over seeds of the method minus noisy, in F1 points).

The bar, for the choice: at least +3 micro and +3 macro on average at 30–50% noise; at least 1 point more
than LSNPC's gain in each; at most 1 point lost in either F1 at 0% noise and on any setting.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from bench_quality import DEFAULT_HOME, NOISE_NAMES, NOISES, parse_config, prepare_setting

METHODS = ("noisy", "lsnpc", "relabelled", "relabelled-raw", "kept-rows", "cleanlab", "path", "choice", "true")
CHOOSE = ("scene", "yeast", "synthetic")


def wrapped_estimator(seed: int):
    """scikit-learn's MLP, trained to convergence (no early stopping): the kind that memorises noise."""
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(hidden_layer_sizes=(256,), max_iter=500, random_state=seed)


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str) -> list[dict]:
    """The rows of one setting, one per method."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning at max_iter, LSNPC's flat-base note
        return _run_setting(dataset, size, kind, rate, seed, home)


def _run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str) -> list[dict]:
    from cleanlab.multilabel_classification.filter import find_label_issues
    from sklearn.base import clone

    from lsnpc import LSNPC, CorrectedLabelsClassifier, correct_labels, tune_threshold
    from lsnpc.label_issues import keep_label_positives
    from lsnpc.metrics import macro_f1, micro_f1

    s = prepare_setting(dataset, size, kind, rate, seed, home, 4000, None)
    X, Y, Xt, Yt, Yn = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"]
    tr, v0 = s["split"]["train"], s["split"]["val0"]
    Xtr, Xv, Yv = X[tr], X[v0], Y[v0]
    key = dict(dataset=dataset, requested=size, size=len(X), kind=kind, rate=rate, seed=seed, val_rows=len(v0))
    rows: list[dict] = []

    def record(method: str, predicted: np.ndarray, started: float, **extra) -> None:
        rows.append(dict(key, method=method, micro=100 * micro_f1(Yt, predicted), macro=100 * macro_f1(Yt, predicted),
                         seconds=time.perf_counter() - started, **extra))

    def retrained(method: str, Xa: np.ndarray, Ya: np.ndarray, started: float, model=None, **extra):
        """Record ``model`` (fitted on Xa, Ya: the meta-estimator's own, where it kept it) or a fresh fit."""
        model = model if model is not None else clone(wrapped_estimator(seed)).fit(Xa, Ya)
        tuned = tune_threshold(Yv, model.predict_proba(Xv))
        record(method, tuned.predict(model.predict_proba(Xt)), started, threshold=tuned.threshold, **extra)
        return model

    started = time.perf_counter()
    meta = CorrectedLabelsClassifier(wrapped_estimator(seed), random_state=seed, n_threads=1, fallback_se=1.0).fit(
        Xtr, Yn, X_val=Xv, y_val=Yv)
    report = meta.report_
    test = report.given_test
    record("choice", meta.predict(Xt), started, threshold=meta.threshold_, kept=report.kept,
           labels_changed=report.labels_changed, rows_trained=report.rows_trained,
           candidates=[c.__dict__ for c in report.candidates], given_test=test.__dict__)
    started = time.perf_counter()
    path = meta if not test.fell_back else CorrectedLabelsClassifier(
        wrapped_estimator(seed), random_state=seed, n_threads=1, fallback_se=1e9).fit(Xtr, Yn, X_val=Xv, y_val=Yv)
    record("path", path.predict(Xt), started, kept=path.report_.kept)
    # the meta-estimator's own models where it kept them: the same estimator and seed on the same rows
    started = time.perf_counter()
    noisy = retrained("noisy", Xtr, Yn, started, meta.models_.get("noisy"))
    started = time.perf_counter()
    corrector = LSNPC(random_state=seed, n_threads=1).fit(Xtr, noisy.predict_proba(Xtr), X_val=Xv, y_val=Yv,
                                                          pred_probs_val=noisy.predict_proba(Xv))
    record("lsnpc", corrector.predict(Xt, noisy.predict_proba(Xt)), started, threshold=corrector.threshold_)
    unchanged = meta.train_rows_  # the rows the correction left unchanged (all, relabelled, where too few are)
    started = time.perf_counter()
    retrained("relabelled", Xtr, meta.labels_, started)
    started = time.perf_counter()
    correct_seed = int(np.random.default_rng(seed).integers(2**31 - 1, size=5)[1])  # the estimator's
    raw = correct_labels(Yn, meta.oof_probs_, features=Xtr, random_state=correct_seed, n_threads=1)
    if not (keep_label_positives(Yn, raw, min_fraction=meta.min_positive_fraction) == meta.labels_).all():
        raise RuntimeError("the raw correction is not the estimator's: the seeds have drifted")
    retrained("relabelled-raw", Xtr, raw, started)
    started = time.perf_counter()
    retrained("kept-rows", Xtr[unchanged], meta.labels_[unchanged], started, meta.models_.get("retrained"),
              rows_kept=float(unchanged.mean()))
    started = time.perf_counter()
    flagged = np.asarray(find_label_issues([list(np.flatnonzero(r)) for r in Yn], meta.oof_probs_))
    if (~flagged).sum() < 2:  # cleanlab flags (nearly) every row: nothing to retrain on, the noisy model stays
        flagged[:] = False
    retrained("cleanlab", Xtr[~flagged], Yn[~flagged], started, rows_kept=float((~flagged).mean()))
    started = time.perf_counter()
    retrained("true", Xtr, Y[tr], started)
    return rows


def setting_key(row: dict) -> tuple:
    """The setting a result row belongs to (data set, requested size, noise kind and rate, seed)."""
    return row["dataset"], str(row["requested"]), row["kind"], row["rate"], row["seed"]


def rows_by_setting(rows: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    """``rows`` grouped by :func:`setting_key`, then by method, in the order they come."""
    settings: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        settings.setdefault(setting_key(r), {}).setdefault(r["method"], []).append(r)
    return settings


def pending_settings(configs: list[tuple[str, str]], noise: list[str], seeds: list[int],
                     done: set[tuple]) -> list[tuple[str, str, str, float, int]]:
    """The (data set, size, noise kind, rate, seed) settings of ``configs`` × ``noise`` × ``seeds`` whose
    :func:`setting_key` is not in ``done``."""
    tasks = [(d, size, spec.split(":")[0], float(spec.split(":")[1]), seed) for d, size in configs
             for spec in noise for seed in seeds]
    return [t for t in tasks if (t[0], str(t[1]), *t[2:]) not in done]


def read_results(paths: list[Path] | None) -> list[dict]:
    """The rows of the JSON-lines results files ``paths`` that exist, in order."""
    return [json.loads(line) for path in paths or [] if path.exists() for line in path.read_text().splitlines()]


def run_settings(run, tasks: list[tuple], args: argparse.Namespace, rows: list[dict], *extra,
                 describe=None) -> None:
    """``run(*task, args.data_home, *extra)`` for each of ``tasks`` on ``args.jobs`` processes, in order; each
    result's rows are added to ``rows`` and appended to ``args.out[0]`` (when given) as it finishes, and a line
    says so (``describe(result)``, or the setting and its seconds)."""
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run, *task, args.data_home, *extra) for task in tasks]
        for future in futures:
            result = future.result()
            rows.extend(result)
            if args.out:
                with open(args.out[0], "a") as fh:
                    fh.writelines(json.dumps(r) + "\n" for r in result)
            first = result[0]
            print("  done " + (describe(result) if describe else f"{first['dataset']}@{first['requested']} "
                               f"{first['kind']}:{first['rate']} seed {first['seed']} ({first['seconds']:.0f} s)"),
                  flush=True)


def run_configs(parser: argparse.ArgumentParser, args: argparse.Namespace, run, *extra
                ) -> tuple[list[tuple[str, str]], list[dict]]:
    """``args.configs`` parsed (a bad one is the parser's error) and the rows of ``args.out``; unless ``--report``,
    every setting of those configs not yet in the rows is run first (:func:`run_settings`, ``extra`` passed on)."""
    try:
        configs = [parse_config(spec) for spec in args.configs]
    except ValueError as error:
        parser.error(str(error))
    rows = read_results(args.out)
    if not args.report:
        done = {setting_key(r) for r in rows}
        run_settings(run, pending_settings(configs, args.noise, args.seeds, done), args, rows, *extra)
    return configs, rows


def add_run_options(parser: argparse.ArgumentParser, *, seeds: list[int], choose: list[str],
                    out_required: bool) -> None:
    """The options the retraining benchmarks share: noise settings, seeds, the chosen-on sets, where the data
    and the results are, --report and --jobs."""
    parser.add_argument("--noise", nargs="+", default=list(NOISES))
    parser.add_argument("--seeds", nargs="+", type=int, default=seeds)
    parser.add_argument("--choose", nargs="+", default=choose,
                        help="the sets the policy was chosen on (summarised apart from the others)")
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--out", type=Path, nargs="+", required=out_required, default=None,
                        help="JSON-lines results file (appended, resumed); with --report, several are merged")
    parser.add_argument("--report", action="store_true", help="only print the tables of --out")
    parser.add_argument("--jobs", type=int, default=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help="default: scene yeast synthetic")
    parser.add_argument("--train-sizes", nargs="+", default=["500", "1500"])
    parser.add_argument("--configs", nargs="+", default=None, metavar="DATASET@SIZE",
                        help="data sets each at its own size, instead of --datasets and --train-sizes")
    add_run_options(parser, seeds=[0, 1, 2], choose=list(CHOOSE), out_required=False)
    args = parser.parse_args()
    if args.configs is not None:
        if args.datasets is not None:
            parser.error("--configs gives each data set its size: pass it instead of --datasets and --train-sizes")
        try:
            configs = [parse_config(spec) for spec in args.configs]
        except ValueError as error:
            parser.error(str(error))
    else:
        configs = [(d, size) for d in args.datasets or list(CHOOSE) for size in args.train_sizes]
    if args.report and not args.out:
        parser.error("--report prints the tables of results files: pass them with --out")
    rows = read_results(args.out)
    if not args.report:
        done = {setting_key(r) for r in rows if r["method"] == "choice"}
        tasks = pending_settings(configs, args.noise, args.seeds, done)
        started = time.perf_counter()
        run_settings(run_setting, tasks, args, rows, describe=lambda result: (
            f"{result[0]['dataset']} n={result[0]['size']} {result[0]['kind']}:{result[0]['rate']} "
            f"seed {result[0]['seed']}: " + ", ".join(f"{r['method']} {r['micro']:.1f}/{r['macro']:.1f}"
                                                    for r in result)))
        print(f"{len(tasks)} settings in {time.perf_counter() - started:.0f} s")
    wanted = {(d, str(size)) for d, size in configs} if not args.report or args.configs or args.datasets else None
    print_tables(rows, args.choose, wanted)


def print_tables(rows: list[dict], choose: list[str], configs: set[tuple[str, str]] | None = None, *,
                 methods: tuple[str, ...] = METHODS) -> None:
    """Per setting (mean over seeds) the noisy-trained model's F1 and every one of ``methods``' Δ, then the
    summary against the bar, for the sets in ``choose`` and for the others apart."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        print("\nNo results to print.")
        return
    df["requested"] = df["requested"].astype(str)
    df = df.drop_duplicates(subset=["dataset", "requested", "kind", "rate", "seed", "method"])
    if configs is not None:
        df = df[[(d, r) in configs for d, r in zip(df.dataset, df.requested)]]
    setting = ["dataset", "size", "kind", "rate"]
    wide = df.pivot_table(index=[*setting, "seed"], columns="method", values=["micro", "macro"])
    methods = [m for m in methods if ("micro", m) in wide.columns]
    for group, sets in (("chosen on", lambda d: d.isin(choose)), ("kept aside", lambda d: ~d.isin(choose))):
        part = wide[sets(wide.index.get_level_values("dataset"))]
        if part.empty:
            continue
        names = sorted(set(part.index.get_level_values("dataset")))
        print(f"\n{group}: {', '.join(names)} (test F1 ×100, mean over seeds; Δ against noisy)\n")
        print("| data set | n | noise | seeds | noisy micro / macro | "
              + " | ".join(f"{m} Δ" for m in methods if m != "noisy") + " |")
        print("|---|---|---|---|---|" + "---|" * (len(methods) - 1))
        per = part.groupby(level=setting, sort=False)
        mean = per.mean()
        for (dataset, size, kind, rate), r in mean.iterrows():
            noise = "0%" if rate == 0 else f"{NOISE_NAMES.get(kind, kind)} {rate:.0%}"
            cells = [f"{r[('micro', m)] - r[('micro', 'noisy')]:+.1f} / {r[('macro', m)] - r[('macro', 'noisy')]:+.1f}"
                     for m in methods if m != "noisy"]
            print(f"| {dataset} | {size} | {noise} | {per.size()[(dataset, size, kind, rate)]} | "
                  f"{r[('micro', 'noisy')]:.1f} / {r[('macro', 'noisy')]:.1f} | " + " | ".join(cells) + " |")
        print_summary(mean, methods)


def print_summary(mean, methods: list[str]) -> None:
    """The bar, per method: mean Δ micro / macro at 30–50% noise, that minus LSNPC's, the worst Δ at 0% and the
    worst setting anywhere (the smaller of the two F1s)."""
    rate = mean.index.get_level_values("rate")
    delta = {m: (mean[("micro", m)] - mean[("micro", "noisy")], mean[("macro", m)] - mean[("macro", "noisy")])
             for m in methods}
    print("\n| method | settings | mean Δ micro / macro, 30–50% | minus LSNPC's | worst Δ at 0% | worst Δ anywhere |")
    print("|---|---|---|---|---|---|")
    for m in methods:
        if m == "noisy":
            continue
        micro, macro = delta[m]
        noisy_part = rate > 0
        vs = ""
        if "lsnpc" in delta:
            vs = (f"{(micro - delta['lsnpc'][0])[noisy_part].mean():+.2f} / "
                  f"{(macro - delta['lsnpc'][1])[noisy_part].mean():+.2f}")
        worst = np.minimum(micro, macro)
        at0 = f"{worst[~noisy_part].min():+.2f}" if (~noisy_part).any() else ""
        print(f"| {m} | {len(mean)} | {micro[noisy_part].mean():+.2f} / {macro[noisy_part].mean():+.2f} | {vs} | "
              f"{at0} | {worst.min():+.2f} |")
    print("bar, for choice: ≥ +3 / +3 at 30–50%; ≥ +1 / +1 over LSNPC's; ≥ −1 at 0% and anywhere")


if __name__ == "__main__":
    main()
