"""Saved-model folders: safetensors weights beside a JSON config, both checksummed; never a pickle.

What every saved format here shares (the base classifiers', :class:`lsnpc.CorrectedLabelsClassifier`'s):

- ``config.json`` names its ``format`` and ``format_version`` and carries ``config_sha256``, the SHA-256 of
  the rest of the config in one canonical JSON spelling, so an edit or damage is caught on load;
- every other file is listed in the config with its SHA-256, checked before it is read;
- tensors are read with ``safetensors`` (no code runs) and must be finite;
- a folder is written atomically and replaces only a saved model of the same format, and only when asked
  (:func:`lsnpc._io.atomic_directory`);
- a path may start with ``~`` (:func:`lsnpc._io.user_path`).

LSNPC's own folder (:mod:`lsnpc.corrector.persistence`) uses these helpers too, with a reader of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._io import atomic_directory, check_replaceable, user_path

__all__ = ["CONFIG_NAME", "jsonable", "config_digest", "seal", "file_digest", "saved_format", "check_target",
           "saved_folder", "read_config", "check_file", "write_tensors", "read_safetensors", "read_tensors",
           "is_int", "optional_fitted", "check_optional_fitted", "restore_optional_fitted"]

CONFIG_NAME = "config.json"


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: tuples and arrays become lists, numpy and torch scalars plain numbers, non-finite
    floats None."""
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def config_digest(config: Mapping[str, Any]) -> str:
    """The SHA-256 of ``config`` without its own ``config_sha256``, in one canonical JSON spelling."""
    body = {k: v for k, v in config.items() if k != "config_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` made JSON-safe, with its ``config_sha256`` added."""
    out = jsonable(config)
    out["config_sha256"] = config_digest(out)
    return out


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def saved_format(path: str | Path) -> str | None:
    """The ``format`` the config.json in folder ``path`` names; None when there is no readable one."""
    try:
        config = json.loads((user_path(path) / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config.get("format") if isinstance(config, dict) and isinstance(config.get("format"), str) else None


def check_target(path: str | Path, *, fmt: str, what: str, overwrite: bool, owned: Collection[str] = ()) -> None:
    """Raise FileExistsError, saying what to do, when a save of ``fmt`` may not write the folder ``path``:
    a non-empty folder that is not a saved ``what`` (never replaced), or one that is, without ``overwrite``;
    then whatever :func:`lsnpc._io.check_replaceable` refuses with the save's ``owned`` files (a link, a file,
    the current folder or a parent of it, a saved folder holding other files too). Lets a caller check
    before a long fit; the atomic write checks again."""
    path = user_path(path)
    cwd = Path.cwd().resolve()
    # the current folder, links and files get their message from check_replaceable
    if not path.is_symlink() and path.is_dir() and path.resolve() not in (cwd, *cwd.parents) and any(path.iterdir()):
        if saved_format(path) != fmt:
            raise FileExistsError(f"{str(path)!r} exists and is not a saved {what} (no {CONFIG_NAME} of format "
                                  f"{fmt!r}); it is never replaced: choose a new folder")
        if not overwrite:
            raise FileExistsError(f"{str(path)!r} already holds a saved {what}; pass overwrite=True to replace it")
    check_replaceable(path, owned)


@contextlib.contextmanager
def saved_folder(path: str | Path, *, owned: Collection[str], overwrite: bool) -> Iterator[Path]:
    """:func:`lsnpc._io.atomic_directory` for a save: the body writes the ``owned`` files into the folder it is
    given, which then becomes ``path``; a refusal (another process saved there first) speaks of ``overwrite``,
    the saving functions' word, not ``replace``."""
    try:
        with atomic_directory(path, owned=owned, replace=overwrite) as tmp:
            yield tmp
    except FileExistsError as exc:
        raise FileExistsError(str(exc).replace("replace=True", "overwrite=True")) from None


def read_config(path: str | Path, *, fmt: str, versions: tuple[int, ...], what: str,
                older: str | None = None) -> dict[str, Any]:
    """The checked config of the folder ``path``: valid JSON, of format ``fmt`` and a readable version, whose
    ``config_sha256`` matches its content. One ValueError that says what is wrong otherwise; ``older``, what to
    do about a folder of a version older than any of ``versions`` (refused before its checksum is read)."""
    path = user_path(path)
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
    if older is not None and isinstance(version, int) and not isinstance(version, bool) and version < min(versions):
        raise ValueError(f"{config_path} was written by an older lsnpc (format version {version}); this lsnpc "
                         f"reads version {max(versions)}: {older}")
    if isinstance(version, bool) or version not in versions:
        raise ValueError(f"{config_path} has format_version {version!r}; this lsnpc reads "
                         f"{', '.join(map(str, versions))} (a newer lsnpc wrote it?)")
    if config.get("config_sha256") != config_digest(config):
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


def read_safetensors(folder: Path, name: str, sha256: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The tensors and the metadata of the safetensors file ``name`` in ``folder``, checked: its recorded
    SHA-256, readable, every floating tensor finite."""
    from safetensors import SafetensorError, safe_open

    target = check_file(folder, name, sha256)
    try:
        with safe_open(str(target), framework="pt", device="cpu") as fh:
            metadata = fh.metadata() or {}
            tensors = {key: fh.get_tensor(key) for key in fh.keys()}  # noqa: SIM118 (a safe_open handle)
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"{target} is corrupt or not a safetensors file: {exc}") from exc
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(v.isfinite().all())]
    if bad:
        raise ValueError(f"{target} is damaged: non-finite values in {', '.join(bad[:3])}")
    return tensors, metadata


def read_tensors(folder: Path, name: str, sha256: Any) -> dict[str, Any]:
    """The tensors of :func:`read_safetensors`, without the metadata."""
    return read_safetensors(folder, name, sha256)[0]


def is_int(value: Any, low: int, high: float = math.inf) -> bool:
    """Whether a value read from a config is an integer (not a bool) in [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def optional_fitted(model: Any) -> dict[str, Any]:
    """The fitted fields a classifier has only sometimes, as JSON: ``feature_names_in_`` (fitted on a DataFrame)
    and ``binary_classes`` (the two classes of a 1-d y)."""
    out: dict[str, Any] = {}
    if getattr(model, "feature_names_in_", None) is not None:
        out["feature_names_in_"] = [str(name) for name in model.feature_names_in_]
    if getattr(model, "_binary_classes", None) is not None:
        out["binary_classes"] = np.asarray(model._binary_classes).tolist()
    return out


def check_optional_fitted(raw: Mapping[str, Any], config_path: Path) -> None:
    """Refuse damaged optional fitted fields (see :func:`optional_fitted`)."""
    names = raw.get("feature_names_in_")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"{config_path} is damaged: fitted field feature_names_in_ must be a list of strings")
    classes = raw.get("binary_classes")
    if classes is not None and (not isinstance(classes, list) or len(classes) != 2 or not all(
            isinstance(c, (str, int, float, bool)) for c in classes) or classes[0] == classes[1]):
        raise ValueError(f"{config_path} is damaged: fitted field binary_classes must be a list of two classes")


def restore_optional_fitted(model: Any, fitted: Mapping[str, Any]) -> None:
    """Set the optional fitted fields that ``fitted`` holds on ``model``."""
    if fitted.get("feature_names_in_") is not None:
        model.feature_names_in_ = np.asarray(fitted["feature_names_in_"], dtype=object)
    if fitted.get("binary_classes") is not None:
        model._binary_classes = np.asarray(fitted["binary_classes"])
