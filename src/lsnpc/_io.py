"""Atomic file writes: a file is either fully written or absent, never half-written.

Directories are written the same way (:func:`atomic_directory`), and they never replace, or delete,
anything the program did not write: a folder is replaced only when it holds nothing but the files
the caller names as its own. What a killed writer leaves behind is recognisable (a name pattern and
a marker file naming the writing process) and is removed by the next writer once that process is
gone. Writers of one directory that race (two processes saving to one path) take turns for the
final swap, so a folder that appeared meanwhile is replaced only when replacing was allowed.

Every path may start with ``~`` (the user's home, :func:`user_path`), as a shell would expand it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "user_path",
    "atomic_path",
    "atomic_directory",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "process_token",
    "process_alive",
]

# Leftovers of a killed directory write: ".<name>.lsnpc-partial-XXXX" (the new content, with the
# marker file inside) and ".<name>.lsnpc-old-XXXX" (the previous content during the swap).
_PARTIAL = "lsnpc-partial"
_OLD = "lsnpc-old"
# ".<name>.lsnpc-lock": held (flock) by the writer swapping a folder in; removed by whoever holds it.
_LOCK = "lsnpc-lock"
PARTIAL_MARKER = ".lsnpc-partial"
# A partial folder whose marker is gone (the writer removes it just before the final rename) or names
# a process on another host is stale after this long; a save takes seconds.
_STALE_AFTER_S = 24 * 3600


def user_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path with a leading ``~`` or ``~user`` expanded, as a shell would (a folder literally
    named ``~`` is never what a user meant)."""
    return Path(os.fspath(path)).expanduser()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    The temporary file lives in the same directory (so the rename is atomic on POSIX) and is
    removed if the body raises. ``suffix`` keeps an extension some writers insist on
    (e.g. ``np.save`` appends ``.npy`` otherwise).
    """
    target = user_path(path)
    if target.is_dir():
        # os.replace would fail naming the temporary file: say what is wrong with the path the caller gave
        raise IsADirectoryError(f"{target} is a folder; a file cannot replace it: choose a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=suffix if suffix is not None else ".tmp"
        )
    except PermissionError as exc:
        raise PermissionError(f"cannot write {target}: no permission to create a file in {target.parent}") from exc
    except FileExistsError as exc:  # a file where a parent folder should be
        raise NotADirectoryError(f"cannot write {target}: {exc.filename} is a file, not a folder") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if tmp.exists():  # mkstemp creates 0600; give the file the permissions open() would
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _umask() -> int:
    """The process umask (read by setting and restoring it; there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; return the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    """Serialise ``obj`` as JSON to ``path`` atomically; return the path."""
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=True) + "\n")


def process_token() -> dict[str, Any]:
    """Who is writing: host, pid and (on Linux) the process start time, which tells a reused pid apart."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_time(os.getpid())}


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a Linux process from /proc; None where unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields 3 (state) and 22 (start time); the command name (field 2) may hold spaces, so split after it.
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def _start_time(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def process_alive(token: Any) -> bool | None:
    """Whether the process of a :func:`process_token` still runs: None when it is on another host
    (or the token is unreadable), so the caller falls back to the age of what it left."""
    if not isinstance(token, dict) or token.get("host") != socket.gethostname():
        return None
    pid = token.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        pass
    stat = _proc_stat(pid)
    if stat is not None and stat[0] in ("Z", "X"):
        # A zombie: killed or exited, not yet reaped. Where the init process does not reap orphans (as
        # in some containers) a killed runner's workers stay zombies for good; they hold nothing.
        return False
    start = token.get("start")
    return start is None or stat is None or stat[1] == start


def _is_stale(folder: Path, marker: Path) -> bool:
    try:
        token = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        token = None
    alive = process_alive(token)
    if alive is not None:
        return not alive
    try:
        return time.time() - folder.stat().st_mtime > _STALE_AFTER_S
    except OSError:
        return False


def _ours(name: str, owned: Collection[str]) -> bool:
    """A file the directory writer creates: an owned name, the marker, or an atomic write's temp file."""
    if name in owned or name == PARTIAL_MARKER:
        return True
    return name.endswith(".tmp") and any(name.startswith(f".{o}.") for o in (*owned, PARTIAL_MARKER))


def _remove_our_files(folder: Path, owned: Collection[str]) -> bool:
    """Delete the files of ``folder`` that :func:`_ours` recognises, then the folder if it is empty.

    Never recursive: anything else in it stays, and so does the folder. Returns whether it is gone.
    """
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if _ours(entry.name, owned) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


def remove_stale_partials(path: str | os.PathLike[str], owned: Collection[str]) -> list[Path]:
    """Remove what killed :func:`atomic_directory` writes of ``path`` left beside it; return those removed.

    A partial folder is removed only once its writer is gone (its marker names a process that no
    longer runs, or it is older than a day); the previous content of a swap only once ``path``
    exists again. Only the writer's own files are deleted, never anything else.
    """
    target = Path(os.path.abspath(user_path(path)))
    removed = []
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            name = entry.name
            if not name.startswith(f".{target.name}.") or entry.is_symlink() or not entry.is_dir():
                continue
            kind = name[len(target.name) + 2 :].rsplit("-", 1)[0]
            if kind == _PARTIAL:
                stale = _is_stale(entry, entry / PARTIAL_MARKER)
            elif kind == _OLD:
                stale = target.is_dir()
            else:
                continue
            if stale and _remove_our_files(entry, owned):
                removed.append(entry)
    return removed


def check_replaceable(path: str | os.PathLike[str], owned: Collection[str]) -> Path | None:
    """Raise FileExistsError saying why a directory write may not replace ``path``; else return the
    directory there (None when ``path`` is absent).

    It may when it is absent, an empty directory, or a directory holding only ``owned`` files; never
    the current folder or a parent of it, a link or a file.
    """
    target = user_path(path)
    cwd = Path.cwd().resolve()
    resolved = target.resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise FileExistsError(f"{str(path)!r} is the current folder or one of its parents; "
                              "give the name of a new folder inside it")
    if target.is_symlink():
        raise FileExistsError(f"{str(path)!r} is a symbolic link; give the path of a folder")
    if not target.exists():
        return None
    if not target.is_dir():
        raise FileExistsError(f"{str(path)!r} exists and is not a folder")
    foreign = sorted(p.name for p in target.iterdir() if p.name not in owned or not p.is_file() or p.is_symlink())
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise FileExistsError(f"{str(path)!r} holds files this program did not write ({shown}); "
                              "it is never replaced: choose another path")
    return target


@contextlib.contextmanager
def atomic_directory(
    path: str | os.PathLike[str], *, owned: Collection[str], replace: bool = False
) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success it becomes ``path``.

    ``owned``: the names of the files the body writes. An existing ``path`` is replaced only when it
    is an empty directory or holds nothing but ``owned`` files and ``replace`` is true (else
    FileExistsError before the body runs; :func:`check_replaceable` says why); the previous files are
    then deleted one by one after the swap (never a recursive delete). The current folder and its
    parents are never replaced. If the body raises, the temporary directory is deleted and ``path``
    is left as it was; if the process is killed, the next write of ``path`` removes its leftovers
    (:func:`remove_stale_partials`). Files and the directory get the permissions ``open`` and
    ``mkdir`` would give them.

    Concurrent writers of one ``path`` (threads or processes, on one machine) swap their folder in one
    at a time, and each checks ``path`` again when its turn comes: without ``replace``, of writers
    racing to create a new ``path`` exactly one succeeds and the others raise FileExistsError, leaving
    the winner's folder as it is; with ``replace`` each succeeds in turn and the last one's folder
    stays, whole. ``path`` may start with ``~``.
    """
    owned = frozenset(owned)
    target = Path(os.path.abspath(user_path(path)))
    existing = check_replaceable(path, owned)
    if existing is not None and any(existing.iterdir()) and not replace:
        raise FileExistsError(f"{str(path)!r} already exists; pass replace=True to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(target, owned)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{_PARTIAL}-"))
    try:
        atomic_write_json(tmp / PARTIAL_MARKER, process_token())
        yield tmp
        (tmp / PARTIAL_MARKER).unlink()
        mask = _umask()
        for entry in tmp.iterdir():  # some writers (safetensors) create 0600 files
            os.chmod(entry, 0o666 & ~mask)
        os.chmod(tmp, 0o777 & ~mask)  # mkdtemp creates 0700
        with _swap_lock(target):
            _swap_in(tmp, target, owned, replace=replace, shown=str(path))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # made by this call, a moment ago
        raise


@contextlib.contextmanager
def _swap_lock(target: Path) -> Iterator[None]:
    """Hold the lock of ``target``'s swap: an exclusive ``flock`` on ``.<name>.lsnpc-lock`` beside it.

    The kernel releases it when its holder dies, so a killed writer never blocks the next. The holder
    deletes the lock file before releasing it; a writer that was waiting on a deleted file sees that
    its file is no longer the one at the lock's path and takes the lock again on the new one, so the
    file is gone once nobody holds it. Where ``fcntl`` does not exist (Windows) renaming onto an
    existing folder fails anyway, so the first writer wins without a lock.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock = target.parent / f".{target.name}.{_LOCK}"
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666 & ~_umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                current = os.stat(lock, follow_symlinks=False)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the previous holder deleted this file: lock the one at the path now
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)  # releases the lock


def _swap_in(tmp: Path, target: Path, owned: frozenset[str], *, replace: bool, shown: str) -> None:
    """Rename ``tmp`` onto ``target``, holding :func:`_swap_lock`. A ``target`` that exists now (another
    writer may have made it since the first check) is checked again: it is replaced only with
    ``replace`` (or when it is an empty folder) and when nothing foreign is in it. It then moves aside
    first and its files are deleted after."""
    if not target.exists() and not target.is_symlink():
        _rename_new(tmp, target, shown)
        return
    existing = check_replaceable(target, owned)
    if existing is not None and any(existing.iterdir()) and not replace:
        raise FileExistsError(f"{shown!r} was written by another process while this one was writing; it was "
                              "left as it is (pass replace=True to replace it)")
    old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{_OLD}-"))
    try:
        os.rename(target, old)  # onto the empty directory just made: atomic, and fails if it is not empty
    except BaseException:
        old.rmdir()  # made a moment ago, still empty
        raise
    try:
        _rename_new(tmp, target, shown)
    except BaseException:
        os.rename(old, target)  # the previous content goes back where it was
        raise
    _remove_our_files(old, owned)


def _rename_new(tmp: Path, target: Path, shown: str) -> None:
    """``os.rename(tmp, target)`` where ``target`` should not exist; one that a program other than this
    module put there meanwhile (a folder with files, a file) is a FileExistsError, not a raw OSError."""
    try:
        os.rename(tmp, target)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise FileExistsError(f"{shown!r} was created by another program while this one was writing; it "
                                  "was left as it is") from None
        raise
