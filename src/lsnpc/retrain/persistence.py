"""Saving and loading a fitted CorrectedLabelsClassifier: one folder, safetensors + JSON, checksummed.

Layout of ``path/``::

    config.json                  {"format": "lsnpc-retrained", "format_version": 4, "params": {...},
                                  "fitted": {...}, "files": {name: sha256, ...}, "config_sha256": ...}
    arrays.safetensors           labels_, train_rows_ and oof_probs_
    model-<name>.<file>          each model of ``models_`` ("noisy", "retrained"), as its own ``save`` writes
                                 it (lsnpc's classifiers only)
    corrector-<candidate>.<file> each LSNPC of ``correctors_`` (by candidate name: "noisy+lsnpc", ...), as
                                 ``LSNPC.save`` writes it

The models' and correctors' folders are stored flat under a prefix, so the folder holds files only
and the atomic write (:func:`lsnpc._io.atomic_directory`) can replace it whole. Loading checks every file's
SHA-256 against the config before it is read; the parts' own loaders check them again.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_json, user_path
from .._saving import (
    CONFIG_NAME,
    check_file,
    check_optional_fitted,
    check_target,
    file_digest,
    is_int,
    optional_fitted,
    read_config,
    read_tensors,
    restore_optional_fitted,
    saved_folder,
    seal,
    write_tensors,
)
from .selection import CANDIDATES, RetrainReport, model_of

__all__ = ["FORMAT", "check_save_target", "save_retrained", "load_retrained"]

FORMAT = "lsnpc-retrained"
FORMAT_VERSION = 4  # 2: the report says which candidates could replace the mean; 3: LSNPC post-hoc's part;
# 4: the report's test against the given-label model (given_test), and the floor on each label's positives
#: The versions load reads: a version-3 estimator loads with ``report_.given_test`` None (it predates the test).
READ_VERSIONS = (3, 4)
ARRAYS_NAME = "arrays.safetensors"
_PARTS = ("model-noisy", "model-retrained", *(f"corrector-{name}" for name in CANDIDATES if "+" in name))
_WHAT = "CorrectedLabelsClassifier"


def _params(model: Any) -> dict[str, Any]:
    params = model.get_params(deep=False)
    if callable(params["scoring"]):
        raise ValueError("save needs a named scoring ('micro+macro', 'micro_f1' or 'macro_f1'); a callable cannot "
                         "be written without pickling it")
    params["estimator"] = None if params["estimator"] is None else "given"
    params["random_state"] = params["random_state"] if isinstance(params["random_state"], int) else None
    if not isinstance(params["thresholds"], str):
        params["thresholds"] = [float(t) for t in params["thresholds"]]
    params["corrector_params"] = None if params["corrector_params"] is None else dict(params["corrector_params"])
    return params


def _owned_by_existing(path: Path) -> set[str]:
    """The part files a saved estimator already at ``path`` lists (they may differ from the new ones)."""
    try:
        return set(read_config(path, fmt=FORMAT, versions=tuple(range(1, FORMAT_VERSION + 1)), what=_WHAT)["files"])
    except (ValueError, KeyError, TypeError):
        return set()


def check_save_target(path: str | Path, *, overwrite: bool = False) -> None:
    """Raise FileExistsError, saying what to do, where :func:`save_retrained` would refuse ``path`` (before a
    long fit): a folder that is not a saved estimator, one without ``overwrite``, a file, a link, the current
    folder or a parent of it. The save itself checks again."""
    target = user_path(path)
    check_target(target, fmt=FORMAT, what=_WHAT, overwrite=overwrite,
                 owned={CONFIG_NAME, ARRAYS_NAME, *_owned_by_existing(target)})


def save_retrained(model: Any, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``model`` (fitted) to the folder ``path`` atomically; return the path."""
    from .. import __version__
    from ..classifiers import classifier_classes

    for kept in model.models_.values():
        if classifier_classes().get(type(kept).__name__) is not type(kept):
            raise ValueError(f"save writes the models in lsnpc's safetensors format, which only lsnpc's classifiers "
                             f"({', '.join(classifier_classes())}) have, not {type(kept).__module__}."
                             f"{type(kept).__qualname__}: save it with its own tools (e.g. skops for scikit-learn) "
                             "and labels_ with numpy")
    params = _params(model)
    target = user_path(path)
    check_save_target(target, overwrite=overwrite)
    with tempfile.TemporaryDirectory() as staging:
        parts = {**{f"model-{k}": v for k, v in model.models_.items()},
                 **{f"corrector-{k}": v for k, v in model.correctors_.items()}}
        files: dict[str, Path] = {}
        for name, part in parts.items():
            part.save(Path(staging) / name)
            files.update({f"{name}.{f.name}": f for f in sorted((Path(staging) / name).iterdir())})
        owned = {CONFIG_NAME, ARRAYS_NAME, *files, *_owned_by_existing(target)}
        with saved_folder(target, owned=owned, overwrite=overwrite) as tmp:
            digests = {ARRAYS_NAME: write_tensors(tmp / ARRAYS_NAME, {
                "labels_": model.labels_, "train_rows_": model.train_rows_.astype(np.uint8),
                "oof_probs_": model.oof_probs_}, fmt=FORMAT)}
            for name, source in files.items():
                shutil.copyfile(source, tmp / name)
                digests[name] = file_digest(tmp / name)
            config = {"format": FORMAT, "format_version": FORMAT_VERSION, "lsnpc_version": __version__,
                      "params": params, "files": digests,
                      "fitted": {"report_": model.report_.to_dict(), "threshold_": model.threshold_,
                                 "n_features_in_": model.n_features_in_, "n_labels_": model.n_labels_,
                                 **optional_fitted(model)}}
            atomic_write_json(tmp / CONFIG_NAME, seal(config))
    return target


def load_retrained(cls: type, path: str | Path, *, device: str = "cpu") -> Any:
    """Load what :func:`save_retrained` wrote, every file checked first."""
    from sklearn.base import clone

    from ..classifiers import classifier_classes
    from ..classifiers.persistence import load_classifier
    from ..corrector import LSNPC

    folder = user_path(path)
    config = read_config(folder, fmt=FORMAT, versions=READ_VERSIONS, what=_WHAT, older="fit it again")
    config_path = folder / CONFIG_NAME
    files, params, fitted = config.get("files"), config.get("params"), config.get("fitted")
    if not isinstance(files, dict) or not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValueError(f"{config_path} is damaged: 'files', 'params' and 'fitted' must be objects")
    unknown = sorted(set(params) - set(cls._get_param_names()))
    if unknown:
        raise ValueError(f"{config_path} has parameters this lsnpc does not know: {', '.join(unknown)}")
    try:
        report = RetrainReport.from_dict(fitted.get("report_"))
    except ValueError as exc:
        raise ValueError(f"{config_path} is damaged: {exc}") from exc
    check_optional_fitted(fitted, config_path)
    n_features, n_labels, threshold = (fitted.get(k) for k in ("n_features_in_", "n_labels_", "threshold_"))
    if not all(is_int(v, 1) for v in (n_features, n_labels)):
        raise ValueError(f"{config_path} is damaged: n_features_in_ and n_labels_ must be positive integers")
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 < threshold <= 1:
        raise ValueError(f"{config_path} is damaged: threshold_ must be a number in (0, 1], got {threshold!r}")
    for name in files:
        if name != ARRAYS_NAME and name.partition(".")[0] not in _PARTS:
            raise ValueError(f"{config_path} is damaged: it lists {name!r}, which is no part of a saved {_WHAT}")
    arrays = read_tensors(folder, ARRAYS_NAME, files.get(ARRAYS_NAME))
    labels, oof, rows = arrays.get("labels_"), arrays.get("oof_probs_"), arrays.get("train_rows_")
    if labels is None or oof is None or rows is None or tuple(labels.shape) != tuple(oof.shape) or labels.ndim != 2 \
            or labels.shape[1] != n_labels or tuple(rows.shape) != (labels.shape[0],):
        raise ValueError(f"{folder / ARRAYS_NAME} is damaged: it must hold labels_ and oof_probs_ of shape (n, "
                         f"{n_labels}) and train_rows_ of shape (n,)")
    with tempfile.TemporaryDirectory() as staging:
        for part in _PARTS:
            for name, sha in files.items():
                if name.startswith(f"{part}."):
                    (Path(staging) / part).mkdir(exist_ok=True)
                    shutil.copyfile(check_file(folder, name, sha), Path(staging) / part / name[len(part) + 1:])
        present = {part for part in _PARTS if (Path(staging) / part).is_dir()}
        needed = {f"model-{model_of(c)}" for c in report.components} | {
            f"corrector-{c}" for c in report.components if "+" in c}
        if present != needed:
            raise ValueError(f"{config_path} is damaged: the kept candidate {report.kept!r} needs "
                             f"{', '.join(sorted(needed))}, but the folder holds {', '.join(sorted(present)) or 'none'}")
        models = {part.removeprefix("model-"): load_classifier(Path(staging) / part, classes=classifier_classes(),
                                                                      device=device)
                  for part in sorted(present) if part.startswith("model-")}
        correctors = {part.removeprefix("corrector-"): LSNPC.load(Path(staging) / part, device=device)
                      for part in sorted(present) if part.startswith("corrector-")}
    for estimator in models.values():
        if estimator.n_labels_ != n_labels or estimator.n_features_in_ != n_features:
            raise ValueError(f"{config_path} is damaged: a saved model has {estimator.n_features_in_} features and "
                             f"{estimator.n_labels_} labels, the config says {n_features} and {n_labels}")
    estimator = next(iter(models.values()))
    template = None if params.get("estimator") is None else clone(estimator)
    if config.get("format_version") == 3:  # before the floor on labels' positives: none was applied
        params = {"min_positive_fraction": None, **params}
    model = cls(**{**params, "estimator": template, "device": device})
    if isinstance(model.thresholds, list):
        model.thresholds = tuple(model.thresholds)
    try:
        model._check_params()
    except ValueError as exc:
        raise ValueError(f"{config_path} is damaged: parameter {exc}") from exc
    model.models_, model.correctors_ = models, correctors
    model.labels_ = labels.numpy().astype(np.int64)
    model.oof_probs_ = oof.numpy().astype(np.float32)
    model.train_rows_ = rows.numpy().astype(bool)
    model.threshold_ = float(threshold)
    model.report_ = report
    model.n_features_in_, model.n_labels_ = n_features, n_labels
    restore_optional_fitted(model, fitted)
    return model
