"""Image and text sources: GoEmotions, Tomato-Village, a VOC devkit tree, a COCO annotation file."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lsnpc.data import VOC_CLASSES, load_coco, load_dataset, load_goemotions, load_voc

def test_goemotions(shared_data: Path) -> None:
    sizes = {"train": 43410, "val": 5426, "test": 5427}
    for split, n in sizes.items():
        ds = load_dataset("goemotions", split, data_home=shared_data)
        assert len(ds) == n and ds.Y.shape == (n, 28) and len(ds.X) == n
        assert ds.kind == "texts" and isinstance(ds.X[0], str)
        assert ds.Y.sum(axis=1).min() >= 1
    assert ds.label_names[0] == "admiration" and ds.label_names[27] == "neutral"
    train = load_dataset("goemotions", "train", data_home=shared_data)
    assert train.Y.sum(axis=1).mean() == pytest.approx(1.1772, abs=1e-4)
    # row 1 of train.tsv: "My favourite food is anything I didn't have to cook myself.\t27\teebbqej"
    assert train.X[0] == "My favourite food is anything I didn't have to cook myself."
    assert train.ids[0] == "eebbqej" and np.flatnonzero(train.Y[0]).tolist() == [27]
    # CSV-style quoting left in the TSV is undone
    quoted = next(t for t in train.X if t.startswith("Three words, no subtlety."))
    assert quoted == 'Three words, no subtlety. "Dude. Stop. Seriously." '


def test_goemotions_quoting(tmp_path: Path) -> None:
    (tmp_path / "labels.txt").write_text("a\nb\n")
    (tmp_path / "dev.tsv").write_text('"x ""y"" z"\t0,1\tid1\n"keep "this" as is"\t1\tid2\n')
    ds = load_goemotions(tmp_path, "val")
    assert ds.X == ['x "y" z', '"keep "this" as is"']  # not CSV-quoted: left as it is
    np.testing.assert_array_equal(ds.Y, [[1, 1], [0, 1]])


def test_tomato(shared_data: Path) -> None:
    sizes = {"train": 3945, "val": 1124, "test": 584}
    for split, n in sizes.items():
        ds = load_dataset("tomato", split, data_home=shared_data)
        assert ds.Y.shape == (n, 8) and len(ds.X) == n and ds.kind == "images"
        assert all(Path(p).parent.name == split for p in ds.X[:5])
    train = load_dataset("tomato", "train", data_home=shared_data)
    assert train.label_names[6] == "Pottassium Deficiency"  # sic, as in the source
    # PROVENANCE per-label positives (train)
    assert train.Y.sum(axis=0).tolist() == [403, 151, 641, 1465, 1058, 326, 59, 639]
    expected = shared_data / "tomato-village-b" / "train" / "IMG20220323100125.jpg"
    assert Path(train.X[0]).resolve() == expected.resolve()  # the data home may be a symlink
    assert train.ids[0] == "IMG20220323100125.jpg"


@pytest.fixture(scope="module")
def voc_root(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VOC2007 devkit tree: the real label files plus a small JPEG per trainval image."""
    image = pytest.importorskip("PIL.Image", reason="Pillow (lsnpc[vision]) writes the test JPEGs")
    root = tmp_path_factory.mktemp("voc") / "VOCdevkit" / "VOC2007"
    shutil.copytree(shared_data / "voc2007-labels" / "ImageSets", root / "ImageSets")
    buf = io.BytesIO()
    image.new("RGB", (8, 6), (200, 30, 30)).save(buf, format="JPEG")
    jpeg = buf.getvalue()
    images = root / "JPEGImages"
    images.mkdir()
    for line in (root / "ImageSets" / "Main" / "trainval.txt").read_text().split():
        (images / f"{line}.jpg").write_bytes(jpeg)
    return root


def _flags(main: Path, cls: str, image_set: str) -> dict[str, int]:
    pairs = (line.split() for line in (main / f"{cls}_{image_set}.txt").read_text().splitlines() if line.strip())
    return {i: int(f) for i, f in pairs}


def test_voc2007_devkit_tree(voc_root: Path) -> None:
    data_home = voc_root.parents[1]
    ds = load_dataset("voc2007", "train", data_home=data_home)
    assert ds.Y.shape == (5011, 20) and len(ds.X) == 5011 and ds.label_names == list(VOC_CLASSES)
    assert all(Path(p).is_file() for p in ds.X)
    from PIL import Image

    with Image.open(ds.X[0]) as im:
        assert im.size == (8, 6)
    main = voc_root / "ImageSets" / "Main"
    # difficult-only (flag 0) entries count as positive
    person = _flags(main, "person", "trainval")
    difficult = [i for i, f in person.items() if f == 0]
    assert difficult, "the real files have difficult-only person entries"
    col = VOC_CLASSES.index("person")
    row = {image_id: r for r, image_id in enumerate(ds.ids)}
    assert all(ds.Y[row[i], col] == 1 for i in difficult)
    assert sum(f == 1 for f in person.values()) == 2008  # official trainval count
    assert ds.Y[:, col].sum() == sum(f >= 0 for f in person.values())
    # PROVENANCE: cardinality with flag >= 0 is 1.5791 on trainval
    assert ds.Y.sum(axis=1).mean() == pytest.approx(1.5791, abs=1e-4)
    test = load_dataset("voc2007", "test", data_home=data_home)
    assert test.Y.shape == (4952, 20) and not set(test.ids) & set(ds.ids)
    assert not Path(test.X[0]).exists()  # no test images written: labels still load


def test_voc2012_test_is_voc2007_test(shared_data: Path, tmp_path: Path) -> None:
    # the labels-only shared folder is accepted as a VOC2007 root
    test12 = load_dataset("voc2012", "test", data_home=shared_data)
    test07 = load_voc(shared_data / "voc2007-labels", "test")
    assert test12.name == "voc2012" and test12.ids == test07.ids
    np.testing.assert_array_equal(test12.Y, test07.Y)


def test_coco_json(tmp_path: Path) -> None:
    root = tmp_path / "coco2014"
    (root / "annotations").mkdir(parents=True)
    categories = [{"id": 90, "name": "toothbrush"}, {"id": 1, "name": "person"}, {"id": 3, "name": "car"}]
    images = [
        {"id": 30, "file_name": "COCO_train2014_000000000030.jpg"},
        {"id": 9, "file_name": "COCO_train2014_000000000009.jpg"},
        {"id": 12, "file_name": "COCO_train2014_000000000012.jpg"},  # no annotation
    ]
    annotations = [
        {"id": 1, "image_id": 9, "category_id": 90},
        {"id": 2, "image_id": 9, "category_id": 1},
        {"id": 3, "image_id": 9, "category_id": 1},  # a second person: still one label
        {"id": 4, "image_id": 30, "category_id": 3},
    ]
    payload = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / "instances_train2014.json").write_text(json.dumps(payload))
    ds = load_dataset("coco2014", "train", data_home=tmp_path)
    assert ds.label_names == ["person", "car", "toothbrush"]  # sorted by category id
    assert ds.ids == ["9", "30"]  # sorted by image id, unlabeled image dropped
    np.testing.assert_array_equal(ds.Y, [[1, 0, 1], [0, 1, 0]])
    assert ds.X[0] == str(root / "train2014" / "COCO_train2014_000000000009.jpg")
    kept = load_coco(root, "train", drop_unlabeled=False)
    assert kept.ids == ["9", "12", "30"] and kept.Y[1].sum() == 0
    with pytest.raises(FileNotFoundError, match="instances_val2014.json"):
        load_dataset("coco2014", "test", data_home=tmp_path)
