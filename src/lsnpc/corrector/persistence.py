"""Saving and loading a fitted LSNPC: a directory of safetensors weights plus a JSON config.

Layout of ``path/``::

    config.json         {"format": "lsnpc", "format_version": 1, "params": {...}, "fitted": {...}}
    model.safetensors   every tensor of the model's state dict
    student.safetensors the corrected-label student's state dict (only when it has one)

Nothing is pickled; loading validates the config before building the model and rejects a corrupt or
foreign file with a ValueError that says what is wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from .._io import atomic_directory, atomic_write_json

__all__ = ["FITTED_FIELDS", "SavedCorrector", "save_corrector", "read_corrector"]

FORMAT = "lsnpc"
FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
STUDENT_WEIGHTS_NAME = "student.safetensors"

FITTED_FIELDS = ("n_features_in_", "input_shape_", "n_labels_", "data_dim_", "epochs_", "best_epoch_",
                 "selection_", "history_", "guard_", "predict_seed_", "student_info_")


def _jsonable(value: Any) -> Any:
    """JSON-safe copy: tuples → lists, non-finite floats → None."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def save_corrector(
    path: str | Path, *, params: dict[str, Any], fitted: dict[str, Any], model: nn.Module,
    student: nn.Module | None = None,
) -> Path:
    """Write a fitted corrector to the directory ``path`` atomically; return the path.

    ``params``: the estimator's constructor parameters (``encoder`` is recorded only as "user" or
    "builtin": its code is the user's); ``fitted``: the learned attributes of :data:`FITTED_FIELDS`;
    ``model``: the trained networks, whose state dict becomes the safetensors file; ``student``: the
    corrected-label student, saved beside it when given.
    """
    from .. import __version__

    params = dict(params)
    user_encoder = params.pop("encoder") is not None
    params["random_state"] = params["random_state"] if isinstance(params["random_state"], int) else None
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lsnpc_version": __version__,
        "encoder": "user" if user_encoder else "builtin",
        "params": params,
        "fitted": {name: fitted[name] for name in FITTED_FIELDS},
    }
    target = Path(path)
    with atomic_directory(target) as tmp:
        save_file(_cpu_state(model), str(tmp / WEIGHTS_NAME), metadata={"format": FORMAT})
        if student is not None:
            save_file(_cpu_state(student), str(tmp / STUDENT_WEIGHTS_NAME), metadata={"format": FORMAT})
        atomic_write_json(tmp / CONFIG_NAME, _jsonable(config))
    return target


def _cpu_state(module: nn.Module) -> dict[str, Any]:
    return {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}


@dataclass
class SavedCorrector:
    """What a saved corrector holds, read and checked, before a model is built from it."""

    path: Path
    params: dict[str, Any]
    fitted: dict[str, Any]
    user_encoder: bool

    def load_weights(self, model: nn.Module, *, student: bool = False) -> None:
        """Load the saved state dict into ``model`` (built from ``params`` by ``build_model``), or with
        ``student=True`` the student's into ``model`` (a :class:`~lsnpc.corrector.student.LabelStudent`)."""
        weights = self.path / (STUDENT_WEIGHTS_NAME if student else WEIGHTS_NAME)
        try:
            state = load_file(str(weights), device="cpu")
        except FileNotFoundError as exc:
            raise ValueError(f"{str(self.path)!r} has no {weights.name}: the saved model is incomplete") from exc
        except (SafetensorError, OSError, ValueError) as exc:
            raise ValueError(f"{weights} is corrupt or not a safetensors file: {exc}") from exc
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"{weights} does not match the model its config describes: {exc}") from exc


def read_corrector(path: str | Path, *, encoder: nn.Module | None) -> SavedCorrector:
    """Read and check the config of a corrector saved by :func:`save_corrector`.

    ``encoder``: the module a user-encoder model is to be loaded into (None for LSNPC's own encoder).
    """
    path = Path(path)
    config = _read_config(path)
    user_encoder = config["encoder"] == "user"
    if user_encoder and encoder is None:
        raise ValueError(
            f"{str(path)!r} was fitted with a user encoder: pass encoder=<a module of the same architecture> "
            "to LSNPC.load"
        )
    if not user_encoder and encoder is not None:
        raise ValueError(f"{str(path)!r} uses LSNPC's own data encoder; do not pass encoder= to load it")
    fitted = dict(config["fitted"])
    fitted["input_shape_"] = tuple(fitted["input_shape_"])
    fitted.setdefault("student_info_", None)  # saved before correctors had a student
    return SavedCorrector(path, dict(config["params"]), fitted, user_encoder)


def _read_config(path: Path) -> dict[str, Any]:
    config_path = path / CONFIG_NAME
    if not path.is_dir():
        raise ValueError(f"path {str(path)!r} is not a saved LSNPC directory (expected a folder with {CONFIG_NAME})")
    if not config_path.is_file():
        raise ValueError(f"{str(path)!r} has no {CONFIG_NAME}: not a saved LSNPC model")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{config_path} is corrupt (not valid JSON): {exc}") from exc
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{config_path} is not an LSNPC config (format field is {config.get('format')!r})"
                         if isinstance(config, dict) else f"{config_path} is not an LSNPC config")
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{config_path} has format_version {version!r}; this lsnpc reads version {FORMAT_VERSION}"
        )
    for key in ("params", "fitted", "encoder"):
        if key not in config:
            raise ValueError(f"{config_path} is incomplete: missing {key!r}")
    return config
