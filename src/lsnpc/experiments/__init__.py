"""The experimental system: configs, grid expansion, the runner, executors, results store, reports.

Typical use::

    from lsnpc.experiments import load_config, run_experiment, load_results, write_report
    summary = run_experiment(load_config("configs/offline.yaml"), "results/offline", jobs=2)
    df = load_results("results/offline")          # one row per run
    write_report("results/offline", "results/offline/report")

Nothing heavy (torch, pandas, matplotlib) is imported until it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConfigError": "config",
    "ExperimentConfig": "config",
    "DatasetSpec": "config",
    "NoiseSpec": "config",
    "ComponentSpec": "config",
    "load_config": "config",
    "parse_config": "config",
    "Component": "components",
    "COMPONENTS": "components",
    "CLASSIFIERS": "components",
    "POST_PROCESSORS": "components",
    "RUNNER_OPTIONS": "components",
    "get_component": "components",
    "RunSpec": "grid",
    "GroupTask": "grid",
    "expand_runs": "grid",
    "group_runs": "grid",
    "ResultsStore": "store",
    "load_results": "store",
    "run_group": "runner",
    "GroupResult": "runner",
    "execute": "executors",
    "run_experiment": "experiment",
    "plan_experiment": "experiment",
    "ExperimentSummary": "experiment",
    "summary_table": "report",
    "write_report": "report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"lsnpc.experiments.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'lsnpc.experiments' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
