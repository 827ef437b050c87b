"""Saving and loading the base classifiers (lsnpc.classifiers.persistence): safetensors + JSON, checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from lsnpc.classifiers import ADDGCN, HLC, MLPClassifier
from lsnpc.classifiers._base import NetClassifier
from tests.conftest import make_toy_multilabel

MAKERS = {
    "MLPClassifier": lambda: MLPClassifier(hidden_dims=(8, 4), epochs=3, random_state=0),
    "ADDGCN": lambda: ADDGCN(hidden_dim=8, epochs=3, random_state=0),
    "HLC": lambda: HLC(hidden_dim=8, epochs=4, start=1, random_state=0),
}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return make_toy_multilabel(96, 6, 3, seed=2)


@pytest.fixture(scope="module")
def mlp(data) -> MLPClassifier:
    X, Y = data
    return MAKERS["MLPClassifier"]().fit(X[:64], Y[:64], X_val=X[64:], y_val=Y[64:])


@pytest.fixture
def saved(mlp, tmp_path: Path) -> Path:
    mlp.save(tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_round_trip_gives_the_same_model(name: str, data, tmp_path: Path) -> None:
    X, Y = data
    model = MAKERS[name]().fit(X, Y)
    model.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]
    rng_before = torch.random.get_rng_state()
    loaded = type(model).load(tmp_path / "m")
    assert torch.equal(rng_before, torch.random.get_rng_state())  # building the network drew nothing of the caller's
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    for field in ("input_shape_", "n_features_in_", "n_labels_", "embedding_dim_", "best_epoch_", "history_"):
        assert getattr(loaded, field) == getattr(model, field), field
    for field in model._fitted_arrays:
        np.testing.assert_array_equal(getattr(loaded, field), getattr(model, field))
    assert not loaded.network_.training
    # the trunk is the loaded network's, as after fit
    assert loaded.trunk_ is loaded.network_.trunk
    assert isinstance(NetClassifier.load(tmp_path / "m"), type(model))


def test_a_spatial_addgcn_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3, 2, 2)).astype(np.float32)
    Y = (X[:, :2].mean(axis=(2, 3)) > 0).astype(np.int64)
    model = ADDGCN(hidden_dim=4, epochs=2, random_state=0).fit(X, Y)
    model.save(tmp_path / "m")
    np.testing.assert_array_equal(ADDGCN.load(tmp_path / "m").predict_proba(X), model.predict_proba(X))


def test_loading_as_another_class_is_refused(saved: Path) -> None:
    with pytest.raises(ValueError, match="holds a saved MLPClassifier, not a ADDGCN"):
        ADDGCN.load(saved)


def test_unfitted_and_foreign_targets(mlp, data, tmp_path: Path) -> None:
    from lsnpc import NotFittedError

    with pytest.raises(NotFittedError):
        MLPClassifier().save(tmp_path / "never")
    assert not (tmp_path / "never").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a saved classifier"):
        mlp.save(tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    mlp.save(tmp_path / "m")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        mlp.save(tmp_path / "m")
    X, Y = data
    other = MAKERS["MLPClassifier"]().set_params(random_state=5).fit(X, Y)
    other.save(tmp_path / "m", overwrite=True)
    np.testing.assert_array_equal(MLPClassifier.load(tmp_path / "m").predict_proba(X), other.predict_proba(X))


def test_damaged_weights_are_refused(saved: Path) -> None:
    weights = saved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 does not match"):
        MLPClassifier.load(saved)


def _rewrite_config(saved: Path, edit) -> None:
    """Edit the config and seal it again, as a careless tool would: only the content checks can catch it."""
    from lsnpc._saving import seal

    config = json.loads((saved / "config.json").read_text())
    edit(config)
    (saved / "config.json").write_text(json.dumps(seal(config)))


def test_an_edited_config_is_refused(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["params"]["lr"] = 0.5
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="config_sha256"):
        MLPClassifier.load(saved)


@pytest.mark.parametrize("edit, match", [
    (lambda c: c["params"].update(hidden_dims=[9, 4]), "does not match the network"),
    (lambda c: c["params"].update(hidden_dims=[9]), "embedding_dim_ = 4, but the parameters give 9"),
    (lambda c: c["params"].update(dropout=3), "parameter dropout"),
    (lambda c: c["params"].update(colour="red"), "colour"),
    (lambda c: c.update({"class": "Pickle"}), "names class 'Pickle'"),
    (lambda c: c["fitted"].update(n_labels_=0), "n_labels_"),
    (lambda c: c["fitted"].pop("history_"), "history_"),
    (lambda c: c.update(format_version=7), "format_version 7"),
])
def test_an_inconsistent_config_is_refused(saved: Path, edit, match: str) -> None:
    _rewrite_config(saved, edit)
    with pytest.raises(ValueError, match=match):
        MLPClassifier.load(saved)


def test_non_finite_weights_are_refused(saved: Path) -> None:
    from lsnpc._saving import file_digest

    weights = saved / "model.safetensors"
    state = load_file(str(weights))
    name = next(k for k in state if k.endswith("weight"))
    state[name][0, 0] = float("nan")
    save_file(state, str(weights))
    _rewrite_config(saved, lambda c: c["weights"].update(sha256=file_digest(weights)))
    with pytest.raises(ValueError, match="non-finite"):
        MLPClassifier.load(saved)


def test_not_a_saved_classifier(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a saved classifier"):
        MLPClassifier.load(tmp_path / "absent")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"format": "lsnpc"}))
    with pytest.raises(ValueError, match="expected 'lsnpc-classifier'"):
        MLPClassifier.load(tmp_path / "other")


def test_a_path_with_a_tilde_is_in_the_home_folder(mlp, data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    mlp.save("~/model")
    assert (home / "model" / "config.json").is_file()
    assert list(work.iterdir()) == [], "no folder literally named '~'"
    with pytest.raises(FileExistsError, match="overwrite=True"):
        mlp.save("~/model")
    X, _ = data
    np.testing.assert_array_equal(MLPClassifier.load("~/model").predict_proba(X), mlp.predict_proba(X))
