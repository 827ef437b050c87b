"""Run a whole experiment config: expand, skip what is finished, execute the rest, summarise."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lsnpc.experiments.config import ExperimentConfig, load_config
from lsnpc.experiments.executors import check_execution, execute
from lsnpc.experiments.grid import GroupTask, expand_runs, group_runs
from lsnpc.experiments.runner import GroupResult, prefetch_features
from lsnpc.experiments.store import ResultsStore

__all__ = ["ExperimentSummary", "plan_experiment", "run_experiment"]


@dataclass
class ExperimentSummary:
    """Counts of a grid invocation; ``errors`` maps run id → traceback of failed runs."""

    n_runs: int
    n_skipped: int
    n_done: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    partial_removed: int = 0
    n_elsewhere: int = 0  # runs left to another runner working on the same results folder

    @property
    def n_failed(self) -> int:
        return len(self.errors)


def plan_experiment(config: ExperimentConfig, results_dir: str | Path) -> tuple[list[GroupTask], int, int]:
    """(groups with at least one unfinished run, total runs, runs already finished)."""
    store = ResultsStore(results_dir)
    runs = expand_runs(config)
    finished = store.finished_ids()
    pending = [r for r in runs if r.run_id not in finished]
    return group_runs(pending), len(runs), len(runs) - len(pending)


def run_experiment(
    config: ExperimentConfig | str | Path,
    results_dir: str | Path,
    *,
    jobs: int = 1,
    executor: str = "local",
    threads: int | None = None,
    ray_address: str | None = None,
    on_plan: Callable[[list[GroupTask], int, int], None] | None = None,
    on_result: Callable[[GroupResult], None] | None = None,
) -> ExperimentSummary:
    """Run every unfinished run of ``config`` and write each to ``results_dir``.

    Re-running the same config skips finished runs (a run file that does not hold a complete run is
    redone); leftovers of writes interrupted by a kill are removed first. Several invocations may share
    a results directory: each group runs in only one of them at a time (claims, see
    :class:`~lsnpc.experiments.store.ResultsStore`), so they divide the grid between them.

    Parameters
    ----------
    config : ExperimentConfig or path to a YAML config
    results_dir : path
        The results store (``results_dir/runs/<run_id>.json``).
    jobs, executor, threads, ray_address
        See :func:`lsnpc.experiments.executors.execute`.
    on_plan : callable, optional
        Called once with (groups to run, total runs, finished runs) before anything runs.
    on_result : callable, optional
        Called with each finished group.
    """
    check_execution(executor, jobs)
    if not isinstance(config, ExperimentConfig):
        config = load_config(config)
    start = time.perf_counter()
    store = ResultsStore(results_dir)
    removed = store.remove_partial()
    tasks, n_runs, n_skipped = plan_experiment(config, results_dir)
    if on_plan is not None:
        on_plan(tasks, n_runs, n_skipped)
    summary = ExperimentSummary(n_runs=n_runs, n_skipped=n_skipped, partial_removed=removed)
    if executor == "local" and jobs > 1:
        prefetch_features(tasks, threads)
    for result in execute(tasks, results_dir, jobs=jobs, executor=executor, threads=threads,
                          ray_address=ray_address, on_result=on_result):
        summary.n_done += len(result.rows)
        summary.n_elsewhere += len(result.elsewhere)
        summary.errors.update(result.errors)
    summary.elapsed_s = time.perf_counter() - start
    return summary
