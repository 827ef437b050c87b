"""Small torch helpers shared by every module that trains a network.

No global state is changed: seeding happens inside :func:`seeded`, which forks torch's RNG so the
caller's random stream is untouched.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import numpy as np
import torch

__all__ = ["as_tensor", "resolve_device", "seeded", "torch_seed_from", "to_tensor", "num_threads"]


def resolve_device(device: str | torch.device | None, name: str = "device") -> torch.device:
    """Turn ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"auto"`` or a torch.device into a device.

    ``"auto"`` picks CUDA when available, else CPU. Asking for CUDA without one is an error.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={device!r} was requested but CUDA is not available on this machine")
    return dev


def torch_seed_from(rng: np.random.Generator) -> int:
    """Draw a 63-bit torch seed from a numpy Generator (so one seed drives both libraries)."""
    return int(rng.integers(0, 2**63 - 1))


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | None = None) -> Iterator[None]:
    """Run the body with torch's global RNG seeded to ``seed``, restoring the caller's RNG after.

    Used around module construction (parameter init draws from the global RNG) and training.
    """
    devices = [device] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def as_tensor(data: object, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """``torch.as_tensor`` for a caller's arrays, without torch's warning about read-only ones.

    A NumPy array that is not writable (a memory-mapped file opened read-only, a broadcast view) makes
    torch warn that writing to the tensor would be undefined behaviour. lsnpc only reads the tensors it
    makes from a caller's arrays (tested: fits and predictions on read-only inputs leave them as they
    were and raise no warning), so the array is shared as it is, without a copy, and the warning is
    silenced for this conversion alone.
    """
    if isinstance(data, np.ndarray) and not data.flags.writeable:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
            return torch.as_tensor(data, dtype=dtype, device=device)
    return torch.as_tensor(data, dtype=dtype, device=device)


def to_tensor(array: np.ndarray, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A tensor view of ``array`` on ``device`` (no copy on CPU when dtypes agree; see :func:`as_tensor`)."""
    return as_tensor(array, dtype=dtype, device=device)


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(n)`` (None: leave as is), restoring it after."""
    if n is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(previous)
