"""The paper's splits: a held-out part of the training portion, half for model selection, half
the small clean set.

Every data set goes through :func:`paper_splits` (on its training portion); the test split is the
source's own and is never touched here.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from lsnpc._validation import check_random_state, check_scalar
from lsnpc.data.dataset import MultilabelDataset

__all__ = ["paper_splits", "split_dataset"]


def paper_splits(
    n_samples: int, *, val_fraction: float = 0.1, random_state: Any
) -> dict[str, np.ndarray]:
    """Carve train / val0 / val1 index sets out of ``n_samples`` training samples.

    ``round(val_fraction * n_samples)`` samples are held out at random; half of them (the larger
    half when the count is odd) form ``val0``, the validation split for model selection, and the
    other half ``val1``, the clean set. The rest is ``train`` (the part whose labels get noised).

    Parameters
    ----------
    n_samples : int
        Size of the training portion.
    val_fraction : float in (0, 1)
        Fraction held out (the paper: 0.1).
    random_state : None, int or numpy Generator
        Seed; required so the split is a deliberate choice (pass None for a fresh random split).

    Returns
    -------
    dict with keys "train", "val0", "val1"
        Sorted int64 index arrays; pairwise disjoint, together exactly ``range(n_samples)``.
    """
    check_scalar(n_samples, "n_samples", kind=Integral, low=3)
    check_scalar(val_fraction, "val_fraction", kind=Real, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    n_held = int(round(val_fraction * n_samples))
    if n_held < 2 or n_held >= n_samples:
        raise ValueError(
            f"val_fraction={val_fraction} of n_samples={n_samples} holds out {n_held} samples; "
            "need at least 2 (one for val0, one for val1) and at least one left for train"
        )
    rng = check_random_state(random_state)
    order = rng.permutation(n_samples)
    n_val0 = n_held - n_held // 2
    return {
        "train": np.sort(order[n_held:]),
        "val0": np.sort(order[:n_val0]),
        "val1": np.sort(order[n_val0:n_held]),
    }


def split_dataset(
    dataset: MultilabelDataset, *, val_fraction: float = 0.1, random_state: Any
) -> dict[str, MultilabelDataset]:
    """Apply :func:`paper_splits` to a data set's training portion.

    Parameters
    ----------
    dataset : MultilabelDataset
        The training portion (e.g. ``load_dataset(name, "train")``).
    val_fraction, random_state
        As in :func:`paper_splits`.

    Returns
    -------
    dict with keys "train", "val0", "val1"
        Subsets of ``dataset`` whose ``split`` attribute is the key.
    """
    indices = paper_splits(len(dataset), val_fraction=val_fraction, random_state=random_state)
    return {key: dataset.subset(idx, split=key) for key, idx in indices.items()}
