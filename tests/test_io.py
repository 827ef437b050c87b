"""Atomic writes: complete or absent, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

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


# ----------------------------------------------------------------------------- racing writers


def _race_writer(worker: int, barrier: Any, targets: list[str], replace: bool, results: Any) -> None:
    """One racing process: at each round, writes its own folder to the round's target at the same moment
    as the others (they all wait at ``barrier``) and reports what happened."""
    import time

    from lsnpc._io import atomic_directory

    for target in targets:
        barrier.wait(timeout=120)
        try:
            with atomic_directory(target, owned=("who", "payload"), replace=replace) as tmp:
                (tmp / "payload").write_bytes(bytes([worker]) * 50_000)
                (tmp / "who").write_text(str(worker))
                time.sleep(0.02)  # every writer is past the first check before any swaps in
            results.put((target, worker, "saved"))
        except FileExistsError:
            results.put((target, worker, "refused"))
        except BaseException as exc:  # noqa: BLE001  (reported to the test, which fails on it)
            results.put((target, worker, f"{type(exc).__name__}: {exc}"))


def _race(tmp_path: Path, targets: list[Path], *, replace: bool, writers: int = 3) -> dict[str, dict[int, str]]:
    """Run ``writers`` processes racing on each target in turn; {target: {worker: outcome}}."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # a fresh interpreter each, like separate programs
    barrier, results = context.Barrier(writers), context.Queue()
    names = [str(t) for t in targets]
    procs = [context.Process(target=_race_writer, args=(w, barrier, names, replace, results)) for w in range(writers)]
    for proc in procs:
        proc.start()
    outcomes: dict[str, dict[int, str]] = {name: {} for name in names}
    for _ in range(writers * len(names)):
        target, worker, outcome = results.get(timeout=300)
        outcomes[target][worker] = outcome
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return outcomes


def _folder_of(target: Path) -> int:
    """The writer whose whole folder ``target`` holds (its two files agree, nothing else is there)."""
    assert sorted(p.name for p in target.iterdir()) == ["payload", "who"]
    who = int((target / "who").read_text())
    assert (target / "payload").read_bytes() == bytes([who]) * 50_000
    return who


def test_writers_racing_to_a_new_folder_never_both_succeed(tmp_path: Path) -> None:
    """Of processes saving to one new path at the same moment without ``replace``, exactly one succeeds, the
    others get FileExistsError, and the folder holds the winner's files whole; nothing is left beside it."""
    targets = [tmp_path / f"model{r}" for r in range(8)]
    for target, outcomes in _race(tmp_path, targets, replace=False).items():
        winners = [w for w, outcome in outcomes.items() if outcome == "saved"]
        assert len(winners) == 1, outcomes
        assert all(outcome == "refused" for w, outcome in outcomes.items() if w != winners[0]), outcomes
        assert _folder_of(Path(target)) == winners[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(t.name for t in targets)


def test_writers_racing_to_replace_all_succeed_and_leave_nothing_behind(tmp_path: Path) -> None:
    """With ``replace``, racing writers each succeed in turn (no raw 'Directory not empty'), on a new path
    and on one that held a folder before; the last folder stays whole and no hidden folder is left."""
    targets = [tmp_path / f"model{r}" for r in range(8)]
    for target in targets[::2]:
        with atomic_directory(target, owned=("who", "payload")) as tmp:
            (tmp / "payload").write_bytes(bytes([9]) * 50_000)
            (tmp / "who").write_text("9")
    for target, outcomes in _race(tmp_path, targets, replace=True).items():
        assert set(outcomes.values()) == {"saved"}, outcomes
        assert _folder_of(Path(target)) in outcomes
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(t.name for t in targets)


def test_a_folder_that_appears_during_the_write_is_not_replaced(tmp_path: Path) -> None:
    """A folder someone else puts at the path while the body runs is refused at the swap, not replaced,
    without ``replace``; one with a file that is not the writer's is never replaced, even with it."""
    target = tmp_path / "model"
    with pytest.raises(FileExistsError, match="while this one was writing"):
        with atomic_directory(target, owned=("f",)) as tmp:
            (tmp / "f").write_text("mine")
            with atomic_directory(target, owned=("f",)) as other:  # another writer, finishing first
                (other / "f").write_text("first")
    assert (target / "f").read_text() == "first"
    with pytest.raises(FileExistsError, match="did not write"):
        with atomic_directory(target, owned=("f",), replace=True) as tmp:
            (tmp / "f").write_text("mine")
            (target / "notes.txt").write_text("a user's file, added meanwhile")
    assert (target / "f").read_text() == "first" and (target / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_paths_starting_with_a_tilde_mean_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/x`` is the home folder's x, as a shell would read it, never a folder literally named ``~``."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    with atomic_directory("~/model", owned=("f",)) as tmp:
        (tmp / "f").write_text("v1")
    with pytest.raises(FileExistsError, match="pass replace=True"):
        with atomic_directory("~/model", owned=("f",)):
            raise AssertionError("the body must not run")
    atomic_write_text("~/notes.txt", "hello")
    assert (home / "model" / "f").read_text() == "v1" and (home / "notes.txt").read_text() == "hello"
    assert list(work.iterdir()) == []
