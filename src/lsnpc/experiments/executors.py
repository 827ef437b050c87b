"""Executors: where groups run. In this process, in local worker processes, or on Ray.

Every executor ships :class:`~lsnpc.experiments.grid.GroupTask` objects to
:func:`~lsnpc.experiments.runner.run_group` and calls ``on_result`` with each
:class:`~lsnpc.experiments.runner.GroupResult` as it finishes (in completion order).

- ``local`` with ``jobs == 1`` runs the groups one after another in this process.
- ``local`` with ``jobs > 1`` uses a :class:`concurrent.futures.ProcessPoolExecutor` with the
  *spawn* start method (fork is unsafe once torch has started threads); each worker sets its own
  torch thread count, so ``jobs`` workers share the cores instead of oversubscribing them, and ends
  itself when its parent is gone (a runner killed with ``kill -9`` cannot stop its workers).
- ``ray`` submits one Ray task per group to the cluster that ``ray.init(address)`` connects to (a
  fresh local instance when ``address`` is None and Ray is not started yet). Workers write finished
  runs to ``results_dir`` themselves, which must therefore be on a file system they share; the
  driver writes the rows they return as well, so results also land when it does not.

With a results folder, a group runs only under its claim (:meth:`ResultsStore.claim`): a group that
another runner on the same folder is working on is left to it and reported in
``GroupResult.elsewhere``. Local groups are claimed by the process that runs them, Ray groups by the
driver.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from lsnpc.experiments.grid import GroupTask
from lsnpc.experiments.runner import GroupResult, run_group
from lsnpc.experiments.store import ResultsStore

__all__ = ["EXECUTORS", "execute", "check_execution", "default_threads"]

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


def _init_worker(threads: int, parent_pid: int | None = None) -> None:
    # Runs inside each spawned worker process: its thread count is its own business.
    import torch

    torch.set_num_threads(threads)
    # a worker's warnings reach the terminal as the command's own do: one line each, not Python's file-and-line
    warnings.showwarning = _warning_line
    if parent_pid is not None:
        _exit_with_parent(parent_pid)


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """``warnings.showwarning`` in a worker process: ``warning: <message>`` on one line of stderr."""
    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def _exit_with_parent(parent_pid: int, interval_s: float = 1.0) -> None:
    """End this process (within ``interval_s``) once its parent is gone.

    A parent killed with SIGKILL cannot tell its workers; without this they run their group to the end
    (minutes, hundreds of MB each) as orphans. An orphan is re-parented, so its parent pid changes.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="lsnpc-exit-with-parent", daemon=True).start()


def _run_claimed(task: GroupTask, results_dir: str | None, threads: int) -> GroupResult:
    """:func:`run_group` under the group's claim in ``results_dir`` (no claim without a results folder)."""
    if results_dir is None:
        return run_group(task, None, threads=threads)
    with ResultsStore(results_dir).claimed(task.key) as mine:
        if not mine:
            return GroupResult(key=task.key, elsewhere=[run.run_id for run in task.runs])
        return run_group(task, results_dir, threads=threads)


def _run_in_worker(task: GroupTask, results_dir: str | None, threads: int) -> GroupResult:
    _init_worker(threads)
    return run_group(task, results_dir, threads=threads)


def check_execution(executor: str, jobs: int) -> None:
    """Raise ValueError unless ``executor`` is known and ``jobs`` a positive integer."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")


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
    check_execution(executor, jobs)
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
            finish(_run_claimed(task, results_path, threads))
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"),
                                 initializer=_init_worker, initargs=(threads, os.getpid())) as pool:
            futures = [pool.submit(_run_claimed, task, results_path, threads) for task in tasks]
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
    claimed: dict[Any, str] = {}  # object ref -> the group key this driver holds the claim of
    try:
        # Keep at most `jobs` tasks in flight so a huge grid does not flood the object store.
        while queue or in_flight:
            while queue and len(in_flight) < jobs:
                task = queue.pop(0)
                if store is not None and not store.claim(task.key):
                    finish(GroupResult(key=task.key, elsewhere=[run.run_id for run in task.runs]))
                    continue
                ref = remote.remote(task, results_path, threads)
                in_flight.append(ref)
                claimed[ref] = task.key
            if not in_flight:
                continue
            ready, in_flight = ray.wait(in_flight, num_returns=1)
            result: GroupResult = ray.get(ready[0])
            if store is not None:
                for row in result.rows:
                    if not store.has(row["run_id"]):
                        store.write(row)
                store.release(claimed.pop(ready[0]))
            finish(result)
    finally:
        if store is not None:
            for key in claimed.values():
                store.release(key)
