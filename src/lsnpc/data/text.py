"""GoEmotions (Demszky et al., ACL 2020): Reddit comments with 28 emotion labels (27 + neutral).

Files (as in google-research/goemotions/data, or the monologg/GoEmotions-pytorch mirror):
``train.tsv``, ``dev.tsv``, ``test.tsv`` and ``labels.txt`` (upstream ``emotions.txt``; one label
name a line, the line number is the label id). A TSV row is ``text<TAB>ids<TAB>comment id`` with
ids comma-separated and 0-based; there is no header.

Splits: ``"train"`` = train.tsv (43,410), ``"val"`` = dev.tsv (5,426), ``"test"`` = test.tsv (5,427).
Some texts carry CSV-style quoting left in the TSV (wrapped in double quotes, inner quotes doubled);
that quoting is undone so ``X`` holds the comment text itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_goemotions", "GOEMOTIONS_SPLIT_FILES"]

#: split name -> TSV file name
GOEMOTIONS_SPLIT_FILES = {"train": "train.tsv", "val": "dev.tsv", "test": "test.tsv"}


def _unquote(text: str) -> str:
    """Undo CSV quoting (``"a ""b"" c"`` -> ``a "b" c``) only when the field is quoted that way."""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        inner = text[1:-1]
        if '"' not in inner.replace('""', ""):
            return inner.replace('""', '"')
    return text


def load_goemotions(root: str | os.PathLike[str], split: str = "train") -> MultilabelDataset:
    """Load one GoEmotions split from a folder holding the TSV files and ``labels.txt``.

    Parameters
    ----------
    root : path-like
        Folder with ``train.tsv``, ``dev.tsv``, ``test.tsv`` and ``labels.txt`` (or ``emotions.txt``).
    split : {"train", "val", "test"}

    Returns
    -------
    MultilabelDataset
        ``kind="texts"``; ``X`` the n comment texts, ``Y`` int64 (n, 28), ``ids`` the comment ids.
    """
    if split not in GOEMOTIONS_SPLIT_FILES:
        raise ValueError(f"split must be one of {sorted(GOEMOTIONS_SPLIT_FILES)}, got {split!r}")
    root = Path(root)
    labels_file = root / "labels.txt"
    if not labels_file.exists() and (root / "emotions.txt").exists():
        labels_file = root / "emotions.txt"
    label_names = [s.strip() for s in labels_file.read_text(encoding="utf-8").splitlines() if s.strip()]
    texts: list[str] = []
    ids: list[str] = []
    rows: list[int] = []
    cols: list[int] = []
    path = root / GOEMOTIONS_SPLIT_FILES[split]
    with open(path, encoding="utf-8", newline="\n") as fh:
        for line_no, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise ValueError(f"{path}:{line_no}: expected 3 TAB-separated fields, got {len(fields)}")
            text, label_ids, comment_id = fields
            for tok in label_ids.split(","):
                k = int(tok)
                if not 0 <= k < len(label_names):
                    raise ValueError(f"{path}:{line_no}: label id {k} is not in labels.txt")
                rows.append(len(texts))
                cols.append(k)
            texts.append(_unquote(text))
            ids.append(comment_id)
    Y = np.zeros((len(texts), len(label_names)), dtype=np.int64)
    Y[rows, cols] = 1
    return MultilabelDataset(
        X=texts, Y=Y, label_names=label_names, name="goemotions", split=split, kind="texts", ids=ids
    )
