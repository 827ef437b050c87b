"""Summary terms from a grid's results directory (``lsnpc experiment run ... --results DIR``).

Per post-processor (and base classifier), against the base model (post-processor ``none``) of the same
setting: the mean Δ micro- and macro-F1 over the noisy settings, the worst setting there and the worst at
0% noise, each naming its setting. A setting is a data set × noise kind × noise rate; its Δ is the mean
over seeds of the post-processor minus the mean of the base model's (``lsnpc.experiments.report
.summary_table``), in F1 points; "worst" is the lower of the two F1s, computed the same way as
``bench_quality.py`` computes its summary.

    python benchmarks/grid_bar.py results/offline
    python benchmarks/grid_bar.py results/offline --datasets goemotions yeast
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

METRICS = ("micro_f1", "macro_f1")


def bar_terms(df: Any, base: str = "none") -> Any:
    """The bar's terms per (classifier, processor) from runs ``df`` (:func:`lsnpc.experiments.load_results`).

    Returns a DataFrame with one row per post-processor other than ``base``: ``settings`` (data set × noise
    kind × rate), ``seeds`` (the fewest seeds of a setting), ``mean_micro`` and ``mean_macro`` (mean Δ over
    the settings with noise), ``worst`` and ``worst_setting`` there, ``worst_clean`` and
    ``worst_clean_setting`` at 0% noise (NaN and "" where there is none). Δ in F1 points.
    """
    import pandas as pd

    from lsnpc.experiments.report import summary_table

    if df.empty or base not in set(df["processor"]):
        raise ValueError(f"the results hold no run of the base post-processor {base!r}")
    summary = summary_table(df, METRICS)
    keys = ["classifier", "processor", "dataset", "noise_kind", "noise_rate"]
    wide = summary.pivot_table(index=keys, columns="metric", values=["delta", "n"], aggfunc="first")
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    wide = wide[wide["processor"] != base]
    wide["low"] = 100 * wide[["delta_micro_f1", "delta_macro_f1"]].min(axis=1)
    wide["where"] = (wide["dataset"] + " " + wide["noise_kind"] + " "
                     + (100 * wide["noise_rate"]).round().astype(int).astype(str) + "%")
    out = []
    for (classifier, processor), h in wide.groupby(["classifier", "processor"], sort=True):
        noisy, clean = h[h["noise_rate"] > 0], h[h["noise_rate"] == 0]
        row = dict(classifier=classifier, processor=processor, settings=len(h), seeds=int(h["n_micro_f1"].min()),
                   mean_micro=100 * noisy["delta_micro_f1"].mean(), mean_macro=100 * noisy["delta_macro_f1"].mean(),
                   worst=float("nan"), worst_setting="", worst_clean=float("nan"), worst_clean_setting="")
        for part, name in ((noisy, "worst"), (clean, "worst_clean")):
            if len(part):
                at = part["low"].idxmin()
                row[name], row[f"{name}_setting"] = float(part.loc[at, "low"]), part.loc[at, "where"]
        out.append(row)
    return pd.DataFrame(out)


def format_table(terms: Any) -> str:
    """The terms as a markdown table."""
    lines = ["| classifier | post-processor | settings | seeds | mean Δ micro (noisy) | mean Δ macro (noisy) | "
             "worst Δ (noisy) | worst Δ at 0% |", "|---|---|---|---|---|---|---|---|"]
    for r in terms.itertuples():
        clean = f"{r.worst_clean:+.2f} ({r.worst_clean_setting})" if r.worst_clean_setting else "–"
        lines.append(f"| {r.classifier} | {r.processor} | {r.settings} | {r.seeds} | {r.mean_micro:+.2f} | "
                     f"{r.mean_macro:+.2f} | {r.worst:+.2f} ({r.worst_setting}) | {clean} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a results directory written by `lsnpc experiment run`")
    parser.add_argument("--base", default="none", help="the post-processor the others are compared with")
    parser.add_argument("--datasets", nargs="+", default=None, help="only these data sets")
    args = parser.parse_args()
    from lsnpc.experiments.store import load_results

    df = load_results(args.results)
    if args.datasets:
        df = df[df["dataset"].isin(args.datasets)]
    print(format_table(bar_terms(df, args.base)))


if __name__ == "__main__":
    main()
