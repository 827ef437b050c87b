"""Correction quality of LSNPC on real multilabel data: test micro/macro-F1 against the base model.

Protocol, per (data set, training size n, noise, seed): n rows drawn (seeded) from the data set's
canonical training split (all of it when n is "full" or larger); 10% of them held out
(`lsnpc.data.paper_splits`: half val0, the ≈5% clean validation triple, half val1, the clean set); the
paper's noise (`lsnpc.simulate_noise`) on the remaining training labels; a base `MLPClassifier` trained
on them (checkpoint on clean val0 micro-F1, as the paper does for every model; the same base model
serves every method); then each post-processor is fitted on the training features and the base model's
probabilities and scored on the canonical test split.

Methods get the val0 triple, or with the suffix "-noval" no clean label at all:
  lsnpc              LSNPC(), the default
  lsnpc-labels       LSNPC() given the noisy training labels too (``fit(labels=...)``, as the Quick start does)
  lsnpc-paper        LSNPC.paper(encoder=base.trunk_), the paper's recipe
  lsnpc-noguard      LSNPC(guard=False): the student and the correction, no base model mixed in
  lsnpc-nostudent    LSNPC(student=False): the correction alone, blended as the plan says
  lsnpc-correction   LSNPC(student=False, guard=False): the correction alone, unblended
  lsnpc-trunk        LSNPC(encoder=base.trunk_); lsnpc-trunk-labels with the noisy labels too
  lsnpc-semi         LSNPC() with the val1 clean set as well, trained on (no "-noval" variant)
  lsnpc-oof          LSNPC() fitted on out-of-fold probabilities of the training rows (5 multilabel-stratified
                     folds, each a base MLP trained the same way on the other four folds' noisy labels:
                     ``lsnpc.cross_val_pred_probs``) instead of the base model's own; ``-labels``, ``-noval`` as above
  base-threshold     not a corrector: the base model's own probabilities at the threshold ``lsnpc.tune_threshold``
                     chooses for them on val0 (0.5 when val0 holds no positive label): what a threshold alone
                     buys, the simplest competitor
  base-clean         not a corrector: the base MLP trained the same way on the *true* training labels, the
                     headroom of a setting (a reference, not a ceiling)

``--set KEY=VALUE`` passes a parameter to every LSNPC the run fits (``--set prior_base_weight=0.25``), to
measure a variant; the results file should then be its own.

    python benchmarks/bench_quality.py --datasets scene yeast --train-sizes 500 full --seeds 0 1 2 \\
        --out results.jsonl --jobs 2

A pool of configurations, each with its own size, runs as one command with ``--configs DATASET@SIZE ...``
(instead of ``--datasets`` and ``--train-sizes``); the summary against the bar is then the pool's:

    python benchmarks/bench_quality.py --configs "scene@640" "bibtex[top=110]@960" --methods lsnpc lsnpc-noval \\
        --out pool.jsonl

Arguments may also come from a file, one per line, named with ``@``: ``@benchmarks/stand-ins.args`` holds
the seven stand-ins for data sets we do not have (the README's quality table).

Each finished setting is appended to ``--out`` (JSON lines), and a run skips the settings already
there, so an interrupted run resumes; ``--report`` prints the tables of an existing file. Text data
sets (goemotions) are encoded with MiniLM (`lsnpc.features`), cached under ``--feature-cache``, from a
seeded pool of ``--text-pool`` training and test texts.

LSNPC methods are scored as ``LSNPC.predict`` decides, at the fitted ``threshold_``, and record the rows of the
validation triple they were given (``val_rows``, 0 without one), the base weight, the epoch, and the scores at 0.5
(``micro_at_half``, ``macro_at_half``). The base model's row keeps its sharpness on the training rows
(``lsnpc.corrector.blend.base_sharpness``; the benchmark silences ``LSNPC.fit``'s flat-base warning, because the
protocol's early checkpoints are often flat).

Prints, per setting, the mean over seeds of test micro/macro-F1 (×100) and the change against the
base model, then a summary for each method: the mean change at 30–50% noise, the worst setting, the worst
0%-noise setting, the mean change over every run and both F1s, and the same against base-threshold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_HOME = Path(os.environ.get("LSNPC_SHARED_DATA", REPO.parent / "shared" / "data"))
VARIANTS = {"lsnpc": {}, "lsnpc-labels": {}, "lsnpc-noguard": dict(guard=False), "lsnpc-nostudent": dict(student=False),
            "lsnpc-correction": dict(student=False, guard=False), "lsnpc-semi": {}, "lsnpc-oof": {},
            "lsnpc-oof-labels": {}}
TRUNK = ("lsnpc-trunk", "lsnpc-trunk-labels", "lsnpc-paper")
NO_NOVAL = ("lsnpc-semi",)
METHODS = (*VARIANTS, *TRUNK, *(f"{m}-noval" for m in (*VARIANTS, *TRUNK) if m not in NO_NOVAL), "base-clean",
           "base-threshold")
NOISES = ("symmetric:0.0", "symmetric:0.3", "pairflip:0.3", "symmetric:0.5", "pairflip:0.5")
TEXT_SETS = ("goemotions",)
NOISE_NAMES = {"symmetric": "sym", "pairflip": "pair"}


def make_corrector(method: str, seed: int, trunk, params: dict | None = None):
    from lsnpc import LSNPC

    name = method.removesuffix("-noval")
    params = dict(params or {})
    if name in VARIANTS:
        return LSNPC(random_state=seed, **{**VARIANTS[name], **params})
    if name in ("lsnpc-trunk", "lsnpc-trunk-labels"):
        return LSNPC(random_state=seed, encoder=trunk, **params)
    if name == "lsnpc-paper":
        return LSNPC.paper(random_state=seed, encoder=trunk)
    raise ValueError(f"unknown method {method!r}")


def parse_variant(spec: str) -> tuple[str, dict[str, float]]:
    """``"name"`` or ``"name[key=value,...]"``: the data set and its variant's options (numbers).

    ``synthetic[...]`` passes the options to :func:`lsnpc.data.make_synthetic` (``n_labels=45,
    max_frequency=0.1``: another generated problem); any other set takes ``top=K``, its K labels most
    frequent in the training split (a smaller label space on the same features). Variants give data
    configurations no default was chosen on, to look for failures before users do."""
    match = re.fullmatch(r"([\w.-]+)(?:\[(.*)\])?", spec)
    if match is None:
        raise ValueError(f"dataset {spec!r}: expected NAME or NAME[key=value,...]")
    name, body = match.group(1), match.group(2)
    options: dict[str, float] = {}
    for item in filter(None, (body or "").split(",")):
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None or not key.strip():
            raise ValueError(f"dataset {spec!r}: option {item!r} is not key=number")
        options[key.strip()] = int(number) if number.is_integer() and "." not in value else number
    if name != "synthetic" and set(options) - {"top"}:
        raise ValueError(f"dataset {spec!r}: a real data set takes only top=K, got {sorted(options)}")
    if "top" in options and (not isinstance(options["top"], int) or options["top"] < 1):
        raise ValueError(f"dataset {spec!r}: top must be a positive integer")
    return name, options


def load_arrays(dataset: str, home: str, text_pool: int, feature_cache: str | None):
    """(X_train, Y_train, X_test, Y_test) of the canonical splits; text sets encoded with MiniLM.
    ``dataset`` may name a variant (:func:`parse_variant`)."""
    name, options = parse_variant(dataset)
    if name == "synthetic" and options:
        from lsnpc.data import make_synthetic

        parts = make_synthetic(**options)
        return tuple(np.asarray(a) for part in (parts["train"], parts["test"]) for a in (part.X, part.Y))
    X, Y, Xt, Yt = _load_named(name, home, text_pool, feature_cache)
    if "top" in options:
        keep = np.sort(np.argsort(-Y.sum(0), kind="stable")[: options["top"]])
        Y, Yt = Y[:, keep], Yt[:, keep]
    return X, Y, Xt, Yt


def _load_named(dataset: str, home: str, text_pool: int, feature_cache: str | None):
    from lsnpc.data import load_dataset

    train = load_dataset(dataset, "train", data_home=home)
    test = load_dataset(dataset, "test", data_home=home)
    if dataset not in TEXT_SETS:
        return (np.asarray(train.X, dtype=np.float32), np.asarray(train.Y),
                np.asarray(test.X, dtype=np.float32), np.asarray(test.Y))
    from lsnpc.features import extract_features, make_encoder

    encoder = make_encoder("all-MiniLM-L6-v2", num_threads=1)
    parts = []
    for i, part in enumerate((train, test)):
        keep = np.sort(np.random.default_rng(1234 + i).choice(len(part), min(text_pool, len(part)), replace=False))
        part = part.subset(keep)
        X = extract_features(part, encoder, cache_dir=feature_cache, progress=False)
        parts += [np.asarray(X, dtype=np.float32), np.asarray(part.Y)]
    return tuple(parts)


def prepare_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str, text_pool: int,
                    feature_cache: str | None) -> dict:
    """One setting of the protocol up to the base model: the arrays (n rows drawn from the training split),
    the paper split, the noisy training labels and the base MLP trained on them (1 torch thread).

    Returns a dict with X, Y (the drawn training rows, true labels), Xt, Yt (test), split (``paper_splits``:
    train / val0 / val1 row indices), Y_noisy (labels of the train rows, (n_train, L)) and base (the fitted
    :class:`lsnpc.MLPClassifier`, checkpoint on clean val0)."""
    import torch

    torch.set_num_threads(1)
    from lsnpc import MLPClassifier, simulate_noise
    from lsnpc.data import paper_splits

    X, Y, Xt, Yt = load_arrays(dataset, home, text_pool, feature_cache)
    if size != "full" and int(size) < len(X):
        rows = np.sort(np.random.default_rng(10_000 + seed).choice(len(X), int(size), replace=False))
        X, Y = X[rows], Y[rows]
    split = paper_splits(len(X), random_state=seed)
    tr, v0 = split["train"], split["val0"]
    Y_noisy = simulate_noise(Y[tr], kind, rate, random_state=seed)[0] if rate > 0 else Y[tr].copy()
    base = MLPClassifier(random_state=seed, n_threads=1).fit(X[tr], Y_noisy, X_val=X[v0], y_val=Y[v0])
    return dict(X=X, Y=Y, Xt=Xt, Yt=Yt, split=split, Y_noisy=Y_noisy, base=base)


def out_of_fold_probs(s: dict, seed: int) -> np.ndarray:
    """Out-of-fold base probabilities of the train rows of a :func:`prepare_setting` dict, (n_train, L): each
    row scored by a base MLP trained as ``s["base"]`` was (same seed, checkpoint on clean val0) on the other
    four of 5 multilabel-stratified folds of the noisy labels."""
    from lsnpc import MLPClassifier, cross_val_pred_probs

    tr, v0 = s["split"]["train"], s["split"]["val0"]
    return cross_val_pred_probs(MLPClassifier(random_state=seed, n_threads=1), s["X"][tr], s["Y_noisy"], cv=5,
                                random_state=seed, fit_params=dict(X_val=s["X"][v0], y_val=s["Y"][v0]))


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, methods: tuple[str, ...],
                home: str, text_pool: int, feature_cache: str | None, params: dict | None = None) -> list[dict]:
    """The rows of one setting: the base model's, then one for each of ``methods`` (``params``: passed to every
    LSNPC fitted but the paper's recipe)."""
    # the protocol's base models are often flat (early checkpoints on a few clean rows): the base row records
    # their sharpness instead of a warning from every fit
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pred_probs barely vary", category=UserWarning)
        return _run_setting(dataset, size, kind, rate, seed, methods, home, text_pool, feature_cache, params)


def _run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, methods: tuple[str, ...],
                 home: str, text_pool: int, feature_cache: str | None, params: dict | None) -> list[dict]:
    from lsnpc import MLPClassifier, tune_threshold
    from lsnpc.corrector.blend import base_sharpness
    from lsnpc.metrics import macro_f1, micro_f1

    s = prepare_setting(dataset, size, kind, rate, seed, home, text_pool, feature_cache)
    X, Y, Xt, Yt, Y_noisy, base = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"], s["base"]
    tr, v0, v1 = s["split"]["train"], s["split"]["val0"], s["split"]["val1"]
    P_tr, P_v0, P_v1, P_te = (base.predict_proba(a) for a in (X[tr], X[v0], X[v1], Xt))
    key = dict(dataset=dataset, requested=size, size=len(X), kind=kind, rate=rate, seed=seed)
    rows_out = [dict(key, method="base", micro=micro_f1(Yt, P_te), macro=macro_f1(Yt, P_te), seconds=0.0,
                     base_sharpness=base_sharpness(P_tr))]
    P_oof, oof_seconds = None, 0.0
    for method in methods:
        started = time.perf_counter()
        if method == "base-clean":
            clean = MLPClassifier(random_state=seed, n_threads=1).fit(X[tr], Y[tr], X_val=X[v0], y_val=Y[v0])
            Q = clean.predict_proba(Xt)
            rows_out.append(dict(key, method=method, micro=micro_f1(Yt, Q), macro=macro_f1(Yt, Q),
                                 seconds=time.perf_counter() - started))
            continue
        if method == "base-threshold":
            t = tune_threshold(Y[v0], P_v0).threshold if Y[v0].any() else 0.5
            rows_out.append(dict(key, method=method, micro=micro_f1(Yt, P_te, t), macro=macro_f1(Yt, P_te, t),
                                 seconds=time.perf_counter() - started, threshold=t))
            continue
        kwargs = {} if method.endswith("noval") else dict(X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
        if method == "lsnpc-semi":
            kwargs.update(X_clean=X[v1], y_clean=Y[v1], pred_probs_clean=P_v1)
        if method.removesuffix("-noval").endswith("-labels"):
            kwargs.update(labels=Y_noisy)
        P_fit = P_tr
        if method.startswith("lsnpc-oof"):
            if P_oof is None:  # once per setting; its time (base-model work) is oof_seconds, not the fit's
                P_oof = out_of_fold_probs(s, seed)
                oof_seconds = time.perf_counter() - started
                started = time.perf_counter()
            P_fit = P_oof
        corrector = make_corrector(method, seed, base.trunk_, params).fit(X[tr], P_fit, **kwargs)
        seconds = time.perf_counter() - started
        Q = corrector.predict_proba(Xt, P_te)
        t = corrector.threshold_
        rows_out.append(dict(key, method=method, micro=micro_f1(Yt, Q, t), macro=macro_f1(Yt, Q, t),
                             seconds=seconds, val_rows=len(kwargs.get("y_val", ())),
                             base_weight=corrector.base_weight_, blend=corrector.report_["blend"].method,
                             epoch=corrector.best_epoch_, epochs=corrector.epochs_, selection=corrector.selection_,
                             threshold=t, micro_at_half=micro_f1(Yt, Q), macro_at_half=macro_f1(Yt, Q)))
        if P_fit is P_oof:
            rows_out[-1]["oof_seconds"] = oof_seconds
    return rows_out


def _key(row: dict) -> tuple:
    return row["dataset"], row["requested"], row["kind"], row["rate"], row["seed"]


def _scalar(value: str) -> object:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value else number


def parse_param(item: str) -> tuple[str, object]:
    """``KEY=VALUE`` (a ``--set`` entry) -> (key, value): a number, true / false, a tuple of them when the value
    has commas (``blend_candidates=0,0.5``), or the text as it is."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set expects KEY=VALUE, such as prior_base_weight=0.25; got {item!r}")
    if "," in value:
        return key.strip(), tuple(_scalar(v) for v in value.split(",") if v)
    return key.strip(), _scalar(value)


def parse_config(spec: str) -> tuple[str, str]:
    """``"DATASET@SIZE"`` (a ``--configs`` entry) -> (dataset, size); the data set may carry a variant
    (``"bibtex[top=110]@960"``), the size is a number of training rows or ``full``."""
    dataset, sep, size = spec.rpartition("@")
    if not sep or not dataset or not (size.isdigit() or size == "full"):
        raise ValueError(f"--configs expects DATASET@SIZE, such as 'scene@640' or 'bibtex[top=110]@960' "
                         f"(SIZE a number of training rows or 'full'); got {spec!r}")
    return dataset, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     fromfile_prefix_chars="@")
    parser.add_argument("--datasets", nargs="+", default=None, help="default: scene (with --report: all in --out)")
    parser.add_argument("--train-sizes", nargs="+", default=None,
                        help='training rows drawn from the canonical training split ("full": all; the default)')
    parser.add_argument("--configs", nargs="+", default=None, metavar="DATASET@SIZE",
                        help="a pool of data sets, each at its own size (instead of --datasets and --train-sizes)")
    parser.add_argument("--noise", nargs="+", default=list(NOISES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=None, choices=METHODS,
                        help="default: lsnpc lsnpc-labels lsnpc-noval lsnpc-labels-noval base-threshold (with "
                             "--report: all in --out)")
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--text-pool", type=int, default=4000, help="texts drawn from each split of a text set")
    parser.add_argument("--feature-cache", default=None, help="feature cache folder (default: lsnpc's)")
    parser.add_argument("--out", type=Path, nargs="+", default=None,
                        help="JSON-lines results file (appended, resumed); with --report, several are merged")
    parser.add_argument("--report", action="store_true", help="only print the tables of --out")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", dest="params",
                        help="LSNPC parameters for every corrector fitted (numbers, true/false, or text)")
    args = parser.parse_args()
    try:
        params = dict(parse_param(item) for item in args.params)
    except ValueError as error:
        parser.error(str(error))
    if args.configs is not None:
        if args.datasets is not None or args.train_sizes is not None:
            parser.error("--configs gives each data set its size: pass it instead of --datasets and --train-sizes")
        try:
            configs = [parse_config(spec) for spec in args.configs]
        except ValueError as error:
            parser.error(str(error))
        args.datasets = list(dict.fromkeys(dataset for dataset, _ in configs))
    elif not args.report:
        args.datasets = args.datasets or ["scene"]
        configs = [(dataset, size) for dataset in args.datasets for size in args.train_sizes or ["full"]]

    if args.report:
        if not args.out:
            parser.error("--report prints the tables of results files: pass them with --out")
        missing = [str(path) for path in args.out if not path.exists()]
        if missing:
            parser.error(f"--out: no such results file to report on: {', '.join(missing)}")
    rows = [json.loads(line) for path in args.out or [] if path.exists() for line in path.read_text().splitlines()]
    out = None if args.out is None else args.out[0]
    if not args.report:
        args.methods = args.methods or ["lsnpc", "lsnpc-labels", "lsnpc-noval", "lsnpc-labels-noval", "base-threshold"]
        done = {(*_key(r), r["method"]) for r in rows}
        tasks = []
        for dataset, size in configs:
            for spec in args.noise:
                kind, rate = spec.split(":")
                for seed in args.seeds:
                    task = (dataset, size, kind, float(rate), seed)
                    todo = tuple(m for m in args.methods if (*task, m) not in done)
                    if todo:
                        tasks.append((task, todo))
        started = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_setting, *task, todo, args.data_home, args.text_pool, args.feature_cache,
                                   params) for task, todo in tasks]
            for future in futures:
                result = future.result()
                key = result[0]
                fresh = [r for r in result if (*_key(r), r["method"]) not in done]
                done.update((*_key(r), r["method"]) for r in fresh)
                rows.extend(fresh)
                if out is not None and fresh:
                    with open(out, "a") as fh:
                        fh.writelines(json.dumps(r) + "\n" for r in fresh)
                print(f"  done {key['dataset']} n={key['size']} {key['kind']}:{key['rate']} seed {key['seed']}: "
                      + ", ".join(f"{r['method']} {100*r['micro']:.1f}/{100*r['macro']:.1f}" for r in result),
                      flush=True)
        print(f"{len(tasks)} settings in {time.perf_counter() - started:.0f} s")
    print_tables(rows, datasets=args.datasets, methods=args.methods,
                 configs=configs if args.configs is not None else None)


def print_tables(rows: list[dict], datasets: list[str] | None = None, methods: list[str] | None = None,
                 configs: list[tuple[str, str]] | None = None) -> None:
    """Print the per-setting table and the summary against the bar of ``rows`` (the JSON lines of a run),
    limited to ``datasets``, to ``methods`` (and the base model) and to ``configs``, (dataset, requested
    size) pairs."""
    import pandas as pd

    keys = ["dataset", "size", "kind", "rate", "seed"]
    df = pd.DataFrame(rows).drop_duplicates(subset=[*keys, "method"])
    if datasets is not None:
        df = df[df.dataset.isin(datasets)]
    if configs is not None:
        wanted = set(configs)
        df = df[[(d, str(r)) in wanted for d, r in zip(df.dataset, df.requested)]]
    if methods is not None:
        df = df[df.method.isin(["base", *methods])]
    if "method" not in df or not (df.method != "base").any():
        print("\nNo results of these data sets, sizes and methods to print.")
        return
    base = df[df.method == "base"].set_index(keys)[["micro", "macro"]]
    df = df[df.method != "base"].merge(base.add_suffix("_base"), left_on=keys, right_index=True)
    df["d_micro"] = 100 * (df.micro - df.micro_base)
    df["d_macro"] = 100 * (df.macro - df.macro_base)
    setting = ["dataset", "size", "kind", "rate"]
    per = df.groupby(setting + ["method"]).agg(
        base_micro=("micro_base", "mean"), base_macro=("macro_base", "mean"), d_micro=("d_micro", "mean"),
        d_macro=("d_macro", "mean"), seconds=("seconds", "mean"), seeds=("seed", "nunique")).reset_index()
    methods = [m for m in METHODS if m in set(per.method)]
    print("\n| data set | n | noise | base micro | base macro | "
          + " | ".join(f"{m} Δ micro / Δ macro" for m in methods) + " |")
    print("|---|---|---|---|---|" + "---|" * len(methods))
    for (dataset, size, kind, rate), g in per.groupby(setting, sort=False):
        g = g.set_index("method")
        cells = [f"{g.loc[m, 'd_micro']:+.1f} / {g.loc[m, 'd_macro']:+.1f}" if m in g.index else "" for m in methods]
        noise = "0%" if rate == 0 else f"{NOISE_NAMES.get(kind, kind)} {rate:.0%}"
        first = g.iloc[0]
        print(f"| {dataset} | {size} | {noise} | {100 * first.base_micro:.1f} | {100 * first.base_macro:.1f} | "
              + " | ".join(cells) + " |")

    print("\nSummary (per setting = data set × size × noise, mean over seeds; Δ in F1 points against the base model"
          "; 'over base-threshold': against the base model at its tuned threshold, the same settings):")
    print("| method | settings | mean Δ micro 30–50% | mean Δ macro 30–50% | worst Δ 30–50% | worst Δ at 0% "
          "| mean Δ, all runs, both F1 | over base-threshold 30–50% micro / macro | over base-threshold, all runs "
          "| fit s (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    reference = per[per.method == "base-threshold"].set_index(setting)[["d_micro", "d_macro"]]
    for method in methods:
        g = per[per.method == method]
        noisy, clean = g[g.rate > 0], g[g.rate == 0]
        worst_noisy = noisy[["d_micro", "d_macro"]].min(axis=1).min() if len(noisy) else float("nan")
        worst_clean = clean[["d_micro", "d_macro"]].min(axis=1).min() if len(clean) else float("nan")
        overall = float(np.mean([g.d_micro.mean(), g.d_macro.mean()]))
        over_noisy = over_all = "–"
        if len(reference) and method != "base-threshold":
            joined = g.set_index(setting)[["d_micro", "d_macro"]].join(reference.add_suffix("_ref"), how="inner")
            diff = joined[["d_micro", "d_macro"]].to_numpy() - joined[["d_micro_ref", "d_macro_ref"]].to_numpy()
            noisy_rows = joined.index.get_level_values("rate") > 0
            if len(joined):
                over_noisy = f"{diff[noisy_rows, 0].mean():+.2f} / {diff[noisy_rows, 1].mean():+.2f}"
                over_all = f"{diff.mean():+.2f}"
        print(f"| {method} | {len(g)} | {noisy.d_micro.mean():+.2f} | {noisy.d_macro.mean():+.2f} | "
              f"{worst_noisy:+.2f} | {worst_clean:+.2f} | {overall:+.2f} | {over_noisy} | {over_all} | "
              f"{g.seconds.mean():.1f} |")


if __name__ == "__main__":
    main()
