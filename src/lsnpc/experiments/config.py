"""Experiment configs: a YAML file describing a grid, validated into frozen dataclasses.

A config names the data sets, the noise settings, the base classifiers, the post-processors and the
seeds; the grid is their product (see :mod:`lsnpc.experiments.grid`). Every validation error is a
:class:`ConfigError` (a ``ValueError``) whose message starts with the path of the offending field,
e.g. ``post_processors[2].name: must be one of ...``.

Example
-------
.. code-block:: yaml

    name: smoke
    seeds: 2                      # or a list: [0, 1]
    device: cpu
    datasets:
      - name: synthetic
        max_train: 400            # subsample (after the paper split) to keep runs short
    noise:                        # a list of {kind, rate}, or kinds x rates:
      kinds: [symmetric, pairflip]
      rates: [0.0, 0.3]           # rate 0 is one clean setting, whatever the kind
    classifiers:
      - name: mlp
        params: {epochs: 5}
    post_processors:
      - none
      - knn
      - name: lsnpc
        params: {epochs: 2}
      - name: lsnpc
        sweep: {nu0: [2.01, 3], nu: [2.01, learned]}   # one post-processor per combination
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lsnpc.experiments.components import (
    CLASSIFIERS,
    NOISE_KINDS,
    POST_PROCESSORS,
    get_component,
    get_noise,
    is_import_path,
)
from lsnpc.experiments.specs import (
    ComponentSpec,
    DatasetSpec,
    ExperimentConfig,
    GridSpec,
    NoiseSpec,
)

__all__ = [
    "CLASSIFIERS",
    "NOISE_KINDS",
    "POST_PROCESSORS",
    "ComponentSpec",
    "ConfigError",
    "DatasetSpec",
    "ExperimentConfig",
    "GridSpec",
    "NoiseSpec",
    "load_config",
    "parse_config",
]

# NOISE_KINDS, CLASSIFIERS and POST_PROCESSORS are the built-in names of the component registry
# (lsnpc.experiments.components); a grid may also name a researcher's own by import path.

_DATASET_KEYS = {
    "name", "label", "data_home", "encoder", "batch_size", "cache_dir", "max_train", "max_test", "overrides",
    "test", "labels",
}
_GRID_KEYS = {"seeds", "datasets", "noise", "classifiers", "post_processors"}
_TOP_KEYS = {"name", "description", "device", "grids", *_GRID_KEYS}


class ConfigError(ValueError):
    """An experiment config is invalid; the message names the field."""


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a YAML experiment config.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ConfigError
        If the YAML is malformed or a field is invalid (the message names the field).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_config(raw, default_name=path.stem, base_dir=path.parent)


def parse_config(raw: Any, *, default_name: str = "experiment", base_dir: str | Path | None = None) -> ExperimentConfig:
    """Validate a config already parsed into Python objects (dicts, lists, scalars).

    With a ``grids`` list, each entry is a partial grid whose missing fields come from the top level
    (so a config can hold several product grids that are not one product, like the paper's
    ablation); without it the top level is the one grid.

    Relative file paths in the config (data files, ``file.py:attribute`` import paths) are relative to
    ``base_dir`` (the YAML file's folder; default: the current directory) and are stored absolute.
    Every name is resolved here (user modules imported, files looked for), so that a name a run could
    not use fails now, with the field's path.
    """
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: must be a mapping of fields, got {type(raw).__name__}")
    _no_unknown(raw, _TOP_KEYS, "config")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"name: must be a non-empty string, got {name!r}")
    device = raw.get("device", "cpu")
    if not isinstance(device, str):
        raise ConfigError(f"device: must be a string such as 'cpu' or 'cuda', got {device!r}")
    defaults = {k: raw[k] for k in _GRID_KEYS if k in raw}
    if "grids" in raw:
        grids = []
        for i, part in enumerate(_seq(raw["grids"], "grids")):
            if not isinstance(part, Mapping):
                raise ConfigError(f"grids[{i}]: must be a mapping of grid fields, got {part!r}")
            _no_unknown(part, _GRID_KEYS, f"grids[{i}]")
            grids.append(_parse_grid({**defaults, **part}, f"grids[{i}].", base))
    else:
        grids = [_parse_grid(defaults, "", base)]
    return ExperimentConfig(name=name, description=str(raw.get("description", "")), device=device,
                            grids=tuple(grids))


def _parse_grid(raw: Mapping[str, Any], prefix: str, base: Path) -> GridSpec:
    for key in ("datasets", "noise", "classifiers", "post_processors"):
        if key not in raw:
            raise ConfigError(f"{prefix}{key}: required field is missing")
    datasets = tuple(
        _parse_dataset(item, f"{prefix}datasets[{i}]", base)
        for i, item in enumerate(_seq(raw["datasets"], f"{prefix}datasets"))
    )
    _unique([d.label for d in datasets], f"{prefix}datasets", "label")
    classifiers = tuple(
        c for i, item in enumerate(_seq(raw["classifiers"], f"{prefix}classifiers"))
        for c in _parse_component(item, f"{prefix}classifiers[{i}]", "classifier", base)
    )
    _unique([c.label for c in classifiers], f"{prefix}classifiers", "label")
    processors = tuple(
        p for i, item in enumerate(_seq(raw["post_processors"], f"{prefix}post_processors"))
        for p in _parse_component(item, f"{prefix}post_processors[{i}]", "post_processor", base)
    )
    _unique([p.label for p in processors], f"{prefix}post_processors", "label")
    return GridSpec(
        seeds=_parse_seeds(raw.get("seeds", 1), f"{prefix}seeds"),
        datasets=datasets,
        noise=_parse_noise(raw["noise"], f"{prefix}noise", base),
        classifiers=classifiers,
        post_processors=processors,
    )


# ----------------------------------------------------------------------------- helpers


def _no_unknown(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _seq(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: must be a non-empty list, got {value!r}")
    return value


def _unique(values: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for i, v in enumerate(values):
        if v in seen:
            raise ConfigError(f"{where}[{i}].{what}: duplicate {what} {v!r} (give each a distinct label)")
        seen.add(v)


def _positive_int(value: Any, where: str, *, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: must be a positive integer, got {value!r}")
    return value


def _parse_seeds(value: Any, where: str = "seeds") -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(f"{where}: an integer means 'this many seeds' and must be >= 1, got {value}")
        return tuple(range(value))
    if isinstance(value, list) and value:
        for i, s in enumerate(value):
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ConfigError(f"{where}[{i}]: must be a non-negative integer, got {s!r}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{where}: must not repeat a seed, got {value}")
        return tuple(value)
    raise ConfigError(f"{where}: must be a positive integer or a non-empty list of integers, got {value!r}")


def _absolute(name: str, base: Path) -> str:
    """``name`` with a relative file path (a data file, or the file of a ``file.py:attribute`` import path)
    made absolute against ``base``; other names unchanged."""
    from lsnpc.experiments.sources import is_file_source

    if is_import_path(name) and name.split(":")[0].endswith(".py"):
        module, attribute = name.split(":")
        return f"{(base / module).resolve()}:{attribute}"
    if is_file_source(name):
        return str((base / name).resolve())
    return name


def _parse_labels(value: Any, where: str) -> int | tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value != 0:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: must be n (the first n columns are labels), -n (the last n) or a list of "
                      f"label column names, got {value!r}")


def _parse_dataset(item: Any, where: str, base: Path) -> DatasetSpec:
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: must be a data set name or a mapping, got {item!r}")
    _no_unknown(item, _DATASET_KEYS, where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: must be a non-empty string, got {name!r}")
    for key in ("data_home", "encoder", "cache_dir"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise ConfigError(f"{where}.{key}: must be a string, got {item[key]!r}")
    overrides = item.get("overrides", {}) or {}
    if not isinstance(overrides, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Mapping) for k, v in overrides.items()
    ):
        raise ConfigError(
            f"{where}.overrides: must map a component name or label to a mapping of parameters, "
            f"got {overrides!r}"
        )
    from lsnpc.experiments.sources import check_source, is_file_source

    if item.get("test") is not None and not (isinstance(item["test"], str) and is_file_source(item["test"])):
        raise ConfigError(f"{where}.test: must be a data file path (.arff, .csv, .npz), got {item['test']!r}")
    if item.get("test") is not None and not is_file_source(name):
        raise ConfigError(f"{where}.test: only a data set read from a file takes a test file; {name!r} is not one")
    default_label = Path(name).stem if is_file_source(name) else name.split(":")[-1] if is_import_path(name) else name
    label = item.get("label", default_label)
    if not isinstance(label, str) or not label:
        raise ConfigError(f"{where}.label: must be a non-empty string, got {label!r}")
    name = _absolute(name, base)
    test = _absolute(item["test"], base) if item.get("test") is not None else None
    spec_labels = _parse_labels(item.get("labels"), f"{where}.labels")
    try:
        check_source(DatasetSpec(name=name, test=test))
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(f"{where}.name: {exc}") from None
    return DatasetSpec(
        name=name,
        test=test,
        labels=spec_labels,
        label=label,
        data_home=item.get("data_home"),
        encoder=item.get("encoder"),
        batch_size=_positive_int(item.get("batch_size", 256), f"{where}.batch_size", allow_none=False),
        cache_dir=item.get("cache_dir"),
        max_train=_positive_int(item.get("max_train"), f"{where}.max_train"),
        max_test=_positive_int(item.get("max_test"), f"{where}.max_test"),
        overrides={k: dict(v) for k, v in overrides.items()},
    )


def _parse_rate(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value < 1.0):
        raise ConfigError(f"{where}: must be a number in [0, 1), got {value!r}")
    return float(value)


def _parse_kind(value: Any, where: str, base: Path) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be one of {', '.join(NOISE_KINDS)} or an import path "
                          f"'module:function'; got {value!r}")
    value = _absolute(value, base)
    try:
        get_noise(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value


def _parse_noise(value: Any, where: str = "noise", base: Path | None = None) -> tuple[NoiseSpec, ...]:
    base = base if base is not None else Path.cwd()
    specs: list[NoiseSpec] = []
    if isinstance(value, Mapping):
        _no_unknown(value, {"kinds", "rates"}, where)
        kinds = [_parse_kind(k, f"{where}.kinds[{i}]", base)
                 for i, k in enumerate(_seq(value.get("kinds"), f"{where}.kinds"))]
        rates = [_parse_rate(r, f"{where}.rates[{i}]")
                 for i, r in enumerate(_seq(value.get("rates"), f"{where}.rates"))]
        specs = [NoiseSpec(k, r) for r in rates for k in kinds]
    else:
        for i, item in enumerate(_seq(value, where)):
            if not isinstance(item, Mapping):
                raise ConfigError(f"{where}[{i}]: must be a mapping {{kind, rate}}, got {item!r}")
            _no_unknown(item, {"kind", "rate"}, f"{where}[{i}]")
            specs.append(NoiseSpec(_parse_kind(item.get("kind"), f"{where}[{i}].kind", base),
                                   _parse_rate(item.get("rate"), f"{where}[{i}].rate")))
    # Rate 0 leaves labels untouched whatever the kind: keep one clean setting (under the first
    # kind listed, as the paper's Table 3 prints 0% once) so it is not trained twice.
    out: list[NoiseSpec] = []
    clean_seen = False
    for spec in specs:
        if spec.rate == 0.0:
            if clean_seen:
                continue
            clean_seen = True
        if spec not in out:
            out.append(spec)
    return tuple(out)


def _format_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _parse_component(item: Any, where: str, role: str, base: Path) -> list[ComponentSpec]:
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: must be a name or a mapping {{name, label, params, sweep}}, got {item!r}")
    _no_unknown(item, {"name", "label", "params", "sweep"}, where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        choices = CLASSIFIERS if role == "classifier" else POST_PROCESSORS
        raise ConfigError(f"{where}.name: must be one of {', '.join(choices)} or an import path "
                          f"'module:attribute'; got {name!r}")
    default_label = name.split(":")[-1] if is_import_path(name) else name
    name = _absolute(name, base)
    try:
        get_component(name, role)
    except ValueError as exc:
        raise ConfigError(f"{where}.name: {exc}") from None
    params = item.get("params", {}) or {}
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ConfigError(f"{where}.params: must be a mapping of parameter names to values, got {params!r}")
    for key, val in params.items():
        if isinstance(val, float) and not math.isfinite(val):
            raise ConfigError(f"{where}.params.{key}: must be finite, got {val!r}")
    label = item.get("label", default_label)
    if not isinstance(label, str) or not label:
        raise ConfigError(f"{where}.label: must be a non-empty string, got {label!r}")
    sweep = item.get("sweep")
    if sweep is None:
        return [_checked(ComponentSpec(name=name, label=label, params=dict(params)), where, role)]
    if not isinstance(sweep, Mapping) or not sweep:
        raise ConfigError(f"{where}.sweep: must map parameter names to lists of values, got {sweep!r}")
    keys = list(sweep)
    for key in keys:
        if not isinstance(sweep[key], list) or not sweep[key]:
            raise ConfigError(f"{where}.sweep.{key}: must be a non-empty list of values, got {sweep[key]!r}")
    out = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        values = dict(zip(keys, combo, strict=True))
        suffix = ",".join(f"{k}={_format_value(v)}" for k, v in values.items())
        out.append(_checked(ComponentSpec(name=name, label=f"{label}[{suffix}]", params={**params, **values}), where, role))
    return out


def _checked(spec: ComponentSpec, where: str, role: str) -> ComponentSpec:
    """``spec`` once its runner options (clean_set, select_on, encoder) are valid for its component."""
    try:
        get_component(spec.name, role).split_params(spec.params)
    except ValueError as exc:
        raise ConfigError(f"{where}.params.{exc}") from None
    return spec
