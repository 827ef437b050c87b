"""Reports from a results store: tables in the style of the paper's Table 3, in Markdown and HTML.

Each table has one block per base classifier, and inside it one block of rows per noise rate with
one row per post-processor; columns are (data set, noise kind) × (macro-F1, micro-F1). A cell is
``mean ± std`` over seeds in percent, then the change against the base model (the ``none``
post-processor of the same classifier and setting) in brackets; the best mean of each
(classifier, rate, column) is bold.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from lsnpc._io import atomic_write_text
from lsnpc.experiments.config import POST_PROCESSORS
from lsnpc.metrics import LOWER_IS_BETTER  # bold goes to the minimum of these

__all__ = ["summary_table", "format_markdown", "format_html", "write_report", "DEFAULT_METRICS"]

DEFAULT_METRICS = ("macro_f1", "micro_f1")
METRIC_TITLES = {"macro_f1": "macro-F1", "micro_f1": "micro-F1", "map": "mAP", "lrap": "LRAP",
                 "hamming_loss": "Hamming loss", "ranking_loss": "ranking loss",
                 "one_error": "one-error", "coverage": "coverage", "subset_accuracy": "subset acc."}
BASE = "none"


def _sweep_key(label: str) -> tuple[tuple[int, float, str], ...]:
    """A sweep label's values (``lsnpc[nu0=10,nu=2.01]``) as a sort key: numbers by value (2.01 before 10),
    then words (``learned``)."""
    inside = label.partition("[")[2].rstrip("]")
    key = []
    for part in inside.split(",") if inside else []:
        value = part.partition("=")[2]
        try:
            key.append((0, float(value), ""))
        except ValueError:
            key.append((1, 0.0, value))
    return tuple(key)


def _processor_order(labels: list[str]) -> list[str]:
    """Registry order, then the researcher's own by name; a sweep's rows by their values, numerically."""
    def key(label: str) -> tuple[int, str, tuple[tuple[int, float, str], ...], str]:
        name = label.split("[", 1)[0]
        rank = POST_PROCESSORS.index(name) if name in POST_PROCESSORS else len(POST_PROCESSORS)
        return (rank, name, _sweep_key(label), label)

    return sorted(labels, key=key)


def summary_table(df: Any, metrics: tuple[str, ...] = DEFAULT_METRICS) -> Any:
    """Aggregate runs over seeds.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run (:func:`lsnpc.experiments.load_results`).
    metrics : tuple of str
        Metric columns to aggregate.

    Returns
    -------
    pandas.DataFrame
        Long form, one row per (classifier, noise_rate, dataset, noise_kind, processor, metric), with
        ``mean``, ``std`` (sample std, 0 for one seed), ``n`` (seeds) and ``delta`` (mean minus the
        base model's mean for the same setting; NaN when no base run exists).
    """
    import pandas as pd

    missing = [m for m in metrics if m not in df.columns]
    if missing:
        raise ValueError(f"metrics {missing} are not in the results (columns: {sorted(df.columns)})")
    keys = ["classifier", "noise_rate", "dataset", "noise_kind", "processor"]
    long = df.melt(id_vars=keys, value_vars=list(metrics), var_name="metric", value_name="value")
    agg = (long.groupby([*keys, "metric"], dropna=False)["value"]
           .agg(mean="mean", std="std", n="count").reset_index())
    agg["std"] = agg["std"].fillna(0.0)
    base = agg[agg["processor"] == BASE].drop(columns=["processor", "std", "n"])
    base = base.rename(columns={"mean": "base_mean"})
    merged = agg.merge(base, on=["classifier", "noise_rate", "dataset", "noise_kind", "metric"], how="left")
    merged["delta"] = merged["mean"] - merged["base_mean"]
    return pd.DataFrame(merged.drop(columns=["base_mean"]))


def base_model_notes(df: Any) -> list[str]:
    """Lines saying where a post-processor handed back the base model instead of a correction.

    From the runs' ``n_fallback_labels`` (KNN answers a label with the base probabilities when none of
    its training samples is confidently positive, or none confidently negative), and from runs whose
    metrics equal the base model's of the same setting and seed (a fallback for every label, or a
    guard that kept the base model).
    """
    import pandas as pd

    keys = ["dataset", "noise_kind", "noise_rate", "classifier", "seed"]
    metrics = [m for m in METRIC_TITLES if m in df.columns]
    base = df[df["processor"] == BASE].drop_duplicates(keys)[keys + metrics]
    lines = []
    for proc, sub in df[df["processor"] != BASE].groupby("processor"):
        parts = []
        if "n_fallback_labels" in sub and sub["n_fallback_labels"].notna().any():
            fell = sub[sub["n_fallback_labels"].fillna(0) > 0]
            if len(fell):
                per_set = []
                for dataset, runs in fell.groupby("dataset"):
                    low, high = int(runs["n_fallback_labels"].min()), int(runs["n_fallback_labels"].max())
                    span = f"{low}" if low == high else f"{low} to {high}"
                    per_set.append(f"{dataset}: {len(runs)} of {int((sub['dataset'] == dataset).sum())} runs, "
                                   f"{span} of its {int(runs['n_labels'].max())} labels a run")
                parts.append("answered some labels with the base model's own probabilities (no confidently "
                             f"positive or no confidently negative training row for them) in {len(fell)} of "
                             f"{len(sub)} runs ({'; '.join(per_set)})")
        joined = sub[keys + metrics].merge(base, on=keys, how="left", suffixes=("", "_base"))
        same = pd.Series(True, index=joined.index)
        for m in metrics:
            same &= (joined[m] == joined[f"{m}_base"]) | (joined[m].isna() & joined[f"{m}_base"].isna())
        if same.any():
            parts.append(f"scored exactly as the base model in {int(same.sum())} of {len(sub)} runs")
        if parts:
            lines.append(f"{proc}: " + "; ".join(parts))
    return lines


def _cell(mean: float, std: float, n: int, delta: float, is_base: bool) -> str:
    text = f"{100 * mean:.1f}" if n <= 1 else f"{100 * mean:.1f} ± {100 * std:.1f}"
    if not is_base and not math.isnan(delta):
        text += f" ({100 * delta:+.1f})"
    return text


def _header(summary: Any, metrics: tuple[str, ...]) -> list[tuple[str, str, str]]:
    columns = sorted({(d, k) for d, k in zip(summary["dataset"], summary["noise_kind"], strict=True)})
    return [(d, k, METRIC_TITLES.get(m, m)) for d, k in columns for m in metrics]


def _rows(summary: Any, metrics: tuple[str, ...]) -> list[tuple[tuple[str, str, str], list[tuple[str, bool]]]]:
    columns = sorted({(d, k) for d, k in zip(summary["dataset"], summary["noise_kind"], strict=True)})
    index = {
        (r.classifier, r.noise_rate, r.processor, r.dataset, r.noise_kind, r.metric): r
        for r in summary.itertuples(index=False)
    }
    out = []
    for clf in sorted(summary["classifier"].unique()):
        sub = summary[summary["classifier"] == clf]
        for rate in sorted(sub["noise_rate"].unique()):
            procs = _processor_order(list(sub[sub["noise_rate"] == rate]["processor"].unique()))
            best: dict[tuple[str, str, str], float] = {}
            for d, k in columns:
                for m in metrics:
                    vals = [index[key].mean for p in procs if (key := (clf, rate, p, d, k, m)) in index]
                    vals = [v for v in vals if not math.isnan(v)]
                    if vals:
                        best[(d, k, m)] = min(vals) if m in LOWER_IS_BETTER else max(vals)
            for p in procs:
                cells = []
                for d, k in columns:
                    for m in metrics:
                        r = index.get((clf, rate, p, d, k, m))
                        if r is None:
                            cells.append(("", False))
                            continue
                        bold = len(procs) > 1 and best.get((d, k, m)) == r.mean
                        cells.append((_cell(r.mean, r.std, int(r.n), r.delta, p == BASE), bold))
                out.append(((clf, f"{100 * rate:g}%", p), cells))
    return out


def format_markdown(summary: Any, metrics: tuple[str, ...] = DEFAULT_METRICS) -> str:
    """The Table-3-style table as GitHub Markdown."""
    head = _header(summary, metrics)
    lines = [
        "| classifier | NR | post-processor | " + " | ".join(f"{d} {k} {m}" for d, k, m in head) + " |",
        "|---|---|---|" + "---|" * len(head),
    ]
    previous: tuple[str, str] = ("", "")
    for (clf, rate, proc), cells in _rows(summary, metrics):
        shown_clf = clf if clf != previous[0] else ""
        shown_rate = rate if (clf, rate) != previous else ""
        previous = (clf, rate)
        texts = [f"**{t}**" if bold else t for t, bold in cells]
        lines.append(f"| {shown_clf} | {shown_rate} | {proc} | " + " | ".join(texts) + " |")
    return "\n".join(lines) + "\n"


def format_html(summary: Any, metrics: tuple[str, ...] = DEFAULT_METRICS) -> str:
    """The Table-3-style table as an HTML ``<table>`` (two header rows, like the paper)."""
    head = _header(summary, metrics)
    esc = html.escape
    groups: list[tuple[str, int]] = []
    for d, k, _ in head:
        label = f"{d} / {k}"
        if groups and groups[-1][0] == label:
            groups[-1] = (label, groups[-1][1] + 1)
        else:
            groups.append((label, 1))
    parts = ["<table>", "<thead><tr><th rowspan='2'>classifier</th><th rowspan='2'>NR</th>"
             "<th rowspan='2'>post-processor</th>"]
    parts += [f"<th colspan='{n}'>{esc(label)}</th>" for label, n in groups]
    parts.append("</tr><tr>" + "".join(f"<th>{esc(m)}</th>" for _, _, m in head) + "</tr></thead><tbody>")
    for (clf, rate, proc), cells in _rows(summary, metrics):
        tds = "".join(f"<td>{'<b>' + esc(t) + '</b>' if bold else esc(t)}</td>" for t, bold in cells)
        cls = " class='base'" if proc == BASE else ""
        parts.append(f"<tr{cls}><td>{esc(clf)}</td><td>{esc(rate)}</td><td>{esc(proc)}</td>{tds}</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts) + "\n"


_CSS = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:center}tr.base{background:#f4f4f4}
img{max-width:48%;margin:4px}"""


def write_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    plots: bool = True,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.html``, ``summary.csv`` and PNG plots for a results store.

    Parameters
    ----------
    results_dir : path
        A results store (``runs/*.json``).
    out_dir : path, optional
        Where to write (default: ``results_dir/report``).
    metrics : tuple of str
        Metrics in the main table (an extra table lists every metric's mean).
    plots : bool
        Whether to draw the PNG figures.

    Returns
    -------
    dict
        ``{"markdown": path, "html": path, "csv": path, "plots": [paths], "unreadable": [paths]}``; the
        last are run files that do not hold a complete run (left out of the report, and named in it).
    """
    from lsnpc.experiments.store import ResultsStore, load_results

    df = load_results(results_dir, with_history=True)
    unreadable = ResultsStore(results_dir).unreadable_files()
    if df.empty:
        bad = f" ({len(unreadable)} run file(s) could not be read, e.g. {unreadable[0]})" if unreadable else ""
        raise ValueError(f"no finished runs in {results_dir}: nothing to report{bad}")
    out = Path(out_dir) if out_dir is not None else Path(results_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    summary = summary_table(df, metrics)
    pngs: list[Path] = []
    if plots:
        from lsnpc.experiments.plots import draw_all

        pngs = draw_all(df, out)
    atomic_write_text(out / "summary.csv", summary.to_csv(index=False))

    selections = sorted({f"{p}: {s}" for p, s in zip(df["processor"], df["selection"], strict=True)})
    n_seeds = int(df["seed"].nunique())
    intro = (f"{len(df)} runs, {n_seeds} seed(s), data sets: {', '.join(sorted(df['dataset'].unique()))}. "
             f"Cells: mean ± std over seeds in percent, (change against the base model `none`); "
             f"best mean per block in bold.")
    version = ", ".join(sorted(df["lsnpc_version"].astype(str).unique())) if "lsnpc_version" in df else "?"
    if "lsnpc_revision" in df:  # the git commits that produced the runs (absent for installed wheels)
        revisions = sorted(df["lsnpc_revision"].dropna().astype(str).unique())
        version += f" (source {', '.join(revisions)})" if revisions else ""
    md = [f"# lsnpc results: {Path(results_dir).name}", "", intro, "", f"lsnpc version: {version}", "",
          "## F1 (Table 3 style)", ""]
    datasets = sorted(summary["dataset"].unique())
    for dataset in datasets:  # one table per data set keeps each readable (Table 3 has two)
        md += [f"### {dataset}", "", format_markdown(summary[summary["dataset"] == dataset], metrics)]
    md += ["## Model selection (which labels chose each checkpoint)", ""]
    md += [f"- {s}" for s in selections]
    notes = base_model_notes(df)
    if notes:
        md += ["", "## Where a post-processor returned the base model", ""] + [f"- {n}" for n in notes]
    if unreadable:
        md += ["", "## Left out", "", f"{len(unreadable)} run file(s) that do not hold a complete run "
               "(truncated or empty; `lsnpc experiment run` redoes them):", ""]
        md += [f"- `{p.name}`" for p in unreadable]
    md += ["", "## Figures", ""] + [f"![{p.stem}]({p.name})" for p in pngs]
    md_path = atomic_write_text(out / "report.md", "\n".join(md) + "\n")
    body = [f"<h1>lsnpc results: {html.escape(Path(results_dir).name)}</h1>", f"<p>{html.escape(intro)}</p>",
            f"<p>lsnpc version: {html.escape(version)}</p>", "<h2>F1 (Table 3 style)</h2>"]
    for dataset in datasets:
        body += [f"<h3>{html.escape(dataset)}</h3>", format_html(summary[summary["dataset"] == dataset], metrics)]
    body += ["<h2>Model selection</h2><ul>"]
    body += [f"<li>{html.escape(s)}</li>" for s in selections]
    if notes:
        body += ["</ul><h2>Where a post-processor returned the base model</h2><ul>"]
        body += [f"<li>{html.escape(n)}</li>" for n in notes]
    if unreadable:
        body += ["</ul><h2>Left out</h2><ul>"] + [f"<li>{html.escape(p.name)}: not a complete run file</li>"
                                                  for p in unreadable]
    body += ["</ul><h2>Figures</h2>"] + [f"<img src='{html.escape(p.name)}' alt='{html.escape(p.stem)}'>" for p in pngs]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>lsnpc report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
    html_path = atomic_write_text(out / "report.html", page)
    return {"markdown": md_path, "html": html_path, "csv": out / "summary.csv", "plots": pngs,
            "unreadable": unreadable}
