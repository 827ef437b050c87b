"""Saving and loading LSNPC: nothing a user owns is replaced or deleted, damaged models are refused."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from lsnpc import LSNPC

from tests.test_corrector import FAST, fitted, problem  # noqa: F401 - the fixtures, shared

REPO = Path(__file__).resolve().parents[1]
TEST = slice(350, None)  # rows neither fitted nor validated on


def _rewrite_config(target: Path, edit) -> None:
    """Edit a saved config and give it a matching checksum (a deliberate edit, not damage)."""
    config = json.loads((target / "config.json").read_text())
    edit(config)
    body = {k: v for k, v in config.items() if k != "config_sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    config["config_sha256"] = hashlib.sha256(canonical).hexdigest()
    (target / "config.json").write_text(json.dumps(config))


# ----------------------------------------------------------------------------- save


def test_round_trip_and_file_permissions(fitted: LSNPC, problem: dict[str, np.ndarray], tmp_path: Path) -> None:
    X, P = problem["X"][TEST], problem["P"][TEST]
    target = tmp_path / "model"
    old = os.umask(0o022)
    try:
        fitted.save(target)
    finally:
        os.umask(old)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors", "student.safetensors"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in target.iterdir()} == {0o644}
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    config = json.loads((target / "config.json").read_text())
    assert config["format"] == "lsnpc" and config["format_version"] == 5
    assert config["weights"]["sha256"] == hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    loaded = LSNPC.load(target)
    np.testing.assert_array_equal(loaded.predict_proba(X, P), fitted.predict_proba(X, P))
    assert loaded.selection_ == fitted.selection_ and loaded.best_epoch_ == fitted.best_epoch_
    assert loaded.report_ == fitted.report_ and loaded.report_.summary() == fitted.report_.summary()
    assert loaded.threshold_ == fitted.threshold_ and loaded.base_weight_ == fitted.base_weight_
    np.testing.assert_array_equal(loaded.predict(X, P), fitted.predict(X, P))
    assert loaded.get_params() == {**fitted.get_params(), "device": "cpu"}


def test_several_networks_round_trip_in_the_same_files(problem: dict[str, np.ndarray], tmp_path: Path) -> None:
    """n_fits=2: both networks and both students are saved (the second's names prefixed "fit1."), loaded and
    averaged as fitted; a file that holds another number of networks than the config says is refused."""
    from safetensors import safe_open

    X, Y, P = problem["X"], problem["Y"], problem["P"]
    fitted = LSNPC(random_state=0, n_fits=2, **FAST).fit(
        X[:300], P[:300], X_val=X[300:350], y_val=Y[300:350], pred_probs_val=P[300:350])
    target = tmp_path / "model"
    fitted.save(target)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors", "student.safetensors"]
    for name in ("model.safetensors", "student.safetensors"):
        with safe_open(str(target / name), framework="pt") as fh:
            keys = list(fh.keys())
        first = [k for k in keys if not k.startswith("fit1.")]
        assert sorted(k.removeprefix("fit1.") for k in keys if k.startswith("fit1.")) == sorted(first)
    loaded = LSNPC.load(target)
    assert len(loaded.models_) == len(loaded.students_) == 2 and loaded.n_fits == 2
    np.testing.assert_array_equal(loaded.predict_proba(X[TEST], P[TEST]), fitted.predict_proba(X[TEST], P[TEST]))
    assert loaded.report_ == fitted.report_

    def one_network(c: dict) -> None:
        c["params"]["n_fits"] = 1
        c["fitted"]["report_"]["decisions"][0]["evidence"]["best_epochs"] = [c["fitted"]["best_epoch_"]]

    _rewrite_config(target, one_network)
    with pytest.raises(ValueError, match="does not match the model its config describes: .*fit1"):
        LSNPC.load(target)


def test_a_folder_written_before_n_fits_loads_as_one_network(fitted: LSNPC, problem: dict[str, np.ndarray],
                                                              saved: Path) -> None:
    """Format version 4 had no n_fits and no best_epochs: it is read as the one network it holds."""

    def version_4(c: dict) -> None:
        c["format_version"] = 4
        c["params"].pop("n_fits")
        c["fitted"]["report_"]["decisions"][0]["evidence"].pop("best_epochs")

    _rewrite_config(saved, version_4)
    loaded = LSNPC.load(saved)
    assert loaded.n_fits == 1 and len(loaded.models_) == 1
    X, P = problem["X"][TEST], problem["P"][TEST]
    np.testing.assert_array_equal(loaded.predict_proba(X, P), fitted.predict_proba(X, P))


def test_a_fit_on_the_noisy_labels_round_trips(problem: dict[str, np.ndarray], tmp_path: Path) -> None:
    """A fit given the noisy labels and no clean ones, with named columns: the saved model answers, describes
    itself and checks its columns the same."""
    import pandas as pd

    from lsnpc import simulate_noise

    X, Y, P = problem["X"], problem["Y"], problem["P"]
    noisy = simulate_noise(Y[:300], "symmetric", 0.2, random_state=0)[0]
    features = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    fitted = LSNPC(random_state=0, **FAST).fit(features[:300], P[:300], labels=noisy)
    assert fitted.report_.plan.evidence == "noisy labels" and fitted.report_.plan.n_holdout == 30
    fitted.save(tmp_path / "model")
    loaded = LSNPC.load(tmp_path / "model")
    assert loaded.report_ == fitted.report_ and loaded.report_.summary() == fitted.report_.summary()
    assert list(loaded.feature_names_in_) == list(fitted.feature_names_in_) and not hasattr(loaded, "label_names_in_")
    np.testing.assert_array_equal(loaded.predict_proba(features[TEST], P[TEST]),
                                  fitted.predict_proba(features[TEST], P[TEST]))
    with pytest.raises(ValueError, match="in another order"):
        loaded.predict_proba(features[TEST][features.columns[::-1]], P[TEST])


def test_save_never_replaces_what_it_did_not_write(fitted: LSNPC, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "data.csv").write_text("precious")
    (project / "src" / "code.py").write_text("print()")
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="not a saved LSNPC model"):
            fitted.save(project, overwrite=overwrite)
    assert (project / "data.csv").read_text() == "precious" and (project / "src" / "code.py").exists()

    (tmp_path / "file").write_text("mine")
    with pytest.raises(FileExistsError, match="not a folder"):
        fitted.save(tmp_path / "file", overwrite=True)
    assert (tmp_path / "file").read_text() == "mine"

    monkeypatch.chdir(project)
    for here in (".", "..", str(project)):
        with pytest.raises(FileExistsError, match="current folder"):
            fitted.save(here, overwrite=True)
    assert sorted(p.name for p in project.iterdir()) == ["data.csv", "src"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "project"]


def test_a_saved_model_is_replaced_only_when_asked(fitted: LSNPC, problem: dict[str, np.ndarray],
                                                   tmp_path: Path) -> None:
    target = tmp_path / "model"
    fitted.save(target)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        fitted.save(target)
    other = LSNPC(random_state=1, **FAST).fit(problem["X"][:100], problem["P"][:100])
    other.save(target, overwrite=True)
    assert LSNPC.load(target).predict_seed_ == other.predict_seed_
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"], "no temporary folders left behind"
    (target / "notes.txt").write_text("my notes")  # a user's file inside a model folder
    with pytest.raises(FileExistsError, match="notes.txt"):
        fitted.save(target, overwrite=True)
    assert (target / "notes.txt").read_text() == "my notes"
    empty = tmp_path / "empty"
    empty.mkdir()  # `mkdir model && lsnpc fit --out model`: nothing is lost
    fitted.save(empty)
    assert LSNPC.load(empty).predict_seed_ == fitted.predict_seed_


_KILLED_SAVE = """
import sys, time
from lsnpc._io import atomic_directory
with atomic_directory(sys.argv[1], owned=("config.json", "model.safetensors")) as tmp:
    (tmp / "model.safetensors").write_bytes(b"x" * 1000)
    print(tmp, flush=True)
    time.sleep(60)
"""


def test_a_killed_save_leaves_nothing_forever(fitted: LSNPC, tmp_path: Path) -> None:
    target = tmp_path / "model"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(target)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    partial = Path(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert partial.is_dir() and partial.name.startswith(".model.")
    # a folder that merely looks like a leftover, but holds a user's file, is left alone
    lookalike = tmp_path / ".model.lsnpc-partial-abc"
    lookalike.mkdir()
    (lookalike / "mine.txt").write_text("keep")
    fitted.save(target)
    assert not partial.exists()
    assert (lookalike / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.lsnpc-partial-abc", "model"]


# ----------------------------------------------------------------------------- load


@pytest.fixture
def saved(fitted: LSNPC, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    fitted.save(target)
    return target


def test_damaged_weights_are_refused(saved: Path) -> None:
    weights = saved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    rng = np.random.default_rng(0)
    for i in rng.choice(np.arange(len(data) // 2, len(data)), 200, replace=False):  # tensor data, not header
        data[i] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="damaged: its SHA-256 does not match"):
        LSNPC.load(saved)
    weights.write_bytes(bytes(data[:100]))
    with pytest.raises(ValueError, match="damaged"):
        LSNPC.load(saved)
    weights.unlink()
    with pytest.raises(ValueError, match="has no model.safetensors"):
        LSNPC.load(saved)


def test_edited_config_is_refused(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["params"]["nu"] = 5.0
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="does not match its config_sha256"):
        LSNPC.load(saved)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda c: c["fitted"].update(base_weight_=5.0), "base_weight_ must be a number in"),
        (lambda c: c["fitted"].update(base_weight_=0.25), "fitted base_weight_ = 0.25 but the report says"),
        (lambda c: c["fitted"].update(threshold_=0.3), "fitted threshold_ = 0.3 but the report says"),
        (lambda c: c["params"].update(threshold=0.3), "params.threshold is 0.3 but the fitted threshold_ is"),
        (lambda c: c["params"].pop("threshold"), "parameters threshold are missing"),
        (lambda c: c["fitted"]["report_"]["decisions"][2].update(choice="x"), "choice must be a number or null"),
        (lambda c: c["fitted"]["report_"].pop("plan"), "exactly 'plan' and 'decisions'"),
        (lambda c: c["fitted"].update(feature_names_in_=["a"]), "feature_names_in_ must be null or a list of 8"),
        (lambda c: c["fitted"].update(selection_="best"), "selection_ must be one of"),
        (lambda c: c["fitted"].pop("n_labels_"), "fitted fields missing n_labels_"),
        (lambda c: c["fitted"].update(extra_=1), "fitted fields unknown extra_"),
        (lambda c: c["fitted"].update(n_labels_="4"), "n_labels_ must be a positive integer"),
        (lambda c: c["fitted"].update(best_epoch_=99), "best_epoch_ must be an integer in"),
        (lambda c: c["fitted"].update(input_shape_=[9]), "input_shape_ must be a shape of n_features_in_"),
        (lambda c: c["fitted"].update(history_="x"), "history_ must be a list"),
        (lambda c: c["fitted"].update(n_labels_=5), "does not match the model"),
        (lambda c: c["fitted"].update(data_dim_=7), "data_dim_ = 7 but hidden_dim = 32"),
        (lambda c: c["params"].update(nu=5.0), "with nu=2.01, but config.json says nu=5.0: the files do not belong"),
        (lambda c: c["params"].update(latent="gauss"), "latent='student', but config.json says latent='gauss'"),
        (lambda c: c["params"].update(latent="cauchy"), "damaged: parameter latent must be one of"),
        (lambda c: c["params"].update(guard="maybe"), "guard must be True or False"),
        (lambda c: c["params"].update(nosuch=1), "parameters this lsnpc does not know: nosuch"),
        (lambda c: c.pop("weights"), "missing 'weights'"),
        (lambda c: c.update(encoder="other"), "'encoder' must be 'user' or 'builtin'"),
        (lambda c: c["params"].update(n_fits=2), "best_epochs must list n_fits = 2 epochs"),
        (lambda c: c["fitted"]["report_"]["decisions"][0]["evidence"].update(best_epochs=[99]),
         "the first best_epoch_ = "),
    ],
)
def test_inconsistent_config_is_refused(saved: Path, edit, match: str) -> None:
    _rewrite_config(saved, edit)
    with pytest.raises(ValueError, match=match):
        LSNPC.load(saved)


def test_non_finite_weights_are_refused(fitted: LSNPC, saved: Path) -> None:
    from safetensors.torch import load_file, save_file

    from safetensors import safe_open

    with safe_open(str(saved / "model.safetensors"), framework="pt") as fh:
        metadata = fh.metadata()
    state = load_file(str(saved / "model.safetensors"))
    name = next(k for k, v in state.items() if v.is_floating_point() and v.numel() > 1)
    state[name][0] = float("nan")
    save_file(state, str(saved / "model.safetensors"), metadata=metadata)
    digest = hashlib.sha256((saved / "model.safetensors").read_bytes()).hexdigest()
    _rewrite_config(saved, lambda c: c["weights"].update(sha256=digest))
    with pytest.raises(ValueError, match="non-finite values in " + name):
        LSNPC.load(saved)


def test_older_formats_are_refused_and_checksums_cannot_be_skipped(saved: Path) -> None:
    """A folder of format version 1 or 2 (written before the fit report existed) is refused with a message to fit
    again, whatever else it holds: relabelling a config as version 1 cannot skip the checksums."""
    config = json.loads((saved / "config.json").read_text())
    for version in (1, 2):
        edited = {**config, "format_version": version, "params": {**config["params"], "threshold": 0.3}}
        edited.pop("config_sha256")
        (saved / "config.json").write_text(json.dumps(edited))
        with pytest.raises(ValueError, match=f"older lsnpc \\(format version {version}\\).*fit the corrector again"):
            LSNPC.load(saved)


def test_corrupt_and_foreign_configs_are_refused(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a saved LSNPC"):
        LSNPC.load(tmp_path / "missing")
    (saved / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        LSNPC.load(saved)
    (saved / "config.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not the config of a saved LSNPC model"):
        LSNPC.load(saved)
    (saved / "config.json").write_text(json.dumps({"format": "lsnpc", "format_version": 99}))
    with pytest.raises(ValueError, match="format_version"):
        LSNPC.load(saved)


def test_save_load_with_user_encoder(problem: dict[str, np.ndarray], tmp_path: Path) -> None:
    X, P = problem["X"], problem["P"]
    encoder = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU())
    model = LSNPC(encoder=encoder, random_state=0, **FAST).fit(X[:150], P[:150])
    model.save(tmp_path / "m")
    with pytest.raises(ValueError, match="pass encoder="):
        LSNPC.load(tmp_path / "m")
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU())
    loaded = LSNPC.load(tmp_path / "m", encoder=fresh)
    np.testing.assert_array_equal(loaded.predict_proba(X[:20], P[:20]), model.predict_proba(X[:20], P[:20]))
    with pytest.raises(ValueError, match="does not match the model"):
        LSNPC.load(tmp_path / "m", encoder=torch.nn.Sequential(torch.nn.Linear(8, 13), torch.nn.ReLU()))


# ----------------------------------------------------------------------------- predict on far-out X


def test_far_out_features_warn_and_never_give_non_finite_probabilities(
    fitted: LSNPC, problem: dict[str, np.ndarray]
) -> None:
    X, P = problem["X"][350:360].copy(), problem["P"][350:360]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.predict_proba(X, P)  # ordinary data: no warning
    X[3, 2] = 1e10
    with pytest.warns(UserWarning, match="row 3, feature 2 is .* training standard deviations"):
        fitted.predict_proba(X, P)
    X = X.astype(np.float64)
    X[3, 2] = 1e39
    with pytest.raises(ValueError, match=r"X holds values too large for float32 \(largest magnitude 1e\+39"):
        fitted.predict_proba(X, P)  # finite, but not a float32: named as such, not as NaN or infinite


def test_predict_proba_raises_instead_of_returning_non_finite(fitted: LSNPC, problem: dict[str, np.ndarray]) -> None:
    import copy

    broken = copy.deepcopy(fitted)
    broken.base_weight_ = 0.0  # the pure correction, to see it
    with torch.no_grad():
        next(broken.model_.label_decoder.parameters()).fill_(float("nan"))
    with pytest.raises(ValueError, match="non-finite probabilities for 50 of 50 rows"):
        broken.predict_proba(problem["X"][TEST], problem["P"][TEST])
