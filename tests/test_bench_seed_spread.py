"""The seed-spread benchmark (``benchmarks/bench_seed_spread.py``): one LSNPC fit per seed on the same setting, the
mean of their probabilities, and the tables of their spread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from bench_seed_spread import print_tables, run_setting

SMALL = "synthetic[n_labels=4,n_features=8,n_train=300,n_test=80]"


def _row(method, micro, macro, rate=0.0, **extra):
    return dict(dataset="d", requested="500", kind="symmetric", rate=rate, seed=0, method=method, micro=micro,
                macro=macro, **extra)


def test_tables_give_the_spread_of_the_single_fits_and_the_mean_against_the_tuned_base(capsys):
    rows = [_row("base-threshold", 50.0, 40.0), _row("lsnpc", 52.0, 38.0, lsnpc_seed=1),
            _row("lsnpc", 56.0, 44.0, lsnpc_seed=2), _row("lsnpc-mean", 55.0, 43.0),
            _row("lsnpc-mean-guarded", 51.0, 39.0), _row("lsnpc-n-fits", 53.0, 42.5)]
    print_tables(rows)
    out = capsys.readouterr().out
    assert ("| d@500 | symmetric 0% | 0 | 50.0 / 40.0 | 54.0 / 41.0 | 52.0 / 38.0 | 56.0 / 44.0 | 55.0 / 43.0 "
            "| 51.0 / 39.0 | 53.0 / 42.5 |") in out
    # spread 4 / 6; single fits +4 / +1 over the base; lowest +2 / −2; the mean +5 / +3; guarded +1 / −1, worst −1;
    # n_fits +3 / +2.5, worst +2.5
    assert ("| 0% | 1 | 4.00 / 6.00 | +4.00 / +1.00 | +2.00 / -2.00 | +5.00 / +3.00 | +1.00 / -1.00 | -1.0 "
            "| +3.00 / +2.50 | +2.5 |") in out
    print_tables(rows[:-1])  # results written before the library's n_fits was a row
    assert "| +5.00 / +3.00 | +1.00 / -1.00 | -1.0 | – | – |" in capsys.readouterr().out
    print_tables(rows[:-2])  # and before the guarded mean was
    assert "| 0% | 1 | 4.00 / 6.00 | +4.00 / +1.00 | +2.00 / -2.00 | +5.00 / +3.00 | – | – | – | – |" in capsys.readouterr().out


def test_a_setting_fits_one_lsnpc_per_seed_and_their_mean(tmp_path):
    rows = run_setting(SMALL, "full", "symmetric", 0.3, 0, str(tmp_path), [3, 4])
    assert [r["method"] for r in rows] == ["base-threshold", "lsnpc", "lsnpc", "lsnpc-mean", "lsnpc-mean-guarded",
                                           "lsnpc-n-fits"]
    assert [r.get("lsnpc_seed") for r in rows[1:3]] == [3, 4] and rows[3]["n_fits"] == rows[4]["n_fits"] == 2
    assert rows[5]["n_fits"] == 2
    assert rows[4]["base_weight"] in (0.0, 0.5, 1.0) and rows[5]["base_weight"] in (0.0, 0.5, 1.0)  # the guard's
    assert all(0 <= r["micro"] <= 100 and 0 <= r["macro"] <= 100 for r in rows)
    assert rows[0]["val_rows"] >= 10  # the triple tests each fit, as a user's would


def test_one_lsnpc_seed_is_refused_by_name(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_seed_spread.py"), "--configs", "scene@500",
                           "--lsnpc-seeds", "3", "--out", str(tmp_path / "s.jsonl")], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--lsnpc-seeds" in done.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_the_command_appends_each_setting_and_resumes_from_its_results_file(tmp_path):
    out = tmp_path / "spread.jsonl"
    command = [sys.executable, str(BENCHMARKS / "bench_seed_spread.py"), "--configs", f"{SMALL}@full", "--noise",
               "symmetric:0.3", "--seeds", "0", "--lsnpc-seeds", "3", "4", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" in first.stdout and len(out.read_text().splitlines()) == 6  # base, two fits, two means, n_fits=2
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" not in again.stdout and len(out.read_text().splitlines()) == 6
    assert "| 30% | 1 |" in again.stdout  # the tables of what the file holds
