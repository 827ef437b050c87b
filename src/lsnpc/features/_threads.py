"""Scoped torch thread count: set for one forward pass, restored afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(num_threads: int | None) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(num_threads)``; ``None`` leaves it as it is.

    On a machine shared with other processes, fewer intra-op threads than cores can be several
    times faster (OpenMP workers spin while waiting for a busy core), so callers may choose.
    The previous value is restored, so nothing leaks into the caller's process.
    """
    if num_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
