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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsnpc.data.dataset import MultilabelDataset

__all__ = ["load_mulan", "read_mulan_label_names"]


def read_mulan_label_names(xml_path: str | os.PathLike[str]) -> list[str]:
    """Return the label names declared in a MULAN XML label file, in document order.

    Hierarchical files (labels nested inside labels) list every label, parents first.
    """
    try:
        root = ET.parse(xml_path).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{xml_path} is not a well-formed XML file: {exc}") from exc
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


@dataclass(frozen=True)
class _Header:
    attributes: list[tuple[str, Any]]  # (name, "NUMERIC" | "STRING" | ... | [nominal values])
    data_line: int  # 0-based line number of the @data line
    sparse: bool  # rows in ``{index value, ...}`` form
    n_rows: int


def _parse_header(path: Path) -> _Header:
    """Read the header with liac-arff and scan the data section once (sparse? how many rows?).

    The row count is taken here because a sparse parse only sees rows that hold a value, so
    trailing all-zero rows (``{}``) would otherwise be lost.
    """
    import arff  # liac-arff; imported here so that importing lsnpc.data stays fast

    header_lines: list[str] = []
    data_line, sparse, n_rows = -1, False, 0
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh):
            if data_line < 0:
                header_lines.append(line)
                if line.strip().lower().startswith("@data"):
                    data_line = line_no
                continue
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            if n_rows == 0:
                sparse = s.startswith("{")
            n_rows += 1
    if data_line < 0:
        raise ValueError(f"{path} has no @data section")
    attributes = arff.loads("".join(header_lines))["attributes"]
    return _Header(attributes, data_line, sparse, n_rows)


def _is_numeric_attribute(kind: Any) -> bool:
    return not isinstance(kind, list) and str(kind).upper() in ("NUMERIC", "REAL", "INTEGER")


def _nominal_lookup(values: list[str]) -> np.ndarray:
    """Map a nominal value's index to the number it stands for (its index if not numeric)."""
    try:
        return np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        return np.arange(len(values), dtype=np.float64)


def _read_dense_numeric(path: Path, header: _Header) -> np.ndarray | None:
    """Fast path (pandas' C parser) for dense files whose every value is a number.

    Returns the (n, n_attributes) float64 table with NaN for ``?``, or None when the file needs
    the general parser (string attributes, non-numeric nominal values, quoting, ...).
    """
    if header.sparse:
        return None
    for _, kind in header.attributes:
        # a nominal value that is a number is read as that number: no index lookup needed
        if not (_is_numeric_attribute(kind) or (isinstance(kind, list) and _numeric_values(kind))):
            return None
    import pandas as pd

    try:
        table = pd.read_csv(
            path, skiprows=header.data_line + 1, header=None, comment="%", na_values=["?"],
            skipinitialspace=True, dtype=np.float64, skip_blank_lines=True, engine="c",
        ).to_numpy()  # fmt: skip
    except (ValueError, pd.errors.ParserError):
        return None
    if table.shape != (header.n_rows, len(header.attributes)):
        return None
    if np.isnan(table).any():  # a '?' or a short row (pandas fills both with NaN): the general parser tells them apart
        return None
    return table


def _numeric_values(values: list[str]) -> bool:
    try:
        [float(v) for v in values]
    except ValueError:
        return False
    return True


def _read_general(path: Path, header: _Header, wanted: list[int]) -> dict[int, np.ndarray]:
    """liac-arff for anything (sparse rows, nominal words, quoted values): decoded columns."""
    import arff
    import scipy.sparse as sp

    n_attr = len(header.attributes)
    with open(path, encoding="utf-8") as fh:
        # encode_nominal: nominal values arrive as indices, so sparse rows decode to numbers
        parsed = arff.load(fh, encode_nominal=True, return_type=arff.COO if header.sparse else arff.DENSE)
    if header.sparse:
        values, rows, cols = parsed["data"]
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        usable = np.zeros(n_attr, dtype=bool)
        usable[wanted] = True
        keep = usable[cols]
        vals = np.array(
            [np.nan if v is None else v for v, k in zip(values, keep, strict=True) if k],
            dtype=np.float64,
        )
        table = sp.csc_matrix((vals, (rows[keep], cols[keep])), shape=(header.n_rows, n_attr))
        raw = {j: table[:, j].toarray().ravel() for j in wanted}
    else:
        table_obj = np.array(parsed["data"], dtype=object).reshape(len(parsed["data"]), n_attr)
        raw = {
            j: np.array([np.nan if v is None else v for v in table_obj[:, j]], dtype=np.float64)
            for j in wanted
        }
    for j in wanted:  # nominal value index -> the value it stands for
        kind = header.attributes[j][1]
        if isinstance(kind, list):
            col = raw[j]
            ok = ~np.isnan(col)
            out = np.full_like(col, np.nan)
            out[ok] = _nominal_lookup(kind)[col[ok].astype(np.int64)]
            raw[j] = out
    return raw


def load_mulan(
    arff_path: str | os.PathLike[str],
    xml_path: str | os.PathLike[str] | None = None,
    *,
    label_names: list[str] | None = None,
    name: str | None = None,
    split: str = "train",
    fast: bool = True,
) -> MultilabelDataset:
    """Load a MULAN ARFF file with the labels named in its XML file.

    Parameters
    ----------
    arff_path : path-like
        The ARFF file (dense or sparse).
    xml_path : path-like, optional
        The MULAN XML file whose ``<label name="...">`` elements name the label attributes.
    label_names : list of str, optional
        The label attributes' names, instead of ``xml_path`` (give exactly one of the two).
    name : str, optional
        Data set name for the result; defaults to the XML (else the ARFF) file's stem.
    split : str
        Split name for the result.
    fast : bool
        Read dense all-numeric files with pandas' C parser (same result, much faster); False
        always uses liac-arff.

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
    if (xml_path is None) == (label_names is None):
        raise ValueError("load_mulan: give exactly one of xml_path (a MULAN XML file) and label_names")
    arff_path = Path(arff_path)
    source = Path(xml_path) if xml_path is not None else arff_path
    label_set = set(read_mulan_label_names(source) if xml_path is not None else label_names or ())
    try:
        return _load(arff_path, source, label_set, name=name, split=split, fast=fast)
    except ValueError:
        raise
    except Exception as exc:  # liac-arff's parse errors (BadDataFormat and the like) are the file's, not ours
        if type(exc).__module__.split(".")[0] != "arff":
            raise
        raise ValueError(f"{arff_path} is not a well-formed ARFF file: {_short(str(exc))}") from exc


def _short(message: str, limit: int = 160) -> str:
    """A parser's message cut to ``limit`` characters (liac-arff quotes a whole bad row, which may be huge)."""
    return message if len(message) <= limit else message[:limit] + " ..."


def _load(arff_path: Path, source: Path, label_set: set[str], *, name: str | None, split: str,
          fast: bool) -> MultilabelDataset:
    """:func:`load_mulan` once the label names are known (``source``: the file that named them)."""
    header = _parse_header(arff_path)
    attr_names = [a for a, _ in header.attributes]
    missing = sorted(label_set - set(attr_names))
    if missing:
        raise ValueError(
            f"{source.name} names labels that are not attributes of {arff_path.name}: {missing[:10]}"
        )
    label_cols = [j for j, a in enumerate(attr_names) if a in label_set]
    feature_cols = [  # numeric or nominal; string and date attributes are not features
        j
        for j, (a, kind) in enumerate(header.attributes)
        if a not in label_set and (isinstance(kind, list) or _is_numeric_attribute(kind))
    ]
    table = _read_dense_numeric(arff_path, header) if fast else None
    if table is not None:
        X = table[:, feature_cols].astype(np.float32)
        Y = table[:, label_cols]
    else:
        columns = _read_general(arff_path, header, label_cols + feature_cols)
        X = np.empty((header.n_rows, len(feature_cols)), dtype=np.float32)
        for out_j, j in enumerate(feature_cols):
            X[:, out_j] = columns[j]
        Y = np.empty((header.n_rows, len(label_cols)), dtype=np.float64)
        for out_j, j in enumerate(label_cols):
            Y[:, out_j] = columns[j]
    if np.isnan(Y).any():
        raise ValueError(f"{arff_path.name} has missing ('?') label values")
    if not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError(f"{arff_path.name} has label values other than 0/1")
    return MultilabelDataset(
        X=X,
        Y=Y.astype(np.int64),
        label_names=[attr_names[j] for j in label_cols],
        name=name if name is not None else source.stem,
        split=split,
        kind="features",
        feature_names=[attr_names[j] for j in feature_cols],
    )
