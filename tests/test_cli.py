"""The command line, through real subprocesses (``python -m lsnpc.cli``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import make_toy_multilabel

REPO = Path(__file__).resolve().parents[1]


def lsnpc(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsnpc.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def assert_user_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    text = " ".join(result.stderr.split())
    assert text.startswith("error:"), result.stderr
    for fragment in fragments:
        assert fragment in text, text


def test_help_lists_every_command_and_does_not_import_torch() -> None:
    result = lsnpc("--help")
    assert result.returncode == 0
    for command in ("demo", "noise", "fit", "correct", "evaluate", "datasets", "experiment", "report"):
        assert command in result.stdout
    probe = subprocess.run([sys.executable, "-c", "import sys, lsnpc.cli; print('torch' in sys.modules)"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "False"
    assert "--executor" in lsnpc("experiment", "run", "--help").stdout


def test_noise_then_evaluate_roundtrip(tmp_path: Path) -> None:
    _, Y = make_toy_multilabel(200, 4, 5, seed=1)
    np.save(tmp_path / "Y.npy", Y)
    out = tmp_path / "Yn.csv"
    result = lsnpc("noise", "--labels", tmp_path / "Y.npy", "--kind", "symmetric", "--rate", "0.4",
                   "--seed", "3", "--out", out)
    assert result.returncode == 0, result.stderr
    Yn = np.loadtxt(out, delimiter=",", ndmin=2)
    assert Yn.shape == Y.shape and (Yn != Y).any()
    np.testing.assert_array_equal(Yn.sum(axis=1), Y.sum(axis=1))  # symmetric noise keeps row counts
    from lsnpc.noise import simulate_noise

    np.testing.assert_array_equal(Yn, simulate_noise(Y, "symmetric", 0.4, random_state=3)[0])

    probs = np.clip(Y * 0.8 + 0.1, 0, 1)
    pd.DataFrame(probs, columns=[f"c{j}" for j in range(5)]).to_parquet(tmp_path / "P.parquet")
    result = lsnpc("evaluate", "--labels", out, "--probs", tmp_path / "P.parquet", "--json")
    assert result.returncode == 0, result.stderr
    from lsnpc.metrics import evaluate

    expected = evaluate(Yn, probs)
    got = json.loads(result.stdout)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value)


def test_user_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    assert_user_error(lsnpc("evaluate", "--labels", tmp_path / "nope.npy", "--probs", tmp_path / "p.npy"),
                      "--labels", "not found")
    np.save(tmp_path / "Y.npy", np.ones((5, 3), dtype=int))
    np.save(tmp_path / "P.npy", np.full((4, 3), 0.5))
    assert_user_error(lsnpc("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy"),
                      "same number of samples")
    assert_user_error(lsnpc("noise", "--labels", tmp_path / "Y.npy", "--out", tmp_path / "x.txt"),
                      "--out must end in .npy, .csv, .parquet")
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [synthetic]\nnoise: [{kind: symmetric, rate: 2}]\nclassifiers: [mlp]\n"
                   "post_processors: [none]\n")
    assert_user_error(lsnpc("experiment", "run", bad, "--results", tmp_path / "r"), "noise[0].rate")
    assert_user_error(lsnpc("experiment", "run", REPO / "configs" / "smoke.yaml", "--results", tmp_path / "r",
                            "--executor", "slurm"), "executor must be one of")
    assert_user_error(lsnpc("report", tmp_path / "missing"), "results folder not found")
    assert_user_error(lsnpc("correct", "--model", tmp_path / "nomodel", "--features", tmp_path / "Y.npy",
                            "--probs", tmp_path / "P.npy"), "model folder not found")


@pytest.mark.slow
def test_fit_then_correct_keeps_the_input_format(tmp_path: Path) -> None:
    X, Y = make_toy_multilabel(240, 6, 4, seed=2)
    rng = np.random.default_rng(0)
    P = np.clip(0.7 * Y + rng.uniform(0, 0.3, Y.shape), 0, 1)
    np.save(tmp_path / "X.npy", X)
    columns = ["cat", "dog", "bird", "fish"]
    pd.DataFrame(P, columns=columns).to_csv(tmp_path / "P.csv", index=False)
    model = tmp_path / "model"
    result = lsnpc("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.csv", "--out", model,
                   "--epochs", "1", "--set", "hidden_dim=16", "--set", "latent_dim=4", "--set", "warm_start=false")
    assert result.returncode == 0, result.stderr
    assert "no clean labels" in " ".join(result.stdout.split())
    result = lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.csv")
    assert result.returncode == 0, result.stderr
    corrected = pd.read_csv(tmp_path / "P.corrected.csv")
    assert list(corrected.columns) == columns and corrected.shape == P.shape
    assert corrected.to_numpy().min() >= 0 and corrected.to_numpy().max() <= 1
    from lsnpc.corrector import LSNPC

    np.testing.assert_allclose(corrected.to_numpy(), LSNPC.load(model).predict_proba(X, P), atol=1e-6)
    assert_user_error(lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy",
                            "--probs", tmp_path / "X.npy"), "pred_probs")


@pytest.mark.slow
def test_demo_runs_end_to_end_on_builtin_data() -> None:
    result = lsnpc("demo", "--max-train", "300", "--mlp-epochs", "2", "--lsnpc-epochs", "1", "--seed", "1")
    assert result.returncode == 0, result.stderr
    for fragment in ("synthetic", "base MLP", "+ KNN", "+ LSNPC", "micro-F1", "macro-F1", "300 noisy training"):
        assert fragment in result.stdout


@pytest.mark.slow
def test_experiment_run_and_report(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = lsnpc("experiment", "run", REPO / "configs" / "smoke.yaml", "--results", results)
    assert run.returncode == 0, run.stderr
    assert "finished 6 run(s)" in run.stdout
    report = lsnpc("report", results, "--out", tmp_path / "report")
    assert report.returncode == 0, report.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    from lsnpc.experiments.store import load_results

    df = load_results(results)
    lsnpc_mean = df.loc[df.processor == "lsnpc", "micro_f1"].mean()
    assert f"{100 * lsnpc_mean:.1f} ±" in md
    assert list((tmp_path / "report").glob("f1_vs_noise_*.png")) or list((tmp_path / "report").glob("history_*.png"))


def test_datasets_list_and_experiment_plan(tmp_path: Path) -> None:
    listing = lsnpc("datasets", "list")
    assert listing.returncode == 0, listing.stderr
    for name in ("synthetic", "scene", "yeast", "tmc2007-500", "goemotions", "voc2007"):
        assert name in listing.stdout
    plan = lsnpc("experiment", "plan", REPO / "configs" / "offline.yaml", "--results", tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "400 runs" in plan.stdout and "100 group(s) to run" in " ".join(plan.stdout.split())


def test_evaluate_prints_a_table_by_default(tmp_path: Path) -> None:
    np.save(tmp_path / "Y.npy", np.eye(3, dtype=int)[[0, 1, 2, 0]])
    np.save(tmp_path / "P.npy", np.eye(3)[[0, 1, 2, 1]] * 0.8 + 0.1)
    result = lsnpc("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy")
    assert result.returncode == 0, result.stderr
    assert "micro-F1" in result.stdout and "0.7500" in result.stdout  # 3 of 4 samples right


def test_demo_names_the_flag_of_a_bad_value() -> None:
    assert_user_error(lsnpc("demo", "--noise-rate", "1.5"), "--noise-rate", "[0, 1)")
    assert_user_error(lsnpc("demo", "--noise-kind", "uniform"), "--noise-kind", "symmetric, pairflip")
