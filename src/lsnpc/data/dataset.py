"""The one container every loader returns: :class:`MultilabelDataset`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from lsnpc._validation import check_binary_labels

__all__ = ["MultilabelDataset", "DatasetKind"]

DatasetKind = Literal["features", "images", "texts"]
_KINDS = ("features", "images", "texts")


@dataclass(frozen=True, eq=False)
class MultilabelDataset:
    """One split of a multilabel data set.

    Attributes
    ----------
    X : ndarray of shape (n, d) or list of str of length n
        ``kind == "features"``: a float32 feature array (n samples, d features).
        ``kind == "images"``: image file paths (str); the files need not exist (labels load
        without the images, e.g. from a labels-only devkit).
        ``kind == "texts"``: the raw texts.
    Y : ndarray of shape (n, L), int64
        The clean labels in {0, 1}; ``Y[i, k] == 1`` when sample i carries label k.
    label_names : list of str, length L
        ``label_names[k]`` names column k of ``Y``.
    name : str
        Registry name of the data set (e.g. ``"scene"``).
    split : str
        Which portion this is (``"train"``, ``"val"``, ``"test"``, or a carved split such as
        ``"val0"``).
    kind : {"features", "images", "texts"}
        What ``X`` holds.
    ids : list of str or None
        Per-sample identifiers from the source (image ids, comment ids), when it has them.
    feature_names : list of str or None
        Names of the d feature columns (``kind == "features"`` only), when the source has them.
    """

    X: Any
    Y: np.ndarray
    label_names: list[str]
    name: str
    split: str
    kind: DatasetKind = "features"
    ids: list[str] | None = None
    feature_names: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        Y = check_binary_labels(self.Y, "Y", min_samples=0)
        object.__setattr__(self, "Y", Y)
        if self.kind == "features":
            X = np.asarray(self.X)
            if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
                raise ValueError(
                    f"X must be a numeric (n, d) array for kind='features', got shape {X.shape} "
                    f"and dtype {X.dtype}"
                )
            object.__setattr__(self, "X", X)
        else:
            if isinstance(self.X, (str, bytes)) or not isinstance(self.X, Sequence | np.ndarray):
                raise ValueError(f"X must be a list of str for kind={self.kind!r}")
            object.__setattr__(self, "X", [str(x) for x in self.X])
        if len(self.X) != Y.shape[0]:
            raise ValueError(f"X has {len(self.X)} samples but Y has {Y.shape[0]} rows")
        if len(self.label_names) != Y.shape[1]:
            raise ValueError(
                f"label_names has {len(self.label_names)} names but Y has {Y.shape[1]} columns"
            )
        object.__setattr__(self, "label_names", [str(s) for s in self.label_names])
        if self.ids is not None:
            if len(self.ids) != Y.shape[0]:
                raise ValueError(f"ids has {len(self.ids)} entries but Y has {Y.shape[0]} rows")
            object.__setattr__(self, "ids", [str(s) for s in self.ids])
        if self.feature_names is not None:
            if self.kind != "features" or len(self.feature_names) != np.shape(self.X)[1]:
                raise ValueError("feature_names must name the d columns of a feature array X")
            object.__setattr__(self, "feature_names", [str(s) for s in self.feature_names])

    def __len__(self) -> int:
        return int(self.Y.shape[0])

    def __repr__(self) -> str:
        if self.kind == "features":
            x_desc = f"X={np.shape(self.X)}"
        else:
            x_desc = f"X=<{len(self.X)} {self.kind[:-1]} entries>"
        return (
            f"MultilabelDataset(name={self.name!r}, split={self.split!r}, kind={self.kind!r}, "
            f"{x_desc}, Y={self.Y.shape})"
        )

    @property
    def n_labels(self) -> int:
        """L, the number of label columns."""
        return int(self.Y.shape[1])

    def subset(self, indices: Sequence[int] | np.ndarray, split: str | None = None) -> MultilabelDataset:
        """Return the samples at ``indices`` (in that order) as a new data set.

        Parameters
        ----------
        indices : array-like of int, shape (m,)
            Row positions to keep.
        split : str, optional
            Name of the new split; defaults to this one's.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise ValueError(f"indices must lie in [0, {len(self)}), got range [{idx.min()}, {idx.max()}]")
        if self.kind == "features":
            X: Any = np.asarray(self.X)[idx]
        else:
            X = [self.X[i] for i in idx]
        ids = None if self.ids is None else [self.ids[i] for i in idx]
        return replace(
            self, X=X, Y=self.Y[idx], ids=ids, split=self.split if split is None else split
        )
