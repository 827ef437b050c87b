"""The ``lsnpc`` command line (Typer + Rich); also ``python -m lsnpc``.

Heavy modules (torch, pandas, matplotlib) are imported inside the commands, so ``lsnpc --help``
stays fast. Every command follows the same conventions, for people and for scripts:

- results go to stdout: a table or a line, or with ``--json`` one JSON document; one-line messages
  are never wrapped, whatever the width (pipes, logs);
- progress bars (epochs and time left) go to stderr, and only when stderr is a terminal;
- a user mistake (a missing file, a wrong shape, a bad parameter or config) ends with one line
  ``error: ...`` on stderr that names the command-line flag, and exit status 1 — never a traceback;
- files the user owns are never replaced without ``--force``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["app", "main"]

app = typer.Typer(
    name="lsnpc",
    help="Correct the predictions of multilabel classifiers trained on noisy labels (LSNPC), "
    "and run the experiments around it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: Typer's Rich panels print "<bool>" after every flag, as if it took a value.
    rich_markup_mode=None,
)
datasets_app = typer.Typer(help="List and download the data sets lsnpc knows.", no_args_is_help=True,
                           rich_markup_mode=None)
experiment_app = typer.Typer(help="Run experiment grids from YAML configs.", no_args_is_help=True,
                             rich_markup_mode=None)
app.add_typer(datasets_app, name="datasets")
app.add_typer(experiment_app, name="experiment")

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPTION = typer.Option("--json", help="Print the result as one JSON document instead of text.")
THREADS_HELP = ("Torch CPU threads (default 1: as fast as more on an idle machine for these networks, "
                "and several times faster when other programs keep the cores busy).")


def _version(value: bool) -> None:
    if value:
        from lsnpc import __version__

        typer.echo(f"lsnpc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print lsnpc's version and exit.",
                                          callback=_version, is_eager=True)] = False,
) -> None:
    """The options that come before a command (the application's help text is Typer's ``help``)."""


def _console() -> Console:
    """stdout, for results; a line is never broken to fit a width (pipes and logs have none)."""
    return Console(soft_wrap=True)


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True)


def _print_json(document: Any) -> None:
    typer.echo(json.dumps(document, indent=2, sort_keys=True, default=str))


# The library's words for what the command line calls otherwise, in every command's messages.
_PHRASES = (
    (re.compile(r"lsnpc\.data\.download_dataset\('([^']+)'\)"), r"lsnpc datasets download \1"),
    (re.compile(r"the data_home argument"), "--data-home"),
    (re.compile(r"pass overwrite=True"), "pass --force"),
)


def _say_flags(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with the library's argument names (whole words, not inside paths) replaced by the flags."""
    for pattern, replacement in _PHRASES:
        message = pattern.sub(replacement, message)
    for name in sorted(flags, key=len, reverse=True):
        message = re.sub(rf"(?<![^\s(,'\"]){re.escape(name)}(?=[\s:,;)'\"]|$)", flags[name], message)
    return message


def _user_errors(func: F | None = None, /, **flags: str) -> Any:
    """Turn user mistakes into one red line on stderr and exit status 1; never a traceback.

    ``flags`` maps the library's argument names in messages to this command's flags
    (``X="--features"``). Usable bare (``@_user_errors``) or with flags (``@_user_errors(X="--features")``).
    An unexpected exception (a bug) is one line too, exit status 2; ``LSNPC_TRACEBACK=1`` shows where.
    """
    if func is None:
        return functools.partial(_user_errors, **flags)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import click

        from lsnpc.data.download import DownloadError

        try:
            return func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            _stderr().print("interrupted", highlight=False)
            raise typer.Exit(code=130) from None
        except DownloadError as exc:  # the first line; the rest lists files to fetch by hand
            _error(str(exc).splitlines()[0], flags)
            raise typer.Exit(code=1) from None
        except (ValueError, OSError, ImportError) as exc:
            # ValueError includes NotFittedError and ConfigError; ImportError = an optional extra is missing;
            # OSError: missing files, existing outputs, permissions, a full disk.
            _error(str(exc), flags)
            raise typer.Exit(code=1) from None
        except Exception as exc:
            if os.environ.get("LSNPC_TRACEBACK"):
                raise
            _error(f"unexpected {type(exc).__name__}: {exc} (a bug in lsnpc; set LSNPC_TRACEBACK=1 to see where)",
                   flags)
            raise typer.Exit(code=2) from None

    return wrapper


def _error(message: str, flags: Mapping[str, str]) -> None:
    _stderr().print(f"[bold red]error:[/] {escape(_say_flags(message, flags))}", highlight=False)


def _refuse_existing(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise FileExistsError(f"--out {path} already exists; pass --force to replace it")


@contextlib.contextmanager
def _progress(description: str, unit: str = "") -> Iterator[Callable[..., None]]:
    """A Rich progress bar on stderr, drawn only when stderr is a terminal; yields ``update(completed, total,
    description=None)``. ``unit`` ("epoch") labels the count; the bar shows time elapsed and left."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    err = _stderr()
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn(unit), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    with Progress(*columns, console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task(description, total=None)

        def update(completed: int, total: int | None, description: str | None = None) -> None:
            bar.update(task, completed=completed, total=total,
                       **({"description": description} if description else {}))

        yield update


@contextlib.contextmanager
def _status(message: str) -> Iterator[None]:
    """A spinner on stderr while the body runs (only when stderr is a terminal)."""
    err = _stderr()
    if not err.is_terminal:
        yield
        return
    with err.status(message):
        yield


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
@_user_errors(data_home="--data-home")
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
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Run the whole pipeline once: noisy labels -> base MLP -> KNN and LSNPC -> metrics on clean test labels.

    The base MLP is trained on noisy labels (and chooses its epoch on noisy validation labels);
    KNN and LSNPC (unsupervised: no clean label anywhere) correct its test-set probabilities.
    """
    from lsnpc.experiments import ConfigError, expand_runs, get_component, group_runs, parse_config, run_group

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
    with _status(f"[bold]{dataset}[/]: {noise_kind} noise {noise_rate:.0%}, training the base MLP, "
                 "then KNN and LSNPC ..."):
        result = run_group(task, None, threads=threads, raise_errors=True)
    seconds = time.perf_counter() - start
    names = {name: f"base {get_component('mlp').title}" if name == "none" else f"+ {get_component(name).title}"
             for name in (r["processor_name"] for r in result.rows)}
    metrics = ["micro_f1", "macro_f1", "map", "lrap", "hamming_loss", "ranking_loss"]
    first_row = result.rows[0]
    if as_json:
        _print_json({
            "dataset": dataset, "seed": seed, "noise_kind": noise_kind, "noise_rate": noise_rate,
            "noise_realised_rate": first_row["noise_realised_rate"], "n_train": first_row["n_train"],
            "n_test": first_row["n_test"], "n_labels": first_row["n_labels"], "seconds": seconds,
            "methods": {names[r["processor_name"]].lstrip("+ "): {m: r[m] for m in metrics} for r in result.rows},
        })
        return
    console = _console()
    rows = [(names[r["processor_name"]], r) for r in result.rows]
    title = (f"{dataset}: {first_row['n_train']} noisy training / {first_row['n_test']} clean test samples, "
             f"{first_row['n_labels']} labels, {noise_kind} noise {noise_rate:.0%} (realised "
             f"{first_row['noise_realised_rate']:.1%}), seed {seed}")
    console.print(_metrics_table(title, rows, metrics))
    console.print("base MLP: trained on noisy labels; + KNN / + LSNPC: its test probabilities corrected "
                  "without any clean label. Higher is better except Hamming and ranking loss; "
                  "the best of each column is green.")
    console.print(f"took {seconds:.1f} s (features + noise {first_row['time_data_s']:.1f} s, "
                  f"base MLP {first_row['time_classifier_s']:.1f} s, "
                  + ", ".join(f"{names[r['processor_name']][2:]} {r['time_fit_s']:.1f} s"
                              for r in result.rows if r["processor_name"] != "none") + ")")


# ----------------------------------------------------------------------------- user arrays


def _read(path: Path, name: str) -> tuple[Any, list[str] | None]:
    from lsnpc.experiments._files import read_array

    return read_array(path, name)


@app.command()
@_user_errors(Y="--labels", kind="--kind", rate="--rate", random_state="--seed")
def noise(
    labels: Annotated[Path, typer.Option(help="Clean 0/1 labels, shape (n, L): .npy, .csv or .parquet.")],
    out: Annotated[Path, typer.Option(help="Where to write the noisy labels (.npy, .csv or .parquet).")],
    kind: Annotated[str, typer.Option(help="Noise model: symmetric, pairflip or flip.")] = "symmetric",
    rate: Annotated[float, typer.Option(help="Noise rate in [0, 1).")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same noisy labels.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Corrupt a label matrix with synthetic multilabel noise and write the noisy labels."""
    from lsnpc.experiments._files import array_format, write_array
    from lsnpc.noise import simulate_noise

    array_format(out, "--out")
    _refuse_existing(out, force)
    Y, columns = _read(labels, "--labels")
    Y_noisy, report = simulate_noise(Y, kind, rate, random_state=seed)
    write_array(out, Y_noisy, columns=columns)
    info = report.to_dict()
    shown = {k: v for k, v in info.items() if not isinstance(v, (list, dict))}
    if as_json:
        _print_json({"out": str(out), "shape": list(Y_noisy.shape), **info})
        return
    _console().print(f"wrote {out} ({Y_noisy.shape[0]}x{Y_noisy.shape[1]}): "
                     + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))


@app.command()
@_user_errors(y_true="--labels", probs="--probs", threshold="--threshold")
def evaluate(
    labels: Annotated[Path, typer.Option(help="True 0/1 labels, shape (n, L).")],
    probs: Annotated[Path, typer.Option(help="Predicted probabilities, shape (n, L), in [0, 1].")],
    threshold: Annotated[float, typer.Option(help="Probability at or above which a label is predicted.")] = 0.5,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Score predicted probabilities against true labels (micro/macro-F1, mAP, LRAP, losses)."""
    from lsnpc.metrics import evaluate as evaluate_metrics

    Y, _ = _read(labels, "--labels")
    P, _ = _read(probs, "--probs")
    scores = evaluate_metrics(Y, P, threshold=threshold)
    if as_json:
        _print_json(scores)
        return
    from rich.table import Table

    from lsnpc.experiments.report import METRIC_TITLES

    table = Table(title=f"{probs.name} against {labels.name} (threshold {threshold:g})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in scores.items():
        table.add_row(METRIC_TITLES.get(key, key), f"{value:.4f}")
    _console().print(table)


# LSNPC parameters with a flag of their own, which --set must not take: in every command that fits
# LSNPC, and in `lsnpc fit`.
_OWN_FLAGS = {"random_state": "--seed", "device": "--device", "n_threads": "--threads"}
_FIT_FLAGS = {"latent": "--latent", "epochs": "--epochs", **_OWN_FLAGS}
_FIT_ERRORS = dict(X="--features", pred_probs="--probs", X_clean="--clean-features", y_clean="--clean-labels",
                   pred_probs_clean="--clean-probs", X_val="--val-features", y_val="--val-labels",
                   pred_probs_val="--val-probs", **_FIT_FLAGS)


def _parse_sets(values: list[str] | None, own_flags: Mapping[str, str] = _OWN_FLAGS) -> dict[str, Any]:
    """``--set NAME=VALUE`` items as LSNPC parameters (values read as YAML: 3, 0.5, true, gauss); a name
    in ``own_flags`` is refused with the flag to use instead."""
    import yaml

    from lsnpc.corrector import LSNPC

    known = set(LSNPC._get_param_names()) - {"encoder"}
    out: dict[str, Any] = {}
    for item in values or []:
        if "=" not in item:
            raise ValueError(f"--set must look like NAME=VALUE, got {item!r}")
        key, raw = (part.strip() for part in item.split("=", 1))
        if key in own_flags:
            raise ValueError(f"--set {key}=...: use {own_flags[key]} instead")
        if key not in known:
            raise ValueError(f"--set {key}=...: LSNPC has no parameter {key!r}; it has "
                             f"{', '.join(sorted(known - set(own_flags)))}")
        try:
            out[key] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ValueError(f"--set {item}: could not read the value: {exc}") from exc
    return out


def _optional_triplet(name: str, paths: tuple[Path | None, ...]) -> list[Any] | None:
    given = [p is not None for p in paths]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(f"--{name}-features, --{name}-labels and --{name}-probs must be given together")
    return [_read(p, f"--{name}-{what}")[0] for p, what in zip(paths, ("features", "labels", "probs"), strict=True)]


@app.command()
@_user_errors(**_FIT_ERRORS)
def fit(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), for the samples the classifier scored.")],
    probs: Annotated[Path, typer.Option(help="The classifier's predicted probabilities P, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Folder to save the fitted LSNPC model in (a new folder, or a model "
                                           "saved before, replaced only with --force).")],
    clean_features: Annotated[Path | None, typer.Option(help="Semi-supervised: features of a small clean set.")] = None,
    clean_labels: Annotated[Path | None, typer.Option(help="Semi-supervised: its clean 0/1 labels.")] = None,
    clean_probs: Annotated[Path | None, typer.Option(help="Semi-supervised: the classifier's probabilities on it.")] = None,
    val_features: Annotated[Path | None, typer.Option(help="Model selection: features of a validation set with clean labels.")] = None,
    val_labels: Annotated[Path | None, typer.Option(help="Model selection: its clean 0/1 labels.")] = None,
    val_probs: Annotated[Path | None, typer.Option(help="Model selection: the classifier's probabilities on it.")] = None,
    latent: Annotated[str, typer.Option(help="Latent family: student, gauss or learned (learned ν).")] = "student",
    epochs: Annotated[int | None, typer.Option(help="Training epochs (default: the library's).")] = None,
    paper: Annotated[bool, typer.Option("--paper", help="Use the paper's exact recipe (LSNPC.paper()).")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="NAME=VALUE",
                                                   help="Any other LSNPC parameter, NAME=VALUE (repeatable), "
                                                        "e.g. --set beta=0.01 --set nu0=3.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the model's initialisation and sampling.")] = 0,
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:N or auto.")] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace a model saved before at --out.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Fit LSNPC on your own features and predicted probabilities; save it to a folder.

    Without a clean set this is the unsupervised LSNPC; --clean-* makes it semi-supervised.
    Without --val-* the checkpoint is chosen with no clean label.
    """
    from lsnpc.corrector import LSNPC
    from lsnpc.corrector.persistence import check_save_target

    try:
        check_save_target(out, overwrite=force)  # before minutes of training, not after
    except FileExistsError as exc:
        raise FileExistsError(f"--out: {exc}") from None
    params = _parse_sets(set_, _FIT_FLAGS)
    params.update(random_state=seed, device=device, n_threads=threads)
    if epochs is not None:
        params["epochs"] = epochs
    model = LSNPC.paper(**params) if paper else LSNPC(latent=latent, **params)
    X, _ = _read(features, "--features")
    P, _ = _read(probs, "--probs")
    kwargs: dict[str, Any] = {}
    clean = _optional_triplet("clean", (clean_features, clean_labels, clean_probs))
    if clean is not None:
        kwargs.update(X_clean=clean[0], y_clean=clean[1], pred_probs_clean=clean[2])
    val = _optional_triplet("val", (val_features, val_labels, val_probs))
    if val is not None:
        kwargs.update(X_val=val[0], y_val=val[1], pred_probs_val=val[2])
    start = time.perf_counter()
    with _progress(f"fitting LSNPC on {X.shape[0]} samples", unit="epoch") as update:
        def on_epoch(epoch: int, total: int, entry: dict[str, Any]) -> None:
            update(epoch, total, "warm start done" if epoch == 0 else None)

        try:
            model.fit(X, P, on_epoch=on_epoch, **kwargs)
        except ValueError as exc:  # a parameter given with --set is named as such
            if str(exc).split(" ", 1)[0] in set(params) - set(_FIT_FLAGS):
                raise ValueError(f"--set {exc}") from None
            raise
    model.save(out, overwrite=force)
    if as_json:
        _print_json({"model": str(out), "epochs": model.epochs_, "best_epoch": model.best_epoch_,
                     "selection": model.selection_, "guard": model.guard_,
                     "seconds": time.perf_counter() - start})
        return
    _console().print(f"saved the fitted model to {out} (selection: {model.selection_})")


@app.command()
@_user_errors(X="--features", pred_probs="--probs", n_threads="--threads")
def correct(
    model: Annotated[Path, typer.Option(help="A folder written by 'lsnpc fit'.")],
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d).")],
    probs: Annotated[Path, typer.Option(help="The classifier's probabilities P, shape (n, L).")],
    out: Annotated[Path | None, typer.Option(help="Where to write corrected probabilities; the suffix picks the format "
                                                  "(default: beside --probs as NAME.corrected, in --probs' format).")] = None,
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Correct a classifier's probabilities with a fitted LSNPC model; write them in the input's format."""
    from lsnpc.corrector import LSNPC
    from lsnpc.experiments._files import array_format, write_array

    if not model.is_dir():
        raise FileNotFoundError(f"--model: model folder not found: {model}")
    target = out if out is not None else probs.with_name(f"{probs.stem}.corrected{probs.suffix}")
    array_format(target, "--out")
    _refuse_existing(target, force)
    X, _ = _read(features, "--features")
    P, columns = _read(probs, "--probs")
    try:
        corrector = LSNPC.load(model)
    except ValueError as exc:
        raise ValueError(f"--model: {exc}") from None
    corrector.n_threads = threads
    with _status(f"correcting {X.shape[0]} rows ..."):
        corrected = corrector.predict_proba(X, P)
    write_array(target, corrected, columns=columns)
    if as_json:
        _print_json({"out": str(target), "shape": list(corrected.shape), "model": str(model),
                     "guard_blend": corrector.guard_.blend})
        return
    _console().print(f"wrote corrected probabilities {corrected.shape[0]}x{corrected.shape[1]} to {target}")


# ----------------------------------------------------------------------------- data sets


@datasets_app.command("list")
@_user_errors
def datasets_list(as_json: Annotated[bool, JSON_OPTION] = False) -> None:
    """List the data sets lsnpc can load."""
    from lsnpc.data import list_datasets

    infos = list_datasets()
    if as_json:
        _print_json([{"name": i.name, "kind": i.kind, "n_labels": i.n_labels, "splits": list(i.splits),
                      "n_samples": dict(i.n_samples), "downloadable": bool(i.files)} for i in infos])
        return
    from rich.table import Table

    table = Table(title="data sets (load with --dataset NAME; --data-home DIR points at their files)")
    for column in ("name", "kind", "labels", "samples per split", "downloadable"):
        table.add_column(column)
    for info in infos:
        sizes = ", ".join(f"{s} {info.n_samples[s]}" if s in info.n_samples else s for s in info.splits)
        table.add_row(info.name, info.kind, str(info.n_labels), sizes, "yes" if info.files else "no")
    _console().print(table)


@datasets_app.command("download")
@_user_errors(data_home="--data-home")
def datasets_download(
    name: Annotated[str, typer.Argument(help="The data set to download (see 'lsnpc datasets list').")],
    data_home: Annotated[Path | None, typer.Option(help="Where to store it (default: the library's data home).")] = None,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Download a data set (checked against its checksum) into the data home."""
    from lsnpc.data import download_dataset

    # the download's own bar draws on stdout: only when both streams are a terminal
    where = download_dataset(name, data_home=data_home, progress=_stderr().is_terminal and _console().is_terminal)
    if as_json:
        _print_json({"name": name, "path": str(where)})
        return
    _console().print(f"{name} is ready in {where}")


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
    """Entry point of the ``lsnpc`` console script and of ``python -m lsnpc``."""
    app(prog_name="lsnpc")


if __name__ == "__main__":
    main()
