"""PNG figures for a report (matplotlib, Agg backend: no display needed).

- F1 against noise rate, one line per post-processor, error bars = std over seeds
  (one figure per data set × noise kind × classifier; the clean rate-0 runs appear on every kind).
- The paper's Figure 2: the NPC extension's training analysis (training loss, validation losses,
  validation micro-F1 per epoch), from NPC runs that watched a clean validation set.
- The ν0 × ν sensitivity heat map (runs whose post-processor params name ``nu0`` and ``nu``, or a
  learned ν), like the paper's Figure 4.
- Training curves from the post-processors' recorded ``history`` (first seed), at their real epoch
  numbers (LSNPC's warm start is epoch 0), every one of them.
- The paper's Figure 3: where some runs trained on the clean set (semi-supervised), micro- and macro-F1 of
  every post-processor as grouped bars per base classifier and noise rate, error bars = std over seeds.
(Its Figure 5 is ``lsnpc gradcam``.) Files are named ``figure2_*``, ``figure3_*``, ``figure4_*`` for the
paper's figures.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from lsnpc._io import atomic_path

__all__ = ["draw_all", "history_series", "plot_f1_vs_noise", "plot_histories", "plot_npc_training",
           "plot_semi_supervised", "plot_sensitivity"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _slug(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "_".join(str(p) for p in parts)).strip("_")


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` (a temporary file, then renamed), close it, and return ``path``."""
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110)
    _pyplot().close(fig)
    return path


def plot_f1_vs_noise(df: Any, out_dir: Path) -> list[Path]:
    """F1 (micro and macro) against noise rate per post-processor; returns the PNG paths."""
    import pandas as pd

    plt = _pyplot()
    paths = []
    clean = df[df["noise_rate"] == 0]
    for (dataset, kind, clf), sub in df[df["noise_rate"] > 0].groupby(["dataset", "noise_kind", "classifier"]):
        sub = pd.concat([sub, clean[(clean["dataset"] == dataset) & (clean["classifier"] == clf)]])
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
        for ax, metric in zip(axes, ("micro_f1", "macro_f1"), strict=True):
            for proc, rows in sub.groupby("processor"):
                agg = rows.groupby("noise_rate")[metric].agg(["mean", "std"]).fillna(0.0)
                ax.errorbar(100 * agg.index, 100 * agg["mean"], yerr=100 * agg["std"], marker="o",
                            markersize=7, capsize=4, label=proc)
            rates = sorted(100 * sub["noise_rate"].unique())
            if len(rates) == 1:  # one setting: a column of points, centred, not on the axes' edge
                ax.set_xlim(rates[0] - 10, rates[0] + 10)
                ax.set_xticks(rates)
            ax.set_xlabel("noise rate (%)")
            ax.set_ylabel(f"{metric.replace('_', '-')} (%)")
            ax.grid(alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=8)  # beside the plots, hiding no point
        fig.suptitle(f"{dataset}, {kind} noise, base {clf}")
        paths.append(_save(fig, out_dir / f"f1_vs_noise_{_slug(dataset, kind, clf)}.png"))
    return paths


def _nu_values(params_json: str) -> tuple[str, str] | None:
    params = json.loads(params_json) if isinstance(params_json, str) else {}
    if "nu0" not in params:
        return None
    nu = "learned" if params.get("nu") == "learned" or params.get("latent") == "learned" else params.get("nu", 2.01)
    return (f"{params['nu0']:g}" if isinstance(params["nu0"], (int, float)) else str(params["nu0"]),
            nu if isinstance(nu, str) else f"{nu:g}")


def _sort_nu(values: set[str]) -> list[str]:
    return sorted(values, key=lambda v: (math.inf if not v.replace(".", "", 1).isdigit() else float(v)))


def plot_sensitivity(df: Any, out_dir: Path) -> list[Path]:
    """ν0 × ν heat maps of mean micro- and macro-F1 (one figure per setting); PNG paths."""
    plt = _pyplot()
    nus = df["processor_params"].map(_nu_values)
    sens = df[nus.notna()].assign(nu0=nus[nus.notna()].map(lambda t: t[0]),
                                  nu=nus[nus.notna()].map(lambda t: t[1]))
    paths = []
    for (dataset, kind, rate, clf), sub in sens.groupby(["dataset", "noise_kind", "noise_rate", "classifier"]):
        nu0s, nu_s = _sort_nu(set(sub["nu0"])), _sort_nu(set(sub["nu"]))
        if len(nu0s) * len(nu_s) < 2:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
        for ax, metric in zip(axes, ("micro_f1", "macro_f1"), strict=True):
            means = sub.groupby(["nu0", "nu"])[metric].mean()
            grid = [[100 * means.get((a, b), math.nan) for b in nu_s] for a in nu0s]
            image = ax.imshow(grid, cmap="viridis", aspect="auto")
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if not math.isnan(v):
                        ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="w", fontsize=8)
            ax.set_xticks(range(len(nu_s)), nu_s)
            ax.set_yticks(range(len(nu0s)), nu0s)
            ax.set_xlabel("ν")
            ax.set_ylabel("ν0")
            ax.set_title(metric.replace("_", "-") + " (%)")
            fig.colorbar(image, ax=ax)
        fig.suptitle(f"Fig. 4, sensitivity: {dataset}, {kind} {100 * rate:g}%, base {clf}")
        paths.append(_save(fig, out_dir / f"figure4_sensitivity_{_slug(dataset, kind, rate, clf)}.png"))
    return paths


def history_series(history: Any) -> dict[str, tuple[list[float], list[float]]]:
    """Numeric series of a training history as ``{name: (epochs, values)}``.

    A list of per-epoch dicts (LSNPC's ``history_``) gives each key at the epochs whose entry has it,
    at the entry's own ``epoch`` number (LSNPC's warm start is epoch 0, its training losses start at
    1); a dict of per-epoch lists (the classifiers') is numbered 1, 2, ...
    """
    series: dict[str, tuple[list[float], list[float]]] = {}

    def add(key: str, epoch: float, value: Any) -> None:
        if key == "epoch" or isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        epochs, values = series.setdefault(key, ([], []))
        epochs.append(float(epoch))
        values.append(float(value))

    if isinstance(history, dict):
        for key, values in history.items():
            if isinstance(values, list):
                for i, value in enumerate(values):
                    add(key, i + 1, value)
    elif isinstance(history, list):
        for i, row in enumerate(history):
            if isinstance(row, dict):
                epoch = row.get("epoch", i + 1)
                for key, value in row.items():
                    add(key, epoch if isinstance(epoch, (int, float)) else i + 1, value)
    return series


def _history_keys(curves: list[tuple[str, dict[str, Any]]], limit: int = 4) -> list[str]:
    """The series worth a panel: training losses first, then validation scores, then the rest."""
    keys = {k for _, s in curves for k in s if k not in ("seconds", "lr")}

    def rank(key: str) -> tuple[int, str]:
        order = ("loss", "train_loss", "reconstruction", "latent", "clean_loss")
        if key in order:
            return (0, f"{order.index(key):02d}")
        return (1 if key.startswith("val") or "elbo" in key else 2, key)

    return sorted(keys, key=rank)[:limit]


def plot_histories(df: Any, out_dir: Path) -> list[Path]:
    """Training curves (first seed) per data set, classifier and post-processor, at their real epoch
    numbers; PNG paths."""
    if "history" not in df.columns:
        return []
    plt = _pyplot()
    paths = []
    rows = df[df["history"].notna()].sort_values("seed")
    for (dataset, clf, proc), sub in rows.groupby(["dataset", "classifier", "processor"]):
        first_seed = sub[sub["seed"] == sub["seed"].min()]
        curves = [(f"{r.noise_kind} {100 * r.noise_rate:g}%", history_series(r.history))
                  for r in first_seed.itertuples()]
        keys = _history_keys(curves)
        if not keys:
            continue
        fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.5), constrained_layout=True,
                                 squeeze=False)
        for ax, key in zip(axes[0], keys, strict=True):
            for label, series in curves:
                if key in series:
                    epochs, values = series[key]
                    ax.plot(epochs, values, marker="." if len(values) < 30 else None, label=label)
            ax.set_xlabel("epoch")
            ax.set_title(key)
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"training: {dataset}, base {clf}, {proc}")
        paths.append(_save(fig, out_dir / f"history_{_slug(dataset, clf, proc)}.png"))
    return paths


NPC_PANELS = (("training loss", (("loss", "training"),)),
              ("validation loss", (("val_loss", "noisy objective"), ("val_clean_loss", "against clean labels"))),
              ("validation micro-F1", (("val_micro_f1", "micro-F1"),)))


def plot_npc_training(df: Any, out_dir: Path) -> list[Path]:
    """The paper's Figure 2: per NPC run that watched a clean validation set (first seed of each data set,
    noise and classifier), its training loss, validation losses and validation micro-F1 per epoch, in
    three columns; PNG paths."""
    if "history" not in df.columns or "processor_name" not in df.columns:
        return []
    plt = _pyplot()
    runs = df[(df["processor_name"] == "npc") & df["history"].notna()].sort_values("seed")
    paths = []
    for (dataset, kind, rate, clf, proc), sub in runs.groupby(["dataset", "noise_kind", "noise_rate", "classifier",
                                                               "processor"]):
        series = history_series(sub.iloc[0]["history"])
        if "val_loss" not in series:  # NPC ran without a validation set to watch
            continue
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), layout="constrained")
        for ax, (title, keys) in zip(axes, NPC_PANELS, strict=True):
            for key, label in keys:
                if key in series:
                    ax.plot(*series[key], marker=".", label=label)
            ax.set_xlabel("epoch")
            ax.set_title(title)
            ax.grid(alpha=0.3)
            if len(keys) > 1:
                ax.legend(fontsize=8)
        fig.suptitle(f"Fig. 2: NPC extension on {dataset}, {kind} {100 * rate:g}%, base {clf} ({proc})")
        paths.append(_save(fig, out_dir / f"figure2_{_slug(dataset, kind, rate, clf, proc)}.png"))
    return paths


def plot_semi_supervised(df: Any, out_dir: Path) -> list[Path]:
    """The paper's Figure 3, where the results hold semi-supervised runs (``clean_set_used``): per data set and
    noise kind, micro-F1 (top) and macro-F1 (bottom) of every post-processor as grouped bars over (base
    classifier, noise rate), error bars the std over seeds; PNG paths."""
    if "clean_set_used" not in df.columns or not df["clean_set_used"].fillna(False).astype(bool).any():
        return []
    import numpy as np

    plt = _pyplot()
    paths = []
    for (dataset, kind), sub in df[df["noise_rate"] > 0].groupby(["dataset", "noise_kind"]):
        groups = sorted({(c, r) for c, r in zip(sub["classifier"], sub["noise_rate"], strict=True)})
        processors = sorted(sub["processor"].unique(), key=lambda p: (p != "none", p))
        width = 0.8 / max(1, len(processors))
        fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 1.2 * len(groups) * len(processors) / 2 + 3), 6.5),
                                 layout="constrained", sharex=True)
        for ax, metric in zip(axes, ("micro_f1", "macro_f1"), strict=True):
            stats = sub.groupby(["classifier", "noise_rate", "processor"])[metric].agg(["mean", "std"]).fillna(0.0)
            for i, proc in enumerate(processors):
                means = [100 * stats["mean"].get((c, r, proc), np.nan) for c, r in groups]
                stds = [100 * stats["std"].get((c, r, proc), 0.0) for c, r in groups]
                ax.bar(np.arange(len(groups)) + (i - (len(processors) - 1) / 2) * width, means, width, yerr=stds,
                       capsize=2, label=proc)
            ax.set_ylabel(f"{metric.replace('_', '-')} (%)")
            ax.grid(alpha=0.3, axis="y")
        axes[1].set_xticks(range(len(groups)), [f"{c}\n{100 * r:g}%" for c, r in groups])
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=8)
        fig.suptitle(f"Fig. 3, unsupervised and semi-supervised: {dataset}, {kind} noise")
        paths.append(_save(fig, out_dir / f"figure3_{_slug(dataset, kind)}.png"))
    return paths


def draw_all(df: Any, out_dir: str | Path) -> list[Path]:
    """Every figure that the results support; returns the PNG paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [*plot_f1_vs_noise(df, out), *plot_npc_training(df, out), *plot_semi_supervised(df, out),
            *plot_sensitivity(df, out), *plot_histories(df, out)]
