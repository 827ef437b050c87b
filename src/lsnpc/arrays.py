"""Read and write user arrays (features, probabilities, labels) as .npy, .csv or .parquet.

The command line reads and writes every user array through these; they are public so that scripts read
files exactly as ``lsnpc fit`` / ``lsnpc correct`` do. A CSV may have a header row (kept as column names, so corrected
probabilities are written back under the same names) and an index column as pandas writes it (dropped);
a parquet file's columns are all read. Writes are atomic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lsnpc._io import atomic_path

__all__ = ["FORMATS", "array_format", "read_array", "write_array"]

FORMATS = (".npy", ".csv", ".parquet")


def array_format(path: str | Path, name: str = "path") -> str:
    """The format (``.npy``, ``.csv`` or ``.parquet``) named by a path's suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{name} must end in {', '.join(FORMATS)}; got {str(path)!r}")
    return suffix


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_layout(path: Path) -> tuple[bool, bool]:
    """(has a header row, has an index column) of a CSV, read from its first two lines.

    A header is a first row that is not all numbers, or that is exactly ``0,1,...,k-1`` as pandas
    writes a frame's default column names, when the next row cannot sit beside it as data: a row written as
    decimals (probabilities), or, for k >= 3, a row of 0/1 (a label row never holds 2). A headerless file of
    other integers (counts, say) whose first row happens to be ``0,1,...,k-1`` keeps that row as data. An index
    column is a header whose first name is empty or ``Unnamed: 0``, as ``DataFrame.to_csv()`` writes it.
    """
    with open(path, encoding="utf-8") as fh:
        first = fh.readline().strip()
        second = fh.readline().strip()
    if not first:
        raise ValueError("the file is empty")
    fields = [f.strip().strip('"') for f in first.split(",")]
    if not all(_is_number(f) for f in fields):
        return True, fields[0] in ("", "Unnamed: 0")
    if fields != [str(i) for i in range(len(fields))]:
        return False, False
    below = [f.strip().strip('"') for f in second.split(",")] if second else []
    decimals = bool(below) and all(any(c in f for c in ".eE") for f in below)
    zeros_ones = bool(below) and all(f in ("0", "1") for f in below)
    return decimals or (len(fields) >= 3 and zeros_ones), False


def _read_csv(path: Path) -> tuple[np.ndarray, list[str] | None]:
    import pandas as pd

    header, index = _csv_layout(path)
    frame = pd.read_csv(path, header=0 if header else None, index_col=0 if index else None)
    text = [str(c) for c, dtype in frame.dtypes.items() if not pd.api.types.is_numeric_dtype(dtype)]
    if text:
        raise ValueError(f"column(s) {', '.join(text[:5])} hold non-numeric values (a CSV may have one header "
                         "row and a pandas index column; every other cell must be a number)")
    return frame.to_numpy(), [str(c) for c in frame.columns] if header else None


def read_array(path: str | Path, name: str) -> tuple[np.ndarray, list[str] | None]:
    """Read a 2-d numeric array; returns (array, column names or None).

    Raises FileNotFoundError for a missing file and ValueError (naming ``name``) for an unreadable
    or non-numeric one. A 1-d array is returned as is; callers check shapes.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{name}: {path} is a folder, not a file")
    if not path.is_file():
        raise FileNotFoundError(f"{name}: file not found: {path}")
    fmt = array_format(path, name)
    try:
        if fmt == ".npy":
            # allow_pickle=False: a user file must never run code when loaded
            return np.load(path, allow_pickle=False), None
        if fmt == ".csv":
            return _read_csv(path)
        import pandas as pd

        frame = pd.read_parquet(path)
        return frame.to_numpy(), [str(c) for c in frame.columns]
    except (OSError, ValueError, ImportError) as exc:
        raise ValueError(f"{name}: could not read {path}: {exc}") from exc


def write_array(path: str | Path, array: np.ndarray, *, columns: list[str] | None = None) -> Path:
    """Write ``array`` atomically in the format named by ``path``'s suffix."""
    path = Path(path)
    fmt = array_format(path, "out")
    array = np.asarray(array)
    if columns is not None and (array.ndim != 2 or len(columns) != array.shape[1]):
        columns = None
    with atomic_path(path, suffix=fmt) as tmp:
        if fmt == ".npy":
            np.save(tmp, array, allow_pickle=False)
        elif fmt == ".csv":
            header = ",".join(columns) if columns else ""
            fmt_spec = "%d" if np.issubdtype(array.dtype, np.integer) else "%.8g"
            np.savetxt(tmp, array, delimiter=",", header=header, comments="", fmt=fmt_spec)
        else:
            import pandas as pd

            names = columns or [f"label_{j}" for j in range(array.shape[1] if array.ndim == 2 else 1)]
            pd.DataFrame(array.reshape(len(array), -1), columns=names).to_parquet(tmp, index=False)
    return path

