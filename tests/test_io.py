"""Atomic writes: complete or absent, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lsnpc._io import atomic_directory, atomic_write_json, atomic_write_text


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
        with atomic_directory(tmp_path / "dir") as tmp:
            (tmp / "part").write_text("half")
            raise RuntimeError("interrupted")
    assert not (tmp_path / "dir").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_atomic_directory_replaces_and_gets_mkdir_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for text in ("first", "second"):
            with atomic_directory(tmp_path / "model") as tmp:
                (tmp / "f").write_text(text)
    finally:
        os.umask(old)
    assert (tmp_path / "model" / "f").read_text() == "second"
    assert _mode(tmp_path / "model") == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
