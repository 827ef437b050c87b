"""Argument and array checks shared by every public entry point.

Every check raises :class:`ValueError` (or :class:`NotFittedError`) with a message that names the
argument and says what was expected, so that a user who passes the wrong thing learns which one.
Nothing here knows about torch models or data sets.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = [
    "NotFittedError",
    "check_array",
    "check_finite",
    "check_finite_output",
    "check_probabilities",
    "check_binary_labels",
    "check_multilabel",
    "check_same_n_samples",
    "check_n_features",
    "check_random_state",
    "check_in_choices",
    "check_bool",
    "check_scalar",
    "check_is_fitted",
]


class NotFittedError(_SklearnNotFittedError):
    """Raised when a method that needs a fitted estimator is called before ``fit``.

    A subclass of scikit-learn's ``NotFittedError`` (itself a ValueError and an AttributeError), so code that
    catches scikit-learn's catches lsnpc's too."""


def _is_sparse(value: Any) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(value)


def _from_frame(value: Any, name: str) -> np.ndarray:
    """A pandas DataFrame or Series as a float64 array (nullable and boolean columns too); a missing value
    (``pd.NA`` or NaN), a category or a text column is refused by name."""
    import pandas as pd

    frame = value.to_frame() if isinstance(value, pd.Series) else value
    for column, dtype in frame.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            raise ValueError(f"{name} column {column!r} is categorical; lsnpc needs numbers: encode it first "
                             f"(e.g. pandas.get_dummies, or .cat.codes)")
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise ValueError(f"{name} column {column!r} holds {dtype} values, not numbers")
    missing = frame.isna().any()
    if missing.any():
        column = missing.index[int(np.argmax(missing.to_numpy()))]
        raise ValueError(f"{name} has missing values (pd.NA or NaN) in column {column!r}, row "
                         f"{int(np.argmax(frame[column].isna().to_numpy()))}: fill or drop them first")
    try:
        out = frame.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold numbers, could not read it as floats: {exc}") from exc
    return out.ravel() if isinstance(value, pd.Series) else out


def _to_ndarray(value: Any, name: str) -> np.ndarray:
    if value is None:
        raise ValueError(f"{name} is required, got None")
    if _is_sparse(value):
        # densifying a sparse multilabel set silently can take all the memory there is: say so instead
        raise TypeError(f"{name} is a sparse matrix; sparse input is not supported: pass a dense array "
                        f"({name}.toarray()) if it fits in memory")
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series)):
        return _from_frame(value, name)
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} must be array-like, could not convert it: {exc}") from exc
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: Complex data not supported (got dtype {arr.dtype}); pass the real part or the "
                         "magnitude explicitly")
    if arr.dtype == object:
        if arr.size and any(isinstance(v, complex) for v in arr.flat):
            raise ValueError(f"{name}: Complex data not supported (found a complex number)")
        try:  # numbers held as Python objects (e.g. X.astype(object)) read as numbers
            arr = arr.astype(np.float64)
        except TypeError as exc:
            raise TypeError(f"{name} must be a numeric array; an entry is not a number: {exc}") from exc
        except ValueError as exc:
            raise ValueError(f"{name} must be a numeric array; an entry is not a number: {exc}") from exc
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Refuse NaN or infinite entries of a float array, with how many and where the first is."""
    if not np.issubdtype(arr.dtype, np.floating):
        return
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.argwhere(~finite)[0].tolist()
        kind = "NaN" if np.isnan(arr[tuple(bad)]) else "infinite"
        raise ValueError(f"{name} contains NaN or infinite values ({int((~finite).sum())} entries; the first, "
                         f"at {tuple(bad)}, is {kind})")


def check_array(
    value: Any,
    name: str,
    *,
    ndim: int = 2,
    dtype: type | np.dtype = np.float32,
    min_samples: int = 1,
    allow_nonfinite: bool = False,
) -> np.ndarray:
    """Return ``value`` as a C-contiguous array of ``dtype`` with ``ndim`` dimensions.

    Parameters
    ----------
    value : array-like
        What the user passed: an array, nested lists, a pandas DataFrame (nullable and boolean columns too;
        ``pd.NA`` is a missing value). Sparse matrices and complex numbers are refused.
    name : str
        The argument's name, used in error messages.
    ndim : int
        Required number of dimensions (a 1-d array is never silently reshaped).
    dtype : numpy dtype
        Output dtype.
    min_samples : int
        Minimum length of the first axis.
    allow_nonfinite : bool
        If False, NaN or infinite entries are rejected, and so are finite values too large for ``dtype``.
    """
    arr = _to_ndarray(value, name)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        hint = ""
        if arr.ndim == 1 and ndim == 2:
            hint = (f"; Reshape your data: {name}.reshape(-1, 1) if it holds one feature, {name}.reshape(1, -1) "
                    "if it is one sample")
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}{hint}")
    if arr.shape[0] < min_samples:
        raise ValueError(
            f"{name} must have at least {min_samples} sample(s) (rows), got n_samples = {arr.shape[0]}"
        )
    if ndim >= 2 and arr.shape[1] < 1:
        raise ValueError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if not allow_nonfinite:
        check_finite(arr, name)
    with np.errstate(over="ignore"):  # a finite value beyond dtype's range is refused just below, by name
        arr = np.ascontiguousarray(arr, dtype=dtype)
    if not allow_nonfinite and np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        largest = float(np.max(np.abs(_to_ndarray(value, name).astype(np.float64))))
        raise ValueError(f"{name} holds values too large for {np.dtype(dtype).name} (largest magnitude "
                         f"{largest:.3g}, the limit is {float(np.finfo(dtype).max):.3g}): rescale it")
    return arr


def check_finite_output(values: np.ndarray, name: str, source: np.ndarray, what: str = "probabilities") -> np.ndarray:
    """Refuse NaN or infinite entries of an output computed from the argument ``name`` (its array ``source``):
    finite inputs too large for float32 arithmetic overflow inside a model, and a silent NaN is a wrong answer."""
    finite = np.isfinite(values).reshape(len(values), -1).all(axis=1)
    if not finite.all():
        largest = float(np.max(np.abs(source))) if source.size else 0.0
        raise ValueError(f"{name} gave non-finite {what} for {int((~finite).sum())} of {len(finite)} rows (first: "
                         f"row {int(np.argmin(finite))}); its values are too large for the model's float32 arithmetic "
                         f"(largest magnitude {largest:.3g}): rescale {name} as in fit")
    return values


def check_probabilities(value: Any, name: str, *, min_samples: int = 1) -> np.ndarray:
    """Return an (n, L) float32 array of probabilities, each finite and in [0, 1]."""
    arr = check_array(value, name, ndim=2, dtype=np.float32, min_samples=min_samples)
    lo, hi = float(arr.min()), float(arr.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(
            f"{name} must hold probabilities in [0, 1], got values in [{lo:.4g}, {hi:.4g}]"
        )
    return arr


def check_binary_labels(value: Any, name: str, *, min_samples: int = 1) -> np.ndarray:
    """Return an (n, L) int64 array whose entries are all 0 or 1."""
    arr = _to_ndarray(value, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d (n_samples, n_labels) array, got shape {arr.shape}")
    if arr.shape[0] < min_samples:
        raise ValueError(
            f"{name} must have at least {min_samples} sample(s) (rows), got {arr.shape[0]}"
        )
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one label column, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must hold 0/1 labels, got dtype {arr.dtype}")
    if arr.dtype != bool:
        if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
            raise ValueError(f"{name} must hold 0/1 labels, found NaN or infinite values")
        bad = ~np.isin(arr, (0, 1))
        if bad.any():
            examples = np.unique(arr[bad])[:5].tolist()
            continuous = np.issubdtype(arr.dtype, np.floating) and not np.all(arr[bad] == np.round(arr[bad]))
            raise ValueError(f"{name} must hold only 0/1 labels, found values {examples}"
                             + (" (continuous values: probabilities are not labels)" if continuous else ""))
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_multilabel(value: Any, name: str, *, n_labels: int | None = None, min_samples: int = 1) -> np.ndarray:
    """Return multilabel annotations as an (n, L) int64 0/1 matrix.

    ``value`` is either a multi-hot (n, L) array or cleanlab's format: a list with one entry per sample,
    each a list of the class indices (0..L-1) that apply, e.g. ``[[0, 2], [], [1]]``; L is then
    ``n_labels`` (e.g. ``pred_probs.shape[1]``). A nested Python list whose rows all hold L (or, without
    ``n_labels``, equally many) entries of 0 and 1 is read as multi-hot. For a matrix, ``n_labels``,
    when given, must match its width.
    """
    if _is_index_lists(value, n_labels):
        if n_labels is None:
            raise ValueError(f"{name} given as lists of class indices needs the number of labels L")
        if len(value) < min_samples:
            raise ValueError(f"{name} must have at least {min_samples} sample(s), got {len(value)}")
        out = np.zeros((len(value), n_labels), dtype=np.int64)
        for i, row in enumerate(value):
            indices = np.asarray(list(row))
            if indices.size == 0:
                continue
            if not np.issubdtype(indices.dtype, np.integer):
                raise ValueError(f"{name}[{i}] must hold integer class indices, got {list(row)!r}")
            if len(np.unique(indices)) != len(indices):
                # a 0/1 row of the wrong length reads as indices that repeat: say so rather than guess
                raise ValueError(f"{name}[{i}] repeats a class index ({list(row)!r}); a row of class indices lists "
                                 f"each label once, and a 0/1 row needs all {n_labels} entries in every row")
            bad = indices[(indices < 0) | (indices >= n_labels)]
            if bad.size:
                raise ValueError(
                    f"{name}[{i}] holds class index {int(bad[0])}, outside 0..{n_labels - 1} (L = {n_labels})"
                )
            out[i, indices] = 1
        return out
    arr = check_binary_labels(value, name, min_samples=min_samples)
    if n_labels is not None and arr.shape[1] != n_labels:
        raise ValueError(f"{name} has {arr.shape[1]} label columns, but pred_probs has {n_labels}")
    return arr


def _is_index_lists(value: Any, n_labels: int | None) -> bool:
    """Whether ``value`` is a Python sequence of index lists rather than a multi-hot matrix."""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    rows = [row for row in value if isinstance(row, (list, tuple, set, frozenset, np.ndarray))]
    if len(rows) != len(value) or any(np.ndim(row) != 1 for row in rows):
        return False
    widths = {len(row) for row in rows}
    multi_hot_width = len(widths) == 1 and (n_labels is None or widths == {n_labels})
    # 0/1 entries, integers or floats (a float 0/1 matrix is a label matrix, not lists of indices 0 and 1)
    zeros_ones = all(isinstance(v, (int, float, np.integer, np.floating, bool)) and v in (0, 1)
                     for row in rows for v in row)
    return not (multi_hot_width and zeros_ones and widths != {0})


def check_same_n_samples(**arrays: np.ndarray | None) -> int:
    """Check that every given (non-None) array has the same first dimension; return it."""
    sizes = {name: len(a) for name, a in arrays.items() if a is not None}
    if len(set(sizes.values())) > 1:
        detail = ", ".join(f"{name} has {n}" for name, n in sizes.items())
        raise ValueError(f"the arrays must have the same number of samples (rows): {detail}")
    return next(iter(sizes.values())) if sizes else 0


def check_labelled_triple(
    prefix: str,
    X: Any,
    y: Any,
    probs: Any,
    *,
    check_X: Callable[[Any, str], np.ndarray],
    sample_shape: tuple[int, ...],
    n_labels: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Check an optional labelled set given as three arguments ``X_<prefix>``, ``y_<prefix>`` and
    ``pred_probs_<prefix>`` (features, true 0/1 labels, the base model's probabilities).

    Returns None when none of the three is given; otherwise all three must be, with one row per sample,
    the training data's sample shape ``sample_shape`` (X.shape[1:]) and ``n_labels`` columns.
    ``check_X(value, name)`` converts and checks the features.
    """
    names = (f"X_{prefix}", f"y_{prefix}", f"pred_probs_{prefix}")
    given = [v is not None for v in (X, y, probs)]
    if not any(given):
        return None
    if not all(given):
        missing = [name for name, ok in zip(names, given, strict=True) if not ok]
        raise ValueError(
            f"the {prefix} set needs {', '.join(names)} together; missing {', '.join(missing)}"
            + (" (the base model's probabilities on those samples)" if names[2] in missing else "")
        )
    Xs = check_X(X, names[0])
    # a 0/1 matrix, or lists of class indices as labels= takes (a matrix's width is checked below, by name)
    ys = check_multilabel(y, names[1], n_labels=n_labels if _is_index_lists(y, n_labels) else None)
    ps = check_probabilities(probs, names[2])
    _check_like_training({names[0]: Xs, names[1]: ys, names[2]: ps}, sample_shape, n_labels)
    return Xs, ys, ps


def check_unlabelled_pair(
    prefix: str,
    X: Any,
    probs: Any,
    *,
    check_X: Callable[[Any, str], np.ndarray],
    sample_shape: tuple[int, ...],
    n_labels: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Check optional rows without labels given as ``X_<prefix>`` and ``pred_probs_<prefix>`` (features, the base
    model's probabilities): None when neither is given, else both, shaped like the training data (as
    :func:`check_labelled_triple`)."""
    names = (f"X_{prefix}", f"pred_probs_{prefix}")
    if X is None and probs is None:
        return None
    if X is None or probs is None:
        raise ValueError(f"the {prefix} rows need {names[0]} and {names[1]} together; missing "
                         f"{names[0] if X is None else names[1]}")
    Xs = check_X(X, names[0])
    ps = check_probabilities(probs, names[1])
    _check_like_training({names[0]: Xs, names[1]: ps}, sample_shape, n_labels)
    return Xs, ps


def _check_like_training(arrays: dict[str, np.ndarray], sample_shape: tuple[int, ...], n_labels: int) -> None:
    """The first of ``arrays`` (name: array) holds features with the training data's ``sample_shape``, the others
    ``n_labels`` columns; all the same number of rows."""
    check_same_n_samples(**arrays)
    (x_name, Xs), *others = arrays.items()
    if Xs.shape[1:] != sample_shape:
        if Xs.ndim == 2 and len(sample_shape) == 1:
            raise ValueError(f"{x_name} has {Xs.shape[1]} features, but X has {sample_shape[0]}")
        raise ValueError(f"{x_name} has sample shape {Xs.shape[1:]}, but X has {sample_shape}")
    for name, arr in others:
        if arr.shape[1] != n_labels:
            raise ValueError(f"{name} has {arr.shape[1]} labels, but pred_probs has {n_labels}")


def check_n_features(
    arr: np.ndarray, name: str, expected: int, what: str = "columns", owner: str = "the estimator"
) -> None:
    """Check that ``arr.shape[1] == expected`` (e.g. predict on the same d or L as fit); ``owner`` names the
    estimator in the message (scikit-learn's wording, so its checks recognise it)."""
    if arr.shape[1] != expected:
        raise ValueError(
            f"{name} has {arr.shape[1]} {what}, but {owner} is expecting {expected} {what} as input "
            f"(it was fitted with {expected})"
        )


def check_random_state(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """Turn None, an int seed, a SeedSequence or a Generator into a numpy Generator.

    Never touches numpy's global RNG. ``None`` gives fresh OS entropy (non-reproducible).
    """
    if random_state is None or isinstance(random_state, (Integral, np.random.SeedSequence)):
        if isinstance(random_state, Integral) and random_state < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {random_state}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise ValueError(
        f"{name} must be None, a non-negative int, a numpy SeedSequence or Generator, "
        f"got {type(random_state).__name__}"
    )


def check_in_choices(value: Any, name: str, choices: Sequence[Any]) -> Any:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}; got {value!r}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """Check that a switch is ``True`` or ``False`` (not 0/1, not a string), naming it in the error."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_scalar(
    value: Any,
    name: str,
    *,
    kind: type = Real,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> Any:
    """Check a scalar hyper-parameter's type and range, naming it in the error."""
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if kind is Integral else "a number"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if kind is not Integral and not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (not low_inclusive and value == low)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and (value > high or (not high_inclusive and value == high)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value!r}")
    return value


def check_is_fitted(estimator: Any, attribute: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has the learned ``attribute``."""
    if getattr(estimator, attribute, None) is None:
        raise NotFittedError(
            f"this {type(estimator).__name__} is not fitted yet: call fit(...) before using it"
        )
