"""The results store: one JSON file per finished run, written atomically; claims on groups in progress.

Layout::

    RESULTS/
      runs/<run_id>.json     one finished run: every config field, every metric, timings,
                             ``selection`` (which labels chose the checkpoint), library version,
                             and the training history when the post-processor records one
      claims/<group>.json    a group some runner is working on now (who: host, pid, since when)

Why one file per run rather than one JSONL file: a run's file appears by a rename of a complete
temporary file (:func:`lsnpc._io.atomic_write_json`), so a reader or a killed runner can never see
or leave a half-written row; many worker processes (or Ray workers on a shared file system) write
without any lock or coordination; "is this run finished?" is a check that its file exists and holds
a complete run (a file truncated or emptied by other means counts as unfinished and is redone), which
is what makes resuming a grid trivial. An interrupted write leaves at most a hidden ``.<name>.*.tmp``
file, which readers ignore and :meth:`ResultsStore.remove_partial` deletes (while another runner is
at work on the store, only once it is old enough that no live writer can still own it).

Claims keep two runners on one results folder from running the same group twice: a runner takes a
group by creating its claim file exclusively (``O_CREAT | O_EXCL``), and drops it when the group is
done. A claim whose process is gone (same host) or that is older than a day (another host) is stale
and is taken over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsnpc._io import atomic_write_json, process_alive, process_token

__all__ = ["ResultsStore", "load_results"]

# A temporary file of a run write is a few milliseconds old while its writer lives; one older than
# this was left by a killed writer.
_PARTIAL_STALE_S = 600.0
# A claim from another host cannot be checked for a live process; a group takes minutes to hours.
_CLAIM_STALE_S = 24 * 3600.0


def _json_safe(value: Any) -> Any:
    """Turn numpy scalars/arrays and non-finite floats into plain JSON values."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalar or array
        return _json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class ResultsStore:
    """A directory of finished runs.

    Parameters
    ----------
    root : str or Path
        The results directory (created on first write).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def path_for(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.json"

    def _read_run(self, path: Path) -> dict[str, Any] | None:
        """The run in ``path``, or None when it is not a complete run file (truncated, empty, foreign)."""
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        return row if isinstance(row, dict) and row.get("run_id") == path.stem else None

    def _run_files(self) -> list[Path]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.glob("*.json") if not p.name.startswith("."))

    def has(self, run_id: str) -> bool:
        """True when the run has finished (its file holds the complete run)."""
        return self._read_run(self.path_for(run_id)) is not None

    def finished_ids(self) -> set[str]:
        return {p.stem for p in self._run_files() if self._read_run(p) is not None}

    def unreadable_files(self) -> list[Path]:
        """Run files that do not hold a complete run (they count as unfinished and are redone)."""
        return [p for p in self._run_files() if self._read_run(p) is None]

    def write(self, row: dict[str, Any]) -> Path:
        """Write one finished run atomically; ``row["run_id"]`` names the file."""
        if "run_id" not in row:
            raise ValueError("row must have a 'run_id'")
        return atomic_write_json(self.path_for(row["run_id"]), _json_safe(row))

    def partial_files(self, *, min_age_s: float = 0.0) -> list[Path]:
        """Temporary files of interrupted writes, at least ``min_age_s`` old."""
        if not self.runs_dir.is_dir():
            return []
        now = time.time()
        out = []
        for p in self.runs_dir.iterdir():
            with contextlib.suppress(OSError):
                if p.name.startswith(".") and now - p.stat().st_mtime >= min_age_s:
                    out.append(p)
        return sorted(out)

    def remove_partial(self) -> int:
        """Delete leftovers of interrupted writes; return how many. While another runner holds a claim on
        this store, only those old enough that no live writer can own them."""
        files = self.partial_files(min_age_s=_PARTIAL_STALE_S if self.live_claims() else 0.0)
        for p in files:
            p.unlink(missing_ok=True)
        return len(files)

    def rows(self) -> list[dict[str, Any]]:
        """Every finished run, as dicts, in a stable order (by run id); unreadable files are left out."""
        return [row for p in self._run_files() if (row := self._read_run(p)) is not None]

    # ------------------------------------------------------------------ claims
    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    def _claim_path(self, key: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", key).strip("_")[:80]
        return self.claims_dir / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:10]}.json"

    def claim(self, key: str) -> bool:
        """Take group ``key`` for this process; False when another live runner holds it."""
        path = self._claim_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):  # a stale claim is removed once, then taken
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._remove_if_stale(path):
                    return False
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, **process_token(), "since": time.time()}, fh)
            return True
        return False

    def _remove_if_stale(self, path: Path) -> bool:
        """Remove a stale claim; whether the claim is gone. Under a lock, so that two runners taking over
        the same stale claim cannot remove each other's fresh one (creating it stays O_EXCL)."""
        import fcntl

        with open(self.claims_dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self._claim_is_stale(path):
                return False
            path.unlink(missing_ok=True)
            return True

    def _claim_is_stale(self, path: Path) -> bool:
        try:
            token = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return True
        except (OSError, ValueError):  # being written this instant, or damaged: judge by its age
            token = None
        alive = process_alive(token)
        if alive is not None:
            return not alive
        with contextlib.suppress(OSError):
            return time.time() - path.stat().st_mtime > _CLAIM_STALE_S
        return True

    def live_claims(self) -> list[Path]:
        """Claim files of runners that are still working on this store."""
        if not self.claims_dir.is_dir():
            return []
        return [p for p in sorted(self.claims_dir.glob("*.json")) if not self._claim_is_stale(p)]

    def release(self, key: str) -> None:
        """Drop this process's claim on ``key`` (another process's claim is left alone)."""
        path = self._claim_path(key)
        with contextlib.suppress(OSError, ValueError):
            token = json.loads(path.read_text(encoding="utf-8"))
            if token.get("pid") == os.getpid() and token.get("host") == process_token()["host"]:
                path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def claimed(self, key: str) -> Iterator[bool]:
        """Hold the claim on ``key`` for the body, if it can be had; yields whether it was."""
        got = self.claim(key)
        try:
            yield got
        finally:
            if got:
                self.release(key)

    def to_frame(self, *, with_history: bool = False) -> "Any":
        """A pandas DataFrame with one row per finished run (history dropped unless asked)."""
        import pandas as pd

        rows = self.rows()
        if not with_history:
            for r in rows:
                r.pop("history", None)
        return pd.DataFrame(rows)


def load_results(root: str | Path, *, with_history: bool = False) -> "Any":
    """Load a results directory into a DataFrame (one row per finished run; unreadable files left out,
    see :meth:`ResultsStore.unreadable_files`).

    Raises
    ------
    FileNotFoundError
        If ``root`` holds no finished run.
    """
    store = ResultsStore(root)
    if not store.runs_dir.is_dir():
        raise FileNotFoundError(f"no results found in {root} (expected a 'runs' folder of JSON files)")
    return store.to_frame(with_history=with_history)
