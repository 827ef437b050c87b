"""The one function that fetches a file from the network: streamed, checksummed, atomic.

A download is written to a temporary file beside its destination and renamed into place only after
its SHA-256 matches, so an interrupted or corrupted download never leaves a file that a later run
would mistake for a good one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from lsnpc._io import atomic_path

__all__ = ["ChecksumError", "download_file", "sha256_file"]

_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A downloaded (or cached) file's SHA-256 is not the expected one."""


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_sha256(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    value = sha256.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"sha256 must be 64 hexadecimal characters, got {sha256!r}")
    return value


def download_file(
    url: str,
    path: str | os.PathLike[str],
    *,
    sha256: str | None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``path`` and check its SHA-256; return ``path``.

    If ``path`` already exists with the expected checksum nothing is fetched. A file there with
    another checksum is replaced by a fresh download.

    Parameters
    ----------
    url : str
        ``http(s)://`` or ``file://`` address.
    path : path-like
        Destination file; its folder is created.
    sha256 : str or None
        Expected hex digest (64 characters). ``None`` accepts any content, with a warning: use it
        only for sources whose digest is not published.
    progress : bool
        Show a Rich progress bar (bytes, speed, time left).
    timeout : float
        Seconds to wait for the server before giving up.

    Raises
    ------
    ChecksumError
        The downloaded bytes do not match ``sha256``; nothing is left at ``path``.
    ConnectionError
        The server could not be reached or answered with an error.
    """
    expected = _check_sha256(sha256)
    target = Path(path)
    if target.is_file():
        if expected is None or sha256_file(target) == expected:
            return target
        # A stale or damaged file: fetch again rather than trust it.
    if expected is None:
        warnings.warn(
            f"downloading {url} without a known SHA-256: its content cannot be verified",
            stacklevel=2,
        )
    try:
        response = urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 - user-chosen URL
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(
            f"could not download {url}: {exc}. If this machine is offline, fetch the file "
            f"elsewhere and pass its local path instead."
        ) from exc
    with response, atomic_path(target, suffix=".part") as tmp:
        digest = hashlib.sha256()
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        with open(tmp, "wb") as out, _progress_bar(progress, target.name, total) as advance:
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                out.write(chunk)
                digest.update(chunk)
                advance(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if expected is not None and got != expected:
            raise ChecksumError(
                f"checksum mismatch for {url}: expected sha256 {expected}, got {got}; "
                f"the download was discarded"
            )
    return target


@contextlib.contextmanager
def _progress_bar(enabled: bool, label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n_bytes)``; a no-op when ``enabled`` is False."""
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(TextColumn("{task.description}"), *columns, transient=True) as bar:
        task = bar.add_task(f"download {label}", total=total)
        yield lambda n: bar.advance(task, n)
