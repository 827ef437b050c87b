"""Grid expansion: a config becomes runs, and runs are grouped into tasks.

A *run* is one (data set, noise, base classifier, post-processor, seed); its result is a pure
function of its :class:`RunSpec`. A *group* (one task for an executor) is every run sharing a
(data set, noise, seed): the features, the noisy labels and the base classifiers are computed once
per group and shared by all its post-processors.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from lsnpc.experiments.config import ComponentSpec, DatasetSpec, ExperimentConfig, NoiseSpec

__all__ = ["RunSpec", "GroupTask", "expand_runs", "group_runs"]


@dataclass(frozen=True)
class RunSpec:
    """One run of a grid. ``run_id`` is a hash of everything that determines its result."""

    experiment: str
    dataset: DatasetSpec
    noise: NoiseSpec
    classifier: ComponentSpec
    processor: ComponentSpec
    seed: int
    device: str = "cpu"

    def identity(self) -> dict[str, Any]:
        """The fields that determine the result (the experiment's name and the device do not)."""
        data = self.dataset.to_dict()
        data.pop("overrides")  # already folded into the component params
        return {
            "dataset": data,
            "noise": self.noise.to_dict(),
            "classifier": self.classifier.to_dict(),
            "processor": self.processor.to_dict(),
            "seed": self.seed,
        }

    @property
    def run_id(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, default=str).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:20]

    @property
    def group_key(self) -> tuple[str, str, float, int]:
        data = json.dumps(self.identity()["dataset"], sort_keys=True)
        return (data, self.noise.kind, self.noise.rate, self.seed)

    def flat(self) -> dict[str, Any]:
        """The run's config as flat columns for the results table."""
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "dataset": self.dataset.label,
            "dataset_name": self.dataset.name,
            "data_home": self.dataset.data_home,
            "encoder": self.dataset.encoder,
            "max_train": self.dataset.max_train,
            "max_test": self.dataset.max_test,
            "noise_kind": self.noise.kind,
            "noise_rate": self.noise.rate,
            "classifier": self.classifier.label,
            "classifier_name": self.classifier.name,
            "classifier_params": json.dumps(dict(self.classifier.params), sort_keys=True),
            "processor": self.processor.label,
            "processor_name": self.processor.name,
            "processor_params": json.dumps(dict(self.processor.params), sort_keys=True),
            "seed": self.seed,
            "device": self.device,
        }


@dataclass(frozen=True)
class GroupTask:
    """The runs sharing one (data set, noise, seed): one unit of work for an executor."""

    dataset: DatasetSpec
    noise: NoiseSpec
    seed: int
    device: str
    runs: tuple[RunSpec, ...]

    @property
    def key(self) -> str:
        return f"{self.dataset.label}/{self.noise.kind}-{self.noise.rate:g}/seed{self.seed}"


def _with_overrides(component: ComponentSpec, dataset: DatasetSpec) -> ComponentSpec:
    params = dict(component.params)
    for key in (component.name, component.label):  # the label is more specific, so it wins
        params.update(dataset.overrides.get(key, {}))
    return ComponentSpec(name=component.name, label=component.label, params=params)


def expand_runs(config: ExperimentConfig) -> list[RunSpec]:
    """Every run of the grid, in a stable order (data set, noise, seed, classifier, processor)."""
    runs: dict[str, RunSpec] = {}  # run id -> run: grids that overlap do not run anything twice
    for grid in config.grids:
        for dataset, noise, seed, classifier, processor in itertools.product(
            grid.datasets, grid.noise, grid.seeds, grid.classifiers, grid.post_processors
        ):
            run = RunSpec(
                experiment=config.name,
                dataset=dataset,
                noise=noise,
                classifier=_with_overrides(classifier, dataset),
                processor=_with_overrides(processor, dataset),
                seed=seed,
                device=config.device,
            )
            runs.setdefault(run.run_id, run)
    return list(runs.values())


def group_runs(runs: list[RunSpec]) -> list[GroupTask]:
    """Group runs by (data set, noise, seed), keeping the first-seen order."""
    groups: dict[tuple[str, str, float, int], list[RunSpec]] = {}
    for run in runs:
        groups.setdefault(run.group_key, []).append(run)
    return [
        GroupTask(dataset=members[0].dataset, noise=members[0].noise, seed=members[0].seed,
                  device=members[0].device, runs=tuple(members))
        for members in groups.values()
    ]
