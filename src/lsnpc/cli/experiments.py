"""``lsnpc experiment run / plan`` and ``lsnpc report``: grids of runs and their report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ._app import (
    JSON_OPTION, _console, _print_json, _progress, _status, _stderr, _user_errors, app, experiment_app,
)

@experiment_app.command("run")
@_user_errors
def experiment_run(
    config: Annotated[Path, typer.Argument(help="A YAML experiment config (see configs/).")],
    results: Annotated[Path | None, typer.Option(help="Results folder (default: results/<config name>). "
                                                       "Finished runs found there are skipped.")] = None,
    jobs: Annotated[int, typer.Option(help="Groups run in parallel (local worker processes, or Ray tasks).")] = 1,
    executor: Annotated[str, typer.Option(help="local (processes on this machine) or ray (a Ray cluster).")] = "local",
    threads: Annotated[int | None, typer.Option(help="Torch threads per worker (default 1: these small networks run fastest single-threaded; "
                                                  "use --jobs for parallelism).")] = None,
    ray_address: Annotated[str | None, typer.Option(help="Address of a running Ray cluster (default: start a local one).")] = None,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Run every unfinished run of an experiment grid; each finished run is saved at once.

    Runs (and groups) another runner is working on in the same results folder are left to it.
    """
    from lsnpc.experiments.config import load_config
    from lsnpc.experiments.experiment import run_experiment

    cfg = load_config(config)
    out = results if results is not None else Path("results") / cfg.name
    err = _stderr()
    with _progress(cfg.name, unit="groups") as update:
        done = 0

        def on_plan(tasks: list[Any], n_runs: int, n_skipped: int) -> None:
            update(0, len(tasks))
            err.print(f"{n_runs} runs in {cfg.name}: {n_skipped} already finished in {out}, "
                      f"{n_runs - n_skipped} to run in {len(tasks)} group(s)", highlight=False)

        def on_result(result: Any) -> None:
            nonlocal done
            done += 1
            update(done, None, f"{cfg.name}: {result.key}")

        summary = run_experiment(cfg, out, jobs=jobs, executor=executor, threads=threads,
                                 ray_address=ray_address, on_plan=on_plan, on_result=on_result)
    if as_json:
        _print_json({"results": str(out), "n_runs": summary.n_runs, "n_skipped": summary.n_skipped,
                     "n_done": summary.n_done, "n_failed": summary.n_failed, "n_elsewhere": summary.n_elsewhere,
                     "elapsed_s": summary.elapsed_s,
                     "errors": {k: v.strip().splitlines()[-1] for k, v in summary.errors.items()}})
    else:
        elsewhere = f", left {summary.n_elsewhere} to another runner" if summary.n_elsewhere else ""
        _console().print(f"finished {summary.n_done} run(s), skipped {summary.n_skipped}, failed {summary.n_failed}"
                         f"{elsewhere} in {summary.elapsed_s:.1f} s; results in {out}")
    if summary.errors:
        for run_id, tb in list(summary.errors.items())[:5]:
            err.print(f"[red]run {escape(run_id)} failed:[/] {escape(tb.strip().splitlines()[-1])}", highlight=False)
        raise typer.Exit(code=1)


@experiment_app.command("plan")
@_user_errors
def experiment_plan(
    config: Annotated[Path, typer.Argument(help="A YAML experiment config.")],
    results: Annotated[Path | None, typer.Option(help="Results folder to compare against.")] = None,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Validate a config and show how many runs and groups it has (runs nothing)."""
    from lsnpc.experiments.config import load_config
    from lsnpc.experiments.experiment import plan_experiment

    cfg = load_config(config)
    out = results if results is not None else Path("results") / cfg.name
    tasks, n_runs, n_skipped = plan_experiment(cfg, out)
    if as_json:
        _print_json({"name": cfg.name, "results": str(out), "n_runs": n_runs, "n_finished": n_skipped,
                     "n_groups_to_run": len(tasks), "n_grids": len(cfg.grids)})
        return
    _console().print(f"{cfg.name}: {len(cfg.grids)} grid(s) over {len(cfg.datasets)} data set(s), "
                     f"{len(cfg.noise)} noise setting(s), {len(cfg.classifiers)} classifier(s), "
                     f"{len(cfg.post_processors)} post-processor(s), {len(cfg.seeds)} seed(s): {n_runs} runs; "
                     f"{n_skipped} finished in {out}; {len(tasks)} group(s) to run")


@app.command()
@_user_errors
def report(
    results: Annotated[Path, typer.Argument(help="A results folder written by 'lsnpc experiment run'.")],
    out: Annotated[Path | None, typer.Option(help="Where to write the report (default: RESULTS/report).")] = None,
    metric: Annotated[list[str] | None, typer.Option(help="Metric column(s) of the main table (repeatable; "
                                                          "default macro_f1 and micro_f1).")] = None,
    plots: Annotated[bool, typer.Option(help="Draw the PNG figures.")] = True,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Write Markdown and HTML tables in the style of the paper's Table 3, a CSV summary and PNG plots.

    Run files that cannot be read (truncated, empty) are left out and named.
    """
    from lsnpc.experiments.report import DEFAULT_METRICS, write_report

    if not results.is_dir():
        raise FileNotFoundError(f"results folder not found: {results}")
    with _status("writing the report ..."):
        paths = write_report(results, out, metrics=tuple(metric) if metric else DEFAULT_METRICS, plots=plots)
    for bad in paths["unreadable"]:
        _stderr().print(f"[yellow]warning:[/] left out {escape(str(bad))}: not a complete run file", highlight=False)
    if as_json:
        _print_json({key: [str(p) for p in value] if isinstance(value, list) else str(value)
                     for key, value in paths.items()})
        return
    _console().print(f"wrote {paths['markdown']}, {paths['html']} and {len(paths['plots'])} plot(s)")


