"""Saving and loading a fitted base classifier (MLPClassifier, ADDGCN, HLC): safetensors + JSON.

Layout of ``path/``::

    config.json         {"format": "lsnpc-classifier", "format_version": 1, "class": "MLPClassifier",
                         "params": {...}, "fitted": {...}, "weights": {"file": "model.safetensors", "sha256": ...},
                         "config_sha256": ...}
    model.safetensors   the network's state dict, and the fitted arrays of a class that has some
                        (HLC's corrected labels) under "fitted.<name>"

Loading builds the class the config names from lsnpc's own classifiers only (nothing is imported by a
name read from a file, nothing is unpickled), checks its parameters as ``fit`` would, and loads the
weights strictly (every name and shape). The conventions are :mod:`lsnpc._saving`'s.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lsnpc._io import atomic_write_json, user_path
from lsnpc._saving import (
    CONFIG_NAME,
    check_optional_fitted,
    check_target,
    is_int,
    optional_fitted,
    read_config,
    read_tensors,
    restore_optional_fitted,
    saved_folder,
    seal,
    write_tensors,
)

__all__ = ["FORMAT", "save_classifier", "load_classifier"]

FORMAT = "lsnpc-classifier"
FORMAT_VERSION = 1
WEIGHTS_NAME = "model.safetensors"
OWNED_FILES = (CONFIG_NAME, WEIGHTS_NAME)
_FITTED = ("input_shape_", "n_features_in_", "n_labels_", "embedding_dim_", "best_epoch_", "history_")
_ARRAY_PREFIX = "fitted."


def _saved_params(model: Any) -> dict[str, Any]:
    params = model.get_params(deep=False)
    # a Generator cannot be written; the fitted weights are saved, so only a refit would need it
    params["random_state"] = params["random_state"] if isinstance(params["random_state"], int) else None
    params["device"] = str(params["device"])
    return params


def save_classifier(model: Any, path: str | Path, *, classes: Mapping[str, type], overwrite: bool = False) -> Path:
    """Write the fitted ``model``, of one of ``classes`` (lsnpc's classifiers by name), to the folder ``path``
    atomically; return the path.

    An existing saved classifier there is replaced only with ``overwrite``; any other existing folder or file
    is never replaced (FileExistsError)."""
    from lsnpc import __version__
    from lsnpc._validation import check_is_fitted

    check_is_fitted(model, "network_")
    name = type(model).__name__
    if classes.get(name) is not type(model):
        raise ValueError(f"save writes lsnpc's own classifiers ({', '.join(classes)}), not {name}")
    fitted = {field: getattr(model, field) for field in _FITTED}
    fitted.update(optional_fitted(model))
    arrays = {f"{_ARRAY_PREFIX}{field}": np.asarray(getattr(model, field)) for field in model._fitted_arrays}
    target = user_path(path)
    check_target(target, fmt=FORMAT, what="classifier", overwrite=overwrite, owned=OWNED_FILES)
    with saved_folder(target, owned=OWNED_FILES, overwrite=overwrite) as tmp:
        tensors = {**model.network_.state_dict(), **arrays}
        sha = write_tensors(tmp / WEIGHTS_NAME, tensors, fmt=FORMAT)
        config = {"format": FORMAT, "format_version": FORMAT_VERSION, "lsnpc_version": __version__, "class": name,
                  "params": _saved_params(model), "fitted": fitted, "weights": {"file": WEIGHTS_NAME, "sha256": sha}}
        atomic_write_json(tmp / CONFIG_NAME, seal(config))
    return target


def _check_fitted(raw: Any, config_path: Path) -> dict[str, Any]:
    if not isinstance(raw, dict) or any(field not in raw for field in _FITTED):
        raise ValueError(f"{config_path} is damaged: 'fitted' must hold {', '.join(_FITTED)}")

    def bad(field: str, what: str) -> ValueError:
        return ValueError(f"{config_path} is damaged: fitted field {field} must be {what}, got {raw[field]!r:.80}")

    for field in ("n_features_in_", "n_labels_", "embedding_dim_"):
        if not is_int(raw[field], 1):
            raise bad(field, "a positive integer")
    if not is_int(raw["best_epoch_"], 0):
        raise bad("best_epoch_", "a non-negative integer")
    shape = raw["input_shape_"]
    if not isinstance(shape, list) or not shape or not all(is_int(s, 1) for s in shape) or shape[0] != raw["n_features_in_"]:
        raise bad("input_shape_", "a list of positive integers starting with n_features_in_")
    history = raw["history_"]
    if not isinstance(history, dict) or not all(isinstance(v, list) for v in history.values()):
        raise bad("history_", "an object of lists")
    check_optional_fitted(raw, config_path)
    return {**raw, "input_shape_": tuple(shape)}


def load_classifier(path: str | Path, *, classes: Mapping[str, type], device: str = "cpu") -> Any:
    """Load a classifier written by :func:`save_classifier`, on ``device``, as the class of ``classes`` (lsnpc's
    classifiers by name) its config names. Anything damaged or inconsistent
    (checksums, parameters, fitted fields, weights' names and shapes, non-finite weights) raises one
    ValueError that says what."""
    from lsnpc._torch import resolve_device, seeded

    folder = user_path(path)
    config = read_config(folder, fmt=FORMAT, versions=(FORMAT_VERSION,), what="classifier")
    config_path = folder / CONFIG_NAME
    cls = classes.get(config.get("class"))
    if cls is None:
        raise ValueError(f"{config_path} names class {config.get('class')!r}; lsnpc saves {', '.join(classes)}")
    params, fitted = config.get("params"), _check_fitted(config.get("fitted"), config_path)
    signature = inspect.signature(cls.__init__).parameters
    if not isinstance(params, dict) or set(params) - set(signature):
        unknown = sorted(set(params) - set(signature)) if isinstance(params, dict) else "not an object"
        raise ValueError(f"{config_path} is damaged: parameters {unknown} are not {cls.__name__}'s")
    # JSON has no tuples: give back the type of a tuple default (hidden_dims=(256,))
    params = {k: tuple(v) if isinstance(v, list) and isinstance(signature[k].default, tuple) else v
              for k, v in params.items()}
    model = cls(**{**params, "device": device})
    try:
        model._check_params()
    except ValueError as exc:
        raise ValueError(f"{config_path} is damaged: parameter {exc}") from exc
    weights = config.get("weights")
    if not isinstance(weights, dict) or weights.get("file") != WEIGHTS_NAME:
        raise ValueError(f"{config_path} is damaged: 'weights' must name {WEIGHTS_NAME} and its sha256")
    tensors = read_tensors(folder, WEIGHTS_NAME, weights.get("sha256"))
    arrays = {k[len(_ARRAY_PREFIX):]: v.numpy() for k, v in tensors.items() if k.startswith(_ARRAY_PREFIX)}
    state = {k: v for k, v in tensors.items() if not k.startswith(_ARRAY_PREFIX)}
    if set(arrays) != set(model._fitted_arrays):
        raise ValueError(f"{folder / WEIGHTS_NAME} holds fitted arrays {sorted(arrays)}, but a {cls.__name__} has "
                         f"{sorted(model._fitted_arrays)}")
    dev = resolve_device(device)
    # the initial weights are overwritten by the saved ones; seeding keeps the caller's torch RNG untouched
    with seeded(0):
        network = model._build_network(np.zeros((2, *fitted["input_shape_"]), dtype=np.float32), fitted["n_labels_"])
    if int(network.embedding_dim) != fitted["embedding_dim_"]:
        raise ValueError(f"{config_path} is damaged: embedding_dim_ = {fitted['embedding_dim_']}, but the parameters "
                         f"give {network.embedding_dim}")
    try:
        network.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        lines = " ".join(line.strip() for line in str(exc).strip().splitlines()[:3])
        raise ValueError(f"{folder / WEIGHTS_NAME} does not match the network its config describes: {lines}") from exc
    network.to(dev).eval()
    for field in _FITTED:
        setattr(model, field, fitted[field])
    restore_optional_fitted(model, fitted)
    for field, value in arrays.items():
        setattr(model, field, value.astype(np.int64) if value.dtype.kind in "iub" else value)
    model.network_ = network
    model.trunk_ = network.trunk
    return model
