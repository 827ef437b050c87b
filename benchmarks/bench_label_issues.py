"""Label issues and corrected labels from LSNPC against cleanlab, on real multilabel data.

Protocol, per (data set, noise, seed): the paper's noise (`lsnpc.simulate_noise`) on the training
labels of MULAN's train split; out-of-fold probabilities of the base `MLPClassifier` trained on the
noisy labels (`lsnpc.cross_val_pred_probs`, 5 multilabel-stratified folds) — the same probabilities
for both methods; then

* finding the flipped entries: per-entry AUROC and average precision of LSNPC's
  `label_quality_scores` and of cleanlab's per-class quality scores
  (`cleanlab.multilabel_classification.rank.get_label_quality_scores_per_class`, self-confidence);
  precision and recall of LSNPC's `find_label_issues` and of cleanlab's
  `find_multilabel_issues_per_class`;
* retraining: test micro/macro-F1 of a fresh base MLP trained on (a) the noisy labels, (b) cleanlab's
  kept rows (`cleanlab.multilabel_classification.filter.find_label_issues` removed), (c)
  `correct_labels`' output, (d) the true labels; scored on MULAN's test split, each the mean over
  --retrain-seeds MLP seeds (the setting's seed, then seed + 1000, + 2000, ...; the same seeds for the
  four label sets). One retrain is a noisy judge on small data: on a generated 19-label problem the
  noisy-label model's macro-F1 was 16.1 with the setting's seed and 12.5-13.7 with six others.

goemotions: MiniLM features of a seeded 4,000-text pool per split, as in `bench_quality.py`.

Needs the `bench` extra (cleanlab). One thread per process; settings run in parallel with --jobs.

    python benchmarks/bench_label_issues.py --datasets scene yeast tmc2007-500 bibtex delicious --jobs 2

tmc2007-500 and delicious use a seeded subset of --max-train training rows (default 4,000). Data sets
may be ``bench_quality``'s variants (``synthetic[n_labels=19,...]``, ``bibtex[top=45]``).
"""

from __future__ import annotations

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

DEFAULT_HOME = Path(__file__).resolve().parents[2] / "shared" / "data"
NOISE = ("symmetric:0.3", "symmetric:0.5", "pairflip:0.3", "pairflip:0.5")
LARGE = ("tmc2007-500", "delicious")


def load(dataset: str, home: str, max_train: int) -> tuple[np.ndarray, ...]:
    """(X, Y, X_test, Y_test) as ``bench_quality.load_arrays`` gives them (its variants too, e.g.
    ``bibtex[top=45]``; text sets (goemotions) encoded with MiniLM from its 4,000-text pools, lsnpc's
    feature cache); the sets in LARGE cut to a seeded ``max_train`` of their training rows."""
    from bench_quality import load_arrays, parse_variant

    X, Y, Xt, Yt = load_arrays(dataset, home, 4000, None)
    X, Y, Xt, Yt = np.asarray(X, np.float32), np.asarray(Y, np.int64), np.asarray(Xt, np.float32), np.asarray(Yt, np.int64)
    if parse_variant(dataset)[0] in LARGE and len(X) > max_train:
        keep = np.sort(np.random.default_rng(1234).choice(len(X), max_train, replace=False))
        X, Y = X[keep], Y[keep]
    return X, Y, Xt, Yt


def noisy_and_oof(X, Y, kind: str, rate: float, seed: int, cache: str | None, name: str):
    """Noisy labels and out-of-fold probabilities, read from / written to ``cache`` when given."""
    from lsnpc import MLPClassifier, cross_val_pred_probs, simulate_noise

    path = Path(cache) / f"{name}_{kind}{int(round(rate * 100))}_s{seed}.npz" if cache else None
    if path is not None and path.exists():
        saved = np.load(path)
        return saved["Yn"], saved["P"]
    Yn, _ = simulate_noise(Y, kind, rate, random_state=seed)
    P = cross_val_pred_probs(MLPClassifier(random_state=seed, n_threads=1), X, Yn, cv=5, random_state=seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, Yn=Yn, P=P)
    return Yn, P


def retrain(X, Y, Xt, Yt, seed: int, repeats: int = 1) -> tuple[float, float]:
    """Test (micro, macro)-F1 in percent of a base MLP trained on (X, Y): the mean over ``repeats`` MLP
    seeds, ``seed + 1000 i`` (``repeats=1``: the seed alone)."""
    from lsnpc import MLPClassifier
    from lsnpc.metrics import macro_f1, micro_f1

    scores = []
    for i in range(repeats):
        Q = MLPClassifier(random_state=seed + 1000 * i, n_threads=1).fit(X, Y).predict_proba(Xt)
        scores.append((100 * micro_f1(Yt, Q), 100 * macro_f1(Yt, Q)))
    micro, macro = np.mean(scores, axis=0)
    return float(micro), float(macro)


def run_setting(dataset: str, kind: str, rate: float, seed: int, home: str, max_train: int,
                cache: str | None, retrain_seeds: int = 1) -> dict:
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from cleanlab.multilabel_classification.filter import find_label_issues as cl_find_rows
    from cleanlab.multilabel_classification.filter import find_multilabel_issues_per_class
    from cleanlab.multilabel_classification.rank import get_label_quality_scores_per_class
    from sklearn.metrics import average_precision_score, roc_auc_score

    from lsnpc.label_issues import fit_corrector

    X, Y, Xt, Yt = load(dataset, home, max_train)
    Yn, P = noisy_and_oof(X, Y, kind, rate, seed, cache, dataset)
    flipped = (Yn != Y).ravel()
    row = dict(dataset=dataset, kind=kind, rate=rate, seed=seed, flipped=float(flipped.mean()),
               retrain_seeds=retrain_seeds)

    started = time.perf_counter()
    corrector, _ = fit_corrector(Yn, P, features=X, random_state=seed, n_threads=1)  # the label functions' LSNPC
    # the three answers from one correction, as `lsnpc label-issues` gets them (each function alone
    # fits and corrects again); equal to label_quality_scores / correct_labels / find_label_issues (tested)
    review = corrector.review_labels(X, Yn, P)
    scores, corrected, issues = review["scores"], review["suggested"], review["issues"]
    row["lsnpc_s"] = time.perf_counter() - started

    started = time.perf_counter()
    lists = [list(np.flatnonzero(r)) for r in Yn]
    cl_scores = np.asarray(get_label_quality_scores_per_class(lists, P))
    cl_issues = np.asarray(find_multilabel_issues_per_class(lists, P)).reshape(Yn.shape)
    cl_rows = np.asarray(cl_find_rows(lists, P))
    row["cleanlab_s"] = time.perf_counter() - started

    for method, s, flags in (("lsnpc", scores, issues), ("cleanlab", cl_scores, cl_issues)):
        row[f"{method}_auroc"] = 100 * roc_auc_score(flipped, -s.ravel())
        row[f"{method}_ap"] = 100 * average_precision_score(flipped, -s.ravel())
        hits = (flags.ravel() & flipped).sum()
        row[f"{method}_precision"] = 100 * hits / max(1, flags.sum())
        row[f"{method}_recall"] = 100 * hits / max(1, flipped.sum())
    row["cleanlab_rows_dropped"] = 100 * cl_rows.mean()
    keep = ~cl_rows
    for name, (Xa, Ya) in {"noisy": (X, Yn), "kept": (X[keep], Yn[keep]), "relabelled": (X, corrected),
                           "true": (X, Y)}.items():
        row[f"{name}_micro"], row[f"{name}_macro"] = retrain(Xa, Ya, Xt, Yt, seed, retrain_seeds)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast", "tmc2007-500", "bibtex", "delicious"])
    parser.add_argument("--noise", nargs="+", default=list(NOISE), help="KIND:RATE entries")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--max-train", type=int, default=4000, help="subset size for tmc2007-500 and delicious")
    parser.add_argument("--cache", default=None, help="folder to keep noisy labels and out-of-fold probabilities in")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--retrain-seeds", type=int, default=3,
                        help="MLP seeds each retraining's F1 is averaged over (1: one seed)")
    parser.add_argument("--choose", nargs="+", default=["scene", "yeast"],
                        help="the data sets the design was chosen on: summarised apart from the others")
    parser.add_argument("--csv", default=None, help="also write every setting's row to this CSV")
    parser.add_argument("--tables-from", nargs="+", default=None, metavar="CSV",
                        help="print the tables from CSVs written by --csv, run nothing")
    args = parser.parse_args()
    import pandas as pd

    if args.tables_from:
        print_tables(pd.concat([pd.read_csv(path) for path in args.tables_from], ignore_index=True), args.choose)
        return

    if args.retrain_seeds < 1:
        parser.error(f"--retrain-seeds must be at least 1, got {args.retrain_seeds}")
    tasks = [(d, spec.split(":")[0], float(spec.split(":")[1]), s, args.data_home, args.max_train, args.cache,
              args.retrain_seeds) for d in args.datasets for spec in args.noise for s in args.seeds]
    started = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in pool.map(run_setting, *zip(*tasks)):
            rows.append(row)
            print(f"  done {row['dataset']} {row['kind']}:{row['rate']} seed {row['seed']}: AUROC "
                  f"{row['lsnpc_auroc']:.1f} vs {row['cleanlab_auroc']:.1f}, AP {row['lsnpc_ap']:.1f} vs "
                  f"{row['cleanlab_ap']:.1f}", flush=True)
            if args.csv:  # after every setting, so a long run that stops keeps what it measured
                pd.DataFrame(rows).to_csv(args.csv, index=False)

    df = pd.DataFrame(rows)
    print_tables(df, args.choose)
    print(f"\n{len(tasks)} settings in {time.perf_counter() - started:.0f} s")


def print_tables(df, choose: list[str]) -> None:
    """One table per group (the sets the design was chosen on, the others), means over seeds, and how
    each group stands against the bar."""
    groups = df.groupby(["dataset", "kind", "rate"], sort=False)
    mean = groups.mean(numeric_only=True)
    # CSVs written before --retrain-seeds have no column: one MLP seed per retraining then
    repeats = sorted(set(df["retrain_seeds"].fillna(1).astype(int))) if "retrain_seeds" in df else [1]
    print(f"\nretraining columns: test F1 of base MLPs, the mean over {'/'.join(map(str, repeats))} MLP seed(s) each")
    mean["seeds"] = groups.seed.nunique()
    chosen = mean.index.get_level_values("dataset").isin(choose)
    for group, rows in (("chosen on " + ", ".join(choose), mean[chosen]), ("confirmed on the others", mean[~chosen])):
        if rows.empty:
            continue
        print(f"\n{group}\n\n| data set | noise | seeds | AUROC ours / cleanlab | AP ours / cleanlab | flags: precision / "
              "recall, ours · cleanlab | retrain micro/macro: noisy · cleanlab-kept · relabelled · true |")
        print("|---|---|---|---|---|---|---|")
        for (dataset, kind, rate), r in rows.iterrows():
            print(f"| {dataset} | {kind} {rate:.0%} | {r.seeds:.0f} | {r.lsnpc_auroc:.1f} / {r.cleanlab_auroc:.1f} | "
                  f"{r.lsnpc_ap:.1f} / {r.cleanlab_ap:.1f} | {r.lsnpc_precision:.0f}/{r.lsnpc_recall:.0f} · "
                  f"{r.cleanlab_precision:.0f}/{r.cleanlab_recall:.0f} | {r.noisy_micro:.1f}/{r.noisy_macro:.1f} · "
                  f"{r.kept_micro:.1f}/{r.kept_macro:.1f} · {r.relabelled_micro:.1f}/{r.relabelled_macro:.1f} · "
                  f"{r.true_micro:.1f}/{r.true_macro:.1f} |")
        print()
        for name, delta in (("AUROC", rows.lsnpc_auroc - rows.cleanlab_auroc), ("AP", rows.lsnpc_ap - rows.cleanlab_ap)):
            below = ", ".join(f"{d} {k} {r:.0%} {v:+.2f}" for (d, k, r), v in delta[delta < 2].items()) or "none"
            print(f"{name} ours − cleanlab ({len(rows)} settings): mean {delta.mean():+.2f}, ≥ +2 on "
                  f"{(delta >= 2).sum()}; below +2: {below}")
        for metric in ("micro", "macro"):
            vs_noisy = rows[f"relabelled_{metric}"] - rows[f"noisy_{metric}"]
            vs_kept = rows[f"relabelled_{metric}"] - rows[f"kept_{metric}"]
            print(f"relabelled − noisy ({metric}-F1): worst {vs_noisy.min():+.2f}, mean {vs_noisy.mean():+.2f}; "
                  f"relabelled − cleanlab-kept: mean {vs_kept.mean():+.2f}, below it on {(vs_kept < 0).sum()}")


if __name__ == "__main__":
    main()
