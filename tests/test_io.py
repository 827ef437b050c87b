"""Atomic writes: complete or absent, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lsnpc._io import atomic_directory, atomic_write_json, atomic_write_text, process_token, remove_stale_partials


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_file_has_umask_permissions_and_no_leftovers(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_json(tmp_path / "a.json", {"x": 1})
        atomic_write_text(tmp_path / "a.json", "replaced")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").read_text() == "replaced"
    assert _mode(tmp_path / "a.json") == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "keep.txt", "old")
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "dir", owned=("part",)) as tmp:
            (tmp / "part").write_text("half")
            raise RuntimeError("interrupted")
    assert not (tmp_path / "dir").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_atomic_directory_replaces_and_gets_mkdir_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for text in ("first", "second"):
            with atomic_directory(tmp_path / "model", owned=("f",), replace=True) as tmp:
                (tmp / "f").write_text(text)
    finally:
        os.umask(old)
    assert (tmp_path / "model" / "f").read_text() == "second"
    assert _mode(tmp_path / "model") == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_atomic_directory_never_replaces_foreign_content(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_directory(target, owned=("f",)) as tmp:
        (tmp / "f").write_text("v1")
    with pytest.raises(FileExistsError, match="pass replace=True"):
        with atomic_directory(target, owned=("f",)) as tmp:
            raise AssertionError("the body must not run")
    (target / "user.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds files this program did not write \(user.txt\)"):
        with atomic_directory(target, owned=("f",), replace=True):
            raise AssertionError("the body must not run")
    assert sorted(p.name for p in target.iterdir()) == ["f", "user.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_only_leftovers_of_finished_writers_are_removed(tmp_path: Path) -> None:
    live = tmp_path / ".out.lsnpc-partial-live"
    live.mkdir()
    atomic_write_json(live / ".lsnpc-partial", process_token())  # this process: still writing
    dead = tmp_path / ".out.lsnpc-partial-dead"
    dead.mkdir()
    atomic_write_json(dead / ".lsnpc-partial", {**process_token(), "pid": 2**22 + 12345})
    (dead / "f").write_text("half")
    assert remove_stale_partials(tmp_path / "out", owned=("f",)) == [dead]
    assert live.is_dir() and not dead.exists()


def test_a_zombie_process_counts_as_gone() -> None:
    """A killed runner's workers that nobody reaps (init in some containers does not) hold no claim."""
    import subprocess
    import sys
    import time

    from lsnpc._io import process_alive, process_token

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        token = {**process_token(), "pid": child.pid}
        deadline = time.time() + 30
        while time.time() < deadline:  # exited, not yet waited for: a zombie
            state = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.05)
        else:
            pytest.fail("the child did not exit")
        token["start"] = None
        assert process_alive(token) is False
    finally:
        child.wait()
    assert process_alive({**process_token()}) is True
