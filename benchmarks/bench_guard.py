"""The guard's rules side by side: for each setting LSNPC is fitted once (unguarded), then each rule
decides the base model's weight from the same fit, so the rules differ only in the decision.

Protocol as ``bench_quality.py`` (canonical splits, n training rows, the paper's noise, a base
``MLPClassifier``, the ≈5% clean validation triple val0). Per setting:

- with validation labels: ``LSNPC(guard=False, small_val="validate")`` fitted with the val0 triple (it
  chooses the epoch however few its rows: since rule 15 the library trains on a triple under 20 rows that
  covers 30% of the labels instead, measured by ``bench_quality.py``'s ``lsnpc`` against ``lsnpc-validate``);
  its output on val0 and on the test split; each rule picks w ∈ {0, ½, 1} on val0 (the library's bootstrap:
  500 resamples, the estimator's own seed) and the test output is (1 − w) · output + w · base;
- without them: ``LSNPC(guard=False)`` fitted without; each prior base weight b, and the collapse check
  on the training rows (``decide_without_validation``), gives the test output;
- with the noisy training labels only (mode "labels"): the same priors on ``LSNPC(guard=False)`` fitted
  with ``labels=`` the noisy labels (they choose the epoch, "noisy_f1").

Rules with validation:
  loss@c   the library's bootstrap test (its whole rule until 2026-11-26): pass over a candidate that
           loses micro- or macro-F1 in ≥ c of the resamples
  win@q    take a candidate only if it beats the base model (mean of micro and macro) in ≥ q of them
  prior-first@q  start from the no-label prior ⅓: take w = 0 only if it beats the base model in ≥ q of
           the resamples and does not lose in ≥ ½; else ⅓, ½, 1, the first that does not lose in ≥ ½
  discord@k  the library's from 9ab58c1 to 61d21c0 (k = 3): loss@0.4, except that when output and base
           model decide differently on fewer than k validation entries, or the validation labels hold no
           positive entry, the no-label rule on the training rows (⅓, or 1 for a collapse) decides
  library  the library's rule from 61d21c0 until rule 12 (2026-11-27): loss@0.4, except where
           ``guard._untestable_because`` finds the validation set cannot test (fewer than 20 rows, no
           positive entry, fewer than 3 discordant entries: ``thin@20`` and ``discord@3`` together), the
           no-label rule with the ⅓ prior (or 1 for a collapse)
  library+ds  the library's rule since rule 12 (docs/quality.md, "Beside a validation set too small to test"): the
           same, except that an untestable validation set falls back to the rule without any label,
           dense|sharp@0.4 below, instead of the ⅓ prior (``lsnpc-validate`` in bench_quality.py; ``lsnpc``
           too, except where rule 15 trains on a triple under 20 rows)
  discord-base@k  discord@k, handing back the base model instead
  thin@N   the no-label rule whenever the validation set has fewer than N rows, else loss@0.4
  thin-first@N  below N rows the candidates ⅓, ½, 1 under loss@0.4 (and the collapse check), else loss@0.4
  collapse+loss@0.4  loss@0.4, but w = 1 whenever the no-label collapse check refuses the output
  discord@3+mean@c  discord@3 with a candidate passed over when the mean of its micro- and macro-F1
           loses to the base model's in ≥ c of the resamples (instead of either of them losing)
Rules without (modes "noval" and "labels"): prior@b (b the base weight).
Mode "noval" also (the collapse check kept: a refused output is the base model's for every label; the library's
rule without any label since 2026-11-27 is dense|sharp@0.4, docs/quality.md "No blend with an uninformative base model
on sparse labels"; the others were not adopted):
  sparse0@t  per label: w = 0 where the label's mean base probability on the training rows is below t, ⅓ elsewhere
  dense@d    per data set: ⅓ where the mean base probability over all entries on the training rows is ≥ d, else 0
  sharp@s    per data set: ⅓ where the base model's probabilities on the training rows resolve at least a share s
             of the labels' Bernoulli variance (Σ_k var_i p_ik / Σ_k m_k(1 − m_k), m_k the mean), else 0;
             dense|sharp@s: ⅓ where either dense@0.1 or sharp@s keeps it
Mode "labels" also: ntest@c  the library's rule there since 2026-11-27: the held-out rows' noisy labels test
           the output against the ¼ blend, w = 0 unless it loses micro- or macro-F1 to it in ≥ c of the
           resamples (``guard.decide_with_noisy_labels``; the library's c is 0.5), else ¼; 1 for a collapse
           (beside a validation set too small to test, the fit is this one and the ¼ prior stands untested)
  ds@0.25    rule 13: ¼, but 0 where the sparse rule of the fit without any label (dense|sharp@0.4) drops the
           blend (beside a validation set too small to test); ds+ntest@0.5: the same before the noisy-label
           test (without a validation triple)
Per-label, in every mode: RULE+rare@c  the library's rule (mode val) or prior@b (b ¼ and ⅓), except that each
           label whose expected number of positives under the base model on the training rows (Σ_i p_ij) is
           below c keeps the base model's probabilities (its w is 1)

    python benchmarks/bench_guard.py --datasets scene yeast synthetic --train-sizes 500 1500 --out guard.jsonl
    python benchmarks/bench_guard.py --report --out guard.jsonl --groups choose=scene,yeast,synthetic \\
        confirm=tmc2007-500,bibtex,delicious
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from bench_quality import DEFAULT_HOME, NOISE_NAMES, NOISES, load_arrays

LOSS_LEVELS = (0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
WIN_LEVELS = (0.5, 0.6)
PRIOR_FIRST_LEVELS = (0.6, 0.75, 0.9)
PRIORS = (0.0, 0.25, 1 / 3, 0.4, 0.5)
CANDIDATES = (0.0, 1 / 3, 0.5, 1.0)
THIN_ROWS = (20, 30, 50, 100)
DISCORD = (3, 5, 10, 20)
RARE_COUNTS = (3, 10, 30)
NOISY_TEST_LEVELS = (0.3, 0.4, 0.5)
LOSS_MEAN_LEVELS = (0.3, 0.4, 0.5)
SPARSE_LEVELS = (0.05, 0.1, 0.2)
DENSE_LEVELS = (0.1, 0.15, 0.2)
SHARP_LEVELS = (0.2, 0.3, 0.4)


def _rule_weights(y_val: np.ndarray, output: np.ndarray, base: np.ndarray, seed: int,
                  collapse_w: float, uninformed_w: float) -> dict[str, float]:
    """The base weight each validation rule picks (``collapse_w``: the no-label rule's on the training rows
    with the ⅓ prior; ``uninformed_w``: the rule without any label, dense|sharp@0.4)."""
    from lsnpc.corrector.guard import _counts, _untestable_because, f1_from_counts

    n = len(y_val)
    rng = np.random.default_rng(seed)
    weights = np.vstack([np.ones((1, n)), rng.multinomial(n, np.full(n, 1.0 / n), size=500)])
    scores = {w: f1_from_counts(*_counts(y_val, ((1 - w) * output + w * base) >= 0.5, weights)) for w in CANDIDATES}
    base_micro, base_macro = (s[1:] for s in scores[1.0])
    loss, loss_mean, win = {}, {}, {}
    for w in CANDIDATES[:-1]:
        micro, macro = (s[1:] for s in scores[w])
        loss[w] = float(((micro < base_micro - 1e-12) | (macro < base_macro - 1e-12)).mean())
        loss_mean[w] = float(((micro + macro) < (base_micro + base_macro) - 1e-12).mean())
        win[w] = float(((micro + macro) > (base_micro + base_macro) + 1e-12).mean())
    library = (0.0, 0.5)  # the library's candidates before the base model
    picks = {}
    for c in LOSS_LEVELS:
        picks[f"loss@{c:g}"] = next((w for w in library if loss[w] < c), 1.0)
    for q in WIN_LEVELS:
        picks[f"win@{q:g}"] = next((w for w in library if win[w] >= q), 1.0)
    for q in PRIOR_FIRST_LEVELS:
        if win[0.0] >= q and loss[0.0] < 0.5:
            picks[f"prior-first@{q:g}"] = 0.0
        else:
            picks[f"prior-first@{q:g}"] = next((w for w in CANDIDATES[1:-1] if loss[w] < 0.5), 1.0)
    picks["collapse+loss@0.4"] = 1.0 if collapse_w == 1.0 else picks["loss@0.4"]
    for rows in THIN_ROWS:
        picks[f"thin@{rows}"] = collapse_w if n < rows else picks["loss@0.4"]
        picks[f"thin-first@{rows}"] = (
            1.0 if collapse_w == 1.0 else next((w for w in CANDIDATES[1:-1] if loss[w] < 0.4), 1.0)
        ) if n < rows else picks["loss@0.4"]
    discordant = int(((output >= 0.5) != (base >= 0.5)).sum())
    blind = not y_val.any()  # no positive label: F1 is 0 for every candidate (the library's untestable too)
    for k in DISCORD:
        picks[f"discord@{k}"] = collapse_w if discordant < k or blind else picks["loss@0.4"]
        picks[f"discord-base@{k}"] = 1.0 if discordant < k or blind else picks["loss@0.4"]
    for c in LOSS_MEAN_LEVELS:
        picks[f"discord@3+mean@{c:g}"] = (
            collapse_w if discordant < 3 else next((w for w in library if loss_mean[w] < c), 1.0)
        )
    untestable = _untestable_because(n, int(np.count_nonzero(y_val)), discordant)
    picks["library"] = collapse_w if untestable else picks["loss@0.4"]
    picks["library+ds"] = uninformed_w if untestable else picks["loss@0.4"]
    picks["n_discordant"] = discordant
    return picks


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str, modes: tuple[str, ...]) -> dict:
    import torch

    torch.set_num_threads(1)
    from lsnpc import LSNPC, MLPClassifier, simulate_noise
    from lsnpc.corrector.guard import NO_LABELS_MIN_DENSITY, decide_with_noisy_labels, decide_without_validation
    from lsnpc.data import paper_splits
    from lsnpc.metrics import macro_f1, micro_f1

    X, Y, Xt, Yt = load_arrays(dataset, home, 4000, None)
    if size != "full" and int(size) < len(X):
        rows = np.sort(np.random.default_rng(10_000 + seed).choice(len(X), int(size), replace=False))
        X, Y = X[rows], Y[rows]
    split = paper_splits(len(X), random_state=seed)
    tr, v0 = split["train"], split["val0"]
    Y_noisy = simulate_noise(Y[tr], kind, rate, random_state=seed)[0] if rate > 0 else Y[tr].copy()
    base = MLPClassifier(random_state=seed, n_threads=1).fit(X[tr], Y_noisy, X_val=X[v0], y_val=Y[v0])
    P_tr, P_v0, P_te = (base.predict_proba(a) for a in (X[tr], X[v0], Xt))

    def f1s(Q: np.ndarray) -> list[float]:
        return [micro_f1(Yt, Q), macro_f1(Yt, Q)]

    expected = P_tr.sum(0)  # (L,) the base model's expected positives of each label on the training rows

    def with_rare(picks: dict, rule: str, w: float, out_test: np.ndarray) -> None:
        """The rare@c variants of ``rule`` (base weight ``w``): labels expected fewer than c times keep the base."""
        for c in RARE_COUNTS:
            per_label = np.where(expected < c, 1.0, w)
            picks[f"{rule}+rare@{c:g}"] = dict(w=float(per_label.mean()),
                                              f1=f1s((1 - per_label) * out_test + per_label * P_te))

    out = dict(dataset=dataset, requested=size, size=len(X), kind=kind, rate=rate, seed=seed, n_val=len(v0),
               base=f1s(P_te), val={}, noval={}, labels={})
    started = time.perf_counter()
    if "val" in modes:
        model = LSNPC(random_state=seed, guard=False, small_val="validate").fit(
            X[tr], P_tr, X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
        out_val, out_test = model.predict_proba(X[v0], P_v0), model.predict_proba(Xt, P_te)
        out_train = model.predict_proba(X[tr], P_tr)
        collapse_w = decide_without_validation(out_train, P_tr, base_weight=1 / 3).base_weight
        uninformed_w = decide_without_validation(out_train, P_tr, base_weight=1 / 3, uninformed=True).base_weight
        picks = _rule_weights(Y[v0], out_val, P_v0, model.predict_seed_, collapse_w, uninformed_w)
        out["n_discordant"] = picks.pop("n_discordant")
        for rule, w in picks.items():
            out["val"][rule] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
        with_rare(out["val"], "library", picks["library"], out_test)
    for mode, labels in (("noval", None), ("labels", Y_noisy)):
        if mode not in modes:
            continue
        model = LSNPC(random_state=seed, guard=False).fit(X[tr], P_tr, labels=labels)
        out_train, out_test = model.predict_proba(X[tr], P_tr), model.predict_proba(Xt, P_te)
        for b in PRIORS:
            w = decide_without_validation(out_train, P_tr, base_weight=b).base_weight
            out[mode][f"prior@{b:.2g}"] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
            if b in (0.25, 1 / 3):
                with_rare(out[mode], f"prior@{b:.2g}", w, out_test)
        if mode == "noval":  # the ⅓ prior by label or by data set, from the base model's probabilities alone
            no_label = decide_without_validation(out_train, P_tr, base_weight=1 / 3)
            mean_p = P_tr.mean(0)  # (L,) each label's mean base probability on the training rows
            for t in SPARSE_LEVELS:
                per_label = np.ones_like(mean_p) if no_label.refused else np.where(mean_p < t, 0.0, 1 / 3)
                out[mode][f"sparse0@{t:g}"] = dict(w=float(per_label.mean()),
                                                   f1=f1s((1 - per_label) * out_test + per_label * P_te))
            for d in DENSE_LEVELS:
                w = no_label.base_weight if no_label.refused or mean_p.mean() >= d else 0.0
                out[mode][f"dense@{d:g}"] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
            # the base model's density and sharpness on the training rows, as the guard computed them
            density, sharp = no_label.base_density, no_label.base_sharpness
            for s0 in SHARP_LEVELS:
                for rule, keep in ((f"sharp@{s0:g}", sharp >= s0),
                                   (f"dense|sharp@{s0:g}", sharp >= s0 or density >= NO_LABELS_MIN_DENSITY)):
                    w = no_label.base_weight if no_label.refused or keep else 0.0
                    out[mode][rule] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
            out["noval_stats"] = dict(kept=no_label.kept_base_positives, ratio=no_label.cardinality_ratio,
                                      density=density, refused=bool(no_label.refused), sharpness=sharp)
        if mode == "labels":  # the noisy labels of the rows the fit held out test the output against ¼
            rows = model._holdout_rows  # None where too few rows to hold any out: the prior stands, as in the library
            no_label = decide_without_validation(out_train, P_tr, base_weight=0.25)
            held_out = None if rows is None else model._output(X[tr][rows], P_tr[rows])
            for c in NOISY_TEST_LEVELS:
                w = no_label.base_weight if rows is None else decide_with_noisy_labels(
                    Y_noisy[rows], held_out, P_tr[rows], no_label=no_label, confidence=c,
                    rng=np.random.default_rng(model.predict_seed_)).base_weight
                out[mode][f"ntest@{c:g}"] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
            # rule 13: the sparse rule of the fit without any label, on the ¼ prior (beside an untestable
            # validation set) and before the noisy-label test (without one)
            sparse = decide_without_validation(out_train, P_tr, base_weight=0.25, uninformed=True)
            out[mode]["ds@0.25"] = dict(w=sparse.base_weight,
                                        f1=f1s((1 - sparse.base_weight) * out_test + sparse.base_weight * P_te))
            w = sparse.base_weight if rows is None else decide_with_noisy_labels(
                Y_noisy[rows], held_out, P_tr[rows], no_label=sparse, confidence=0.5,
                rng=np.random.default_rng(model.predict_seed_)).base_weight
            out[mode]["ds+ntest@0.5"] = dict(w=w, f1=f1s((1 - w) * out_test + w * P_te))
            out["labels_stats"] = dict(density=sparse.base_density, sharpness=sparse.base_sharpness,
                                       refused=bool(sparse.refused))
    out["seconds"] = time.perf_counter() - started
    return out


def _key(row: dict) -> tuple:
    return row["dataset"], row["requested"], row["kind"], row["rate"], row["seed"]


def report(rows: list[dict], groups: dict[str, list[str]]) -> None:
    """Per group and mode, each rule against issue 9's bar (mean over seeds per setting)."""
    import pandas as pd

    records = []
    for r in rows:
        for mode in ("val", "noval", "labels"):
            for rule, v in r.get(mode, {}).items():
                records.append(dict(dataset=r["dataset"], size=r["size"], kind=r["kind"], rate=r["rate"],
                                    seed=r["seed"], mode=mode, rule=rule, w=v["w"],
                                    d_micro=100 * (v["f1"][0] - r["base"][0]),
                                    d_macro=100 * (v["f1"][1] - r["base"][1])))
    df = pd.DataFrame(records)
    setting = ["dataset", "size", "kind", "rate", "mode", "rule"]
    per = df.groupby(setting).agg(d_micro=("d_micro", "mean"), d_macro=("d_macro", "mean"), w=("w", "mean"),
                                  seeds=("seed", "nunique")).reset_index()
    for group, sets in groups.items():
        g = per[per.dataset.isin(sets)]
        if g.empty:
            continue
        print(f"\n{group} ({', '.join(sets)}): per setting, mean over seeds; Δ in F1 points")
        print("| mode | rule | settings | mean Δ micro 30–50% | mean Δ macro 30–50% | worst Δ 30–50% | "
              "worst Δ at 0% | mean w |")
        print("|---|---|---|---|---|---|---|---|")
        for (mode, rule), h in g.groupby(["mode", "rule"], sort=True):
            noisy, clean = h[h.rate > 0], h[h.rate == 0]
            worst_noisy = noisy[["d_micro", "d_macro"]].min(axis=1).min()
            worst_clean = clean[["d_micro", "d_macro"]].min(axis=1).min() if len(clean) else float("nan")
            print(f"| {mode} | {rule} | {len(h)} | {noisy.d_micro.mean():+.2f} | {noisy.d_macro.mean():+.2f} | "
                  f"{worst_noisy:+.2f} | {worst_clean:+.2f} | {h.w.mean():.2f} |")
        clean = g[g.rate == 0]
        if len(clean):
            print("\n0% noise, per setting (Δ micro / Δ macro):")
            for (dataset, size, mode), h in clean.groupby(["dataset", "size", "mode"]):
                print(f"  {dataset} {size} {mode}: " + ", ".join(
                    f"{r.rule} {r.d_micro:+.2f}/{r.d_macro:+.2f}" for r in h.itertuples()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["scene"])
    parser.add_argument("--train-sizes", nargs="+", default=["500", "1500"])
    parser.add_argument("--noise", nargs="+", default=list(NOISES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--out", type=Path, nargs="+", required=True, help="JSON lines (appended, resumed)")
    parser.add_argument("--report", action="store_true", help="only print the tables of --out")
    parser.add_argument("--groups", nargs="+", default=None, help="NAME=set1,set2 (default: one group per data set)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=["val", "noval"], choices=("val", "noval", "labels"),
                        help="with the validation triple, without labels, with the noisy training labels only")
    args = parser.parse_args()
    rows = [json.loads(line) for path in args.out if path.exists() for line in path.read_text().splitlines()]
    if not args.report:
        done = {_key(r) for r in rows}
        tasks = [(d, s, spec.split(":")[0], float(spec.split(":")[1]), seed) for d in args.datasets
                 for s in args.train_sizes for spec in args.noise for seed in args.seeds]
        tasks = [t for t in tasks if t not in done]
        started = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            extra = [args.data_home] * len(tasks), [tuple(args.modes)] * len(tasks)
            for row in pool.map(run_setting, *zip(*tasks), *extra):
                rows.append(row)
                with open(args.out[0], "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                noise = "0%" if row["rate"] == 0 else f"{NOISE_NAMES[row['kind']]} {row['rate']:.0%}"
                print(f"  {row['dataset']} n={row['size']} {noise} seed {row['seed']}: {row['seconds']:.0f} s",
                      flush=True)
        print(f"{len(tasks)} settings in {time.perf_counter() - started:.0f} s")
    groups = ({g.split("=")[0]: g.split("=")[1].split(",") for g in args.groups} if args.groups
              else {d: [d] for d in sorted({r["dataset"] for r in rows})})
    report(rows, groups)


if __name__ == "__main__":
    main()
