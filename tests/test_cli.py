"""The command line, through real subprocesses (``python -m lsnpc.cli``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import make_toy_multilabel

REPO = Path(__file__).resolve().parents[1]


# The checkout under test, whatever lsnpc the interpreter has installed.
ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")}


def lsnpc(*args: str, timeout: float = 300, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsnpc.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env={**ENV, **env})


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
                           capture_output=True, text=True, check=True, env=ENV)
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
    assert got.keys() == {*expected, "threshold", "threshold_source", "labels_without_positive"}
    assert got["threshold"] == 0.5 and got["threshold_source"].startswith("the default")
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


def test_fit_trains_on_a_validation_set_too_small_to_test_unless_told_to_validate(tmp_path: Path) -> None:
    """8 validation rows (fewer than min_val_rows, 10) are trained on as the clean set and the fit's report says
    so; ``--set selection=val_f1`` keeps them choosing the checkpoint, as the library does."""
    X, Y = make_toy_multilabel(248, 6, 4, seed=2)
    P = np.clip(0.7 * Y + np.random.default_rng(0).uniform(0, 0.3, Y.shape), 0, 1)
    for name, array in dict(X=X[:240], P=P[:240], Xv=X[240:], Yv=Y[240:], Pv=P[240:]).items():
        np.save(tmp_path / f"{name}.npy", array)
    fit = ("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy", "--val-features",
           tmp_path / "Xv.npy", "--val-labels", tmp_path / "Yv.npy", "--val-probs", tmp_path / "Pv.npy",
           "--epochs", "1", "--set", "hidden_dim=16", "--set", "latent_dim=4", "--json")
    trained = lsnpc(*fit, "--out", tmp_path / "trained")
    assert trained.returncode == 0, trained.stderr
    report = json.loads(trained.stdout)["report"]
    assert report["plan"]["val_trained_on"] is True and report["decisions"][0]["evidence"]["n_clean"] == 8
    assert "trained on as a clean set" in json.loads(trained.stdout)["summary"]
    validated = lsnpc(*fit, "--out", tmp_path / "validated", "--set", "selection=val_f1")
    assert validated.returncode == 0, validated.stderr
    assert json.loads(validated.stdout)["selection"] == "val_f1"


def test_fit_counts_labels_on_the_unlabelled_rows_it_is_given(tmp_path: Path) -> None:
    """--unlabelled-features/--unlabelled-probs (rows the classifier never saw, no labels) set the threshold by the
    label count on those rows; one without the other is a one-line error naming both flags."""
    X, Y = make_toy_multilabel(200, 6, 4, seed=2)
    P = np.clip(0.7 * Y + np.random.default_rng(0).uniform(0, 0.3, Y.shape), 0, 1)
    for name, array in dict(X=X[:160], P=P[:160], Y=Y[:160], Xu=X[160:], Pu=0.6 * P[160:]).items():
        np.save(tmp_path / f"{name}.npy", array)
    fit = ("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy", "--epochs", "1",
           "--set", "hidden_dim=16", "--set", "latent_dim=4", "--json")
    result = lsnpc(*fit, "--unlabelled-features", tmp_path / "Xu.npy", "--unlabelled-probs", tmp_path / "Pu.npy",
                   "--out", tmp_path / "model")
    assert result.returncode == 0, result.stderr
    # --probs reproduce --labels exactly (a memorised training set): without unlabelled rows fit says so, by flag
    memorised = lsnpc(*fit, "--labels", tmp_path / "Y.npy", "--out", tmp_path / "memorised")
    assert memorised.returncode == 0, memorised.stderr
    assert "--probs reproduce the noisy labels on the training rows (micro-F1 1.000 at 0.5)" in memorised.stderr
    assert "--unlabelled-features and --unlabelled-probs" in memorised.stderr
    report = json.loads(result.stdout)["report"]
    threshold = report["decisions"][-1]
    assert report["plan"]["threshold"] == threshold["method"] == "label count on unlabelled rows"
    assert threshold["evidence"]["n_counted"] == 40
    assert_user_error(lsnpc(*fit, "--unlabelled-features", tmp_path / "Xu.npy", "--out", tmp_path / "other"),
                      "--unlabelled-features and --unlabelled-probs must be given together")
    assert not (tmp_path / "other").exists()
    assert_user_error(lsnpc(*fit, "--unlabelled-features", tmp_path / "X.npy", "--unlabelled-probs",
                            tmp_path / "Pu.npy", "--out", tmp_path / "other"), "--unlabelled-features")


def test_fit_trains_several_networks_and_correct_averages_them(tmp_path: Path) -> None:
    """--set n_fits=2: the saved model holds both networks (the report lists both epochs), and correct returns what
    the library's loaded model returns."""
    from lsnpc import LSNPC

    X, Y = make_toy_multilabel(200, 6, 4, seed=2)
    P = np.clip(0.7 * Y + np.random.default_rng(0).uniform(0, 0.3, Y.shape), 0, 1)
    for name, array in dict(X=X[:160], P=P[:160], Xt=X[160:], Pt=P[160:]).items():
        np.save(tmp_path / f"{name}.npy", array)
    result = lsnpc("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy", "--epochs", "1",
                   "--set", "hidden_dim=16", "--set", "latent_dim=4", "--set", "n_fits=2", "--json",
                   "--out", tmp_path / "model")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["report"]["decisions"][0]["evidence"]["best_epochs"]) == 2
    corrected = lsnpc("correct", "--model", tmp_path / "model", "--features", tmp_path / "Xt.npy", "--probs",
                      tmp_path / "Pt.npy", "--out", tmp_path / "Pc.npy")
    assert corrected.returncode == 0, corrected.stderr
    loaded = LSNPC.load(tmp_path / "model")
    assert len(loaded.models_) == 2
    np.testing.assert_array_equal(np.load(tmp_path / "Pc.npy"), loaded.predict_proba(X[160:], P[160:]))


def test_a_library_warning_is_one_line_that_names_the_flag(tmp_path: Path) -> None:
    """fit on flat --probs (a base model that learned nothing) warns in one line ``warning: ...`` on
    stderr that names --probs, not in Python's file-and-line format, and still saves the model; probabilities
    that vary give no warning."""
    X, Y = make_toy_multilabel(120, 6, 4, seed=2)
    flat = np.clip(0.4 + np.random.default_rng(0).normal(0, 0.005, Y.shape), 0, 1)
    sharp = np.clip(0.7 * Y + np.random.default_rng(0).uniform(0, 0.3, Y.shape), 0, 1)
    for name, array in dict(X=X, flat=flat, sharp=sharp).items():
        np.save(tmp_path / f"{name}.npy", array)
    for probs, warned in (("flat", True), ("sharp", False)):
        result = lsnpc("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / f"{probs}.npy", "--epochs", "1",
                       "--set", "hidden_dim=16", "--set", "latent_dim=4", "--out", tmp_path / probs)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / probs).is_dir()
        lines = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert "Warning:" not in result.stderr and "Traceback" not in result.stderr, result.stderr
        if warned:
            assert len(lines) == 1 and lines[0].startswith("warning: --probs barely vary from row to row"), lines
            assert "check how it was trained" in lines[0]
        else:
            assert not lines, lines


@pytest.mark.slow
def test_fit_then_correct_keeps_the_input_format(tmp_path: Path) -> None:
    X, Y = make_toy_multilabel(240, 6, 4, seed=2)
    rng = np.random.default_rng(0)
    P = np.clip(0.7 * Y + rng.uniform(0, 0.3, Y.shape), 0, 1)
    P[:, 3] *= 0.3  # "fish" stays rare
    P[:, :3] = np.clip(P[:, :3] + 0.1, 0, 1)
    np.save(tmp_path / "X.npy", X)
    columns = ["cat", "dog", "bird", "fish"]
    pd.DataFrame(P, columns=columns).to_csv(tmp_path / "P.csv")  # pandas' default: with an index column
    model = tmp_path / "model"
    fit = ("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.csv", "--out", model,
           "--epochs", "1", "--set", "hidden_dim=16", "--set", "latent_dim=4", "--set", "warm_start=false")
    result = lsnpc(*fit, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    fitted = json.loads(result.stdout)
    assert fitted["selection"] == "noisy_elbo" and fitted["report"]["plan"]["evidence"] == "none"
    assert 0 <= fitted["base_weight"] <= 1 and fitted["summary"].startswith("No label tested the output.")
    assert_user_error(lsnpc(*fit), "already holds a saved LSNPC model; pass --force")
    np.save(tmp_path / "Y.npy", Y)
    with_labels = lsnpc(*fit[:6], tmp_path / "labelled", *fit[7:], "--labels", tmp_path / "Y.npy", "--json")
    assert with_labels.returncode == 0, with_labels.stderr
    assert json.loads(with_labels.stdout)["selection"].startswith("noisy_f1")
    assert_user_error(lsnpc(*fit[:6], tmp_path / "bad", *fit[7:], "--labels", tmp_path / "X.npy"), "--labels")
    assert not (tmp_path / "bad").exists()
    result = lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.csv")
    assert result.returncode == 0, result.stderr
    from lsnpc.corrector import LSNPC

    # no label of any kind: the saved threshold_ keeps to the base model's count, 0.35 to 0.5
    threshold = LSNPC.load(model).threshold_
    assert 0.35 <= threshold <= 0.5
    assert f"predicts a label at probability >= {threshold:g}" in result.stdout
    as_json = lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.csv",
                    "--out", tmp_path / "again.csv", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["threshold"] == threshold
    assert json.loads(as_json.stdout)["base_weight"] == LSNPC.load(model).base_weight_
    corrected = pd.read_csv(tmp_path / "P.corrected.csv")
    assert list(corrected.columns) == columns and corrected.shape == P.shape
    assert corrected.to_numpy().min() >= 0 and corrected.to_numpy().max() <= 1
    np.testing.assert_allclose(corrected.to_numpy(), LSNPC.load(model).predict_proba(X, P), atol=1e-6)
    assert_user_error(lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy",
                            "--probs", tmp_path / "X.npy", "--out", tmp_path / "c.npy"), "--probs must hold")
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\x7f" * 8)
    assert_user_error(lsnpc("correct", "--model", model, "--features", tmp_path / "X.npy", "--probs",
                            tmp_path / "P.csv", "--out", tmp_path / "c.npy"), "--model", "damaged")
    assert not (tmp_path / "c.npy").exists()


@pytest.mark.slow
def test_fit_shows_epochs_and_time_left_on_a_terminal(tmp_path: Path) -> None:
    import os
    import pty

    X, Y = make_toy_multilabel(200, 4, 3, seed=4)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "P.npy", np.clip(0.8 * Y + 0.1, 0, 1))
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsnpc", "fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy",
         "--out", tmp_path / "m", "--epochs", "3", "--set", "hidden_dim=16", "--set", "latent_dim=4"],
        stdout=subprocess.PIPE, stderr=follower, cwd=REPO, env={**ENV, "TERM": "xterm"})
    os.close(follower)
    out, _ = proc.communicate(timeout=300)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed once the child has exited and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    shown = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, shown
    assert "epoch" in shown and "3/3" in shown and "left" in shown, shown
    assert b"saved the fitted model" in out
    # the bar names the phase that runs: after the last epoch, the student's fit (not "warm start done")
    assert "fitting the student" in shown and "warm start done" not in shown, shown


def test_fit_progress_names_each_phase_as_it_runs() -> None:
    """What the bar says once each step's history entry arrives: the next step by name, including the phases
    after training, and a phase it does not know by its own name."""
    from lsnpc.cli.correcting import _running_next

    def after(phase: object, epoch: int = 0, total: int = 36, *, student: bool = True, **entry: object) -> str:
        return _running_next(phase, epoch, total, {"phase": phase, **entry}, student=student)

    assert after("warm_start") == "training epoch 1/36"
    assert after("train", 1) == "training epoch 2/36"
    assert after("train", 35) == "training epoch 36/36"
    assert after("train", 36) == "fitting the student"
    assert after("train", 36, student=False) == "choosing blend and threshold"
    assert after("train", 7, diverged=True) == "fitting the student"
    assert after("student", 36) == "choosing blend and threshold"
    assert after("decide", 36) == "saving the model"
    assert after("calibrate_probabilities", 36) == "calibrate probabilities"
    assert after(None) == "fitting LSNPC"
    # several networks: each step says whose, and the next network's training follows the last one's student
    assert after("train", 3, network=2, networks=3) == "network 2/3: training epoch 4/36"
    assert after("train", 36, network=2, networks=3) == "network 2/3: fitting the student"
    assert after("student", 36, network=2, networks=3) == "network 3/3: training"
    assert after("train", 36, student=False, network=1, networks=2) == "network 2/2: training"
    assert after("student", 36, network=3, networks=3) == "choosing blend and threshold"


@pytest.mark.slow
def test_demo_runs_end_to_end_on_builtin_data() -> None:
    result = lsnpc("demo", "--max-train", "300", "--mlp-epochs", "2", "--lsnpc-epochs", "1", "--seed", "1")
    assert result.returncode == 0, result.stderr
    for fragment in ("synthetic", "base MLP", "base MLP @ count threshold", "+ KNN", "+ LSNPC", "micro-F1",
                     "macro-F1", "300 noisy training"):
        assert fragment in result.stdout
    # LSNPC is given the noisy training labels, as the README recommends: they choose its epoch; 300 rows hold
    # out 30, which choose a threshold among the output's own scores, and the demo says where LSNPC labels
    shown = re.search(r"it labels at probability >= ([0-9.]+)", result.stdout)
    assert shown is not None, result.stdout
    as_json = lsnpc("demo", "--max-train", "300", "--mlp-epochs", "2", "--lsnpc-epochs", "1", "--seed", "1", "--json")
    assert as_json.returncode == 0, as_json.stderr
    demo = json.loads(as_json.stdout)
    assert demo["lsnpc_selection"].startswith("noisy_f1")
    assert 0 < demo["lsnpc_threshold"] < 1 and float(shown.group(1)) == pytest.approx(demo["lsnpc_threshold"], abs=5e-4)
    # the base model at the noisy labels' count threshold: its own row, the same probabilities as the base's
    assert set(demo["methods"]) == {"base MLP", "base MLP @ count threshold", "KNN", "LSNPC"}
    assert demo["methods"]["base MLP @ count threshold"]["map"] == demo["methods"]["base MLP"]["map"]
    assert 0 < demo["count_threshold"] <= 1


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
    # the smoke grid's 3-epoch base MLP is confident about no label, so KNN answers with it for every
    # label: the report says so instead of silently equalling the base model
    assert (df.loc[df.processor == "knn", "n_fallback_labels"] == df.loc[df.processor == "knn", "n_labels"]).all()
    assert ("knn: answered some labels with the base model's own probabilities (no confidently positive or no "
            "confidently negative training row for them) in 2 of 2 runs (synthetic: 2 of 2 runs, 12 of its 12 "
            "labels a run)") in " ".join(md.split())
    assert list((tmp_path / "report").glob("f1_vs_noise_*.png")) or list((tmp_path / "report").glob("history_*.png"))


def test_datasets_list_and_experiment_plan(tmp_path: Path) -> None:
    listing = lsnpc("datasets", "list")
    assert listing.returncode == 0, listing.stderr
    for name in ("synthetic", "scene", "yeast", "tmc2007-500", "goemotions", "voc2007"):
        assert name in listing.stdout
    plan = lsnpc("experiment", "plan", REPO / "configs" / "offline.yaml", "--results", tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "500 runs" in plan.stdout and "100 group(s) to run" in " ".join(plan.stdout.split())


def test_evaluate_prints_a_table_by_default(tmp_path: Path) -> None:
    np.save(tmp_path / "Y.npy", np.eye(3, dtype=int)[[0, 1, 2, 0]])
    np.save(tmp_path / "P.npy", np.eye(3)[[0, 1, 2, 1]] * 0.8 + 0.1)
    result = lsnpc("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy")
    assert result.returncode == 0, result.stderr
    assert "micro-F1" in result.stdout and "0.7500" in result.stdout  # 3 of 4 samples right


def test_demo_names_the_flag_of_a_bad_value() -> None:
    assert_user_error(lsnpc("demo", "--noise-rate", "1.5"), "--noise-rate", "[0, 1)")
    assert_user_error(lsnpc("demo", "--noise-kind", "uniform"), "--noise-kind", "symmetric, pairflip")


# ----------------------------------------------------------------------------- as people script it


def test_version_and_python_dash_m() -> None:
    from lsnpc import __version__

    for cmd in ([sys.executable, "-m", "lsnpc", "--version"], [sys.executable, "-m", "lsnpc.cli", "--version"]):
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=True, env=ENV)
        assert done.stdout.strip() == f"lsnpc {__version__}"
    usage = subprocess.run([sys.executable, "-m", "lsnpc", "fit", "--help"], capture_output=True, text=True, cwd=REPO,
                           env=ENV)
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: lsnpc fit")


def test_help_shows_no_value_after_flags() -> None:
    for command in (("fit",), ("report",), ("demo",), ("experiment", "run")):
        text = lsnpc(*command, "--help").stdout
        assert "--json" in text and "<bool>" not in text, text


def test_parameter_mistakes_name_the_flag(tmp_path: Path) -> None:
    X, _ = make_toy_multilabel(40, 3, 2, seed=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "P.npy", np.full((40, 2), 0.5))
    fit = ("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy", "--out", tmp_path / "m")
    assert_user_error(lsnpc(*fit, "--set", "latent=gauss"), "--set latent=...: use --latent")
    assert_user_error(lsnpc(*fit, "--set", "nosuch=1"), "LSNPC has no parameter 'nosuch'")
    assert_user_error(lsnpc(*fit, "--set", "guard=maybe"), "--set guard must be True or False")
    assert_user_error(lsnpc(*fit, "--epochs", "0"), "--epochs must be 'auto' or an integer >= 1")
    np.save(tmp_path / "P9.npy", np.full((39, 2), 0.5))
    assert_user_error(lsnpc("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P9.npy", "--out",
                            tmp_path / "m"), "--features has 40, --probs has 39")
    assert_user_error(lsnpc("evaluate", "--labels", tmp_path / "P.npy", "--probs", tmp_path / "P.npy"),
                      "--labels must hold only 0/1")
    assert_user_error(lsnpc("demo", "--dataset", "scene", "--data-home", tmp_path),
                      "lsnpc datasets download scene", "--data-home")
    assert not (tmp_path / "m").exists()


def test_fit_never_saves_over_a_users_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.csv").write_text("precious")
    X, _ = make_toy_multilabel(40, 3, 2, seed=0)
    np.save(project / "X.npy", X)
    np.save(project / "P.npy", np.full((40, 2), 0.5))
    args = ("fit", "--features", "X.npy", "--probs", "P.npy", "--epochs", "1")
    assert_user_error(lsnpc(*args, "--out", ".", cwd=project), "--out", "current folder")
    assert_user_error(lsnpc(*args, "--out", project, "--force", cwd=project), "current folder")
    assert sorted(p.name for p in project.iterdir()) == ["P.npy", "X.npy", "data.csv"]
    assert (project / "data.csv").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


def test_outputs_are_never_wrapped_when_piped(tmp_path: Path) -> None:
    _, Y = make_toy_multilabel(50, 3, 4, seed=1)
    deep = tmp_path / ("a-rather-long-folder-name-" * 3)
    deep.mkdir()
    np.save(deep / "Y.npy", Y)
    result = lsnpc("noise", "--labels", deep / "Y.npy", "--out", deep / "noisy-labels.npy", COLUMNS="40")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1 and str(deep / "noisy-labels.npy") in result.stdout
    again = lsnpc("noise", "--labels", deep / "Y.npy", "--out", deep / "noisy-labels.npy", COLUMNS="40")
    assert_user_error(again, "already exists; pass --force")
    assert len(again.stderr.splitlines()) == 1
    forced = lsnpc("noise", "--labels", deep / "Y.npy", "--out", deep / "noisy-labels.npy", "--force", "--json")
    assert json.loads(forced.stdout)["shape"] == [50, 4]


def test_json_output_of_listing_and_planning(tmp_path: Path) -> None:
    listing = json.loads(lsnpc("datasets", "list", "--json").stdout)
    assert {"synthetic", "scene"} <= {d["name"] for d in listing}
    plan = json.loads(lsnpc("experiment", "plan", REPO / "configs" / "offline.yaml", "--results", tmp_path,
                            "--json").stdout)
    assert plan["n_runs"] == 500 and plan["n_groups_to_run"] == 100 and plan["n_finished"] == 0


def test_offline_download_is_one_line_and_leaves_no_folder(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on: every connection is refused, as offline
        sock.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    home = tmp_path / "home"
    result = lsnpc("datasets", "download", "scene", "--data-home", home, https_proxy=proxy, http_proxy=proxy)
    assert_user_error(result, "could not download 'scene'")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not home.exists()


def test_csv_written_by_pandas_is_read_as_the_user_meant(tmp_path: Path) -> None:
    _, Y = make_toy_multilabel(30, 3, 4, seed=2)
    P = np.clip(Y * 0.8 + 0.1, 0, 1)
    pd.DataFrame(Y).to_csv(tmp_path / "Y.csv")  # a numeric header and an index column
    pd.DataFrame(P).to_csv(tmp_path / "P.csv", index=False)  # a numeric header
    result = lsnpc("evaluate", "--labels", tmp_path / "Y.csv", "--probs", tmp_path / "P.csv", "--json")
    assert result.returncode == 0, result.stderr
    from lsnpc.metrics import evaluate

    assert json.loads(result.stdout)["micro_f1"] == pytest.approx(evaluate(Y, P)["micro_f1"])
    (tmp_path / "bad.csv").write_text("a,b,c,d\n" + "0.1,0.2,x,0.4\n" * 30)
    assert_user_error(lsnpc("evaluate", "--labels", tmp_path / "Y.csv", "--probs", tmp_path / "bad.csv"),
                      "--probs", "column(s) c hold non-numeric values")


def test_evaluate_on_a_single_label_column(tmp_path: Path) -> None:
    np.save(tmp_path / "y.npy", np.array([[1], [0], [1], [0]]))
    np.save(tmp_path / "p.npy", np.array([[0.9], [0.2], [0.4], [0.6]]))
    result = lsnpc("evaluate", "--labels", tmp_path / "y.npy", "--probs", tmp_path / "p.npy", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["micro_f1"] == pytest.approx(0.5)


# ----------------------------------------------------------------------------- outputs and inputs


def test_an_output_is_never_one_of_the_commands_inputs(tmp_path: Path) -> None:
    """``--force`` replaces an old output, never an input of the same command: every command that writes refuses
    an --out that is one of its inputs (also through a link), or lies inside an input folder, in one line naming
    both flags, and leaves the input as it was."""
    X, Y = make_toy_multilabel(40, 3, 2, seed=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    np.save(tmp_path / "P.npy", np.clip(0.8 * Y + 0.1, 0, 1))
    pd.DataFrame(Y, columns=["a", "b"]).to_csv(tmp_path / "Y.csv", index=False)
    (tmp_path / "link.npy").symlink_to(tmp_path / "Y.npy")
    model = tmp_path / "model"
    model.mkdir()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    X_, Y_, P_, Ycsv = (tmp_path / name for name in ("X.npy", "Y.npy", "P.npy", "Y.csv"))
    cases = [
        (("noise", "--labels", Y_, "--out", Y_), "--labels"),
        (("noise", "--labels", Y_, "--out", tmp_path / "link.npy"), "--labels"),
        (("correct", "--model", model, "--features", X_, "--probs", P_, "--out", X_), "--features"),
        (("correct", "--model", model, "--features", X_, "--probs", P_, "--out", model / "c.npy"), "--model"),
        (("label-issues", "--features", X_, "--labels", Ycsv, "--probs", P_, "--out", Ycsv), "--labels"),
        (("fit", "--features", X_, "--probs", P_, "--out", P_), "--probs"),
    ]
    for args, flag in cases:
        result = lsnpc(*args, "--force", cwd=tmp_path.parent)
        assert_user_error(result, f"--out {args[-1]}", flag, "never writes over its own input")
        assert len(result.stderr.strip().splitlines()) == 1
    # a folder holding the inputs is refused by the save itself: it is not a saved model
    assert_user_error(lsnpc("fit", "--features", X_, "--probs", P_, "--out", tmp_path, "--force"), "--out",
                      "not a saved LSNPC model")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert list(model.iterdir()) == []


def test_paths_may_start_with_a_tilde(tmp_path: Path) -> None:
    """``--out=~/x`` (which no shell expands) and any other path flag mean the home folder's x."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    _, Y = make_toy_multilabel(30, 3, 2, seed=0)
    np.save(home / "Y.npy", Y)
    result = lsnpc("noise", "--labels", "~/Y.npy", "--out=~/noisy.npy", cwd=work, HOME=str(home))
    assert result.returncode == 0, result.stderr
    assert np.load(home / "noisy.npy").shape == Y.shape
    assert list(work.iterdir()) == []


# ----------------------------------------------------------------------------- saying what it means


def test_help_lists_each_command_with_its_whole_description() -> None:
    """``lsnpc --help`` shows every command's first sentence whole (wrapped), never cut off with '...'."""
    import typer.main

    from lsnpc.cli import app

    group = typer.main.get_command(app)
    for columns in ("80", "200"):
        shown = " ".join(lsnpc("--help", COLUMNS=columns).stdout.split())
        assert "..." not in shown.split("Commands:", 1)[1]
        for name, command in group.commands.items():
            first = " ".join(command.help.split("\n\n")[0].split()) if command.help else ""
            sentence = first.split(". ")[0].rstrip(".")
            assert sentence in shown, (name, sentence, shown)


def _tiny_inputs(folder: Path) -> tuple[str, ...]:
    """X, P and Y of 40 rows in ``folder``; the flags of ``lsnpc fit`` that read them, --out ``folder``/m."""
    X, _ = make_toy_multilabel(40, 3, 2, seed=0)
    np.save(folder / "X.npy", X)
    np.save(folder / "P.npy", np.full((40, 2), 0.5))
    np.save(folder / "Y.npy", np.eye(2, dtype=int)[np.arange(40) % 2])
    return ("fit", "--features", str(folder / "X.npy"), "--probs", str(folder / "P.npy"), "--out", str(folder / "m"))


def test_set_encoder_says_the_parameter_exists_but_takes_a_module(tmp_path: Path) -> None:
    fit = _tiny_inputs(tmp_path)
    assert_user_error(lsnpc(*fit, "--set", "encoder=foo"), "encoder takes a torch module", "command line cannot",
                      "LSNPC(encoder=module)")
    assert not (tmp_path / "m").exists()


def test_device_without_cuda_names_the_flag(tmp_path: Path) -> None:
    fit = _tiny_inputs(tmp_path)
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    for args in (fit, ("label-issues", "--features", tmp_path / "X.npy", "--labels", tmp_path / "Y.npy", "--probs",
                       tmp_path / "P.npy", "--out", tmp_path / "issues.csv"), ("demo", "--max-train", "100")):
        assert_user_error(lsnpc(*args, "--device", "cuda", **no_gpu), "--device", "CUDA is not available")
    assert not (tmp_path / "m").exists() and not (tmp_path / "issues.csv").exists()


# ----------------------------------------------------------------------------- evaluate at the model's thresholds


def _scored_at(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_evaluate_scores_at_a_models_own_threshold_and_says_so(tmp_path: Path) -> None:
    """With --model, evaluate labels at the model's thresholds (as its predict does), not at 0.5, and both the
    table and --json say which threshold was used; --threshold given beside it wins, and says so."""
    from lsnpc import LSNPC
    from lsnpc.metrics import evaluate

    X, Y = make_toy_multilabel(60, 3, 3, seed=0)
    P = np.clip(0.45 * Y + np.random.default_rng(0).uniform(0, 0.5, Y.shape), 0, 1)
    LSNPC(epochs=1, hidden_dim=16, latent_dim=4, threshold=0.3, random_state=0).fit(X, P).save(tmp_path / "m")
    np.save(tmp_path / "Y.npy", Y)
    np.save(tmp_path / "P.npy", P)
    base = ("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy")
    at_model = _scored_at(lsnpc(*base, "--model", tmp_path / "m", "--json"))
    assert at_model["micro_f1"] == pytest.approx(evaluate(Y, P, threshold=0.3)["micro_f1"])
    assert at_model["micro_f1"] != pytest.approx(evaluate(Y, P)["micro_f1"])
    assert at_model["threshold"] == pytest.approx(0.3) and "--model" in at_model["threshold_source"]
    shown = lsnpc(*base, "--model", tmp_path / "m")
    assert shown.returncode == 0, shown.stderr
    assert "probability >= 0.3 (--model" in " ".join(shown.stdout.split())
    default = lsnpc(*base)
    assert "probability >= 0.5 (the default" in " ".join(default.stdout.split())
    given = _scored_at(lsnpc(*base, "--model", tmp_path / "m", "--threshold", "0.6", "--json"))
    assert given["micro_f1"] == pytest.approx(evaluate(Y, P, threshold=0.6)["micro_f1"])
    assert given["threshold_source"].startswith("--threshold, instead of --model")
    assert_user_error(lsnpc(*base, "--model", tmp_path / "nomodel"), "--model", "not found")


def test_evaluate_takes_one_threshold_per_label_from_a_file(tmp_path: Path) -> None:
    from lsnpc.metrics import evaluate

    _, Y = make_toy_multilabel(60, 3, 3, seed=1)
    P = np.clip(0.45 * Y + np.random.default_rng(1).uniform(0, 0.5, Y.shape), 0, 1)
    names = ["cat", "dog", "fish"]
    np.save(tmp_path / "Y.npy", Y)
    pd.DataFrame(P, columns=names).to_csv(tmp_path / "P.csv", index=False)
    per_label = np.array([0.3, 0.5, 0.7])
    expected = evaluate(Y, P, threshold=per_label)
    np.save(tmp_path / "t.npy", per_label)
    (tmp_path / "t.json").write_text(json.dumps(per_label.tolist()))
    (tmp_path / "named.json").write_text(json.dumps({"fish": 0.7, "cat": 0.3, "dog": 0.5}))  # any order, by name
    pd.DataFrame([per_label[::-1]], columns=names[::-1]).to_csv(tmp_path / "t.csv", index=False)
    base = ("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.csv")
    for file in ("t.npy", "t.json", "named.json", "t.csv"):
        got = _scored_at(lsnpc(*base, "--thresholds", tmp_path / file, "--json"))
        assert got["micro_f1"] == pytest.approx(expected["micro_f1"]), file
        assert got["threshold"] == pytest.approx(per_label.tolist()), file
    shown = " ".join(lsnpc(*base, "--thresholds", tmp_path / "t.json").stdout.split())
    assert "one per label: cat at 0.3, dog at 0.5, fish at 0.7 (--thresholds" in shown
    (tmp_path / "two.json").write_text("[0.5, 0.5, 0.7]")
    shown = " ".join(lsnpc(*base, "--thresholds", tmp_path / "two.json").stdout.split())
    assert "probability >= 0.5, 1 of 3 labels at their own: fish at 0.7 (--thresholds" in shown
    (tmp_path / "short.json").write_text("[0.3, 0.5]")
    (tmp_path / "big.json").write_text("[0.3, 0.5, 1.5]")
    (tmp_path / "wrong.json").write_text(json.dumps({"cat": 0.3, "dog": 0.5, "bird": 0.7}))
    assert_user_error(lsnpc(*base, "--thresholds", tmp_path / "short.json"), "--thresholds", "one number per label")
    assert_user_error(lsnpc(*base, "--thresholds", tmp_path / "big.json"), "--thresholds", "in [0, 1]")
    assert_user_error(lsnpc(*base, "--thresholds", tmp_path / "wrong.json"), "--thresholds names the labels")
    assert_user_error(lsnpc(*base, "--thresholds", tmp_path / "t.json", "--threshold", "0.4"), "not both")


def test_evaluate_explains_labels_without_a_positive(tmp_path: Path) -> None:
    """mAP averages the labels that have a positive; evaluate says how many had none, and never prints a bare
    'nan' where a score is undefined."""
    Y = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    np.save(tmp_path / "Y.npy", Y)
    np.save(tmp_path / "none.npy", np.zeros_like(Y))
    np.save(tmp_path / "P.npy", np.array([[.9, .2, .1], [.4, .8, .3], [.6, .45, .2], [.1, .1, .6]]))
    some = lsnpc("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy")
    assert some.returncode == 0, some.stderr
    assert "1 of 3 labels have no positive in --labels; mAP averages the other 2" in " ".join(some.stdout.split())
    none = lsnpc("evaluate", "--labels", tmp_path / "none.npy", "--probs", tmp_path / "P.npy")
    assert none.returncode == 0, none.stderr
    assert "nan" not in none.stdout.lower() and "undefined" in none.stdout
    assert "no label has a positive in --labels" in " ".join(none.stdout.split())
    assert json.loads(lsnpc("evaluate", "--labels", tmp_path / "Y.npy", "--probs", tmp_path / "P.npy",
                            "--json").stdout)["labels_without_positive"] == 1


def test_plot_training_writes_a_models_curve_and_never_replaces_a_file_unasked(tmp_path: Path) -> None:
    from lsnpc import LSNPC

    X, Y = make_toy_multilabel(80, 3, 2, seed=0)
    P = np.clip(0.6 * Y + np.random.default_rng(0).uniform(0, 0.4, Y.shape), 0, 1)
    LSNPC(epochs=2, hidden_dim=16, latent_dim=4, random_state=0).fit(X, P, labels=Y).save(tmp_path / "m")
    saved = sorted(p.name for p in (tmp_path / "m").iterdir())
    out = tmp_path / "curve.png"
    result = lsnpc("plot-training", tmp_path / "m", "--out", out)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and out.stat().st_size > 5000
    assert f"wrote the training curve of {tmp_path / 'm'} to {out}" in " ".join(result.stdout.split())
    out.write_bytes(b"mine")
    assert_user_error(lsnpc("plot-training", tmp_path / "m", "--out", out), "--out", "already exists; pass --force")
    assert out.read_bytes() == b"mine"
    forced = lsnpc("plot-training", tmp_path / "m", "--out", out, "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["selection"].startswith("noisy_f1") and out.read_bytes().startswith(b"\x89PNG")
    assert_user_error(lsnpc("plot-training", tmp_path / "m", "--out", tmp_path / "m" / "c.png", "--force"),
                      "--out", "is inside MODEL", "never writes over its own input")
    assert_user_error(lsnpc("plot-training", tmp_path / "m", "--out", tmp_path / "c.txt"), "--out must end in .png")
    assert_user_error(lsnpc("plot-training", tmp_path / "none", "--out", tmp_path / "c.png"), "model folder not found")
    (tmp_path / "m" / "config.json").write_text("{}")
    assert_user_error(lsnpc("plot-training", tmp_path / "m", "--out", tmp_path / "c.png"), "MODEL", "config")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == saved


# ----------------------------------------------------------------------------- a user's mistake, not a bug


def _scene_home(tmp_path: Path, train_rows: str, xml: str | None = None) -> Path:
    """A --data-home whose scene files are the given ARFF data rows (features a; labels l0, l1) and XML."""
    folder = tmp_path / "home" / "scene"
    folder.mkdir(parents=True)
    (folder / "scene.xml").write_text(xml if xml is not None else (
        '<?xml version="1.0"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">'
        '<label name="l0"></label><label name="l1"></label></labels>\n'))
    header = "@relation s\n@attribute a numeric\n@attribute l0 {0,1}\n@attribute l1 {0,1}\n@data\n"
    for split in ("train", "test"):
        (folder / f"scene-{split}.arff").write_text(header + train_rows)
    return folder.parent


@pytest.mark.parametrize("rows", ["1,0,1\n2,1\n", "1,0,1\n" + ",".join(["1"] * 400) + "\n"])
def test_a_malformed_arff_row_is_the_files_fault(tmp_path: Path, rows: str) -> None:
    result = lsnpc("demo", "--dataset", "scene", "--data-home", _scene_home(tmp_path, rows))
    assert_user_error(result, "scene-train.arff is not a well-formed ARFF file", "line 7")
    assert len(result.stderr) < 600  # a long bad row is cut, not printed whole


def test_a_malformed_xml_file_is_the_files_fault(tmp_path: Path) -> None:
    result = lsnpc("demo", "--dataset", "scene", "--data-home", _scene_home(tmp_path, "1,0,1\n", xml="<labels><x"))
    assert_user_error(result, "scene.xml is not a well-formed XML file")


def test_out_naming_a_folder_or_a_path_under_a_file_names_the_flag(tmp_path: Path) -> None:
    _, Y = make_toy_multilabel(20, 3, 3, seed=0)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "taken.npy").mkdir()
    noise = ("noise", "--labels", tmp_path / "Y.npy", "--kind", "symmetric", "--rate", "0.2")
    result = lsnpc(*noise, "--out", tmp_path / "taken.npy", "--force")
    assert_user_error(result, "--out:", "taken.npy is a folder; a file cannot replace it")
    assert ".taken.npy." not in result.stderr  # never the temporary file's name
    (tmp_path / "file").write_text("")
    assert_user_error(lsnpc(*noise, "--out", tmp_path / "file" / "Yn.npy"), "--out:", "file is a file, not a folder")


def test_an_input_flag_naming_a_folder_says_so(tmp_path: Path) -> None:
    (tmp_path / "X.npy").mkdir()
    np.save(tmp_path / "P.npy", np.full((10, 2), 0.5))
    assert_user_error(lsnpc("fit", "--features", tmp_path / "X.npy", "--probs", tmp_path / "P.npy", "--out",
                            tmp_path / "m"), "--features:", "is a folder, not a file")


def test_a_headerless_integer_csv_keeps_its_first_row(tmp_path: Path) -> None:
    from lsnpc.arrays import read_array

    rows = np.vstack([np.arange(4), np.random.default_rng(0).integers(2, 9, size=(5, 4))])
    np.savetxt(tmp_path / "counts.csv", rows, fmt="%d", delimiter=",")
    array, names = read_array(tmp_path / "counts.csv", "--features")
    np.testing.assert_array_equal(array, rows)
    assert names is None
    labels = pd.DataFrame(np.eye(4, dtype=int)[[0, 1, 2, 3, 0]])
    labels.to_csv(tmp_path / "Y.csv", index=False)  # pandas' default header 0,1,2,3 over 0/1 rows
    array, names = read_array(tmp_path / "Y.csv", "--labels")
    assert array.shape == (5, 4) and names == ["0", "1", "2", "3"]


def test_retrain_on_one_label_column(tmp_path: Path) -> None:
    X, Y = make_toy_multilabel(40, 3, 2, seed=1)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y[:, :1])
    result = lsnpc("retrain", "--features", tmp_path / "X.npy", "--labels", tmp_path / "Y.npy", "--out",
                   tmp_path / "m", "--epochs", "1", "--cv", "2", "--no-post-hoc")
    assert result.returncode == 0, result.stderr


def test_parallel_workers_warn_in_one_line_each(tmp_path: Path) -> None:
    script = tmp_path / "workers.py"  # a file: spawned workers import the function from it
    script.write_text(
        "import warnings\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from multiprocessing import get_context\n"
        "from lsnpc.experiments.executors import _init_worker\n"
        "def warn():\n"
        "    warnings.warn('pred_probs barely vary\\nacross rows', UserWarning)\n"
        "if __name__ == '__main__':\n"
        "    with ProcessPoolExecutor(1, mp_context=get_context('spawn'), initializer=_init_worker,"
        " initargs=(1,)) as pool:\n"
        "        pool.submit(warn).result()\n")
    result = subprocess.run([sys.executable, script], capture_output=True, text=True, env=ENV, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "warning: pred_probs barely vary across rows"
