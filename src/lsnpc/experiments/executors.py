"""Executors: where groups run. In this process, in local worker processes, or on Ray.

Every executor ships :class:`~lsnpc.experiments.grid.GroupTask` objects to
:func:`~lsnpc.experiments.runner.run_group` and calls ``on_result`` with each
:class:`~lsnpc.experiments.runner.GroupResult` as it finishes (in completion order).

- ``local`` with ``jobs == 1`` runs the groups one after another in this process.
- ``local`` with ``jobs > 1`` uses a :class:`concurrent.futures.ProcessPoolExecutor` with the
  *spawn* start method (fork is unsafe once torch has started threads); each worker sets its own
  torch thread count, so ``jobs`` workers share the cores instead of oversubscribing them.
- ``ray`` submits one Ray task per group to the cluster that ``ray.init(address)`` connects to (a
  fresh local instance when ``address`` is None and Ray is not started yet). Workers write finished
  runs to ``results_dir`` themselves, which must therefore be on a file system they share; the
  driver writes the rows they return as well, so results also land when it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from lsnpc.experiments.grid import GroupTask
from lsnpc.experiments.runner import GroupResult, run_group
from lsnpc.experiments.store import ResultsStore

__all__ = ["EXECUTORS", "execute", "default_threads"]

EXECUTORS = ("local", "ray")
OnResult = Callable[[GroupResult], None]


def default_threads(jobs: int) -> int:
    """Torch threads per worker: 1.

    The networks of these experiments are small (an MLP over features, batch 32 to 128), and for them
    torch's intra-op threads cost more in synchronisation than they gain: measured on this project's
    2-core machine under load, one MLP fit took 3.9 s with 1 thread and 67 s with torch's default.
    Parallelism comes from running more groups at once (``jobs``), not more threads per group.
    """
    return 1


def _init_worker(threads: int) -> None:
    # Runs inside each spawned worker process: its thread count is its own business.
    import torch

    torch.set_num_threads(threads)


def _run_in_worker(task: GroupTask, results_dir: str | None, threads: int) -> GroupResult:
    _init_worker(threads)
    return run_group(task, results_dir, threads=threads)


def execute(
    tasks: Sequence[GroupTask],
    results_dir: str | Path | None,
    *,
    jobs: int = 1,
    executor: str = "local",
    threads: int | None = None,
    ray_address: str | None = None,
    on_result: OnResult | None = None,
) -> list[GroupResult]:
    """Run ``tasks`` and return their results (in completion order).

    Parameters
    ----------
    tasks : sequence of GroupTask
        The groups to run.
    results_dir : path or None
        Where finished runs are written (None: nowhere, rows are only returned).
    jobs : int
        Worker processes for ``local`` (1: run here); maximum concurrent tasks for ``ray``.
    executor : {"local", "ray"}
        The backend.
    threads : int, optional
        Torch threads per worker (default: :func:`default_threads`). Passed to every estimator as
        ``n_threads``; spawned workers also set it process-wide. With ``jobs == 1`` this
        process's global setting is left alone (the estimators scope their own).
    ray_address : str, optional
        Address of a running Ray cluster (``ray`` only).
    on_result : callable, optional
        Called with each GroupResult as it finishes (progress bars hook in here).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    threads = threads if threads is not None else default_threads(jobs)
    results_path = str(results_dir) if results_dir is not None else None
    done: list[GroupResult] = []

    def finish(result: GroupResult) -> None:
        done.append(result)
        if on_result is not None:
            on_result(result)

    if executor == "ray":
        _execute_ray(tasks, results_path, jobs=jobs, threads=threads, address=ray_address, finish=finish)
    elif jobs == 1:
        for task in tasks:
            finish(run_group(task, results_path, threads=threads))
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"),
                                 initializer=_init_worker, initargs=(threads,)) as pool:
            futures = [pool.submit(run_group, task, results_path, threads=threads) for task in tasks]
            for future in as_completed(futures):
                finish(future.result())
    return done


def _execute_ray(
    tasks: Sequence[GroupTask],
    results_path: str | None,
    *,
    jobs: int,
    threads: int,
    address: str | None,
    finish: Callable[[GroupResult], None],
) -> None:
    try:
        import ray
    except ImportError as exc:  # the optional extra
        raise ValueError("the ray executor needs Ray: pip install 'lsnpc[ray]'") from exc
    if not ray.is_initialized():
        if address is not None:
            ray.init(address=address)
        else:
            # Ray renices its workers to 15 by default; here the workers do all the work, and at
            # nice 15 on a busy machine they starve (a torch import took minutes).
            ray.init(num_cpus=max(jobs * threads, 1), include_dashboard=False,
                     _system_config={"worker_niceness": 0})
    remote = ray.remote(num_cpus=threads)(_run_in_worker)
    store = ResultsStore(results_path) if results_path is not None else None
    queue = list(tasks)
    in_flight: list[Any] = []
    # Keep at most `jobs` tasks in flight so a huge grid does not flood the object store.
    while queue or in_flight:
        while queue and len(in_flight) < jobs:
            in_flight.append(remote.remote(queue.pop(0), results_path, threads))
        ready, in_flight = ray.wait(in_flight, num_returns=1)
        result: GroupResult = ray.get(ready[0])
        if store is not None:
            for row in result.rows:
                if not store.has(row["run_id"]):
                    store.write(row)
        finish(result)
