"""MS-COCO 2014 multilabel classification from the instance annotations.

Layout under the COCO root: ``annotations/instances_train2014.json``,
``annotations/instances_val2014.json``, and image folders ``train2014/`` and ``val2014/``.
Registry splits, as in the paper and ML-GCN: ``"train"`` = train2014, ``"test"`` = val2014.

The 80 categories (their ids run 1..90 with gaps) are mapped to contiguous columns **sorted by
category id** (person = column 0, ..., toothbrush = column 79). Images without any annotation
(about 700 in train2014) are dropped by default, as ML-GCN's preprocessing does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_coco", "COCO_SPLITS"]

#: registry split -> (annotation file, image folder)
COCO_SPLITS = {
    "train": ("annotations/instances_train2014.json", "train2014"),
    "test": ("annotations/instances_val2014.json", "val2014"),
}


def load_coco(
    root: str | os.PathLike[str],
    split: str = "train",
    *,
    drop_unlabeled: bool = True,
    name: str = "coco2014",
) -> MultilabelDataset:
    """Load one COCO 2014 split as a multilabel image data set.

    Parameters
    ----------
    root : path-like
        COCO root (see the module docstring for the layout).
    split : {"train", "test"}
        ``"train"`` reads train2014, ``"test"`` reads val2014.
    drop_unlabeled : bool
        Drop images that have no annotated object (their label row would be all zero).
    name : str
        Data set name for the result.

    Returns
    -------
    MultilabelDataset
        ``kind="images"``; ``X`` paths ``<root>/<image folder>/<file_name>`` sorted by image id,
        ``Y`` int64 (n, 80) with columns in category-id order, ``label_names`` the category
        names, ``ids`` the image ids.
    """
    if split not in COCO_SPLITS:
        raise ValueError(f"split must be one of {sorted(COCO_SPLITS)}, got {split!r}")
    root = Path(root)
    ann_file, image_dir = COCO_SPLITS[split]
    with open(root / ann_file, encoding="utf-8") as fh:
        data = json.load(fh)
    categories = sorted(data["categories"], key=lambda c: int(c["id"]))
    column = {int(c["id"]): k for k, c in enumerate(categories)}
    images = sorted(data["images"], key=lambda im: int(im["id"]))
    row = {int(im["id"]): i for i, im in enumerate(images)}
    Y = np.zeros((len(images), len(categories)), dtype=np.int64)
    for ann in data["annotations"]:
        image_id, cat_id = int(ann["image_id"]), int(ann["category_id"])
        if image_id not in row or cat_id not in column:
            raise ValueError(
                f"{ann_file}: annotation {ann.get('id')} refers to an unknown image or category"
            )
        Y[row[image_id], column[cat_id]] = 1
    keep = np.flatnonzero(Y.any(axis=1)) if drop_unlabeled else np.arange(len(images))
    return MultilabelDataset(
        X=[str(root / image_dir / images[i]["file_name"]) for i in keep],
        Y=Y[keep],
        label_names=[str(c["name"]) for c in categories],
        name=name,
        split=split,
        kind="images",
        ids=[str(images[i]["id"]) for i in keep],
    )
