"""Small torch helpers shared by every module that trains a network.

No global state is changed: seeding happens inside :func:`seeded`, which forks torch's RNG so the
caller's random stream is untouched. The one exception is forced by the operating system: a process
forked after its parent ran torch on several CPU threads cannot use those threads (torch's OpenMP pool
does not survive a fork, and its first parallel operation would wait forever), so such a child is set
to one thread when it starts (:func:`num_threads`; the README, "Speed and threads").
"""

from __future__ import annotations

import contextlib
import os
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


class _Threads:
    """What a fork must know about this process's torch CPU threads (process state, as the threads are)."""

    started = False  # torch ran here, through num_threads, on more than one thread: its pool exists
    forked = False  # this process was forked after its parent's pool existed: its threads cannot run here


def _one_thread_after_fork() -> None:
    """In a child forked after torch's thread pool started: one thread, which needs no pool (never hangs)."""
    if _Threads.started:
        _Threads.forked = True
        torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_one_thread_after_fork)


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(n)`` (None: leave as is), restoring it after.

    In a process forked after its parent ran torch on several threads, ``n`` above 1 runs on one thread,
    with a warning: more would hang (the README, "Speed and threads").
    """
    if n is None:
        _Threads.started = _Threads.started or torch.get_num_threads() > 1
        yield
        return
    n = int(n)
    if n > 1 and _Threads.forked:
        warnings.warn(f"n_threads={n} in a process forked after its parent ran torch on several threads: torch's "
                      "threads cannot run in it (they would hang), so this runs on 1 thread; start worker "
                      "processes with multiprocessing's 'spawn' or 'forkserver' method to use more",
                      RuntimeWarning, stacklevel=3)
        n = 1
    _Threads.started = _Threads.started or n > 1
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
