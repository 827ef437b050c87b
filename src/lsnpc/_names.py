"""Column names of the arrays an estimator is fitted on, remembered and checked as scikit-learn does.

A DataFrame whose columns are all strings gives its names (``feature_names_in_`` for X, ``label_names_in_`` for
the probabilities); rows predicted later must come with the same names in the same order, since a corrector reads
columns by position. Other inputs have no names.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = ["column_names", "check_names", "record_names"]


def column_names(data: Any) -> np.ndarray | None:
    """The column names of a DataFrame-like ``data`` as an object array (n_columns,), or None when it has none
    or they are not all strings."""
    columns = getattr(data, "columns", None)
    if columns is None or np.ndim(data) != 2:
        return None
    names = list(columns)
    if not names or not all(isinstance(name, str) for name in names):
        return None
    return np.asarray(names, dtype=object)


def check_names(estimator: Any, names: np.ndarray | None, argument: str, attribute: str) -> None:
    """Refuse ``names`` (the columns of ``argument`` now) that differ from those the estimator was fitted with
    (its ``attribute``), in a ValueError naming the argument and what differs; warn when only one side has names."""
    fitted = getattr(estimator, attribute, None)
    kind = type(estimator).__name__
    if fitted is None and names is None:
        return
    if fitted is None:
        warnings.warn(f"{argument} has column names, but {kind} was fitted without them: its columns are read by "
                      "position", UserWarning, stacklevel=4)
        return
    if names is None:
        warnings.warn(f"{argument} has no column names, but {kind} was fitted with named columns "
                      f"({', '.join(map(str, fitted[:3]))}{', ...' if len(fitted) > 3 else ''}): its columns are read "
                      "by position", UserWarning, stacklevel=4)
        return
    if len(names) == len(fitted) and all(a == b for a, b in zip(names, fitted)):
        return
    if sorted(names) == sorted(fitted):
        moved = next(i for i, (a, b) in enumerate(zip(names, fitted)) if a != b)
        raise ValueError(f"{argument} has the columns {kind} was fitted with, in another order (column {moved} is "
                         f"{names[moved]!r}, fit had {fitted[moved]!r}): reorder them as in fit, e.g. "
                         f"{argument}[list(model.{attribute})]")
    unseen = [str(n) for n in names if n not in set(fitted)][:3]
    missing = [str(n) for n in fitted if n not in set(names)][:3]
    said = "; ".join(part for part in (
        f"not seen in fit: {', '.join(unseen)}" if unseen else "", f"missing: {', '.join(missing)}" if missing else "")
        if part)
    raise ValueError(f"{argument}'s column names differ from those {kind} was fitted with ({said})")


def record_names(estimator: Any, names: np.ndarray | None, attribute: str = "feature_names_in_") -> None:
    """Set ``estimator.<attribute>`` to ``names`` (from :func:`column_names` of what fit was given), or remove it
    when there are none (a refit on an array forgets the names of an earlier fit)."""
    if names is None:
        estimator.__dict__.pop(attribute, None)
    else:
        setattr(estimator, attribute, names)
