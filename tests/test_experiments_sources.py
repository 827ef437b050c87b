"""Data sets a grid names by file (ARFF, CSV, NPZ) or by import path, beside the registry's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lsnpc.experiments.config import ConfigError, parse_config
from lsnpc.experiments.sources import TEST_SHARE, load_file, load_split

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 4)).astype(np.float32)
Y = (RNG.random((40, 3)) < 0.4).astype(np.int64)


def grid(dataset: dict) -> dict:
    return {"datasets": [dataset], "noise": [{"kind": "flip", "rate": 0.1}], "classifiers": ["mlp"],
            "post_processors": ["none"]}


def test_a_csv_file_needs_its_label_columns_and_gets_a_fixed_held_out_test_split(tmp_path: Path) -> None:
    table = pd.DataFrame(X, columns=[f"f{j}" for j in range(4)]).assign(**{f"y{k}": Y[:, k] for k in range(3)})
    table.to_csv(tmp_path / "mine.csv", index=False)
    with pytest.raises(ConfigError, match="datasets\\[0\\].labels: must be n"):
        parse_config(grid({"name": "mine.csv", "labels": "y"}), base_dir=tmp_path)
    spec = parse_config(grid({"name": "mine.csv", "labels": -3}), base_dir=tmp_path).datasets[0]
    assert spec.label == "mine" and Path(spec.name).is_absolute()
    train, test = load_split(spec, "train"), load_split(spec, "test")
    assert len(test) == round(TEST_SHARE * 40) and len(train) + len(test) == 40
    assert train.label_names == ["y0", "y1", "y2"] and train.X.shape[1] == 4
    np.testing.assert_array_equal(load_split(spec, "test").Y, test.Y)  # the same rows every time
    with pytest.raises(ValueError, match="labels names columns the file lacks"):
        load_file(tmp_path / "mine.csv", labels=["y0", "z"])


def test_an_npz_file_with_a_test_file(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", X=X[:30], Y=Y[:30], label_names=np.array(["p", "q", "r"]))
    np.savez(tmp_path / "b.npz", X=X[30:], Y=Y[30:])
    spec = parse_config(grid({"name": "a.npz", "test": "b.npz"}), base_dir=tmp_path).datasets[0]
    assert len(load_split(spec, "train")) == 30 and len(load_split(spec, "test")) == 10
    assert load_split(spec, "train").label_names == ["p", "q", "r"]
    np.savez(tmp_path / "c.npz", features=X)
    with pytest.raises(ValueError, match="must hold arrays 'X' \\(n, d\\) and 'Y'"):
        load_file(tmp_path / "c.npz")
    with pytest.raises(ConfigError, match="datasets\\[0\\].test: only a data set read from a file"):
        parse_config(grid({"name": "scene", "test": "b.npz"}), base_dir=tmp_path)


def test_a_data_set_function_by_import_path(tmp_path: Path) -> None:
    (tmp_path / "mydata.py").write_text(
        "import numpy as np\n"
        "def load(split):\n"
        "    rng = np.random.default_rng(0 if split == 'train' else 1)\n"
        "    return rng.normal(size=(20, 3)), (rng.random((20, 2)) < 0.5).astype(int)\n", encoding="utf-8")
    spec = parse_config(grid({"name": "mydata.py:load"}), base_dir=tmp_path).datasets[0]
    assert spec.label == "load" and len(load_split(spec, "test")) == 20
    with pytest.raises(ConfigError, match="datasets\\[0\\].name: data set '.*mydata.py:nope': module .* has no attribute 'nope'"):
        parse_config(grid({"name": "mydata.py:nope"}), base_dir=tmp_path)
