"""The application object and what every command shares: output, errors named by their flags,
progress, reading user arrays, ``--set`` parameters."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup


class _FullDescriptions(TyperGroup):
    """A command group whose ``--help`` lists each command with its whole first sentence (wrapped to the
    width), where click would cut it off with "..." to fit one line."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="lsnpc",
    cls=_FullDescriptions,
    help="Correct the predictions of multilabel classifiers trained on noisy labels (LSNPC), "
    "and run the experiments around it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: Typer's Rich panels print "<bool>" after every flag, as if it took a value.
    rich_markup_mode=None,
)
datasets_app = typer.Typer(help="List and download the data sets lsnpc knows.", no_args_is_help=True,
                           rich_markup_mode=None, cls=_FullDescriptions)
experiment_app = typer.Typer(help="Run experiment grids from YAML configs.", no_args_is_help=True,
                             rich_markup_mode=None, cls=_FullDescriptions)
app.add_typer(datasets_app, name="datasets")
app.add_typer(experiment_app, name="experiment")

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPTION = typer.Option("--json", help="Print the result as one JSON document instead of text.")
DEVICE_OPTION = typer.Option(help="Torch device: cpu, cuda, cuda:N or auto.")
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
    A warning the library gives while the command runs (a flat base model, rows far from the training data) is
    one yellow line ``warning: ...`` on stderr in the same words, not Python's file-and-line format.
    """
    if func is None:
        return functools.partial(_user_errors, **flags)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import click

        from lsnpc.data.download import DownloadError

        kwargs = {name: _expand_user(value) for name, value in kwargs.items()}
        try:
            with warnings.catch_warnings():  # restores Python's own display when the command ends
                warnings.showwarning = functools.partial(_warning_line, flags=flags)
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
            message = _with_flag(exc, kwargs) if isinstance(exc, OSError) else str(exc)
            _error(message, flags)
            raise typer.Exit(code=1) from None
        except Exception as exc:
            if os.environ.get("LSNPC_TRACEBACK"):
                raise
            _error(f"unexpected {type(exc).__name__}: {exc} (a bug in lsnpc; set LSNPC_TRACEBACK=1 to see where)",
                   flags)
            raise typer.Exit(code=2) from None

    return wrapper


def _with_flag(exc: OSError, kwargs: Mapping[str, Any]) -> str:
    """An OSError's message led by the flag whose path it is about (``--out: ...``), when one of the command's path
    arguments appears in it and no flag is named yet; a raw OSError's temporary file name is never shown."""
    message = str(exc)
    if message.startswith("--"):
        return message
    for name, value in kwargs.items():
        paths = value if isinstance(value, list) else [value]
        for path in paths:
            if isinstance(path, Path) and str(path) in message:
                return f"--{name.replace('_', '-')}: {message}"
    return message


def _expand_user(value: Any) -> Any:
    """A path argument with a leading ``~`` expanded (a shell leaves ``--out=~/x`` as it is, and a script
    passes it unexpanded); lists of paths too; anything else as it is."""
    if isinstance(value, Path):
        return value.expanduser()
    if isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
        return [v.expanduser() for v in value]
    return value


def _check_label_arrays(X: Any, Y: Any, P: Any) -> tuple[Any, Any]:
    """The labels and probabilities checked under the command's flag names."""
    from lsnpc._validation import check_multilabel, check_probabilities, check_same_n_samples

    P = check_probabilities(P, "--probs", min_samples=2)
    Y = check_multilabel(Y, "--labels", min_samples=2)
    if Y.shape[1] != P.shape[1]:
        raise ValueError(f"--labels has {Y.shape[1]} label columns, but --probs has {P.shape[1]}")
    check_same_n_samples(**{"--features": X, "--labels": Y, "--probs": P})
    return Y, P


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None, *, flags: Mapping[str, str]) -> None:
    """``warnings.showwarning`` while a command runs: one yellow line on stderr, the library's argument names
    replaced by the command's ``flags``."""
    _stderr().print(f"[yellow]warning:[/] {escape(_say_flags(str(message), flags))}", highlight=False)


def _error(message: str, flags: Mapping[str, str]) -> None:
    _stderr().print(f"[bold red]error:[/] {escape(_say_flags(message, flags))}", highlight=False)


def _refuse_existing(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise FileExistsError(f"--out {path} already exists; pass --force to replace it")


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file or folder (links and hard links included); False unless both exist."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (which need not exist) lies inside the existing folder ``folder``, links resolved."""
    return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())


def _refuse_input_as_output(out_flag: str, out: Path, inputs: Mapping[str, Path | None]) -> None:
    """Raise ValueError when the output ``out`` would write over one of the command's ``inputs`` ({flag: path}):
    the same file (links included), or a path inside an input folder. ``--force`` replaces an old output, never
    an input of the same command. (A model folder holding an input is refused by the save itself: it never
    replaces a folder with files it did not write.)"""
    for flag, given in inputs.items():
        if given is None:
            continue
        if _same_file(out, given):
            problem = f"is also {flag}"
        elif _inside(out, given):
            problem = f"is inside {flag} {given}"
        else:
            continue
        raise ValueError(f"{out_flag} {out} {problem}: a command never writes over its own input (--force "
                         f"replaces an old output only); choose another {out_flag}")


def _check_device(device: str) -> None:
    """Refuse a ``--device`` this machine does not have (CUDA without a GPU), naming the flag, before any work."""
    from lsnpc._torch import resolve_device

    resolve_device(device, "--device")


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
            # a new phase is drawn at once: a phase shorter than the refresh period would otherwise never show
            changed = bool(description) and description != bar.tasks[0].description
            bar.update(task, completed=completed, total=total, refresh=changed,
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


def _read(path: Path, name: str) -> tuple[Any, list[str] | None]:
    from lsnpc.arrays import read_array

    return read_array(path, name)


# LSNPC parameters with a flag of their own, which --set must not take: in every command that fits
# LSNPC, and in `lsnpc fit`.
_OWN_FLAGS = {"random_state": "--seed", "device": "--device", "n_threads": "--threads"}


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
        if key == "encoder":
            raise ValueError("--set encoder=...: encoder takes a torch module (your own data encoder, e.g. a base "
                             "model's trunk), which the command line cannot pass; fit from Python instead: "
                             "LSNPC(encoder=module).fit(X, pred_probs)")
        if key not in known:
            raise ValueError(f"--set {key}=...: LSNPC has no parameter {key!r}; it has "
                             f"{', '.join(sorted(known - set(own_flags)))}")
        try:
            out[key] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ValueError(f"--set {item}: could not read the value: {exc}") from exc
    return out

