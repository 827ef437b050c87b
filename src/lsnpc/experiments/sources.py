"""Where a grid's data set comes from: a registry name, a file of the researcher's, or an import path.

A data set entry's ``name`` is one of

- a name in :mod:`lsnpc.data`'s registry (``scene``, ``voc2007``, ...), loaded by
  :func:`lsnpc.data.load_dataset`;
- a file path ending in ``.arff``, ``.csv`` or ``.npz`` (relative paths are relative to the grid's YAML
  file), read by :func:`load_file`; its test split is the entry's ``test`` file when given, else a fixed
  quarter of the rows held out (the same rows for every seed, as a published test split is);
- a ``module:attribute`` import path naming a function ``f(split)`` with split ``"train"`` or ``"test"``
  that returns a :class:`~lsnpc.data.MultilabelDataset` or a pair ``(X, Y)`` of features and 0/1 labels.

Which columns of a file are labels: an ARFF file's sibling MULAN XML file (same stem), else the
entry's ``labels`` (an integer n: the first n attributes, -n: the last n; or the label names), else
MEKA's ``-C n`` in the ``@relation`` line; a CSV file's ``labels`` (required); an NPZ file holds
arrays ``X`` and ``Y`` (and optionally ``label_names``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from lsnpc.experiments.components import is_import_path, resolve_import_path

__all__ = ["FILE_SUFFIXES", "check_source", "dataset_kind", "is_file_source", "load_file", "load_split"]

FILE_SUFFIXES = (".arff", ".csv", ".npz")
#: Share of a file's rows held out as its test split when the entry names no ``test`` file.
TEST_SHARE = 0.25
#: Seed of that hold-out: one fixed test split per file, whatever the run's seed.
TEST_SPLIT_SEED = 0

LabelsSpec = int | list[str] | None


def is_file_source(name: str) -> bool:
    """Whether a data set ``name`` is a file path (ends in .arff, .csv or .npz)."""
    return isinstance(name, str) and name.lower().endswith(FILE_SUFFIXES)


def _label_columns(columns: list[str], labels: LabelsSpec, where: str) -> list[str]:
    """The label columns among ``columns`` that ``labels`` (n, -n or names) picks."""
    if isinstance(labels, int) and not isinstance(labels, bool):
        if labels == 0 or abs(labels) >= len(columns):
            raise ValueError(f"{where}: labels must be n (the first n columns) or -n (the last n) with "
                             f"0 < n < {len(columns)} (the file's columns), got {labels}")
        return columns[:labels] if labels > 0 else columns[labels:]
    if isinstance(labels, list) and labels:
        missing = [c for c in labels if c not in columns]
        if missing:
            raise ValueError(f"{where}: labels names columns the file lacks: {missing[:10]}")
        return list(labels)
    raise ValueError(f"{where}: say which columns are labels with 'labels: n' (the first n), '-n' (the last n) "
                     f"or a list of column names, got {labels!r}")


def _meka_count(path: Path) -> int | None:
    """MEKA's label count ``-C n`` in an ARFF file's ``@relation`` line, or None."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip().lower().startswith("@relation"):
                found = re.search(r"-C\s+(-?\d+)", line)
                return int(found.group(1)) if found else None
    return None


def load_file(path: str | Path, *, labels: LabelsSpec = None, name: str | None = None,
              split: str = "train") -> Any:
    """A :class:`~lsnpc.data.MultilabelDataset` of features read from an ARFF, CSV or NPZ file.

    ``labels`` says which columns are labels (see the module docstring). Raises FileNotFoundError when
    the file is missing and ValueError naming the file when its labels cannot be found.
    """
    from lsnpc.data import MultilabelDataset, load_mulan

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    where = f"data set file {path.name}"
    suffix = path.suffix.lower()
    name = name or path.stem
    if suffix == ".arff":
        xml = path.with_suffix(".xml")
        if xml.is_file() and labels is None:
            return load_mulan(path, xml, name=name, split=split)
        labels = labels if labels is not None else _meka_count(path)
        from lsnpc.data.mulan import _parse_header

        columns = [a for a, _ in _parse_header(path).attributes]
        return load_mulan(path, label_names=_label_columns(columns, labels, where), name=name, split=split)
    if suffix == ".csv":
        import pandas as pd

        table = pd.read_csv(path)
        label_cols = _label_columns([str(c) for c in table.columns], labels, where)
        features = table.drop(columns=label_cols)
        return MultilabelDataset(X=features.to_numpy(dtype=np.float32), Y=table[label_cols].to_numpy(dtype=np.int64),
                                 label_names=label_cols, name=name, split=split,
                                 feature_names=[str(c) for c in features.columns])
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            if "X" not in arrays or "Y" not in arrays:
                raise ValueError(f"{where}: an NPZ data file must hold arrays 'X' (n, d) and 'Y' (n, L); "
                                 f"it holds {sorted(arrays.files)}")
            X, Y = arrays["X"].astype(np.float32), arrays["Y"].astype(np.int64)
            names = [str(s) for s in arrays["label_names"]] if "label_names" in arrays else None
        return MultilabelDataset(X=X, Y=Y, label_names=names or [f"label{k}" for k in range(Y.shape[1])],
                                 name=name, split=split)
    raise ValueError(f"data set file {str(path)!r}: must end in one of {', '.join(FILE_SUFFIXES)}")


def _held_out(dataset: Any, split: str) -> Any:
    """The ``split`` ("train" or "test") of a file with no test file: a fixed :data:`TEST_SHARE` of rows."""
    n = len(dataset.Y)
    order = np.random.default_rng(TEST_SPLIT_SEED).permutation(n)
    n_test = max(1, round(TEST_SHARE * n))
    rows = np.sort(order[:n_test] if split == "test" else order[n_test:])
    return dataset.subset(rows, split)


def _from_function(name: str, split: str) -> Any:
    from lsnpc.data import MultilabelDataset

    function = resolve_import_path(name, "data set")
    if not callable(function):
        raise ValueError(f"data set {name!r}: must name a function f(split) returning a MultilabelDataset or "
                         f"(X, Y), got {type(function).__name__}")
    out = function(split)
    if isinstance(out, MultilabelDataset):
        return out
    if isinstance(out, tuple) and len(out) == 2:
        X, Y = np.asarray(out[0], dtype=np.float32), np.asarray(out[1])
        return MultilabelDataset(X=X, Y=Y, label_names=[f"label{k}" for k in range(Y.shape[1])],
                                 name=name, split=split)
    raise ValueError(f"data set {name!r}: {name}({split!r}) must return a MultilabelDataset or a pair (X, Y), "
                     f"got {type(out).__name__}")


def load_split(spec: Any, split: str) -> Any:
    """Split ``split`` ("train" or "test") of the data set a :class:`~lsnpc.experiments.DatasetSpec` names."""
    if is_file_source(spec.name):
        if spec.test is not None:
            return load_file(spec.name if split == "train" else spec.test, labels=spec.labels,
                             name=spec.label, split=split)
        return _held_out(load_file(spec.name, labels=spec.labels, name=spec.label), split)
    if is_import_path(spec.name):
        return _from_function(spec.name, split)
    from lsnpc.data import load_dataset

    return load_dataset(spec.name, split, data_home=spec.data_home)


def dataset_kind(spec: Any) -> str:
    """What the data set's ``X`` holds ("features", "images" or "texts") without loading a registry set."""
    if is_file_source(spec.name):
        return "features"
    if is_import_path(spec.name):
        return str(load_split(spec, "train").kind)
    from lsnpc.data import get_dataset_info

    return get_dataset_info(spec.name).kind


def check_source(spec: Any) -> None:
    """Raise ValueError (or FileNotFoundError) now when a run could not load ``spec``'s data set: an unknown
    registry name, a missing file, or an import path that does not resolve. Registry files are not
    looked for (they may be fetched before the grid runs)."""
    if is_file_source(spec.name):
        for path in (spec.name, spec.test):
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"data file not found: {path}")
        return
    if is_import_path(spec.name):
        resolve_import_path(spec.name, "data set")
        return
    from lsnpc.data import get_dataset_info

    get_dataset_info(spec.name)
