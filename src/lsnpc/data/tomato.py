"""Tomato-Village Variant-b (Gehlot, Saxena & Gandhi, Multimedia Systems 2023): tomato leaf photos
with 8 disease / deficiency labels.

The annotation CSV ``Multi-Label dataset - with augmented.csv`` has the header
``dataset,filename,path,<8 label names>,SUM``: the split (train/val/test), the image file name, the
source folder, a "1" or an empty cell per label, and the label count. Images sit flat under
``<root>/<split>/<filename>``; they need not be present to load the labels.
Splits (rows): train 3,945, val 1,124, test 584.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_tomato", "TOMATO_CSV"]

TOMATO_CSV = "Multi-Label dataset - with augmented.csv"
_SPLITS = ("train", "val", "test")


def load_tomato(root: str | os.PathLike[str], split: str = "train") -> MultilabelDataset:
    """Load one split of Tomato-Village Variant-b.

    Parameters
    ----------
    root : path-like
        Folder holding the annotation CSV (and, for images, ``train/``, ``val/``, ``test/``).
    split : {"train", "val", "test"}

    Returns
    -------
    MultilabelDataset
        ``kind="images"``; ``X`` paths ``<root>/<split>/<filename>``, ``Y`` int64 (n, 8) in the
        CSV's column order, ``ids`` the file names.
    """
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    root = Path(root)
    path = root / TOMATO_CSV
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader)]
        if header[:3] != ["dataset", "filename", "path"] or header[-1] != "SUM":
            raise ValueError(f"{path}: unexpected header {header}")
        label_names = header[3:-1]
        files: list[str] = []
        labels: list[list[int]] = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{line_no}: expected {len(header)} fields, got {len(row)}")
            if row[0].strip() != split:
                continue
            cells = [c.strip() for c in row[3:-1]]
            if any(c not in ("", "1", "0") for c in cells):
                raise ValueError(f"{path}:{line_no}: label cells must be '1' or empty, got {cells}")
            y = [1 if c == "1" else 0 for c in cells]
            if row[-1].strip() and int(row[-1]) != sum(y):
                raise ValueError(f"{path}:{line_no}: SUM={row[-1]} but {sum(y)} labels are set")
            files.append(row[1].strip())
            labels.append(y)
    Y = np.array(labels, dtype=np.int64).reshape(len(labels), len(label_names))
    return MultilabelDataset(
        X=[str(root / split / f) for f in files],
        Y=Y,
        label_names=label_names,
        name="tomato",
        split=split,
        kind="images",
        ids=files,
    )
