"""MULAN ARFF loading: real files (scene, yeast, sparse tmc2007-500) and small hand-written ARFFs."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from lsnpc.data import load_dataset, load_mulan, read_mulan_label_names

XML_TEMPLATE = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
{}
</labels>
"""


def _write_pair(tmp_path: Path, arff_text: str, labels: list[str]) -> tuple[Path, Path]:
    arff_path = tmp_path / "toy.arff"
    xml_path = tmp_path / "toy.xml"
    arff_path.write_text(arff_text)
    xml_path.write_text(XML_TEMPLATE.format("\n".join(f'<label name="{n}"></label>' for n in labels)))
    return arff_path, xml_path


def _raw_dense_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Attribute names and data rows of a dense ARFF, read naively (independent of the loader)."""
    names, rows, in_data = [], [], False
    for line in path.read_text().splitlines():
        s = line.strip()
        if not s or s.startswith("%"):
            continue
        if in_data:
            rows.append(s.split(","))
        elif s.lower().startswith("@attribute"):
            names.append(s.split()[1])
        elif s.lower().startswith("@data"):
            in_data = True
    return names, rows


def test_scene_shapes(shared_data: Path) -> None:
    train = load_dataset("scene", "train", data_home=shared_data)
    test = load_dataset("scene", "test", data_home=shared_data)
    assert train.X.shape == (1211, 294) and train.Y.shape == (1211, 6)
    assert test.X.shape == (1196, 294) and test.Y.shape == (1196, 6)
    assert train.X.dtype == np.float32 and train.Y.dtype == np.int64
    assert train.label_names == ["Beach", "Sunset", "FallFoliage", "Field", "Mountain", "Urban"]
    assert train.kind == "features" and train.split == "train" and train.name == "scene"
    # PROVENANCE: label cardinality 1.0619 (train), 1.0861 (test)
    assert train.Y.sum(axis=1).mean() == pytest.approx(1.0619, abs=1e-4)
    assert test.Y.sum(axis=1).mean() == pytest.approx(1.0861, abs=1e-4)


def test_yeast_labels_matched_by_name(shared_data: Path) -> None:
    folder = shared_data / "yeast"
    xml_order = read_mulan_label_names(folder / "yeast.xml")
    assert xml_order[3] == "Class6"  # the XML's order differs from the ARFF's
    ds = load_mulan(folder / "yeast-train.arff", folder / "yeast.xml")
    assert ds.X.shape == (1500, 103) and ds.Y.shape == (1500, 14)
    assert sorted(ds.label_names) == sorted(xml_order)
    names, rows = _raw_dense_rows(folder / "yeast-train.arff")
    raw = np.array(rows, dtype=np.float64)
    for label in ("Class6", "Class4", "Class10", "Class14"):
        expected = raw[:, names.index(label)].astype(np.int64)
        np.testing.assert_array_equal(ds.Y[:, ds.label_names.index(label)], expected)
    # features are the non-label attributes, in header order
    np.testing.assert_allclose(ds.X[:, 0], raw[:, names.index("Att1")], rtol=1e-6)
    np.testing.assert_allclose(ds.X[:, 102], raw[:, names.index("Att103")], rtol=1e-6)
    assert ds.feature_names[:2] == ["Att1", "Att2"]


def test_tmc2007_sparse(shared_data: Path) -> None:
    start = time.perf_counter()
    ds = load_dataset("tmc2007-500", "train", data_home=shared_data)
    elapsed = time.perf_counter() - start
    assert ds.X.shape == (21519, 500) and ds.Y.shape == (21519, 22)
    assert elapsed < 10.0, f"loading tmc2007-500 took {elapsed:.1f}s"
    assert ds.Y.sum(axis=1).mean() == pytest.approx(2.2256, abs=1e-4)
    # first data row: {19 1,35 1,...,480 1,501 1,505 1,506 1}; attributes 500.. are class01..class22
    first = np.flatnonzero(ds.X[0])
    assert first.tolist() == [19, 35, 90, 109, 123, 165, 185, 212, 227, 271, 333, 375, 382, 480]
    assert [ds.label_names[k] for k in np.flatnonzero(ds.Y[0])] == ["class02", "class06", "class07"]
    assert set(np.unique(ds.X)) <= {0.0, 1.0}


def test_nominal_string_and_missing_features(tmp_path: Path) -> None:
    arff_text = """@relation toy
@attribute id string
@attribute colour {red,green,blue}
@attribute 'size cm' numeric
@attribute flag {1,0}
@attribute lab_b {0,1}
@attribute lab_a {0,1}
@data
'p1',blue,1.5,0,1,0
'p2',red,?,1,0,1
'p3',green,-2,1,1,1
"""
    arff_path, xml_path = _write_pair(tmp_path, arff_text, ["lab_a", "lab_b"])
    ds = load_mulan(arff_path, xml_path, name="toy", split="test")
    assert ds.feature_names == ["colour", "size cm", "flag"]  # the string attribute is dropped
    assert ds.label_names == ["lab_b", "lab_a"]  # ARFF header order
    np.testing.assert_array_equal(ds.X[:, 0], [2, 0, 1])  # non-numeric nominal -> value index
    assert np.isnan(ds.X[1, 1]) and ds.X[2, 1] == -2
    np.testing.assert_array_equal(ds.X[:, 2], [0, 1, 1])  # numeric nominal keeps its number
    np.testing.assert_array_equal(ds.Y, [[1, 0], [0, 1], [1, 1]])
    assert ds.name == "toy" and ds.split == "test"


def test_sparse_omitted_values_and_trailing_empty_rows(tmp_path: Path) -> None:
    arff_text = """@relation toy
@attribute f0 numeric
@attribute f1 {1,0}
@attribute f2 numeric
@attribute y0 {0,1}
@attribute y1 {0,1}
@data
{0 3.5,3 1}
{1 0,2 7,4 1}
{}
{}
"""
    arff_path, xml_path = _write_pair(tmp_path, arff_text, ["y0", "y1"])
    ds = load_mulan(arff_path, xml_path)
    assert ds.X.shape == (4, 3) and ds.Y.shape == (4, 2)
    # an omitted nominal value is its first declared value ("1" for f1)
    np.testing.assert_array_equal(ds.X, [[3.5, 1, 0], [0, 0, 7], [0, 1, 0], [0, 1, 0]])
    np.testing.assert_array_equal(ds.Y, [[1, 0], [0, 1], [0, 0], [0, 0]])


def test_errors_name_the_problem(tmp_path: Path) -> None:
    base = "@relation t\n@attribute f numeric\n@attribute y {0,1}\n@data\n"
    arff_path, xml_path = _write_pair(tmp_path, base + "1,0\n", ["y", "z"])
    with pytest.raises(ValueError, match="z"):
        load_mulan(arff_path, xml_path)
    arff_path, xml_path = _write_pair(tmp_path, base + "1,?\n", ["y"])
    with pytest.raises(ValueError, match="missing"):
        load_mulan(arff_path, xml_path)
    (tmp_path / "empty.xml").write_text(XML_TEMPLATE.format(""))
    with pytest.raises(ValueError, match="label"):
        read_mulan_label_names(tmp_path / "empty.xml")


def test_fast_dense_reader_matches_liac_arff(shared_data: Path) -> None:
    folder = shared_data / "scene"
    fast = load_mulan(folder / "scene-test.arff", folder / "scene.xml", fast=True)
    general = load_mulan(folder / "scene-test.arff", folder / "scene.xml", fast=False)
    np.testing.assert_array_equal(fast.X, general.X)
    np.testing.assert_array_equal(fast.Y, general.Y)
    assert fast.label_names == general.label_names and fast.feature_names == general.feature_names


def test_fast_reader_falls_back_on_quoting_and_missing(tmp_path: Path) -> None:
    arff_text = """@relation toy
% a comment
@attribute f0 numeric
@attribute f1 numeric
@attribute y {0,1}
@data
% rows follow
1.5,?,1

'2',3,0
"""
    arff_path, xml_path = _write_pair(tmp_path, arff_text, ["y"])
    for fast in (True, False):
        ds = load_mulan(arff_path, xml_path, fast=fast)
        np.testing.assert_array_equal(ds.X, np.array([[1.5, np.nan], [2, 3]], dtype=np.float32))
        np.testing.assert_array_equal(ds.Y, [[1], [0]])
