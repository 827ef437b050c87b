"""Shared fixtures: where the real data lives, and small reproducible toy problems."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """``../shared/data`` beside the checkout (or ``$LSNPC_SHARED_DATA``), if it exists."""
    env = os.environ.get("LSNPC_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for path in candidates:
        if path.is_dir():
            return path
    return None


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tests train many tiny networks, for which one intra-op thread is fastest (and, on a busy
    2-core machine, several times faster than two spinning OpenMP workers)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to the shared real data; the test is skipped (with the reason) when it is absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip(
            "real data not found: expected ../shared/data beside the checkout "
            "(or set LSNPC_SHARED_DATA)"
        )
    return path


def make_toy_multilabel(
    n: int = 600, d: int = 12, n_labels: int = 5, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A learnable multilabel problem: labels are thresholded linear functions of X.

    Returns X (n, d) float32 and Y (n, n_labels) int64 with every label present.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    W = rng.normal(size=(d, n_labels))
    logits = X @ W + rng.normal(scale=0.3, size=(n, n_labels))
    thresholds = np.quantile(logits, 0.7, axis=0)
    Y = (logits > thresholds).astype(np.int64)
    return X, Y


def make_noisy_problem(n: int, noise_sd: float, *, seed: int = 3) -> dict[str, np.ndarray]:
    """A toy problem (:func:`make_toy_multilabel`, 8 features, 4 labels) with base probabilities P that
    are noisy versions of the truth: clip(0.6 · Y + 0.2 + N(0, noise_sd²)). Keys X, Y, P (float32)."""
    X, Y = make_toy_multilabel(n, 8, 4, seed=seed)
    rng = np.random.default_rng(seed)
    P = np.clip(0.6 * Y + 0.2 + rng.normal(0, noise_sd, Y.shape), 0, 1).astype(np.float32)
    return {"X": X, "Y": Y, "P": P}


@pytest.fixture
def toy_multilabel() -> tuple[np.ndarray, np.ndarray]:
    return make_toy_multilabel()
