"""The numerical conventions every trained network shares: feature standardisation and mini-batches.

One rule each, used by the base classifiers, the NPC baseline and LSNPC, so that they agree at the
edges (a constant feature, a data set whose size leaves one sample over):

- :func:`standardization`: mean and standard deviation in float64; a feature whose standard
  deviation is below :data:`CONSTANT_SCALE` is treated as constant and gets scale 1 (dividing by a
  standard deviation that is only rounding noise would blow that noise up to unit size).
- :func:`minibatches`: a random permutation cut into batches of ``batch_size``; a trailing batch of a
  single sample is dropped (BatchNorm cannot normalise one sample in training mode). The order is
  redrawn every epoch, so a different sample sits out each time.

F1 lives in :mod:`lsnpc.metrics` (scikit-learn's ``f1_score``); this module is the torch side.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["CONSTANT_SCALE", "standardization", "minibatches"]

#: A feature whose standard deviation is below this is constant: its scale is set to 1.
CONSTANT_SCALE = 1e-8


def standardization(X: np.ndarray, axes: tuple[int, ...] = (0,)) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and scale of ``X``, both float64.

    Parameters
    ----------
    X : ndarray
        Feature vectors (n, d) with ``axes=(0,)``, or maps (n, C, H, W) with ``axes=(0, 2, 3)`` for
        per-channel statistics.
    axes : tuple of int
        The axes averaged over.

    Returns
    -------
    mean, scale : ndarray of the shape of ``X`` without ``axes`` ((d,) or (C,))
        ``(X - mean) / scale`` has mean 0 and standard deviation 1 in every non-constant feature;
        ``scale`` is 1 where the standard deviation is below :data:`CONSTANT_SCALE`.
    """
    mean = X.mean(axis=axes, dtype=np.float64)
    scale = X.std(axis=axes, dtype=np.float64)
    scale[scale < CONSTANT_SCALE] = 1.0
    return mean, scale


def minibatches(
    n: int, batch_size: int, generator: torch.Generator | None = None, *, device: torch.device | None = None
) -> list[torch.Tensor]:
    """Index tensors of the shuffled mini-batches of one epoch over ``n`` samples.

    ``generator`` draws the permutation (None: torch's global generator, e.g. inside
    :func:`lsnpc._torch.seeded`). Every batch holds ``batch_size`` indices except the last, which
    holds the rest; a last batch of a single index is dropped when there is another batch. ``device``:
    where the index tensors live (default the CPU); the permutation is drawn on the CPU either way and
    moved in one copy, so no training step on a GPU waits for one.
    """
    batches = list(torch.randperm(n, generator=generator).split(batch_size))
    if len(batches) > 1 and len(batches[-1]) < 2:
        batches.pop()
    if device is None or device.type == "cpu":
        return batches
    return list(torch.cat(batches).to(device).split([len(b) for b in batches]))
