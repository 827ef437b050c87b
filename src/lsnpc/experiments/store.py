"""The results store: one JSON file per finished run, written atomically.

Layout::

    RESULTS/
      runs/<run_id>.json     one finished run: every config field, every metric, timings,
                             ``selection`` (which labels chose the checkpoint), library version,
                             and the training history when the post-processor records one

Why one file per run rather than one JSONL file: a run's file appears by a rename of a complete
temporary file (:func:`lsnpc._io.atomic_write_json`), so a reader or a killed runner can never see
or leave a half-written row; many worker processes (or Ray workers on a shared file system) write
without any lock or coordination; "is this run finished?" is a file-existence check, which is what
makes resuming a grid trivial. An interrupted write leaves at most a hidden ``.<name>.*.tmp`` file,
which readers ignore and :meth:`ResultsStore.remove_partial` deletes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lsnpc._io import atomic_write_json

__all__ = ["ResultsStore", "load_results"]


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

    def has(self, run_id: str) -> bool:
        """True when the run has finished (its file exists)."""
        return self.path_for(run_id).is_file()

    def finished_ids(self) -> set[str]:
        if not self.runs_dir.is_dir():
            return set()
        return {p.stem for p in self.runs_dir.glob("*.json") if not p.name.startswith(".")}

    def write(self, row: dict[str, Any]) -> Path:
        """Write one finished run atomically; ``row["run_id"]`` names the file."""
        if "run_id" not in row:
            raise ValueError("row must have a 'run_id'")
        return atomic_write_json(self.path_for(row["run_id"]), _json_safe(row))

    def partial_files(self) -> list[Path]:
        """Temporary files left by writes that were interrupted."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.iterdir() if p.name.startswith("."))

    def remove_partial(self) -> int:
        """Delete leftovers of interrupted writes; return how many. Run with no writer active."""
        files = self.partial_files()
        for p in files:
            p.unlink(missing_ok=True)
        return len(files)

    def rows(self) -> list[dict[str, Any]]:
        """Every finished run, as dicts, in a stable order (by run id)."""
        out = []
        if not self.runs_dir.is_dir():
            return out
        for p in sorted(self.runs_dir.glob("*.json")):
            if p.name.startswith("."):
                continue
            out.append(json.loads(p.read_text(encoding="utf-8")))
        return out

    def to_frame(self, *, with_history: bool = False) -> "Any":
        """A pandas DataFrame with one row per finished run (history dropped unless asked)."""
        import pandas as pd

        rows = self.rows()
        if not with_history:
            for r in rows:
                r.pop("history", None)
        return pd.DataFrame(rows)


def load_results(root: str | Path, *, with_history: bool = False) -> "Any":
    """Load a results directory into a DataFrame (one row per run).

    Raises
    ------
    FileNotFoundError
        If ``root`` holds no finished run.
    """
    store = ResultsStore(root)
    if not store.runs_dir.is_dir():
        raise FileNotFoundError(f"no results found in {root} (expected a 'runs' folder of JSON files)")
    return store.to_frame(with_history=with_history)
