"""benchmarks/reproduction.py: the table of what reproduces, from the runs of configs/reproduction.yaml."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from reproduction import format_markdown, reproduction_rows

from lsnpc.experiments import expand_runs, load_config

SCORES = {"none": 0.50, "count-threshold": 0.55, "knn": 0.45, "npc": 0.50, "lsnpc-paper": 0.60,
          "gauss-paper": 0.58, "lsnpc-paper-semi": 0.63, "lsnpc": 0.61}


def _runs(clean_change: float) -> pd.DataFrame:
    rows = []
    for dataset in ("scene", "yeast"):
        for kind in ("symmetric", "pairflip"):
            for rate in (0.0, 0.3, 0.5):
                for seed in (0, 1, 2):
                    for processor, score in SCORES.items():
                        if rate == 0.0:
                            score = 0.80 + (clean_change if processor == "lsnpc-paper" else 0.0)
                        rows.append({"dataset": dataset, "noise_kind": kind, "noise_rate": rate, "seed": seed,
                                     "processor": processor, "micro_f1": score})
    return pd.DataFrame(rows)


def test_the_grid_holds_every_method_the_table_compares() -> None:
    labels = {r.processor.label for r in expand_runs(load_config(BENCHMARKS.parent / "configs" / "reproduction.yaml"))}
    assert labels == set(SCORES)


def test_verdicts_follow_the_measurements() -> None:
    verdicts = [r.verdict for r in reproduction_rows(_runs(-0.008))]
    assert verdicts[:6] == ["agrees"] * 6  # gains, -0.8 at 0%, Student >= GAUSS, semi > unsup, NPC flat, > KNN
    assert verdicts[-4:] == ["cannot be reproduced here"] * 4
    far = reproduction_rows(_runs(-0.07))[1]  # -7 points at 0% noise: outside the paper's -1.3 to -0.6
    assert far.verdict == "disagrees" and "scene -7.0" in far.here
    table = format_markdown(reproduction_rows(_runs(-0.008)))
    assert table.startswith("| paper result |") and table.count("\n") == 2 + 11
