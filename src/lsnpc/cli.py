"""The ``lsnpc`` command line (Typer + Rich).

Heavy modules (torch, pandas, matplotlib) are imported inside the commands, so ``lsnpc --help``
stays fast. User mistakes (a missing file, a wrong shape, a bad config) end with one line on stderr
and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

__all__ = ["app", "main"]

app = typer.Typer(
    name="lsnpc",
    help="Correct the predictions of multilabel classifiers trained on noisy labels (LSNPC), "
    "and run the experiments around it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
datasets_app = typer.Typer(help="List and download the data sets lsnpc knows.", no_args_is_help=True)
experiment_app = typer.Typer(help="Run experiment grids from YAML configs.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")
app.add_typer(experiment_app, name="experiment")

F = TypeVar("F", bound=Callable[..., Any])


def _console() -> Console:
    return Console()


def _user_errors(func: F) -> F:
    """Turn user mistakes into one red line on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
                ImportError) as exc:
            # NotFittedError and ConfigError are ValueErrors; ImportError = an optional extra is missing.
            Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=1) from None

    return wrapper  # type: ignore[return-value]


def _metrics_table(title: str, rows: list[tuple[str, dict[str, float]]], metrics: list[str]) -> Any:
    from rich.table import Table

    from lsnpc.experiments.report import METRIC_TITLES
    from lsnpc.metrics import LOWER_IS_BETTER

    table = Table(title=title)
    table.add_column("method", no_wrap=True)
    for m in metrics:
        table.add_column(METRIC_TITLES.get(m, m), justify="right", overflow="fold")
    best = {}
    for m in metrics:
        vals = [r[m] for _, r in rows if m in r]
        best[m] = (min if m in LOWER_IS_BETTER else max)(vals) if vals else None
    for name, values in rows:
        cells = []
        for m in metrics:
            v = values.get(m)
            text = "" if v is None else f"{v:.4f}"
            cells.append(f"[bold green]{text}[/]" if v is not None and v == best[m] and len(rows) > 1 else text)
        table.add_row(name, *cells)
    return table


# ----------------------------------------------------------------------------- demo

# demo builds a one-group experiment config: its fields, as the flags that set them
_DEMO_FLAGS = {"seeds[0]": "--seed", "device": "--device", "datasets[0].name": "--dataset",
               "datasets[0].max_train": "--max-train", "noise[0].kind": "--noise-kind",
               "noise[0].rate": "--noise-rate"}


@app.command()
@_user_errors
def demo(
    dataset: Annotated[str, typer.Option(help="Data set to run on. 'synthetic' is built in and needs no "
                                              "download; others (scene, yeast, ...) need --data-home or a download.")] = "synthetic",
    data_home: Annotated[Path | None, typer.Option(help="Folder holding the data set (e.g. ../shared/data).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the split, the noise and every model.")] = 0,
    noise_kind: Annotated[str, typer.Option(help="Noise model: symmetric or pairflip.")] = "symmetric",
    noise_rate: Annotated[float, typer.Option(help="Noise rate in [0, 1): the chance a positive label moves.")] = 0.3,
    max_train: Annotated[int | None, typer.Option(help="Use at most this many training samples (faster).")] = None,
    lsnpc_epochs: Annotated[int | None, typer.Option(help="LSNPC training epochs (default: the library's).")] = None,
    mlp_epochs: Annotated[int | None, typer.Option(help="Base MLP training epochs (default: the library's).")] = None,
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:N or auto.")] = "cpu",
    threads: Annotated[int, typer.Option(help="Torch threads (1 is fastest for these small networks).")] = 1,
) -> None:
    """Run the whole pipeline once: noisy labels -> base MLP -> KNN and LSNPC -> metrics on clean test labels.

    The base MLP is trained on noisy labels (and chooses its epoch on noisy validation labels);
    KNN and LSNPC (unsupervised: no clean label anywhere) correct its test-set probabilities.
    """
    from lsnpc.experiments import ConfigError, expand_runs, get_component, group_runs, parse_config, run_group

    console = _console()
    raw = {
        "name": "demo", "device": device, "seeds": [seed],
        "datasets": [{"name": dataset, "data_home": str(data_home) if data_home else None, "max_train": max_train}],
        "noise": [{"kind": noise_kind, "rate": noise_rate}],
        "classifiers": [{"name": "mlp", "params": {"epochs": mlp_epochs} if mlp_epochs else {}}],
        "post_processors": ["none", "knn", {"name": "lsnpc", "params": {"epochs": lsnpc_epochs} if lsnpc_epochs else {}}],
    }
    try:
        (task,) = group_runs(expand_runs(parse_config(raw)))
    except ConfigError as exc:  # say the config field as the flag that set it
        field, _, detail = str(exc).partition(": ")
        raise ValueError(f"{_DEMO_FLAGS.get(field, field)}: {detail}") from None
    start = time.perf_counter()
    with console.status(f"[bold]{dataset}[/]: {noise_kind} noise {noise_rate:.0%}, training the base MLP, "
                        "then KNN and LSNPC ..."):
        result = run_group(task, None, threads=threads, raise_errors=True)
    names = {name: f"base {get_component('mlp').title}" if name == "none" else f"+ {get_component(name).title}"
             for name in (r["processor_name"] for r in result.rows)}
    metrics = ["micro_f1", "macro_f1", "map", "lrap", "hamming_loss", "ranking_loss"]
    rows = [(names[r["processor_name"]], r) for r in result.rows]
    first_row = result.rows[0]
    title = (f"{dataset}: {first_row['n_train']} noisy training / {first_row['n_test']} clean test samples, "
             f"{first_row['n_labels']} labels, {noise_kind} noise {noise_rate:.0%} (realised "
             f"{first_row['noise_realised_rate']:.1%}), seed {seed}")
    console.print(_metrics_table(title, rows, metrics))
    console.print("base MLP: trained on noisy labels; + KNN / + LSNPC: its test probabilities corrected "
                  "without any clean label. Higher is better except Hamming and ranking loss; "
                  "the best of each column is green.")
    console.print(f"took {time.perf_counter() - start:.1f} s (features + noise {first_row['time_data_s']:.1f} s, "
                  f"base MLP {first_row['time_classifier_s']:.1f} s, "
                  + ", ".join(f"{names[r['processor_name']][2:]} {r['time_fit_s']:.1f} s"
                              for r in result.rows if r["processor_name"] != "none") + ")")


# ----------------------------------------------------------------------------- user arrays


def _read(path: Path, name: str) -> tuple[Any, list[str] | None]:
    from lsnpc.experiments._files import read_array

    return read_array(path, name)


@app.command()
@_user_errors
def noise(
    labels: Annotated[Path, typer.Option(help="Clean 0/1 labels, shape (n, L): .npy, .csv or .parquet.")],
    out: Annotated[Path, typer.Option(help="Where to write the noisy labels (.npy, .csv or .parquet).")],
    kind: Annotated[str, typer.Option(help="Noise model: symmetric, pairflip or flip.")] = "symmetric",
    rate: Annotated[float, typer.Option(help="Noise rate in [0, 1).")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same noisy labels.")] = 0,
) -> None:
    """Corrupt a label matrix with synthetic multilabel noise and write the noisy labels."""
    from lsnpc.experiments._files import array_format, write_array
    from lsnpc.noise import simulate_noise

    array_format(out, "--out")
    Y, columns = _read(labels, "--labels")
    Y_noisy, report = simulate_noise(Y, kind, rate, random_state=seed)
    write_array(out, Y_noisy, columns=columns)
    info = report.to_dict()
    shown = {k: v for k, v in info.items() if not isinstance(v, (list, dict))}
    _console().print(f"wrote {out} ({Y_noisy.shape[0]}x{Y_noisy.shape[1]}): "
                     + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))


@app.command()
@_user_errors
def evaluate(
    labels: Annotated[Path, typer.Option(help="True 0/1 labels, shape (n, L).")],
    probs: Annotated[Path, typer.Option(help="Predicted probabilities, shape (n, L), in [0, 1].")],
    threshold: Annotated[float, typer.Option(help="Probability at or above which a label is predicted.")] = 0.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON instead of a table.")] = False,
) -> None:
    """Score predicted probabilities against true labels (micro/macro-F1, mAP, LRAP, losses)."""
    from lsnpc.metrics import evaluate as evaluate_metrics

    Y, _ = _read(labels, "--labels")
    P, _ = _read(probs, "--probs")
    scores = evaluate_metrics(Y, P, threshold=threshold)
    if as_json:
        typer.echo(json.dumps(scores, indent=2, sort_keys=True))
        return
    from rich.table import Table

    from lsnpc.experiments.report import METRIC_TITLES

    table = Table(title=f"{probs.name} against {labels.name} (threshold {threshold:g})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in scores.items():
        table.add_row(METRIC_TITLES.get(key, key), f"{value:.4f}")
    _console().print(table)


def _parse_sets(values: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in values or []:
        if "=" not in item:
            raise ValueError(f"--set must look like NAME=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(raw)
    return out


def _optional_triplet(name: str, paths: tuple[Path | None, ...]) -> list[Any] | None:
    given = [p is not None for p in paths]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(f"--{name}-features, --{name}-labels and --{name}-probs must be given together")
    return [_read(p, f"--{name}-{what}")[0] for p, what in zip(paths, ("features", "labels", "probs"), strict=True)]


@app.command()
@_user_errors
def fit(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), for the samples the classifier scored.")],
    probs: Annotated[Path, typer.Option(help="The classifier's predicted probabilities P, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Folder to save the fitted LSNPC model in.")],
    clean_features: Annotated[Path | None, typer.Option(help="Semi-supervised: features of a small clean set.")] = None,
    clean_labels: Annotated[Path | None, typer.Option(help="Semi-supervised: its clean 0/1 labels.")] = None,
    clean_probs: Annotated[Path | None, typer.Option(help="Semi-supervised: the classifier's probabilities on it.")] = None,
    val_features: Annotated[Path | None, typer.Option(help="Model selection: features of a validation set with clean labels.")] = None,
    val_labels: Annotated[Path | None, typer.Option(help="Model selection: its clean 0/1 labels.")] = None,
    val_probs: Annotated[Path | None, typer.Option(help="Model selection: the classifier's probabilities on it.")] = None,
    latent: Annotated[str, typer.Option(help="Latent family: student, gauss or learned (learned ν).")] = "student",
    epochs: Annotated[int | None, typer.Option(help="Training epochs (default: the library's).")] = None,
    paper: Annotated[bool, typer.Option("--paper", help="Use the paper's exact recipe (LSNPC.paper()).")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Any other LSNPC parameter, NAME=VALUE (repeatable), "
                                                                  "e.g. --set beta=0.01 --set nu0=3.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the model's initialisation and sampling.")] = 0,
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:N or auto.")] = "cpu",
) -> None:
    """Fit LSNPC on your own features and predicted probabilities; save it to a folder.

    Without a clean set this is the unsupervised LSNPC; --clean-* makes it semi-supervised.
    Without --val-* the checkpoint is chosen with no clean label.
    """
    from lsnpc.corrector import LSNPC

    X, _ = _read(features, "--features")
    P, _ = _read(probs, "--probs")
    kwargs: dict[str, Any] = {}
    clean = _optional_triplet("clean", (clean_features, clean_labels, clean_probs))
    if clean is not None:
        kwargs.update(X_clean=clean[0], y_clean=clean[1], pred_probs_clean=clean[2])
    val = _optional_triplet("val", (val_features, val_labels, val_probs))
    if val is not None:
        kwargs.update(X_val=val[0], y_val=val[1], pred_probs_val=val[2])
    params = _parse_sets(set_)
    if epochs is not None:
        params["epochs"] = epochs
    if paper:
        model = LSNPC.paper(**params, random_state=seed, device=device)
    else:
        model = LSNPC(latent=latent, **params, random_state=seed, device=device)
    console = _console()
    with console.status(f"fitting LSNPC on {X.shape[0]} samples ..."):
        model.fit(X, P, **kwargs)
    model.save(out)
    console.print(f"saved the fitted model to {out} (selection: {getattr(model, 'selection_', 'n/a')})")


@app.command()
@_user_errors
def correct(
    model: Annotated[Path, typer.Option(help="A folder written by 'lsnpc fit'.")],
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d).")],
    probs: Annotated[Path, typer.Option(help="The classifier's probabilities P, shape (n, L).")],
    out: Annotated[Path | None, typer.Option(help="Where to write corrected probabilities; the suffix picks the format "
                                                  "(default: beside --probs as NAME.corrected, in --probs' format).")] = None,
) -> None:
    """Correct a classifier's probabilities with a fitted LSNPC model; write them in the input's format."""
    from lsnpc.corrector import LSNPC
    from lsnpc.experiments._files import array_format, write_array

    if not model.is_dir():
        raise FileNotFoundError(f"--model: model folder not found: {model}")
    target = out if out is not None else probs.with_name(f"{probs.stem}.corrected{probs.suffix}")
    array_format(target, "--out")
    X, _ = _read(features, "--features")
    P, columns = _read(probs, "--probs")
    corrected = LSNPC.load(model).predict_proba(X, P)
    write_array(target, corrected, columns=columns)
    _console().print(f"wrote corrected probabilities {corrected.shape[0]}x{corrected.shape[1]} to {target}")


# ----------------------------------------------------------------------------- data sets


@datasets_app.command("list")
@_user_errors
def datasets_list() -> None:
    """List the data sets lsnpc can load."""
    from rich.table import Table

    from lsnpc.data import list_datasets

    table = Table(title="data sets (load with --dataset NAME; --data-home DIR points at their files)")
    for column in ("name", "kind", "labels", "samples per split", "downloadable"):
        table.add_column(column)
    for info in list_datasets():
        sizes = ", ".join(f"{s} {info.n_samples[s]}" if s in info.n_samples else s for s in info.splits)
        table.add_row(info.name, info.kind, str(info.n_labels), sizes, "yes" if info.files else "no")
    _console().print(table)


@datasets_app.command("download")
@_user_errors
def datasets_download(
    name: Annotated[str, typer.Argument(help="The data set to download (see 'lsnpc datasets list').")],
    data_home: Annotated[Path | None, typer.Option(help="Where to store it (default: the library's data home).")] = None,
) -> None:
    """Download a data set (checked against its checksum) into the data home."""
    from lsnpc.data import download_dataset

    console = _console()
    with console.status(f"downloading {name} ..."):
        where = download_dataset(name, data_home=data_home)
    console.print(f"{name} is ready" + (f" in {where}" if where is not None else ""))


# ----------------------------------------------------------------------------- experiments


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
) -> None:
    """Run every unfinished run of an experiment grid; each finished run is saved at once."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lsnpc.experiments.config import load_config
    from lsnpc.experiments.experiment import run_experiment

    cfg = load_config(config)
    out = results if results is not None else Path("results") / cfg.name
    console = _console()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task(cfg.name, total=None, last="")

        def on_plan(tasks: list[Any], n_runs: int, n_skipped: int) -> None:
            progress.update(bar, total=len(tasks))
            progress.console.print(f"{n_runs} runs in {cfg.name}: {n_skipped} already finished in {out}, "
                                   f"{n_runs - n_skipped} to run in {len(tasks)} group(s)")

        def on_result(result: Any) -> None:
            status = f"{result.key}: {len(result.rows)} done" + (f", {len(result.errors)} failed" if result.errors else "")
            progress.update(bar, advance=1, last=status)

        summary = run_experiment(cfg, out, jobs=jobs, executor=executor, threads=threads,
                                 ray_address=ray_address, on_plan=on_plan, on_result=on_result)
    console.print(f"finished {summary.n_done} run(s), skipped {summary.n_skipped}, failed {summary.n_failed} "
                  f"in {summary.elapsed_s:.1f} s; results in {out}")
    if summary.errors:
        err = Console(stderr=True)
        for run_id, tb in list(summary.errors.items())[:5]:
            err.print(f"[red]run {run_id} failed:[/] {tb.strip().splitlines()[-1]}", highlight=False)
        raise typer.Exit(code=1)


@experiment_app.command("plan")
@_user_errors
def experiment_plan(
    config: Annotated[Path, typer.Argument(help="A YAML experiment config.")],
    results: Annotated[Path | None, typer.Option(help="Results folder to compare against.")] = None,
) -> None:
    """Validate a config and show how many runs and groups it has (runs nothing)."""
    from lsnpc.experiments.config import load_config
    from lsnpc.experiments.experiment import plan_experiment

    cfg = load_config(config)
    out = results if results is not None else Path("results") / cfg.name
    tasks, n_runs, n_skipped = plan_experiment(cfg, out)
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
) -> None:
    """Write Markdown and HTML tables in the style of the paper's Table 3, a CSV summary and PNG plots."""
    from lsnpc.experiments.report import DEFAULT_METRICS, write_report

    if not results.is_dir():
        raise FileNotFoundError(f"results folder not found: {results}")
    paths = write_report(results, out, metrics=tuple(metric) if metric else DEFAULT_METRICS, plots=plots)
    _console().print(f"wrote {paths['markdown']}, {paths['html']} and {len(paths['plots'])} plot(s)")


# ----------------------------------------------------------------------------- label issues


@app.command("label-issues")
@_user_errors
def label_issues(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), of the labelled rows.")],
    labels: Annotated[Path, typer.Option(help="The given (possibly wrong) 0/1 labels, shape (n, L); a CSV header "
                                              "names the labels.")],
    probs: Annotated[Path, typer.Option(help="A model's out-of-fold probabilities on the rows, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Where to write the ranked issues (CSV: row, label, given, suggested, "
                                           "score).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON instead of text.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Any LSNPC parameter, NAME=VALUE (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same issues.")] = 0,
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:N or auto.")] = "cpu",
    threads: Annotated[int, typer.Option(help="Torch threads (1 is fastest for these small networks).")] = 1,
) -> None:
    """Find the labels that look wrong and suggest what they should be (LSNPC's label posterior).

    Writes every flagged entry, most suspicious first (score = how likely the given label is right),
    and prints how many entries, rows and labels are affected.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    if out.suffix.lower() != ".csv":
        raise ValueError(f"--out must end in .csv; got {str(out)!r}")
    if out.exists() and not force:
        raise ValueError(f"--out {out} exists; pass --force to replace it")
    stderr = Console(stderr=True)
    steps = ("reading the arrays", "fitting LSNPC", "scoring the labels", "writing the table")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=stderr, transient=True, disable=not stderr.is_terminal) as progress:
        bar = progress.add_task(steps[0], total=len(steps))
        X, _ = _read(features, "--features")
        Y, names = _read(labels, "--labels")
        P, _ = _read(probs, "--probs")
        progress.update(bar, advance=1, description=steps[1])
        from lsnpc.label_issues import fit_corrector

        params = {**_parse_sets(set_), "random_state": seed, "device": device, "n_threads": threads}
        corrector, given = fit_corrector(*_check_label_arrays(X, Y, P), features=X, **params)
        progress.update(bar, advance=1, description=steps[2])
        scores = corrector.label_quality_scores(X, given, P)
        suggested = corrector.correct_labels(X, given, P)
        progress.update(bar, advance=1, description=steps[3])
        summary = _write_issues(out, given, suggested, scores, names)
        progress.update(bar, advance=1)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    console = _console()
    console.print(f"{summary['entries']} label entries look wrong ({summary['entries_share']:.2%} of "
                  f"{summary['n_rows']} x {summary['n_labels']}), in {summary['rows']} rows and {summary['labels']} "
                  f"labels; written, most suspicious first, to {out}")
    if summary["worst_labels"]:
        console.print("labels with the most issues: " + ", ".join(
            f"{w['label']} ({w['issues']})" for w in summary["worst_labels"]))


def _check_label_arrays(X: Any, Y: Any, P: Any) -> tuple[Any, Any]:
    """The labels and probabilities checked under the command's flag names."""
    from lsnpc._validation import check_multilabel, check_probabilities, check_same_n_samples

    P = check_probabilities(P, "--probs", min_samples=2)
    Y = check_multilabel(Y, "--labels", min_samples=2)
    if Y.shape[1] != P.shape[1]:
        raise ValueError(f"--labels has {Y.shape[1]} label columns, but --probs has {P.shape[1]}")
    check_same_n_samples(**{"--features": X, "--labels": Y, "--probs": P})
    return Y, P


def _write_issues(out: Path, given: Any, suggested: Any, scores: Any, names: list[str] | None) -> dict[str, Any]:
    """Write the flagged entries ranked by score (atomically) and return the summary."""
    import numpy as np
    import pandas as pd

    from lsnpc._io import atomic_path

    rows, cols = np.nonzero(suggested != given)
    order = np.argsort(scores[rows, cols], kind="stable")
    rows, cols = rows[order], cols[order]
    label_names = names if names is not None and len(names) == given.shape[1] else [str(k) for k in range(given.shape[1])]
    table = pd.DataFrame({"row": rows, "label": [label_names[k] for k in cols], "given": given[rows, cols],
                          "suggested": suggested[rows, cols], "score": np.round(scores[rows, cols], 6)})
    with atomic_path(out, suffix=".csv") as tmp:
        table.to_csv(tmp, index=False)
    per_label = np.bincount(cols, minlength=given.shape[1])
    worst = [k for k in np.argsort(-per_label, kind="stable")[:5] if per_label[k] > 0]
    return {
        "entries": int(len(rows)), "entries_share": float(len(rows) / given.size),
        "rows": int(len(np.unique(rows))), "labels": int((per_label > 0).sum()),
        "n_rows": int(given.shape[0]), "n_labels": int(given.shape[1]), "out": str(out),
        "worst_labels": [{"label": label_names[k], "issues": int(per_label[k])} for k in worst],
    }


def main() -> None:
    """Entry point of the ``lsnpc`` console script."""
    app()


if __name__ == "__main__":
    main()
