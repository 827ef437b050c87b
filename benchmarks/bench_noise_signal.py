"""Can the noise rate be read off the base model without any label? Statistics of its in-sample probabilities.

Evidence from the noisy data itself could soften a correction where there is no noise: without labels LSNPC can
lose a little at 0% noise on some sets, and nothing in a fit has been found that tells 0% noise apart. This script trains only the base models of the protocol of
``bench_quality.py`` (same draws, same noise, same MLP: :func:`bench_quality.prepare_setting`) and prints, per
data set, size and noise, the mean over seeds of statistics of P, the base model's probabilities on its (noisy)
training rows:

  sharpness  :func:`lsnpc.corrector.blend.base_sharpness`, the share of the labels' variance P resolves
  density    :func:`lsnpc.corrector.blend.base_density`, the mean of P
  recall     the share of the noisy positive labels that P reproduces at 0.5 (how much of them it fits)
  ratio      decisions per row at 0.5 over the expected count Σ_k p_k (the collapse check's reference)

With ``--fit`` each setting also fits ``LSNPC(guard=False)`` without labels (the output before any blend; the
fit is the default's) and adds what the correction does to those rows:

  flip       entries where the output and the base model decide differently at 0.5, over the base model's
             positive entries (how much it changes)
  sharp_out  the output's sharpness over the base model's

A statistic that tells 0% noise apart would have to do it on an absolute scale: a user has one data set and
no noise-free reference. The summary says, per statistic, in how many (data set, size) groups the 0% value is
the group's extreme (its highest; its lowest for ``flip``), the ranges at 0% and at 30–50% noise, and whether
one threshold separates every 0% setting from every 30–50% setting.

    python benchmarks/bench_noise_signal.py --datasets scene yeast synthetic tmc2007-500 bibtex delicious \\
        "bibtex[top=80]" --train-sizes 300 1000 --jobs 2
    python benchmarks/bench_noise_signal.py --fit --datasets scene yeast synthetic "bibtex[top=80]" \\
        "synthetic[n_labels=40,max_frequency=0.2,tail_exponent=1.0,n_features=150]" --train-sizes 300 1000
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_quality import DEFAULT_HOME, NOISE_NAMES, NOISES, prepare_setting  # noqa: E402

STATISTICS = ("sharpness", "density", "recall", "ratio")
FIT_STATISTICS = ("flip", "sharp_out")


def noise_signal(P: np.ndarray, Y_noisy: np.ndarray) -> dict[str, float]:
    """The statistics above for base probabilities ``P`` (n, L) on the training rows and their noisy
    labels ``Y_noisy`` (n, L, 0/1)."""
    from lsnpc.corrector.blend import base_density, base_sharpness

    P = np.asarray(P, dtype=np.float64)
    decisions, positives = P >= 0.5, np.asarray(Y_noisy) > 0
    expected = P.sum(1).mean()
    return dict(sharpness=base_sharpness(P), density=base_density(P),
                recall=float((decisions & positives).sum() / max(1, positives.sum())),
                ratio=float(decisions.sum(1).mean() / expected) if expected > 0 else float("nan"))


def correction_signal(output: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """``flip`` and ``sharp_out`` above for an output (n, L) and the base probabilities ``P`` (n, L)."""
    from lsnpc.corrector.blend import base_sharpness

    output, P = np.asarray(output, dtype=np.float64), np.asarray(P, dtype=np.float64)
    base_positive = P >= 0.5
    sharpness = base_sharpness(P)
    return dict(flip=float(((output >= 0.5) != base_positive).sum() / max(1, base_positive.sum())),
                sharp_out=base_sharpness(output) / sharpness if sharpness > 0 else float("nan"))


def run_setting(dataset: str, size: str, kind: str, rate: float, seed: int, home: str, fit: bool = False) -> dict:
    s = prepare_setting(dataset, size, kind, rate, seed, home, 4000, None)
    X_tr = s["X"][s["split"]["train"]]
    P = s["base"].predict_proba(X_tr)
    row = dict(dataset=dataset, size=size, kind=kind, rate=rate, seed=seed, **noise_signal(P, s["Y_noisy"]))
    if fit:
        from lsnpc import LSNPC

        corrector = LSNPC(guard=False, random_state=seed).fit(X_tr, P)
        row.update(correction_signal(corrector.predict_proba(X_tr, P), P))
    return row


def summarise(rows: list[dict]) -> list[str]:
    """The printed lines: one table row per (data set, size, noise), means over seeds, then the summary: per
    statistic, the (data set, size) groups where the 0% value is the group's extreme (highest; lowest for
    ``flip``, which should grow with the noise), and whether one threshold separates 0% from 30–50%."""
    import pandas as pd

    df = pd.DataFrame(rows)
    stats = [s for s in (*STATISTICS, *FIT_STATISTICS) if s in df.columns]
    per = df.groupby(["dataset", "size", "kind", "rate"], sort=False)[stats].mean().reset_index()
    lines = ["| data set | n | noise | " + " | ".join(stats) + " |", "|---|---|---|" + "---|" * len(stats)]
    for r in per.itertuples():
        noise = "0%" if r.rate == 0 else f"{NOISE_NAMES.get(r.kind, r.kind)} {r.rate:.0%}"
        cells = " | ".join(f"{getattr(r, s):.3f}" for s in stats)
        lines.append(f"| {r.dataset} | {r.size} | {noise} | {cells} |")
    lines.append("\n| statistic | groups where 0% is the extreme | 0% range | 30–50% range | one threshold |")
    lines.append("|---|---|---|---|---|")
    groups = [g for _, g in per.groupby(["dataset", "size"], sort=False) if (g.rate == 0).any()]
    clean, noisy = per[per.rate == 0], per[per.rate >= 0.3]
    for stat in stats:
        sign = -1 if stat == "flip" else 1  # the direction of "no noise": high, or low for flip
        top = sum(sign * g.loc[g.rate == 0, stat].iloc[0] >= (sign * g[stat]).max() for g in groups)
        separates = (sign * clean[stat]).min() > (sign * noisy[stat]).max()
        lines.append(f"| {stat} | {top} of {len(groups)} | {clean[stat].min():.3f}–{clean[stat].max():.3f} | "
                     f"{noisy[stat].min():.3f}–{noisy[stat].max():.3f} | "
                     f"{'separates' if separates else 'does not separate'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast"])
    parser.add_argument("--train-sizes", nargs="+", default=["300", "1000"])
    parser.add_argument("--noise", nargs="+", default=list(NOISES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fit", action="store_true",
                        help="also fit LSNPC(guard=False) without labels: flip, sharp_out")
    args = parser.parse_args()
    tasks = [(d, z, spec.split(":")[0], float(spec.split(":")[1]), seed, args.data_home, args.fit)
             for d in args.datasets for z in args.train_sizes for spec in args.noise for seed in args.seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run_setting, *zip(*tasks, strict=True)))
    print("\n".join(summarise(rows)))


if __name__ == "__main__":
    main()
