"""Saving and loading a fitted LSNPC: a directory of safetensors weights plus a JSON config.

Layout of ``path/``::

    config.json         {"format": "lsnpc", "format_version": 5, "params": {...}, "fitted": {...},
                         "weights": {"file": "model.safetensors", "sha256": ...},
                         ["student_weights": {"file": "student.safetensors", "sha256": ...},]
                         "config_sha256": <the SHA-256 of the rest of this JSON>}
    model.safetensors   every tensor of the model's state dict; with ``n_fits`` > 1 the later networks' too, their
                        names prefixed "fit1.", "fit2.", ...
    student.safetensors the corrected-label students' state dicts, named likewise (only when the corrector has them)

Nothing is pickled. Saving never replaces a folder that is not a saved model, replaces a model only when asked
to, and deletes nothing it did not write (:func:`lsnpc._io.atomic_directory`). Loading refuses, with one
ValueError that says what is wrong, anything damaged or inconsistent: a checksum that does not match (weights or
config), a missing or unknown parameter or fitted field, one of the wrong type or range, a report whose decisions
disagree with the fitted fields, weights whose names, shapes or constants (ν, ν0) disagree with the config, or
non-finite weights. Every field the loader reads is covered by the config's checksum. Format version 4 (before
``n_fits``) is read as one network; older folders are refused with a message to fit again: their decisions were
of another kind.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from .._io import atomic_write_json, user_path
from .._saving import (
    CONFIG_NAME,
    check_target,
    file_digest,
    is_int,
    jsonable,
    read_config,
    read_safetensors,
    saved_folder,
    saved_format,
    seal,
)
from .._torch import resolve_device
from .config import ModelSpec, build_model
from .report import FitReport
from .student import LabelStudent

__all__ = ["FITTED_FIELDS", "SavedCorrector", "save_corrector", "read_corrector", "restore_corrector",
           "is_saved_corrector", "check_save_target"]

FORMAT = "lsnpc"
FORMAT_VERSION = 5
# the oldest format read: version 4 differs only in having no n_fits (one network)
READ_VERSIONS = (4, FORMAT_VERSION)
WEIGHTS_NAME = "model.safetensors"
STUDENT_WEIGHTS_NAME = "student.safetensors"
OWNED_FILES = (CONFIG_NAME, WEIGHTS_NAME, STUDENT_WEIGHTS_NAME)
# Buffers that hold parameters rather than learned state: they must equal what the config says.
_CONSTANT_BUFFERS = ("nu", "nu0")
# The parameters that shape the networks, also written into the weights file's metadata, so weights
# and config are checked to belong together even where shapes agree (e.g. latent "student" vs "gauss").
_SPEC_PARAMS = ("latent", "nu", "nu0", "latent_dim", "label_embedding_dim", "hidden_dim")

FITTED_FIELDS = ("n_features_in_", "input_shape_", "n_labels_", "data_dim_", "epochs_", "best_epoch_",
                 "selection_", "history_", "predict_seed_", "base_weight_", "threshold_", "report_",
                 "feature_names_in_", "label_names_in_")
# constructor parameters held as tuples: JSON gives them back as lists
_TUPLE_PARAMS = ("blend_candidates", "threshold_grid")


def _spec_json(params: Mapping[str, Any]) -> str:
    return json.dumps(jsonable({name: params.get(name) for name in _SPEC_PARAMS}), sort_keys=True)


def is_saved_corrector(path: str | Path) -> bool:
    """Whether ``path`` is a folder whose config.json says it is a saved LSNPC (of any version)."""
    return saved_format(path) == FORMAT


def check_save_target(path: str | Path, *, overwrite: bool = False) -> None:
    """Raise FileExistsError, saying what to do, when :func:`save_corrector` would refuse ``path``: a
    non-empty folder that is not a saved model, a saved model without ``overwrite``, a saved model
    holding other files too, a file, a link, the current folder or a parent of it. Lets a caller check
    before a long fit."""
    check_target(path, fmt=FORMAT, what="LSNPC model", overwrite=overwrite, owned=OWNED_FILES)


def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}


def _prefix(network: int) -> str:
    """The weight names' prefix of a fit's ``network`` (0-based) in its file: none for the first."""
    return "" if network == 0 else f"fit{network}."


def _networks_state(modules: list[nn.Module]) -> dict[str, torch.Tensor]:
    """One state dict for a fit's networks, each one's names under its :func:`_prefix`."""
    return {_prefix(k) + name: t for k, module in enumerate(modules) for name, t in _cpu_state(module).items()}


def save_corrector(path: str | Path, *, estimator: Any, overwrite: bool = False) -> Path:
    """Write a fitted corrector to the directory ``path`` atomically; return the path.

    The config holds the estimator's constructor parameters (``encoder`` recorded only as "user" or "builtin": its
    code is the user's), its fitted fields (:data:`FITTED_FIELDS`), and the checksums of the weights files. An
    existing saved model at ``path`` is replaced only with ``overwrite``; anything else there is never replaced
    (FileExistsError).
    """
    from .. import __version__

    params = dict(estimator.get_params(deep=False))
    user_encoder = params.pop("encoder") is not None
    params["random_state"] = params["random_state"] if isinstance(params["random_state"], int) else None
    fitted = {name: getattr(estimator, name, None) for name in FITTED_FIELDS}
    fitted["report_"] = estimator.report_.to_dict()
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lsnpc_version": __version__,
        "encoder": "user" if user_encoder else "builtin",
        "params": params,
        "fitted": fitted,
    }
    target = user_path(path)
    check_save_target(target, overwrite=overwrite)
    with saved_folder(target, owned=OWNED_FILES, overwrite=overwrite) as tmp:
        _write_corrector(tmp, config, estimator, params)
    return target


def _write_corrector(tmp: Path, config: dict[str, Any], estimator: Any, params: dict[str, Any]) -> None:
    """The weights files and config.json of ``estimator`` into the folder ``tmp``."""
    weights = tmp / WEIGHTS_NAME
    save_file(_networks_state(estimator.models_), str(weights),
              metadata={"format": FORMAT, "model_spec": _spec_json(params)})
    config["weights"] = {"file": WEIGHTS_NAME, "sha256": file_digest(weights)}
    if estimator.student_ is not None:
        student_weights = tmp / STUDENT_WEIGHTS_NAME
        save_file(_networks_state(estimator.students_), str(student_weights), metadata={"format": FORMAT})
        config["student_weights"] = {"file": STUDENT_WEIGHTS_NAME, "sha256": file_digest(student_weights)}
    config = seal(config)
    atomic_write_json(tmp / CONFIG_NAME, config)


@dataclass
class SavedCorrector:
    """What a saved corrector holds, read and checked, before a model is built from it."""

    path: Path
    params: dict[str, Any]
    fitted: dict[str, Any]
    user_encoder: bool
    weights_sha256: str
    student_sha256: str | None = None  # the student's weights (None: no student)

    def load_weights(self, models: list[nn.Module], *, student: bool = False) -> None:
        """Load the saved state dicts into ``models``, the fit's networks in order (built from ``params`` by
        ``build_model``), or with ``student=True`` the students' into ``models`` (each a
        :class:`~lsnpc.corrector.student.LabelStudent`).

        Refuses weights whose checksum, names, shapes, constants (ν, ν0) or values (non-finite) are
        not those of the config.
        """
        weights = self.path / (STUDENT_WEIGHTS_NAME if student else WEIGHTS_NAME)
        state, metadata = read_safetensors(self.path, weights.name,
                                           self.student_sha256 if student else self.weights_sha256)
        if not student and "model_spec" not in metadata:
            raise ValueError(f"{weights} holds no description of its model: it was not written with {CONFIG_NAME}")
        if not student and metadata["model_spec"] != _spec_json(self.params):
            saved, described = json.loads(metadata["model_spec"]), json.loads(_spec_json(self.params))
            differ = [k for k in _SPEC_PARAMS if saved.get(k) != described.get(k)]
            raise ValueError(
                f"{weights} was saved with {', '.join(f'{k}={saved.get(k)!r}' for k in differ)}, but {CONFIG_NAME} "
                f"says {', '.join(f'{k}={described.get(k)!r}' for k in differ)}: the files do not belong together"
            )
        later = {_prefix(k): k for k in range(1, len(models))}
        parts: list[dict[str, torch.Tensor]] = [{} for _ in models]
        for key, tensor in state.items():
            head = key.split(".", 1)[0] + "."
            if head in later:
                parts[later[head]][key[len(head):]] = tensor
            else:
                parts[0][key] = tensor
        for k, (model, part) in enumerate(zip(models, parts)):
            expected = model.state_dict()
            for name in _CONSTANT_BUFFERS:
                if name in expected and name in part and not torch.equal(part[name], expected[name].cpu()):
                    raise ValueError(f"{weights} holds {_prefix(k)}{name}={part[name].item():g}, but {CONFIG_NAME} "
                                     f"says {name}={expected[name].item():g}: the files do not belong together")
            try:
                model.load_state_dict(part, strict=True)
            except RuntimeError as exc:
                first = str(exc).strip().splitlines()
                which = f" (network {k + 1} of {len(models)})" if len(models) > 1 else ""
                raise ValueError(f"{weights} does not match the model its config describes{which}: "
                                 f"{' '.join(line.strip() for line in first[:3])}") from exc


def read_corrector(path: str | Path, *, encoder: nn.Module | None) -> SavedCorrector:
    """Read and check the config of a corrector saved by :func:`save_corrector`.

    ``encoder``: the module a user-encoder model is to be loaded into (None for LSNPC's own encoder).
    The parameters are checked by the estimator (which knows them); the fitted fields here.
    """
    path = user_path(path)
    config = _read_config(path)
    config_path = path / CONFIG_NAME
    user_encoder = config["encoder"] == "user"
    if user_encoder and encoder is None:
        raise ValueError(
            f"{str(path)!r} was fitted with a user encoder: pass encoder=<a module of the same architecture> "
            "to LSNPC.load"
        )
    if not user_encoder and encoder is not None:
        raise ValueError(f"{str(path)!r} uses LSNPC's own data encoder; do not pass encoder= to load it")
    params = dict(config["params"])
    if config["format_version"] == 4:  # written before n_fits: one network
        params.setdefault("n_fits", 1)
    for name in _TUPLE_PARAMS:
        if isinstance(params.get(name), list):
            params[name] = tuple(params[name])
    fitted = _check_fitted(config["fitted"], params, config_path)
    weights_sha256 = _weights_entry(config, "weights", WEIGHTS_NAME, config_path)
    student_sha256 = None
    if fitted["report_"]["student"].choice is not None:
        student_sha256 = _weights_entry(config, "student_weights", STUDENT_WEIGHTS_NAME, config_path)
    elif "student_weights" in config:
        raise ValueError(f"{config_path} is damaged: it lists student weights, but its report has no student")
    return SavedCorrector(path, params, fitted, user_encoder, weights_sha256, student_sha256)


def restore_corrector(cls: type, path: str | Path, *, encoder: nn.Module | None, device: str) -> Any:
    """An estimator of class ``cls`` rebuilt from the folder ``path`` (see ``LSNPC.load``)."""
    dev = resolve_device(device)
    saved = read_corrector(path, encoder=encoder)
    config_path = saved.path / CONFIG_NAME
    known = set(cls._get_param_names()) - {"encoder"}
    unknown, missing = sorted(set(saved.params) - known), sorted(known - set(saved.params))
    if unknown:
        raise ValueError(f"{config_path} has parameters this lsnpc does not know: {', '.join(unknown)}")
    if missing:
        raise ValueError(f"{config_path} is incomplete: parameters {', '.join(missing)} are missing")
    estimator = cls(**saved.params, encoder=encoder)
    estimator.device = device  # where it runs now, not where it was fitted
    try:
        estimator._check_params()
    except ValueError as exc:
        raise ValueError(f"{config_path} is damaged: parameter {exc}") from exc
    fitted = saved.fitted
    if saved.params["threshold"] != "auto" and fitted["threshold_"] != float(saved.params["threshold"]):
        raise ValueError(f"{config_path} is damaged or was edited: params.threshold is {saved.params['threshold']!r} "
                         f"but the fitted threshold_ is {fitted['threshold_']!r}")
    if encoder is None and fitted["data_dim_"] != estimator.hidden_dim:
        raise ValueError(f"{config_path} is damaged: fitted data_dim_ = {fitted['data_dim_']} but hidden_dim = "
                         f"{estimator.hidden_dim}")
    models = [build_model(ModelSpec.from_params(estimator.get_params(deep=False)),
                          n_features=int(fitted["n_features_in_"]), n_labels=int(fitted["n_labels_"]),
                          encoder=encoder, data_dim=int(fitted["data_dim_"]))
              for _ in range(int(estimator.n_fits))]
    saved.load_weights(models)
    students: list[Any] = [None] * len(models)
    share = fitted["report_"]["student"].choice
    if share is not None:
        students = [LabelStudent(copy.deepcopy(model.data_encoder), int(fitted["data_dim_"]),
                                 int(fitted["n_labels_"])) for model in models]
        saved.load_weights(students, student=True)
        students = [student.to(dev).eval() for student in students]
    for name in FITTED_FIELDS:
        if fitted[name] is not None or name not in ("feature_names_in_", "label_names_in_"):
            setattr(estimator, name, fitted[name])
    estimator.models_, estimator.students_ = [model.to(dev).eval() for model in models], students
    estimator._student_share = share
    estimator.device_ = dev
    return estimator


def _weights_entry(config: dict[str, Any], key: str, file_name: str, config_path: Path) -> str:
    """The sha256 recorded under ``key`` for ``file_name``; a ValueError when the entry is damaged."""
    entry = config.get(key)
    if not isinstance(entry, dict) or entry.get("file") != file_name or not isinstance(entry.get("sha256"), str):
        raise ValueError(f"{config_path} is damaged: {key!r} must name {file_name} and its sha256")
    return entry["sha256"]


def _read_config(path: Path) -> dict[str, Any]:
    config = read_config(path, fmt=FORMAT, versions=READ_VERSIONS, what="LSNPC model",
                         older="fit the corrector again")
    config_path = path / CONFIG_NAME
    for key in ("params", "fitted", "encoder", "weights"):
        if key not in config:
            raise ValueError(f"{config_path} is incomplete: missing {key!r}")
    if not isinstance(config["params"], dict) or not isinstance(config["fitted"], dict):
        raise ValueError(f"{config_path} is damaged: 'params' and 'fitted' must be JSON objects")
    if config["encoder"] not in ("user", "builtin"):
        raise ValueError(f"{config_path} is damaged: 'encoder' must be 'user' or 'builtin', got {config['encoder']!r}")
    return config


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_fitted(raw: dict[str, Any], params: dict[str, Any], config_path: Path) -> dict[str, Any]:
    """The fitted fields of a config, each checked for its type and range, and against each other and the
    report (a ValueError naming the field)."""
    missing = [name for name in FITTED_FIELDS if name not in raw]
    unknown = sorted(set(raw) - set(FITTED_FIELDS))
    if missing or unknown:
        raise ValueError(f"{config_path} is damaged: fitted fields "
                         + "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                                       f"unknown {', '.join(unknown)}" if unknown else "") if part))

    def bad(name: str, what: str) -> ValueError:
        return ValueError(f"{config_path} is damaged: fitted field {name} must be {what}, got {raw[name]!r:.80}")

    fitted = dict(raw)
    for name in ("n_features_in_", "n_labels_", "data_dim_", "epochs_"):
        if not is_int(fitted[name], 1):
            raise bad(name, "a positive integer")
    if not is_int(fitted["best_epoch_"], 0, fitted["epochs_"]):
        raise bad("best_epoch_", f"an integer in [0, epochs_ = {fitted['epochs_']}]")
    if not is_int(fitted["predict_seed_"], 0, 2**63 - 1):
        raise bad("predict_seed_", "an integer in [0, 2**63)")
    shape = fitted["input_shape_"]
    if not isinstance(shape, list) or not shape or not all(is_int(s, 1) for s in shape):
        raise bad("input_shape_", "a list of positive integers")
    if math.prod(shape) != fitted["n_features_in_"]:
        raise bad("input_shape_", f"a shape of n_features_in_ = {fitted['n_features_in_']} values")
    fitted["input_shape_"] = tuple(shape)
    if fitted["selection_"] not in ("val_f1", "noisy_f1", "noisy_elbo", "last"):
        raise bad("selection_", "one of 'val_f1', 'noisy_f1', 'noisy_elbo', 'last'")
    if not isinstance(fitted["history_"], list) or not all(isinstance(h, dict) for h in fitted["history_"]):
        raise bad("history_", "a list of objects")
    if not (_is_number(fitted["base_weight_"]) and 0 <= fitted["base_weight_"] <= 1):
        raise bad("base_weight_", "a number in [0, 1]")
    if not (_is_number(fitted["threshold_"]) and 0 < fitted["threshold_"] <= 1):
        raise bad("threshold_", "a number in (0, 1]")
    for name, width in (("feature_names_in_", fitted["n_features_in_"]), ("label_names_in_", fitted["n_labels_"])):
        names = fitted[name]
        if names is None:
            continue
        if not isinstance(names, list) or len(names) != width or not all(isinstance(n, str) for n in names):
            raise bad(name, f"null or a list of {width} strings")
        fitted[name] = np.asarray(names, dtype=object)
    try:
        report = FitReport.from_dict(fitted["report_"])
    except ValueError as exc:
        raise ValueError(f"{config_path} is damaged: {exc}") from exc
    share = report["student"].choice
    agree = {"base_weight_": report["blend"].choice, "threshold_": report["threshold"].choice,
             "best_epoch_": report["epoch"].choice, "selection_": report["epoch"].method}
    for name, value in agree.items():
        if fitted[name] != value:
            raise ValueError(f"{config_path} is damaged or was edited: fitted {name} = {fitted[name]!r} but the "
                             f"report says {value!r}")
    n_fits = params.get("n_fits", 1)
    best_epochs = report["epoch"].evidence.get("best_epochs", [fitted["best_epoch_"]])
    if not (isinstance(best_epochs, list) and len(best_epochs) == n_fits and best_epochs[:1] == [fitted["best_epoch_"]]
            and all(is_int(e, 0, fitted["epochs_"]) for e in best_epochs)):
        raise ValueError(f"{config_path} is damaged or was edited: the report's best_epochs must list n_fits = "
                         f"{n_fits} epochs in [0, {fitted['epochs_']}], the first best_epoch_ = "
                         f"{fitted['best_epoch_']}; got {best_epochs!r:.80}")
    if share is not None and not (_is_number(share) and 0 <= share <= 1):
        raise ValueError(f"{config_path} is damaged: the report's student share must be null or a number in [0, 1]")
    if (share is not None) != bool(params.get("student")):
        raise ValueError(f"{config_path} is damaged or was edited: params.student is {params.get('student')!r} but "
                         f"the report {'has' if share is not None else 'has no'} student")
    fitted["report_"] = report
    return fitted
