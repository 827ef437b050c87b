"""Registry, data home resolution, the dataset container, the paper's splits and the synthetic set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsnpc.data import (
    DATA_HOME_ENV,
    DatasetNotFoundError,
    MultilabelDataset,
    get_data_home,
    list_datasets,
    load_dataset,
    make_synthetic,
    paper_splits,
    split_dataset,
)


def test_list_datasets_covers_the_paper_and_mulan() -> None:
    infos = {info.name: info for info in list_datasets()}
    for name in ("scene", "yeast", "tmc2007-500", "emotions", "bibtex", "voc2007", "voc2012",
                 "coco2014", "tomato", "goemotions", "synthetic"):  # fmt: skip
        assert name in infos
    assert infos["voc2007"].kind == "images" and infos["voc2007"].n_labels == 20
    assert infos["goemotions"].splits == ("train", "val", "test")
    assert infos["scene"].downloadable and not infos["coco2014"].downloadable
    assert all(f.sha256 for f in infos["scene"].files)
    row = infos["tmc2007-500"].as_dict()
    assert row["n_labels"] == 22 and row["n_samples"] == {"train": 21519, "test": 7077}


def test_data_home_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATA_HOME_ENV, str(tmp_path / "from_env"))
    assert get_data_home() == tmp_path / "from_env"
    assert get_data_home(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(DATA_HOME_ENV)
    default = get_data_home()
    assert "lsnpc" in default.parts and default.name == "datasets"


def test_env_var_data_home_is_used(monkeypatch: pytest.MonkeyPatch, shared_data: Path) -> None:
    monkeypatch.setenv(DATA_HOME_ENV, str(shared_data))
    assert len(load_dataset("yeast", "test")) == 917


def test_missing_data_says_which_files_go_where(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("scene", "test", data_home=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "scene" / "scene-test.arff") in message
    assert str(tmp_path / "scene" / "scene.xml") in message
    assert "download_dataset('scene')" in message
    with pytest.raises(DatasetNotFoundError, match="JPEGImages|ImageSets"):
        load_dataset("voc2007", "train", data_home=tmp_path)


def test_unknown_name_or_split() -> None:
    with pytest.raises(ValueError, match="known data sets:.*scene"):
        load_dataset("no-such-set")
    with pytest.raises(ValueError, match="split must be one of"):
        load_dataset("scene", "val")


def test_dataset_container_validates_and_subsets() -> None:
    ds = MultilabelDataset(
        X=["a", "b", "c"], Y=[[1, 0], [0, 1], [1, 1]], label_names=["p", "q"],
        name="toy", split="train", kind="texts", ids=["i0", "i1", "i2"],
    )  # fmt: skip
    assert len(ds) == 3 and ds.n_labels == 2 and ds.Y.dtype == np.int64
    sub = ds.subset([2, 0], split="val0")
    assert sub.X == ["c", "a"] and sub.ids == ["i2", "i0"] and sub.split == "val0"
    np.testing.assert_array_equal(sub.Y, [[1, 1], [1, 0]])
    with pytest.raises(ValueError, match="X has 2 samples"):
        MultilabelDataset(X=["a", "b"], Y=[[1], [0], [1]], label_names=["p"], name="t", split="s", kind="texts")
    with pytest.raises(ValueError, match="label_names"):
        MultilabelDataset(X=np.zeros((2, 3)), Y=[[1], [0]], label_names=["p", "q"], name="t", split="s")
    with pytest.raises(ValueError, match="0/1"):
        MultilabelDataset(X=np.zeros((2, 3)), Y=[[2], [0]], label_names=["p"], name="t", split="s")
    with pytest.raises(ValueError, match="kind"):
        MultilabelDataset(X=np.zeros((2, 3)), Y=[[1], [0]], label_names=["p"], name="t", split="s", kind="audio")
    with pytest.raises(ValueError, match="indices"):
        ds.subset([3])


def test_paper_splits_disjoint_cover_seeded() -> None:
    parts = paper_splits(1001, random_state=3)
    assert set(parts) == {"train", "val0", "val1"}
    sizes = {k: len(v) for k, v in parts.items()}
    assert sizes == {"train": 901, "val0": 50, "val1": 50}
    joined = np.concatenate(list(parts.values()))
    assert len(np.unique(joined)) == 1001 and joined.min() == 0 and joined.max() == 1000
    again = paper_splits(1001, random_state=3)
    other = paper_splits(1001, random_state=4)
    assert all(np.array_equal(parts[k], again[k]) for k in parts)
    assert not np.array_equal(parts["val1"], other["val1"])
    odd = paper_splits(70, val_fraction=0.1, random_state=0)
    assert (len(odd["val0"]), len(odd["val1"])) == (4, 3)
    with pytest.raises(ValueError, match="at least 2"):
        paper_splits(10, val_fraction=0.1, random_state=0)
    with pytest.raises(ValueError, match="val_fraction"):
        paper_splits(100, val_fraction=1.5, random_state=0)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(20, 3000), fraction=st.floats(0.1, 0.6), seed=st.integers(0, 2**32 - 1))
def test_paper_splits_partition_property(n: int, fraction: float, seed: int) -> None:
    parts = paper_splits(n, val_fraction=fraction, random_state=seed)
    joined = np.sort(np.concatenate([parts["train"], parts["val0"], parts["val1"]]))
    np.testing.assert_array_equal(joined, np.arange(n))
    assert 0 <= len(parts["val0"]) - len(parts["val1"]) <= 1
    assert len(parts["val0"]) + len(parts["val1"]) == round(fraction * n)


def test_split_dataset_on_real_data(shared_data: Path) -> None:
    train = load_dataset("scene", "train", data_home=shared_data)
    parts = split_dataset(train, random_state=0)
    assert [len(parts[k]) for k in ("train", "val0", "val1")] == [1090, 61, 60]
    assert parts["val1"].split == "val1" and parts["val1"].name == "scene"
    idx = paper_splits(len(train), random_state=0)["val0"]
    np.testing.assert_array_equal(parts["val0"].X, train.X[idx])
    np.testing.assert_array_equal(parts["val0"].Y, train.Y[idx])


def test_synthetic_defaults_and_structure() -> None:
    data = make_synthetic()
    train, test = data["train"], data["test"]
    assert train.X.shape == (3000, 64) and train.Y.shape == (3000, 12) and len(test) == 1000
    assert train.X.dtype == np.float32 and np.isfinite(train.X).all()
    freq = np.concatenate([train.Y, test.Y]).mean(axis=0)
    assert freq[0] == pytest.approx(0.35, abs=0.01) and freq[-1] < 0.05  # long-tailed
    assert np.all(np.diff(freq) <= 0.01)
    corr = np.corrcoef(train.Y.T)
    # labels 0 and 4 share a topic (round-robin over 4 topics): clearly correlated
    assert corr[0, 4] > 0.2
    np.testing.assert_array_equal(make_synthetic(random_state=0)["train"].X, train.X)
    assert not np.array_equal(make_synthetic(random_state=1)["train"].Y, train.Y)
    small = make_synthetic(50, 10, n_features=7, n_labels=3, n_topics=2, random_state=5)
    assert small["train"].X.shape == (50, 7) and small["test"].Y.shape == (10, 3)
    assert load_dataset("synthetic", "test").Y.shape == (1000, 12)
    with pytest.raises(ValueError, match="n_labels"):
        make_synthetic(n_labels=0)


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve via the rank-sum statistic (continuous scores: no ties)."""
    ranks = scores.argsort().argsort() + 1
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    return float((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def test_synthetic_is_learnable() -> None:
    data = make_synthetic(n_train=1500, n_test=500, random_state=2)
    train_x = np.c_[data["train"].X, np.ones(1500)]
    weights, *_ = np.linalg.lstsq(train_x, data["train"].Y.astype(float), rcond=None)
    scores = np.c_[data["test"].X, np.ones(500)] @ weights
    aucs = [_auc(scores[:, k], data["test"].Y[:, k]) for k in range(12)]
    assert min(aucs) > 0.85, aucs  # even a linear model ranks every label well above chance
    assert _auc(np.arange(4.0), np.array([0, 0, 1, 1])) == 1.0  # the helper itself
