"""MULAN multilabel ARFF data: one ARFF file (dense or sparse) plus the XML file naming its labels.

Which attributes are labels is decided by the names in the XML file, never by position (yeast's XML
lists its labels in a different order from its ARFF header). ``Y``'s columns follow the order in
which the label attributes appear in the ARFF header; every other numeric or nominal attribute
becomes a feature column, in header order. String and date attributes (e.g. genbase's protein id)
are not features and are dropped.

Nominal attributes whose values are all numbers (MULAN's ``{0,1}``) keep those numbers; other
nominal attributes become the index of their value (``{NO,YES}`` -> 0/1). A value left out of a
sparse row is 0 for a numeric attribute and the *first* declared value for a nominal one, as the
ARFF format defines.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_mulan", "read_mulan_label_names"]


def read_mulan_label_names(xml_path: str | os.PathLike[str]) -> list[str]:
    """Return the label names declared in a MULAN XML label file, in document order.

    Hierarchical files (labels nested inside labels) list every label, parents first.
    """
    root = ET.parse(xml_path).getroot()
    names = [
        el.attrib["name"]
        for el in root.iter()
        if el.tag.rsplit("}", 1)[-1] == "label" and "name" in el.attrib
    ]
    if not names:
        raise ValueError(f"no <label name=...> elements found in {xml_path}")
    if len(set(names)) != len(names):
        raise ValueError(f"{xml_path} names a label more than once")
    return names


def _scan_data_section(path: Path) -> tuple[bool, int]:
    """Return (whether the data rows are sparse ``{index value, ...}`` rows, number of rows).

    The row count is taken here because a sparse parse only sees rows that hold a value, so
    trailing all-zero rows (``{}``) would otherwise be lost.
    """
    in_data, sparse, n_rows = False, False, 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            if in_data:
                if n_rows == 0:
                    sparse = s.startswith("{")
                n_rows += 1
            elif s.lower().startswith("@data"):
                in_data = True
    return sparse, n_rows


def _nominal_lookup(values: list[str]) -> np.ndarray:
    """Map a nominal value's index to the number it stands for (its index if not numeric)."""
    try:
        return np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        return np.arange(len(values), dtype=np.float64)


def load_mulan(
    arff_path: str | os.PathLike[str],
    xml_path: str | os.PathLike[str],
    *,
    name: str | None = None,
    split: str = "train",
) -> MultilabelDataset:
    """Load a MULAN ARFF file with the labels named in its XML file.

    Parameters
    ----------
    arff_path : path-like
        The ARFF file (dense or sparse).
    xml_path : path-like
        The MULAN XML file whose ``<label name="...">`` elements name the label attributes.
    name : str, optional
        Data set name for the result; defaults to the XML file's stem.
    split : str
        Split name for the result.

    Returns
    -------
    MultilabelDataset
        ``X`` float32 (n, d) dense; ``Y`` int64 (n, L); ``feature_names`` the d attribute names.

    Raises
    ------
    ValueError
        If a label named in the XML is not an attribute of the ARFF file, a label value is not
        0/1, or a label is missing (``?``).
    """
    # imported here so that importing lsnpc.data (e.g. for the CLI) stays fast
    import arff  # liac-arff: parses dense and sparse ARFF
    import scipy.sparse as sp

    arff_path, xml_path = Path(arff_path), Path(xml_path)
    label_set = set(read_mulan_label_names(xml_path))
    sparse, n_rows = _scan_data_section(arff_path)
    with open(arff_path, encoding="utf-8") as fh:
        # encode_nominal: nominal values arrive as indices, so sparse rows decode to numbers
        parsed = arff.load(fh, encode_nominal=True, return_type=arff.COO if sparse else arff.DENSE)
    attributes: list[tuple[str, object]] = parsed["attributes"]
    attr_names = [a for a, _ in attributes]
    missing = sorted(label_set - set(attr_names))
    if missing:
        raise ValueError(
            f"{xml_path.name} names labels that are not attributes of {arff_path.name}: {missing[:10]}"
        )

    def is_usable(kind: object) -> bool:  # numeric or nominal, not string/date
        return isinstance(kind, list) or str(kind).upper() in ("NUMERIC", "REAL", "INTEGER")

    label_cols = [j for j, a in enumerate(attr_names) if a in label_set]
    feature_cols = [
        j for j, (a, kind) in enumerate(attributes) if a not in label_set and is_usable(kind)
    ]
    lookups = {j: _nominal_lookup(kind) for j, (_, kind) in enumerate(attributes) if isinstance(kind, list)}
    n_attr = len(attributes)

    if sparse:
        values, rows, cols = parsed["data"]
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        n = n_rows
        usable = np.zeros(n_attr, dtype=bool)
        usable[label_cols + feature_cols] = True
        keep = usable[cols]
        vals = np.array(
            [np.nan if v is None else v for v, k in zip(values, keep, strict=True) if k],
            dtype=np.float64,
        )
        table = sp.csc_matrix((vals, (rows[keep], cols[keep])), shape=(n, n_attr))

        def column(j: int) -> np.ndarray:
            return table[:, j].toarray().ravel()
    else:
        rows_data = parsed["data"]
        n = len(rows_data)
        table_obj = np.array(rows_data, dtype=object).reshape(n, n_attr)

        def column(j: int) -> np.ndarray:
            col = table_obj[:, j]
            return np.array([np.nan if v is None else v for v in col], dtype=np.float64)

    def decoded(j: int) -> np.ndarray:
        col = column(j)
        if j in lookups:
            ok = ~np.isnan(col)
            out = np.full_like(col, np.nan)
            out[ok] = lookups[j][col[ok].astype(np.int64)]
            return out
        return col

    X = np.empty((n, len(feature_cols)), dtype=np.float32)
    for out_j, j in enumerate(feature_cols):
        X[:, out_j] = decoded(j)
    Y = np.empty((n, len(label_cols)), dtype=np.float64)
    for out_j, j in enumerate(label_cols):
        Y[:, out_j] = decoded(j)
    if np.isnan(Y).any():
        raise ValueError(f"{arff_path.name} has missing ('?') label values")
    if not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError(f"{arff_path.name} has label values other than 0/1")
    return MultilabelDataset(
        X=X,
        Y=Y.astype(np.int64),
        label_names=[attr_names[j] for j in label_cols],
        name=name if name is not None else xml_path.stem,
        split=split,
        kind="features",
        feature_names=[attr_names[j] for j in feature_cols],
    )
