"""Saving and loading a fitted LSNPC: a directory of safetensors weights plus a JSON config.

Layout of ``path/``::

    config.json         {"format": "lsnpc", "format_version": 1, "params": {...}, "fitted": {...}}
    model.safetensors   every tensor of the model's state dict

Nothing is pickled; loading validates the config before building the model and rejects a corrupt or
foreign file with a ValueError that says what is wrong.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from ._io import atomic_directory, atomic_write_json
from ._torch import resolve_device
from .model import LatentConfig, LatentShiftModel, StandardizedMLPEncoder

if TYPE_CHECKING:  # pragma: no cover
    from .corrector import LSNPC

FORMAT = "lsnpc"
FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

_FITTED = ("n_features_in_", "input_shape_", "n_labels_", "data_dim_", "epochs_", "best_epoch_",
           "selection_", "history_", "guard_", "predict_seed_")


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


def save_lsnpc(estimator: LSNPC, path: str | Path) -> Path:
    """Write ``estimator`` (fitted) to the directory ``path`` atomically; return the path."""
    from . import __version__

    params = estimator.get_params()
    user_encoder = params.pop("encoder") is not None
    params["random_state"] = params["random_state"] if isinstance(params["random_state"], int) else None
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lsnpc_version": __version__,
        "encoder": "user" if user_encoder else "builtin",
        "params": params,
        "fitted": {name: getattr(estimator, name) for name in _FITTED},
    }
    state = {k: v.detach().cpu().contiguous() for k, v in estimator.model_.state_dict().items()}
    target = Path(path)
    with atomic_directory(target) as tmp:
        save_file(state, str(tmp / WEIGHTS_NAME), metadata={"format": FORMAT})
        atomic_write_json(tmp / CONFIG_NAME, _jsonable(config))
    return target


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


def load_lsnpc(cls: type[LSNPC], path: str | Path, *, encoder: nn.Module | None, device: str) -> LSNPC:
    """Rebuild a fitted LSNPC from ``path`` (see :func:`save_lsnpc`)."""
    path = Path(path)
    config = _read_config(path)
    params, fitted = dict(config["params"]), config["fitted"]
    if config["encoder"] == "user" and encoder is None:
        raise ValueError(
            f"{str(path)!r} was fitted with a user encoder: pass encoder=<a module of the same architecture> "
            "to LSNPC.load"
        )
    if config["encoder"] == "builtin" and encoder is not None:
        raise ValueError(f"{str(path)!r} uses LSNPC's own data encoder; do not pass encoder= to load it")
    try:
        estimator = cls(**params, encoder=encoder)
    except TypeError as exc:
        raise ValueError(f"{path / CONFIG_NAME} has parameters this lsnpc does not know: {exc}") from exc
    estimator.device = device
    estimator._check_params()
    dev = resolve_device(device)
    try:
        state = load_file(str(path / WEIGHTS_NAME), device="cpu")
    except FileNotFoundError as exc:
        raise ValueError(f"{str(path)!r} has no {WEIGHTS_NAME}: the saved model is incomplete") from exc
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"{path / WEIGHTS_NAME} is corrupt or not a safetensors file: {exc}") from exc

    data_dim = int(fitted["data_dim_"])
    n_labels = int(fitted["n_labels_"])
    if encoder is None:
        data_encoder: nn.Module = StandardizedMLPEncoder(int(fitted["n_features_in_"]), int(params["hidden_dim"]))
    else:
        import copy

        data_encoder = copy.deepcopy(encoder)
    model = LatentShiftModel(
        data_encoder, data_dim, n_labels,
        LatentConfig(params["latent"], float(params["nu"]), float(params["nu0"])),
        latent_dim=int(params["latent_dim"]), label_embedding_dim=int(params["label_embedding_dim"]),
    )
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"{path / WEIGHTS_NAME} does not match the model its config describes: {exc}") from exc
    model.to(dev).eval()
    for name in _FITTED:
        value = fitted.get(name)
        if name == "input_shape_":
            value = tuple(value)
        setattr(estimator, name, value)
    estimator.model_ = model
    estimator.device_ = dev
    return estimator
