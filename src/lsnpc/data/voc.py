"""PASCAL VOC classification labels from the devkit layout.

A VOC root (``VOCdevkit/VOC2007``, ``VOCdevkit/VOC2012``, or a labels-only copy) holds
``ImageSets/Main/<image_set>.txt`` (the ids of a split) and ``ImageSets/Main/<class>_<image_set>.txt``
(``<id> <flag>`` a line: 1 present, -1 absent, 0 only "difficult" instances). As in the paper (and
the HLC / ADD-GCN code it follows), a "difficult" flag 0 counts as **positive**. Images are
``JPEGImages/<id>.jpg``; the paths are returned whether or not the images are there.

Registry splits: ``"train"`` is the devkit ``trainval`` set (VOC2007: 5,011 images) and ``"test"``
the devkit ``test`` set (VOC2007: 4,952). For VOC2012 the ``"test"`` split is the **VOC2007 test
set**: the authors' VOC2012 "test" was the VOC2012 val set, which overlaps its training images
(REFERENCE_NOTES), and the VOC2012 test labels are not public; HLC evaluates VOC2012 models on
VOC2007 test, and so do we.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_voc", "VOC_CLASSES"]

#: The 20 VOC classes in the devkit's order (the column order of ``Y``).
VOC_CLASSES = (
    "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
    "tvmonitor",
)  # fmt: skip


def _read_ids(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text(encoding="ascii").splitlines() if line.strip()]


def load_voc(
    root: str | os.PathLike[str],
    image_set: str = "trainval",
    *,
    name: str = "voc2007",
    split: str | None = None,
) -> MultilabelDataset:
    """Load the labels of one devkit image set.

    Parameters
    ----------
    root : path-like
        The VOC year folder (holding ``ImageSets/Main`` and, optionally, ``JPEGImages``).
    image_set : str
        Devkit image set: ``"train"``, ``"val"``, ``"trainval"`` or ``"test"``.
    name : str
        Data set name for the result.
    split : str, optional
        Split name for the result; defaults to ``image_set``.

    Returns
    -------
    MultilabelDataset
        ``kind="images"``; ``X`` paths ``<root>/JPEGImages/<id>.jpg``, ``Y`` int64 (n, 20) with
        difficult-only objects counted positive, ``ids`` the 6-digit (2007) or ``YYYY_NNNNNN``
        (2012) image ids, in the order of ``<image_set>.txt``.
    """
    root = Path(root)
    main = root / "ImageSets" / "Main"
    ids = _read_ids(main / f"{image_set}.txt")
    position = {image_id: i for i, image_id in enumerate(ids)}
    Y = np.zeros((len(ids), len(VOC_CLASSES)), dtype=np.int64)
    for k, cls in enumerate(VOC_CLASSES):
        path = main / f"{cls}_{image_set}.txt"
        seen = 0
        for line in path.read_text(encoding="ascii").splitlines():
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or parts[0] not in position:
                raise ValueError(f"{path}: unexpected line {line!r} (id not in {image_set}.txt?)")
            flag = int(parts[1])
            if flag not in (-1, 0, 1):
                raise ValueError(f"{path}: flag must be -1, 0 or 1, got {flag}")
            Y[position[parts[0]], k] = 1 if flag >= 0 else 0  # 0 = difficult: positive, as in the paper
            seen += 1
        if seen != len(ids):
            raise ValueError(f"{path} lists {seen} images but {image_set}.txt lists {len(ids)}")
    return MultilabelDataset(
        X=[str(root / "JPEGImages" / f"{i}.jpg") for i in ids],
        Y=Y,
        label_names=list(VOC_CLASSES),
        name=name,
        split=image_set if split is None else split,
        kind="images",
        ids=ids,
    )
