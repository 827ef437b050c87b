"""The relabel-spread benchmark (``benchmarks/bench_relabel_spread.py``): the model trained on the given labels and
the one retrained on the corrected labels, once per estimator seed on the same setting, and the tables of their
difference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from bench_relabel_spread import print_tables, run_setting

SMALL = "synthetic[n_labels=4,n_features=8,n_train=300,n_test=80]"


def _row(method, estimator_seed, micro, macro, rate=0.5, seed=0):
    return {"dataset": "d", "requested": "500", "kind": "pairflip", "rate": rate, "seed": seed, "method": method,
            "estimator_seed": estimator_seed, "micro": micro, "macro": macro}


def test_tables_give_the_relabelled_models_difference_over_the_estimator_seeds(capsys):
    rows = [_row("noisy", 1, 50.0, 20.0), _row("relabelled", 1, 51.0, 19.0),
            _row("noisy", 2, 52.0, 24.0), _row("relabelled", 2, 52.0, 25.0),
            _row("noisy", 3, 48.0, 22.0), _row("relabelled", 3, 50.0, 21.4),
            _row("noisy", 1, 40.0, 10.0, seed=1), _row("relabelled", 1, 40.0, 9.0, seed=1),
            _row("noisy", 2, 40.0, 12.0, seed=1), _row("relabelled", 2, 40.0, 10.0, seed=1)]
    print_tables(rows)
    out = capsys.readouterr().out
    # seed 0: macro differences −1, +1, −0.6: mean −0.2, SD 1.06, lowest −1; micro +1, 0, +2: mean +1
    sd = np.std([-1.0, 1.0, -0.6], ddof=1)
    assert f"| d@500 | pairflip 50% | 0 | 3 | 22.0 (20.0, 24.0) | -0.20 | {sd:.2f} | -1.00 | +1.00 |" in out
    # seed 1: −1, −2: mean −1.5, SD 0.71; both runs and the seed mean below −0.5
    assert "| d@500 | pairflip 50% | 1 | 2 | 11.0 (10.0, 12.0) | -1.50 | 0.71 | -2.00 | +0.00 |" in out
    # per rate: means −0.85 (macro), +0.5 (micro); 4 of 5 runs and 1 of 2 seed means below −0.5
    assert f"| 50% | 2 | -0.85 | {np.mean([sd, np.std([-1.0, -2.0], ddof=1)]):.2f} | +0.50 | 4 of 5 | 1 of 2 |" in out


def test_a_setting_with_one_seed_pair_is_left_out_of_the_tables(capsys):
    print_tables([_row("noisy", 1, 50.0, 20.0), _row("relabelled", 1, 51.0, 19.0), _row("noisy", 2, 52.0, 24.0)])
    out = capsys.readouterr().out
    assert "| d@500 |" not in out and "| 50% |" not in out
    print_tables([])
    assert "No results to print." in capsys.readouterr().out


def test_a_setting_trains_both_models_once_per_estimator_seed_on_the_same_corrected_labels(tmp_path):
    rows = run_setting(SMALL, "full", "symmetric", 0.3, 0, str(tmp_path), [5, 6])
    assert [(r["method"], r["estimator_seed"]) for r in rows] == [("noisy", 5), ("relabelled", 5), ("noisy", 6),
                                                                  ("relabelled", 6)]
    assert len({r["labels_changed"] for r in rows}) == 1 and rows[0]["labels_changed"] > 0  # one correction
    assert all(0 <= r["micro"] <= 100 and 0 <= r["macro"] <= 100 for r in rows)
    assert rows[0]["val_rows"] >= 10 and rows[0]["seconds"] > 0


def test_one_estimator_seed_is_refused_by_name(tmp_path):
    for seeds in (["3"], ["3", "3"]):
        done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_relabel_spread.py"), "--configs", "scene@500",
                               "--estimator-seeds", *seeds, "--out", str(tmp_path / "s.jsonl")],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 2 and "--estimator-seeds" in done.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_the_command_appends_each_setting_and_resumes_from_its_results_file(tmp_path):
    out = tmp_path / "spread.jsonl"
    command = [sys.executable, str(BENCHMARKS / "bench_relabel_spread.py"), "--configs", f"{SMALL}@full", "--noise",
               "symmetric:0.3", "--seeds", "0", "--estimator-seeds", "3", "4", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" in first.stdout and len(out.read_text().splitlines()) == 4  # two models, two seeds
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" not in again.stdout and len(out.read_text().splitlines()) == 4
    assert "| 30% | 1 |" in again.stdout  # the tables of what the file holds
