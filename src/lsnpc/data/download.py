"""Downloads: one function fetches a file (urllib), shows a Rich progress bar, and checks its
sha256 before the file appears under its final name.

The bytes go to a temporary file beside the destination; only when the size and checksum match
is it renamed into place. A mismatch deletes the temporary file and raises
:class:`ChecksumMismatchError`, so a failed download never leaves a file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from lsnpc._io import atomic_path
from lsnpc.data.home import get_data_home
from lsnpc.data.registry import DatasetInfo, RemoteFile, get_dataset_info

__all__ = [
    "download_file",
    "download_dataset",
    "sha256_of",
    "ChecksumMismatchError",
    "DownloadError",
    "UnverifiedDownloadWarning",
]

_CHUNK = 1 << 16


class ChecksumMismatchError(OSError):
    """The downloaded bytes do not have the expected size or sha256 (nothing was kept)."""


class DownloadError(OSError):
    """A download failed (offline, HTTP error); the message says how to install the files by hand."""


class UnverifiedDownloadWarning(UserWarning):
    """A file was downloaded without a known checksum to verify it against."""


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(
    url: str,
    dest: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    size: int | None = None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest``, verified.

    Parameters
    ----------
    url : str
        Source URL (anything urllib opens: https, http, file).
    dest : path-like
        Final file path; its folder is created.
    sha256 : str, optional
        Expected hex sha256. When None the file is kept unverified and an
        :class:`UnverifiedDownloadWarning` gives the sum of what arrived.
    size : int, optional
        Expected size in bytes.
    progress : bool
        Show a Rich progress bar.
    timeout : float
        Socket timeout in seconds.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ChecksumMismatchError
        Size or sha256 differ; the partial file is deleted and ``dest`` is untouched.
    urllib.error.URLError, OSError
        The transfer failed (nothing is left behind).
    """
    from rich.progress import (  # imported here: importing lsnpc.data stays fast
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    dest = Path(dest)
    digest = hashlib.sha256()
    n_bytes = 0
    # Connect before creating anything, so that being offline leaves no folder behind.
    with urllib.request.urlopen(url, timeout=timeout) as response, atomic_path(dest) as tmp:
        with open(tmp, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else size
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                disable=not progress,
            ) as bar:
                task = bar.add_task(dest.name, total=total)
                for chunk in iter(lambda: response.read(_CHUNK), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    n_bytes += len(chunk)
                    bar.update(task, advance=len(chunk))
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if size is not None and n_bytes != size:
            raise ChecksumMismatchError(
                f"{url}: expected {size} bytes, got {n_bytes}; the download was discarded"
            )
        if sha256 is not None and got != sha256.lower():
            raise ChecksumMismatchError(
                f"{url}: sha256 mismatch (expected {sha256}, got {got}); the download was discarded"
            )
    if sha256 is None:
        warnings.warn(
            f"no checksum known for {url}: {dest.name} was not verified (its sha256 is {got})",
            UnverifiedDownloadWarning,
            stacklevel=2,
        )
    return dest


def _is_present(path: Path, remote: RemoteFile) -> bool:
    if not path.is_file():
        return False
    if remote.size is not None and path.stat().st_size != remote.size:
        return False
    return remote.sha256 is None or sha256_of(path) == remote.sha256.lower()


def _manual_instructions(info: DatasetInfo, target: Path) -> str:
    lines = [f"To install {info.name!r} by hand, put these files in {target}:"]
    for f in info.files:
        check = f"  (sha256 {f.sha256})" if f.sha256 else ""
        lines.append(f"  {f.path}  from  {f.url}{check}")
    return "\n".join(lines)


def download_dataset(
    name: str,
    *,
    data_home: str | os.PathLike[str] | None = None,
    force: bool = False,
    mirror: str | None = None,
    progress: bool = True,
) -> Path:
    """Download a registered data set's files into the data home.

    Files already present with the right checksum are kept unless ``force``.

    Parameters
    ----------
    name : str
        Registry name (see :func:`~lsnpc.data.list_datasets`; ``downloadable`` must be True).
    data_home : path-like, optional
        Where to put it (default: ``$LSNPC_DATA``, else the user cache folder); the files go to
        ``<data_home>/<name>/``.
    force : bool
        Download again even if the files are present and verified.
    mirror : str, optional
        Base URL of a mirror laid out like a data home: file ``f`` of data set ``name`` is fetched
        from ``<mirror>/<name>/<f>`` instead of its source URL. Checksums still apply.
    progress : bool
        Show Rich progress bars.

    Returns
    -------
    Path
        The data set's folder.

    Raises
    ------
    ValueError
        Unknown name, or a data set that cannot be downloaded (the message says where to get it).
    DownloadError
        The transfer failed (e.g. offline); the message lists which files to put where by hand.
    ChecksumMismatchError
        A file arrived corrupted (it is not kept).
    """
    info = get_dataset_info(name)
    home = get_data_home(data_home)
    target = home / info.folders[0] if info.folders else home / info.name
    if not info.downloadable:
        raise ValueError(
            f"data set {name!r} cannot be downloaded by lsnpc. {info.note} "
            f"(source: {info.source}; data home: {home})"
        )
    for remote in info.files:
        dest = target / remote.path
        if not force and _is_present(dest, remote):
            continue
        url = remote.url
        if mirror is not None:
            url = f"{mirror.rstrip('/')}/{info.folders[0]}/{urllib.request.pathname2url(remote.path).lstrip('/')}"
        missing = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
        try:
            download_file(url, dest, sha256=remote.sha256, size=remote.size, progress=progress)
        except BaseException as exc:
            for folder in missing:  # the folders this download made, if it left them empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if isinstance(exc, ChecksumMismatchError) or not isinstance(exc, (urllib.error.URLError, OSError)):
                raise
            reason = getattr(exc, "reason", exc)
            raise DownloadError(
                f"could not download {name!r} from {url} (offline? {reason})\n{_manual_instructions(info, target)}"
            ) from exc
    return target
