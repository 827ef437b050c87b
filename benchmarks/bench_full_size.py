"""The correction at full size against a tuned threshold, with two kinds of base model (docs/full-size.md).

The protocol of ``bench_quality.py`` on whole training splits: 10% of the rows held out (val0, the ≈5% clean
validation triple; val1, the clean set), the paper's noise on the rest, a base model, then each method fitted
on the training rows and the base model's probabilities, and scored on the canonical test split. Base models
(``--bases``):

  protocol   the project's MLPClassifier, checkpoint on clean val0 micro-F1 (bench_quality's base model)
  converged  scikit-learn's MLPClassifier (100 hidden units, Adam, 200 epochs, no early stopping) on
             standardised X, trained to convergence on the noisy labels: a model that memorises the noise,
             as most users' models do
  forest     scikit-learn's RandomForestClassifier(200) on the noisy labels
  linear     scikit-learn's OneVsRestClassifier(LogisticRegression()) on standardised X
  KIND-oof   (converged, forest or linear) the same model, but the training rows' probabilities are out of fold
             (``lsnpc.cross_val_pred_probs``, 5 folds), as a user of a model that memorises its training rows
             gives them; the other rows' probabilities come from the model fitted on every training row

Methods (every one is given the val0 triple unless its name ends in -noval or -unlabelled):

  base-threshold         the base model's probabilities at the threshold ``lsnpc.tune_threshold`` chooses on val0
  base-threshold-narrow  the same on the fixed grid 0.2, 0.225, ..., 0.5 the library searched before
  base-threshold-label   the same with per_label=True
  count-unlabelled       the base model at the label count met on the val0 and val1 rows without their labels
                         (``CountThreshold`` with X_unlabelled=): LSNPC-unlabelled's competitor; -labels-: the
                         noisy labels' count
  lsnpc                  LSNPC(), the default
  lsnpc-noguard          LSNPC(guard=False): the student and the correction, no base model mixed in
  lsnpc-correction       LSNPC(student=False, guard=False): the correction alone
  lsnpc-half             the ½ blend of lsnpc-noguard and the base model, the guard's other candidate (only where
                         the lsnpc fit tested on val0)
  lsnpc-labels           LSNPC() given the noisy labels too (labels=); -noval: those labels and no triple
  lsnpc-noval            LSNPC() with nothing but X and P
  lsnpc-unlabelled       LSNPC() with X, P and the val0 and val1 rows without their labels (X_unlabelled=): rows the
                         base model never saw; -labels-unlabelled: the noisy labels too
  lsnpc-semi             LSNPC() with the val1 clean set trained on as well (Algorithm 1)
  lsnpc-semi-noguard     the same with guard=False

Prints, per setting, test micro / macro-F1 (×100) and mAP of the base model at 0.5 and of each method at its own
threshold, then per base model and method against base-threshold: the mean change at 30–50% noise (micro,
macro), the worst change in any setting, the worst at 0%, and the mean change in mAP.

    HF_HUB_OFFLINE=1 python benchmarks/bench_full_size.py --datasets tmc2007-500 bibtex delicious goemotions \
        --noise symmetric:0.0 symmetric:0.3 symmetric:0.5 pairflip:0.3 --bases converged protocol \
        --feature-cache ~/.cache/lsnpc-features --out full.jsonl

``--configs DATASET@SIZE ...`` (or ``@benchmarks/stand-ins.args``) runs data sets at sizes of their own instead
of whole splits; ``--base-cache DIR`` keeps each setting's base probabilities, so variants train a base model once.
(GoEmotions is encoded with MiniLM once, all of its texts, into ``--feature-cache``.) Each finished
(setting, method) is appended to ``--out`` (JSON lines) and a run skips those already there, so an interrupted
run resumes; ``--report`` prints the tables of existing files. ``--set KEY=VALUE`` passes a parameter to every
LSNPC fitted (a variant: give it its own ``--out``). ``--guard-confidence C ...`` replays the guard's choice at
other values of ``blend_confidence`` from the numbers each lsnpc row records (run lsnpc-noguard and lsnpc-half
beside it), with no fit; ``--guard-min-rows N ...`` beside it keeps the base model below N triple rows.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import bench_quality as bq
import numpy as np
from sklearn.base import BaseEstimator

DATASETS = ("goemotions", "tmc2007-500", "delicious", "bibtex")
BASES = ("protocol", "converged", "forest", "linear", "converged-oof", "forest-oof", "linear-oof")
METHODS = ("base-threshold", "base-threshold-narrow", "base-threshold-label", "count-unlabelled",
           "count-labels-unlabelled", "lsnpc", "lsnpc-noguard", "lsnpc-correction", "lsnpc-half", "lsnpc-labels",
           "lsnpc-labels-noval", "lsnpc-noval", "lsnpc-unlabelled", "lsnpc-labels-unlabelled", "lsnpc-semi",
           "lsnpc-semi-noguard")
DEFAULT_METHODS = ("base-threshold", "base-threshold-narrow", "lsnpc", "lsnpc-noguard", "lsnpc-correction")


class ConvergedMLP(BaseEstimator):
    """scikit-learn's MLPClassifier on standardised X, trained to convergence on the noisy labels (no early
    stopping, no clean label); ``predict_proba`` (n, L) like the project's classifiers. A label with one class
    only in the training rows keeps its training frequency."""

    def __init__(self, random_state: int) -> None:
        self.random_state = random_state

    def fit(self, X: np.ndarray, Y: np.ndarray) -> ConvergedMLP:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier as SkMLP
        from sklearn.preprocessing import StandardScaler
        from threadpoolctl import threadpool_limits

        self.scaler_ = StandardScaler().fit(X)
        self.keep_ = Y.any(0) & ~Y.all(0)
        self.constant_ = Y.mean(0)
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model_ = SkMLP(max_iter=200, random_state=self.random_state).fit(
                self.scaler_.transform(X), Y[:, self.keep_])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        out = np.tile(self.constant_, (len(X), 1)).astype(np.float32)
        with threadpool_limits(1):
            kept = self.model_.predict_proba(self.scaler_.transform(X))
        out[:, self.keep_] = kept.reshape(len(X), -1)
        return np.clip(out, 0.0, 1.0)


class _ConstantColumns(BaseEstimator):
    """A scikit-learn estimator fitted on the labels that vary in the training rows; a label with one class only
    keeps its training frequency. ``predict_proba`` (n, L) float32, as the project's classifiers give it."""

    def _make(self):  # pragma: no cover - each subclass builds its own estimator
        raise NotImplementedError

    def fit(self, X: np.ndarray, Y: np.ndarray) -> _ConstantColumns:
        from threadpoolctl import threadpool_limits

        self.keep_ = Y.any(0) & ~Y.all(0)
        self.constant_ = Y.mean(0)
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the linear models
            self.model_ = self._make().fit(X, Y[:, self.keep_])
        return self

    def _probs(self, X: np.ndarray) -> np.ndarray:
        probs = self.model_.predict_proba(X)
        if isinstance(probs, list):  # a multi-output forest: one (n, 2) array a label
            probs = np.stack([p[:, 1] for p in probs], axis=1)
        return np.asarray(probs).reshape(len(X), -1)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        out = np.tile(self.constant_, (len(X), 1)).astype(np.float32)
        with threadpool_limits(1):
            out[:, self.keep_] = self._probs(X)
        return np.clip(out, 0.0, 1.0)


class Forest(_ConstantColumns):
    """scikit-learn's ``RandomForestClassifier(200)`` on the noisy labels (multi-output, one tree set for every
    label): probabilities far from 0.5 out of sample (the share of trees), memorised on its training rows."""

    def __init__(self, random_state: int) -> None:
        self.random_state = random_state

    def _make(self):
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=200, n_jobs=1, random_state=self.random_state)


class Linear(_ConstantColumns):
    """scikit-learn's ``OneVsRestClassifier(LogisticRegression())`` on standardised X, trained on the noisy
    labels: a calibrated-looking linear model whose probabilities sit near each label's frequency."""

    def __init__(self, random_state: int) -> None:
        self.random_state = random_state

    def _make(self):
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), OneVsRestClassifier(LogisticRegression(max_iter=1000)))


BASE_MODELS = {"converged": ConvergedMLP, "forest": Forest, "linear": Linear}


def prepare(dataset: str, size: str, kind: str, rate: float, seed: int, base_kind: str, home: str,
            text_pool: int, feature_cache: str | None) -> dict:
    """``bench_quality.prepare_setting`` with the base model of ``base_kind`` ("protocol" or "converged"); the
    same rows, split and noise for both."""
    import torch

    torch.set_num_threads(1)
    if base_kind == "protocol":
        return bq.prepare_setting(dataset, size, kind, rate, seed, home, text_pool, feature_cache)
    if base_kind.removesuffix("-oof") not in BASE_MODELS:
        raise ValueError(f"base_kind must be one of {BASES}, got {base_kind!r}")
    from lsnpc import simulate_noise
    from lsnpc.data import paper_splits

    X, Y, Xt, Yt = bq.load_arrays(dataset, home, text_pool, feature_cache)
    if size != "full" and int(size) < len(X):
        rows = np.sort(np.random.default_rng(10_000 + seed).choice(len(X), int(size), replace=False))
        X, Y = X[rows], Y[rows]
    split = paper_splits(len(X), random_state=seed)
    tr = split["train"]
    Y_noisy = simulate_noise(Y[tr], kind, rate, random_state=seed)[0] if rate > 0 else Y[tr].copy()
    base = BASE_MODELS[base_kind.removesuffix("-oof")](seed).fit(X[tr], Y_noisy)
    return dict(X=X, Y=Y, Xt=Xt, Yt=Yt, split=split, Y_noisy=Y_noisy, base=base)


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, base_kind: str, methods: tuple[str, ...],
                home: str, text_pool: int, feature_cache: str | None, params: dict,
                base_cache: str | None = None) -> list[dict]:
    """The base model's row and one row per method of one setting."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pred_probs barely vary", category=UserWarning)
        return _run_setting(dataset, size, kind, rate, seed, base_kind, methods, home, text_pool, feature_cache,
                            params, base_cache)


def _scored(Yt: np.ndarray, Q: np.ndarray, threshold) -> dict:
    """Test micro- and macro-F1 at ``threshold`` (a number or one a label), and mAP (threshold-free)."""
    from lsnpc.metrics import macro_f1, mean_average_precision, micro_f1

    return dict(micro=micro_f1(Yt, Q, threshold), macro=macro_f1(Yt, Q, threshold), map=mean_average_precision(Yt, Q))


def prepared_probs(dataset: str, size: str, kind: str, rate: float, seed: int, base_kind: str, home: str,
                   text_pool: int, feature_cache: str | None, base_cache: str | None) -> dict:
    """:func:`prepare`'s arrays with the base model's probabilities instead of the model: X, Y, Xt, Yt, Y_noisy, the
    split's rows (tr, v0, v1) and P_tr, P_v0, P_v1, P_te (float32). With ``base_cache`` (a folder) they are read
    from ``<setting>.npz`` there when a run wrote it, and written there after a fit (temporary file, then
    rename), so variants of the methods on the same setting train its base model once."""
    name = f"{dataset}@{size}_{kind}{float(rate)}_s{seed}_{base_kind}.npz".replace("/", "_")
    path = None if base_cache is None else Path(base_cache) / name
    if path is not None and path.exists():
        with np.load(path) as saved:
            return {k: saved[k] for k in saved.files}
    s = prepare(dataset, size, kind, rate, seed, base_kind, home, text_pool, feature_cache)
    X, base = s["X"], s["base"]
    out = dict(X=X, Y=s["Y"], Xt=s["Xt"], Yt=s["Yt"], Y_noisy=s["Y_noisy"], tr=s["split"]["train"],
               v0=s["split"]["val0"], v1=s["split"]["val1"])
    for name_, rows in (("P_tr", "tr"), ("P_v0", "v0"), ("P_v1", "v1")):
        out[name_] = np.asarray(base.predict_proba(X[out[rows]]), dtype=np.float32)
    if base_kind.endswith("-oof"):  # the training rows scored by copies not trained on them
        from lsnpc import cross_val_pred_probs

        out["P_tr"] = cross_val_pred_probs(base, X[out["tr"]], out["Y_noisy"], cv=5, random_state=seed)
    out["P_te"] = np.asarray(base.predict_proba(s["Xt"]), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.npz")
        np.savez(partial, **out)
        partial.replace(path)
    return out


def _run_setting(dataset, size, kind, rate, seed, base_kind, methods, home, text_pool, feature_cache, params,
                 base_cache=None):
    from lsnpc import tune_threshold
    from lsnpc.corrector.threshold import NARROW_THRESHOLDS
    from lsnpc.metrics import micro_f1

    started = time.perf_counter()
    s = prepared_probs(dataset, size, kind, rate, seed, base_kind, home, text_pool, feature_cache, base_cache)
    X, Y, Yt, Y_noisy = s["X"], s["Y"], s["Yt"], s["Y_noisy"]
    tr, v0 = s["tr"], s["v0"]
    P_tr, P_v0, P_te = s["P_tr"], s["P_v0"], s["P_te"]
    key = dict(dataset=dataset, requested=size, size=len(X), n_train=len(tr), n_val=len(v0), n_labels=Y.shape[1],
               kind=kind, rate=rate, seed=seed, base=base_kind)
    rows = [dict(key, method="base", **_scored(Yt, P_te, 0.5), seconds=time.perf_counter() - started,
                 train_f1_noisy=micro_f1(Y_noisy, P_tr), train_f1_true=micro_f1(Y[tr], P_tr))]
    for method in methods:
        started = time.perf_counter()
        if method.startswith("base-threshold"):
            options = {"base-threshold": {}, "base-threshold-narrow": dict(thresholds=NARROW_THRESHOLDS),
                       "base-threshold-label": dict(per_label=True)}[method]
            tuned = tune_threshold(Y[v0], P_v0, **options)
            rows.append(dict(key, method=method, **_scored(Yt, P_te, tuned.decision), seconds=0.0,
                             threshold=tuned.threshold))
            continue
        if method.startswith("count-"):
            from lsnpc.baselines import CountThreshold

            given = dict(labels=Y_noisy) if method == "count-labels-unlabelled" else {}
            counted = CountThreshold().fit(X[tr], P_tr, **_unlabelled_rows(s), **given)
            rows.append(dict(key, method=method, **_scored(Yt, P_te, counted.threshold_), seconds=0.0,
                             threshold=counted.threshold_))
            continue
        if method in DERIVED and "lsnpc" in methods:  # read off the "lsnpc" fit where that equals fitting it
            continue
        rows.extend(_fitted_rows(method, methods, params, key, s, seed))
    return rows


def _unlabelled_rows(s: dict) -> dict:
    """The val0 and val1 rows' features and base probabilities, never their labels: rows the base model never saw,
    as ``X_unlabelled``, ``pred_probs_unlabelled``."""
    return dict(X_unlabelled=np.concatenate([s["X"][s["v0"]], s["X"][s["v1"]]]),
                pred_probs_unlabelled=np.concatenate([s["P_v0"], s["P_v1"]]))


def _fitted_rows(method: str, methods: tuple[str, ...], params: dict, key: dict, s: dict, seed: int) -> list[dict]:
    """The row of one fitted LSNPC method; after "lsnpc", the rows of the DERIVED methods requested beside it (read
    off its networks where its plan tested on val0, else fitted)."""
    from lsnpc import LSNPC

    started = time.perf_counter()
    X, Y, Xt, Yt, Y_noisy = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"]
    tr, v0, v1 = s["tr"], s["v0"], s["v1"]
    P_tr, P_v0, P_v1, P_te = s["P_tr"], s["P_v0"], s["P_v1"], s["P_te"]
    options = dict(params)
    if method.endswith("noguard") or method == "lsnpc-correction":
        options["guard"] = False
    if method == "lsnpc-correction":
        options["student"] = False
    if method.endswith("noval"):
        kwargs = {}
    elif method.endswith("-unlabelled"):
        kwargs = _unlabelled_rows(s)
    else:
        kwargs = dict(X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
    if method.startswith("lsnpc-semi"):
        kwargs.update(X_clean=X[v1], y_clean=Y[v1], pred_probs_clean=P_v1)
    if method.removesuffix("-noval").removesuffix("-unlabelled").endswith("labels"):
        kwargs.update(labels=Y_noisy)
    corrector = LSNPC(random_state=seed, **options).fit(X[tr], P_tr, **kwargs)
    seconds = time.perf_counter() - started
    Q = corrector.predict_proba(Xt, P_te)
    t = corrector.threshold_
    at_half = _scored(Yt, Q, 0.5)
    blend = corrector.report_["blend"]
    # the guard's numbers, so that another rule can be replayed on the rows of lsnpc-noguard and lsnpc-half
    guard = ({"guard_support": blend.evidence["loss_support"], "guard_scores": blend.evidence["scores"],
              "guard_se": blend.evidence["difference_se"]}
             if blend.method == "validation test" else {})
    rows = [dict(key, method=method, **_scored(Yt, Q, t), seconds=seconds, threshold=t,
                 base_weight=corrector.base_weight_, blend=blend.method,
                 threshold_method=corrector.report_["threshold"].method, epoch=corrector.best_epoch_,
                 epochs=corrector.epochs_, micro_at_half=at_half["micro"], macro_at_half=at_half["macro"], **guard)]
    if method == "lsnpc":
        for derived in (m for m in methods if m in DERIVED):
            if corrector.report_.plan.evidence == "validation":
                rows.append(dict(key, method=derived, **_derived(corrector, derived, X[v0], Y[v0], P_v0, Xt, Yt, P_te),
                                 seconds=seconds, epoch=corrector.best_epoch_, epochs=corrector.epochs_))
            elif derived != "lsnpc-half":  # the triple was trained on or set aside: fit it (no guard, no ½ blend)
                rows.extend(_fitted_rows(derived, (), params, key, s, seed))
    return rows


#: Methods read off the ``lsnpc`` fit of the same setting, equal to fitting them (the guard and the student come
#: after the training, and the random draws before them are the same): ``lsnpc-noguard`` is ``LSNPC(guard=False)``,
#: ``lsnpc-correction`` is ``LSNPC(student=False, guard=False)``, ``lsnpc-half`` is the guard's ½ blend
#: (``LSNPC(blend_candidates=(0.5,))`` where the guard passes it), each at its threshold tuned on val0.
DERIVED = ("lsnpc-noguard", "lsnpc-correction", "lsnpc-half")


def _derived(corrector, method: str, Xv, yv, Pv, Xt, Yt, Pt) -> dict:
    from lsnpc import tune_threshold

    weight = 0.5 if method == "lsnpc-half" else 0.0
    if method == "lsnpc-correction":
        out = corrector._raw_correct
    else:
        def out(X, P):
            return (1 - weight) * corrector._output(X, P) + weight * P
    t = tune_threshold(yv, out(Xv, Pv), thresholds=corrector.threshold_grid).threshold
    Q = out(Xt, Pt)
    return dict(_scored(Yt, Q, t), threshold=t, base_weight=weight)


KEYS = ("dataset", "requested", "kind", "rate", "seed", "base")


def _noise_name(kind: str, rate: float) -> str:
    return "0%" if rate == 0 else f"{bq.NOISE_NAMES.get(kind, kind)} {rate:.0%}"


def print_tables(rows: list[dict], methods: tuple[str, ...] = METHODS) -> None:
    """The per-setting table (absolute scores, mAP beside them) and the summary, per base model and method, against
    base-threshold (the base model at the threshold ``tune_threshold`` chooses on the same clean rows)."""
    import pandas as pd

    if not rows:
        print("No results to print.")
        return
    df = pd.DataFrame(rows).drop_duplicates(subset=[*KEYS, "method"], keep="last")
    if "map" not in df:
        df["map"] = np.nan
    shown = [m for m in methods if m in set(df.method)]
    setting = ["base", "dataset", "requested", "kind", "rate"]
    per = df.groupby([*setting, "method"], sort=False)[["micro", "macro", "map"]].mean().mul(100)
    print("\nTest micro / macro-F1 (×100; mean over seeds), the change over base-threshold in brackets; mAP after |")
    print("| base model | data set | noise | base at 0.5 | " + " | ".join(shown) + " |")
    print("|---|---|---|---|" + "---|" * len(shown))
    for key, _ in df.groupby(setting, sort=False):
        cells = {m: per.loc[(*key, m)] for m in ("base", *shown) if (*key, m) in per.index}
        ref = cells.get("base-threshold")
        out = []
        for m in shown:
            c = cells.get(m)
            if c is None:
                out.append("")
                continue
            text = f"{c.micro:.1f} / {c.macro:.1f}"
            if m != "base-threshold" and ref is not None:
                text += f" ({c.micro - ref.micro:+.1f} / {c.macro - ref.macro:+.1f})"
            if not m.startswith("base-threshold") and not np.isnan(c["map"]):
                text += f" \\| {c['map']:.1f}"
            out.append(text)
        b = cells["base"]
        base, dataset, requested, kind, rate = key
        name = dataset if requested == "full" else f"{dataset}@{requested}"
        print(f"| {base} | {name} | {_noise_name(kind, rate)} | {b.micro:.1f} / {b.macro:.1f} \\| {b['map']:.1f} | "
              + " | ".join(out) + " |")

    print("\nAgainst base-threshold: the mean change at 30–50% noise, the worst setting in either F1 (all noise "
          "rates) and at 0%, and the mean change in mAP against the base model (threshold-free)")
    print("| base model | method | settings | mean Δ micro 30–50% | mean Δ macro 30–50% | worst Δ | worst Δ at 0% "
          "(micro / macro) | mean Δ mAP |")
    print("|---|---|---|---|---|---|---|---|")
    wide = per.reset_index()
    index = ["dataset", "requested", "kind", "rate"]
    for base in dict.fromkeys(wide.base):
        ref = wide[(wide.base == base) & (wide.method == "base-threshold")].set_index(index)
        plain = wide[(wide.base == base) & (wide.method == "base")].set_index(index)
        for m in shown:
            if m == "base-threshold":
                continue
            g = wide[(wide.base == base) & (wide.method == m)].set_index(index)
            j = g[["micro", "macro", "map"]].join(ref[["micro", "macro"]].add_suffix("_ref"), how="inner").join(
                plain[["map"]].add_suffix("_base"), how="left")
            if not len(j):
                continue
            d = j[["micro", "macro"]].to_numpy() - j[["micro_ref", "macro_ref"]].to_numpy()
            noisy = j.index.get_level_values("rate").to_numpy() > 0
            worst0 = f"{d[~noisy, 0].min():+.1f} / {d[~noisy, 1].min():+.1f}" if (~noisy).any() else "–"
            means = [f"{d[noisy, k].mean():+.2f}" if noisy.any() else "–" for k in (0, 1)]
            dmap = (j["map"] - j["map_base"]).mean()
            print(f"| {base} | {m} | {len(j)} | {means[0]} | {means[1]} | {d.min():+.1f} | {worst0} | "
                  + ("–" if np.isnan(dmap) else f"{dmap:+.2f}") + " |")


#: the method whose row is the output at each base weight the guard can choose
WEIGHT_ROWS = {"0.0": "lsnpc-noguard", "0.5": "lsnpc-half", "1.0": "base-threshold"}


def replay_guard(rows: list[dict], confidences: list[float], min_rows: Sequence[int] = (0,)) -> None:
    """The guard's choice replayed at each of ``confidences`` (``blend_confidence``) from the numbers an ``lsnpc`` row
    records (``guard_support``, ``guard_scores``), and with the base model kept wherever the triple has fewer than
    each of ``min_rows`` rows; scored with the rows of the outputs it chooses among (:data:`WEIGHT_ROWS`; run
    lsnpc-noguard and lsnpc-half beside lsnpc; the fit's own row where the replay keeps its choice): per base model,
    confidence and fewest rows, the mean change over base-threshold at 30–50% noise, the worst setting, the worst
    at 0% and how often the base model came back (in how many fits). Settings are averaged over their seeds first,
    as in :func:`print_tables`."""
    by = {(*(r[k] for k in KEYS), r["method"]): r for r in rows}
    print("\nThe guard replayed at other confidences and fewest triple rows, against base-threshold")
    print("| base model | confidence | fewest rows | settings | mean Δ micro 30–50% | mean Δ macro 30–50% | worst Δ "
          "| worst Δ at 0% | base model kept |")
    print("|---|---|---|---|---|---|---|---|---|")
    for base in dict.fromkeys(r["base"] for r in rows):
        fits = [r for r in rows if r["base"] == base and r["method"] == "lsnpc" and "guard_support" in r]
        for c, fewest in ((c, n) for c in confidences for n in min_rows):
            deltas, kept = {}, 0  # per setting, over its seeds (as print_tables' summary)
            for r in fits:
                key = tuple(r[k] for k in KEYS)
                passing = [w for w, lost in r["guard_support"].items() if lost < c and r["n_val"] >= fewest]
                w = max(passing, key=lambda w: (sum(r["guard_scores"][w]), float(w))) if passing else "1.0"
                own = float(w) == r["base_weight"]
                chosen = r if own else by.get((*key, WEIGHT_ROWS[w]))
                ref = by.get((*key, "base-threshold"))
                if chosen is None or ref is None:
                    continue
                kept += w == "1.0"
                deltas.setdefault((r["dataset"], r["requested"], r["kind"], r["rate"]), []).append(
                    (100 * (chosen["micro"] - ref["micro"]), 100 * (chosen["macro"] - ref["macro"]), r["rate"]))
            if not deltas:
                continue
            d = np.array([np.mean(v, axis=0) for v in deltas.values()])
            noisy, clean = d[d[:, 2] >= 0.3], d[d[:, 2] == 0]
            means = " | ".join(f"{noisy[:, k].mean():+.2f}" if len(noisy) else "–" for k in (0, 1))
            worst0 = f"{clean[:, :2].min():+.1f}" if len(clean) else "–"
            print(f"| {base} | {c:g} | {fewest} | {len(d)} | {means} | {d[:, :2].min():+.1f} | {worst0} | {kept} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     fromfile_prefix_chars="@")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--size", default="full", help='training rows drawn ("full": the whole training split)')
    parser.add_argument("--configs", nargs="+", default=None, metavar="DATASET@SIZE",
                        help="data sets each at its own size, e.g. 'bibtex[top=45]@333' (instead of --datasets, --size)")
    parser.add_argument("--noise", nargs="+", default=list(bq.NOISES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--bases", nargs="+", default=["protocol"], choices=BASES)
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), choices=METHODS)
    parser.add_argument("--data-home", default=str(bq.DEFAULT_HOME))
    parser.add_argument("--text-pool", type=int, default=100_000, help="texts of a text set encoded (all of them)")
    parser.add_argument("--feature-cache", default=None, help="feature cache folder (default: lsnpc's)")
    parser.add_argument("--base-cache", default=None,
                        help="folder of the base models' probabilities, one file a setting (read if there, else written)")
    parser.add_argument("--out", type=Path, nargs="+", required=True,
                        help="JSON-lines results file (appended, resumed); with --report, several are merged")
    parser.add_argument("--report", action="store_true", help="only print the tables of --out")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", dest="params")
    parser.add_argument("--guard-confidence", nargs="+", type=float, default=None, metavar="C",
                        help="also replay the guard at these blend_confidence values (needs lsnpc-noguard, lsnpc-half)")
    parser.add_argument("--guard-min-rows", nargs="+", type=int, default=[0], metavar="N",
                        help="with --guard-confidence: also keep the base model where the triple has fewer than N rows")
    args = parser.parse_args()
    try:
        params = dict(bq.parse_param(item) for item in args.params)
        configs = ([bq.parse_config(c) for c in args.configs] if args.configs is not None
                   else [(d, args.size) for d in args.datasets])
    except ValueError as error:
        parser.error(str(error))
    rows = [json.loads(line) for path in args.out if path.exists() for line in path.read_text().splitlines()]
    if not args.report:
        done = {(*(r[k] for k in KEYS), r["method"]) for r in rows}
        for dataset, size in configs:
            for spec in args.noise:
                kind, rate = spec.split(":")
                for seed in args.seeds:
                    for base_kind in args.bases:
                        key = (dataset, size, kind, float(rate), seed, base_kind)
                        todo = tuple(m for m in args.methods if (*key, m) not in done)
                        if not todo:
                            continue
                        if any(m in DERIVED for m in todo) and "lsnpc" not in todo:
                            todo = ("lsnpc", *todo)  # the derived methods are read off its fit
                        fresh = run_setting(*key, todo, args.data_home, args.text_pool, args.feature_cache, params,
                                            args.base_cache)
                        fresh = [r for r in fresh if (*(r[k] for k in KEYS), r["method"]) not in done]
                        done.update((*(r[k] for k in KEYS), r["method"]) for r in fresh)
                        rows += fresh
                        with open(args.out[0], "a") as fh:
                            fh.writelines(json.dumps(r) + "\n" for r in fresh)
                        print(f"  done {dataset}@{size} {_noise_name(kind, float(rate))} seed {seed} {base_kind}: "
                              + ", ".join(f"{r['method']} {100 * r['micro']:.1f}/{100 * r['macro']:.1f}"
                                          for r in fresh), flush=True)
    print_tables(rows, tuple(m for m in METHODS if m in args.methods) if not args.report else METHODS)
    if args.guard_confidence:
        replay_guard(rows, args.guard_confidence, args.guard_min_rows)


if __name__ == "__main__":
    main()
