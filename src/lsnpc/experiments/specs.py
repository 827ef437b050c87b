"""The validated form of an experiment config: frozen dataclasses (parsed by :mod:`.config`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DatasetSpec", "NoiseSpec", "ComponentSpec", "GridSpec", "ExperimentConfig"]


@dataclass(frozen=True)
class DatasetSpec:
    """One data set of the grid.

    Attributes
    ----------
    name : str
        A name known to :func:`lsnpc.data.load_dataset` (``synthetic``, ``scene``, ``goemotions``...), a
        file path (.arff, .csv, .npz) or a ``module:attribute`` import path (see
        :mod:`lsnpc.experiments.sources`).
    label : str
        How results and reports name it (default: ``name``, a file's stem); distinct labels let one data set
        appear twice, e.g. with two feature encoders.
    data_home : str or None
        Where the data lives (None: the library's default data home).
    encoder : str or None
        Frozen feature encoder for text or image sets (e.g. ``all-MiniLM-L6-v2``, ``resnet50``);
        ignored for feature sets.
    batch_size : int
        Batch size of the feature encoder.
    cache_dir : str or None
        Feature cache directory (None: the features module's default).
    max_train, max_test : int or None
        Keep at most this many training / test samples (a seeded subsample), to bound run time.
    overrides : dict
        Per-component hyper-parameters for this data set only: ``{component name or label: {param:
        value}}``; they update the component's own ``params``.
    test : str or None
        A file data set's test file (None: a fixed quarter of ``name``'s rows).
    labels : int, list of str or None
        Which columns of a file data set are labels (see :mod:`lsnpc.experiments.sources`).
    """

    name: str
    label: str = ""
    data_home: str | None = None
    encoder: str | None = None
    batch_size: int = 256
    cache_dir: str | None = None
    max_train: int | None = None
    max_test: int | None = None
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    test: str | None = None
    labels: int | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "label": self.label, "data_home": self.data_home, "encoder": self.encoder,
            "batch_size": self.batch_size, "cache_dir": self.cache_dir,
            "max_train": self.max_train, "max_test": self.max_test,
            "overrides": {k: dict(v) for k, v in self.overrides.items()},
            # only when set, so that the run ids of registry data sets stay what they were
            **({"test": self.test} if self.test is not None else {}),
            **({"labels": self.labels if isinstance(self.labels, int) else list(self.labels)}
               if self.labels is not None else {}),
        }


@dataclass(frozen=True)
class NoiseSpec:
    """One noise setting: ``kind`` in :data:`NOISE_KINDS` and ``rate`` in [0, 1)."""

    kind: str
    rate: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rate": self.rate}


@dataclass(frozen=True)
class ComponentSpec:
    """A base classifier or a post-processor: its ``name``, a display ``label`` and ``params``."""

    name: str
    label: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "params": dict(self.params)}


@dataclass(frozen=True)
class GridSpec:
    """One product grid: data sets x noise x classifiers x post-processors x seeds."""

    seeds: tuple[int, ...]
    datasets: tuple[DatasetSpec, ...]
    noise: tuple[NoiseSpec, ...]
    classifiers: tuple[ComponentSpec, ...]
    post_processors: tuple[ComponentSpec, ...]


def _union(items: Any) -> tuple[Any, ...]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment: one or more product grids (see the module docstring).

    The ``datasets`` ... ``seeds`` properties list the union over the grids.
    """

    name: str
    grids: tuple[GridSpec, ...]
    device: str = "cpu"
    description: str = ""

    @property
    def datasets(self) -> tuple[DatasetSpec, ...]:
        return _union(d for g in self.grids for d in g.datasets)

    @property
    def noise(self) -> tuple[NoiseSpec, ...]:
        return _union(n for g in self.grids for n in g.noise)

    @property
    def classifiers(self) -> tuple[ComponentSpec, ...]:
        return _union(c for g in self.grids for c in g.classifiers)

    @property
    def post_processors(self) -> tuple[ComponentSpec, ...]:
        return _union(p for g in self.grids for p in g.post_processors)

    @property
    def seeds(self) -> tuple[int, ...]:
        return _union(s for g in self.grids for s in g.seeds)
