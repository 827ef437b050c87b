"""Saved-model folders: safetensors weights beside a JSON config, both checksummed; never a pickle.

What every saved format here shares (the base classifiers', :class:`lsnpc.CorrectedLabelsClassifier`'s):

- ``config.json`` names its ``format`` and ``format_version`` and carries ``config_sha256``, the SHA-256 of
  the rest of the config in one canonical JSON spelling, so an edit or damage is caught on load;
- every other file is listed in the config with its SHA-256, checked before it is read;
- tensors are read with ``safetensors`` (no code runs) and must be finite;
- a folder is written atomically and replaces only a saved model of the same format, and only when asked
  (:func:`lsnpc._io.atomic_directory`).

LSNPC's own folder (:mod:`lsnpc.corrector.persistence`) follows the same conventions with helpers of its own.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CONFIG_NAME", "jsonable", "seal", "file_digest", "saved_format", "check_target", "read_config",
           "check_file", "write_tensors", "read_tensors"]

CONFIG_NAME = "config.json"


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: tuples become lists, numpy and torch scalars plain numbers, non-finite floats None."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _digest(config: Mapping[str, Any]) -> str:
    body = {k: v for k, v in config.items() if k != "config_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` made JSON-safe, with its ``config_sha256`` added."""
    out = jsonable(config)
    out["config_sha256"] = _digest(out)
    return out


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def saved_format(path: str | Path) -> str | None:
    """The ``format`` the config.json in folder ``path`` names; None when there is no readable one."""
    try:
        config = json.loads((Path(path) / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config.get("format") if isinstance(config, dict) and isinstance(config.get("format"), str) else None


def check_target(path: str | Path, *, fmt: str, what: str, overwrite: bool) -> None:
    """Raise FileExistsError, saying what to do, when a save of ``fmt`` may not write the folder ``path``:
    a non-empty folder that is not a saved ``what`` (never replaced), or one that is, without ``overwrite``.
    Links, files, the current folder and its parents are refused by the atomic write itself."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir() or not any(path.iterdir()):
        return
    cwd = Path.cwd().resolve()
    if path.resolve() in (cwd, *cwd.parents):
        return
    if saved_format(path) != fmt:
        raise FileExistsError(f"{str(path)!r} exists and is not a saved {what} (no {CONFIG_NAME} of format {fmt!r}); "
                              "it is never replaced: choose a new folder")
    if not overwrite:
        raise FileExistsError(f"{str(path)!r} already holds a saved {what}; pass overwrite=True to replace it")


def read_config(path: str | Path, *, fmt: str, versions: tuple[int, ...], what: str) -> dict[str, Any]:
    """The checked config of the folder ``path``: valid JSON, of format ``fmt`` and a readable version, whose
    ``config_sha256`` matches its content. One ValueError that says what is wrong otherwise."""
    path = Path(path)
    config_path = path / CONFIG_NAME
    if not path.is_dir():
        raise ValueError(f"path {str(path)!r} is not a saved {what} (expected a folder with {CONFIG_NAME})")
    if not config_path.is_file():
        raise ValueError(f"{str(path)!r} has no {CONFIG_NAME}: not a saved {what}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{config_path} is corrupt (not valid JSON): {exc}") from exc
    if not isinstance(config, dict) or config.get("format") != fmt:
        found = config.get("format") if isinstance(config, dict) else None
        raise ValueError(f"{config_path} is not the config of a saved {what} (format {found!r}, expected {fmt!r})")
    version = config.get("format_version")
    if isinstance(version, bool) or version not in versions:
        raise ValueError(f"{config_path} has format_version {version!r}; this lsnpc reads "
                         f"{', '.join(map(str, versions))} (a newer lsnpc wrote it?)")
    if config.get("config_sha256") != _digest(config):
        raise ValueError(f"{config_path} is damaged or was edited: its content does not match its config_sha256")
    return config


def check_file(folder: Path, name: str, sha256: Any) -> Path:
    """The path of ``name`` in ``folder``, once its SHA-256 is the one recorded; a ValueError otherwise."""
    target = folder / name
    if not isinstance(sha256, str):
        raise ValueError(f"{folder / CONFIG_NAME} is damaged: no sha256 recorded for {name}")
    if not target.is_file():
        raise ValueError(f"{str(folder)!r} has no {name}: the saved model is incomplete")
    if file_digest(target) != sha256:
        raise ValueError(f"{target} is damaged: its SHA-256 does not match the one in {CONFIG_NAME}")
    return target


def write_tensors(path: Path, tensors: Mapping[str, Any], *, fmt: str) -> str:
    """Write torch tensors or numpy arrays (contiguous CPU copies) as safetensors; return the file's SHA-256."""
    import torch
    from safetensors.torch import save_file

    state = {name: (torch.from_numpy(np.ascontiguousarray(t)) if isinstance(t, np.ndarray) else t.detach().cpu())
             .contiguous() for name, t in tensors.items()}
    save_file(state, str(path), metadata={"format": fmt})
    return file_digest(path)


def read_tensors(folder: Path, name: str, sha256: Any) -> dict[str, Any]:
    """The tensors of the safetensors file ``name`` in ``folder``, checked: its recorded SHA-256, readable,
    every floating tensor finite."""
    from safetensors import SafetensorError, safe_open

    target = check_file(folder, name, sha256)
    try:
        with safe_open(str(target), framework="pt", device="cpu") as fh:
            tensors = {key: fh.get_tensor(key) for key in fh.keys()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"{target} is corrupt or not a safetensors file: {exc}") from exc
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(v.isfinite().all())]
    if bad:
        raise ValueError(f"{target} is damaged: non-finite values in {', '.join(bad[:3])}")
    return tensors
