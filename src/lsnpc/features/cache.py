"""Feature extraction with an on-disk cache.

Extracted features are stored as ``.npy`` files under
``<cache_dir>/<dataset name>/<split>/<encoder>__<output>__<weights id>__<preprocessing>__n<n>__<inputs>.npy``
where ``<inputs>`` is a short hash of the image paths or texts, so a data set whose content changed
at the same size does not hit a stale entry. Files are written in place of a temporary file and
renamed only when complete (a crash never leaves a half-written entry), filled batch by batch
through a memory map (so ResNet-50 spatial maps of a whole data set never need to fit in memory),
and loaded memory-mapped read-only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from lsnpc._io import atomic_path
from lsnpc._validation import check_in_choices, check_scalar
from lsnpc.features._paths import resolve_cache_dir

__all__ = ["Encoder", "extract_features", "feature_cache_path"]

_KINDS = ("features", "images", "texts")


class Encoder(Protocol):
    """What :func:`extract_features` needs from an encoder (ImageEncoder and TextEncoder fit)."""

    modality: str  # "images" or "texts"
    name: str
    weights_id: str
    output: str  # "pooled" or "spatial"

    def encode(self, items: Sequence[Any], *, batch_size: int, device: Any) -> np.ndarray: ...


def _safe(part: Any) -> str:
    """A file-name-safe rendering of one key component."""
    text = re.sub(r"[^A-Za-z0-9._=-]+", "_", str(part)).strip("._")
    return text or "none"


def _inputs_hash(items: Sequence[Any]) -> str:
    digest = hashlib.sha256()
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            digest.update(os.fsencode(item))
        elif hasattr(item, "tobytes"):  # a PIL image or an array
            digest.update(item.tobytes())
        else:
            raise ValueError(f"cannot key the cache on an input of type {type(item).__name__}")
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def feature_cache_path(
    dataset: Any,
    encoder: Encoder,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: Any = np.float32,
) -> Path:
    """The ``.npy`` file where ``dataset``'s features under ``encoder`` are (or would be) cached."""
    root = resolve_cache_dir(cache_dir, "features")
    items = dataset.X
    parts = [
        _safe(encoder.name),
        _safe(encoder.output),
        _safe(encoder.weights_id),
        _safe(getattr(encoder, "preprocess_id", "default")),
        f"n{len(items)}",
        _inputs_hash(items),
    ]
    if np.dtype(dtype) != np.float32:  # the default float32 carries no suffix
        parts.append(np.dtype(dtype).name)
    key = "__".join(parts)
    return root / _safe(dataset.name) / _safe(dataset.split) / f"{key}.npy"


def _batches(
    encoder: Encoder, items: Sequence[Any], batch_size: int, device: Any
) -> Iterator[np.ndarray]:
    if hasattr(encoder, "iter_encode"):
        yield from encoder.iter_encode(items, batch_size=batch_size, device=device)
        return
    for start in range(0, len(items), batch_size):
        yield encoder.encode(items[start : start + batch_size], batch_size=batch_size, device=device)


@contextlib.contextmanager
def _progress(enabled: bool, label: str, total: int) -> Iterator[Callable[[int], None]]:
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(TextColumn("{task.description}"), *columns, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _fill(
    batches: Iterator[np.ndarray], n: int, advance: Callable[[int], None], allocate: Callable
) -> np.ndarray:
    """Copy the batches into an (n, ...) array made by ``allocate(shape)`` after the first batch."""
    out = None
    filled = 0
    for part in batches:
        if out is None:
            out = allocate((n, *part.shape[1:]))
        out[filled : filled + len(part)] = part
        filled += len(part)
        advance(len(part))
    if out is None or filled != n:
        raise RuntimeError(f"the encoder returned {filled} rows for {n} inputs")
    return out


def extract_features(
    dataset: Any,
    encoder: Encoder | None,
    *,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    cache_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    progress: bool = True,
    dtype: Any = np.float32,
) -> np.ndarray:
    """Encode a data set's images or texts with a frozen encoder, caching the result on disk.

    Parameters
    ----------
    dataset : MultilabelDataset-like
        Needs ``.X`` (list of image paths, list of texts, or an (n, d) array), ``.kind``
        (``"images"``, ``"texts"`` or ``"features"``), ``.name`` and ``.split``.
    encoder : ImageEncoder, TextEncoder or None
        Any object with ``modality``, ``name``, ``weights_id``, ``output`` and ``encode``.
        Ignored (may be None) for a data set of kind ``"features"``.
    batch_size : int
        Inputs per forward pass.
    device : str or torch.device
        Where the encoder runs.
    cache_dir : path or None
        Feature cache root; default ``$LSNPC_CACHE/features`` or the user cache dir's
        ``features``.
    cache : bool
        Read and write the cache. With False the features are computed in memory.
    progress : bool
        Show a Rich progress bar while encoding.
    dtype : numpy float dtype
        Storage type of the result; ``np.float16`` halves the disk taken by spatial maps
        (ResNet-50's 2048 × 7 × 7 maps of COCO's 82k training images are 33 GB in float32).

    Returns
    -------
    ndarray of ``dtype`` (float32 by default), shape (n, dim) for pooled outputs or
    (n, C, H, W) for spatial maps.
    A cached result is a read-only ``np.memmap``. A ``"features"`` data set's ``X`` is
    returned as it is.
    """
    kind = check_in_choices(getattr(dataset, "kind", None), "dataset.kind", _KINDS)
    if kind == "features":
        return np.asarray(dataset.X)
    if encoder is None:
        raise ValueError(f"encoder is required for a data set of kind {kind!r}")
    modality = getattr(encoder, "modality", kind)
    if modality != kind:
        raise ValueError(
            f"encoder {encoder!r} encodes {modality}, but data set {dataset.name!r} holds {kind}"
        )
    check_scalar(batch_size, "batch_size", kind=Integral, low=1)
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype must be a floating-point type, got {dtype}")
    items = dataset.X
    n = len(items)
    if n == 0:
        raise ValueError(f"data set {dataset.name!r} ({dataset.split}) has no samples to encode")
    label = f"{encoder.name}: {dataset.name}/{dataset.split}"

    if not cache:
        with _progress(progress, label, n) as advance:
            batches = _batches(encoder, items, batch_size, device)
            return _fill(batches, n, advance, lambda shape: np.empty(shape, dtype=dtype))

    path = feature_cache_path(dataset, encoder, cache_dir=cache_dir, dtype=dtype)
    if path.is_file():
        try:
            hit = np.load(path, mmap_mode="r")
        except (ValueError, OSError):  # unreadable entry: rebuild it below
            hit = None
        if hit is not None and hit.shape[:1] == (n,) and hit.dtype == dtype:
            return hit
    with atomic_path(path, suffix=".npy") as tmp, _progress(progress, label, n) as advance:
        batches = _batches(encoder, items, batch_size, device)

        def allocate(shape: tuple[int, ...]) -> np.ndarray:
            return np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)

        written = _fill(batches, n, advance, allocate)
        written.flush()
        del written  # close the map before the file is renamed
    return np.load(path, mmap_mode="r")
