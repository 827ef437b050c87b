"""``lsnpc noise``, ``lsnpc evaluate`` and ``lsnpc datasets``: labels, metrics and data sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import (
    JSON_OPTION, _console, _print_json, _read, _refuse_existing, _refuse_input_as_output, _stderr, _user_errors, app,
    datasets_app,
)

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
    from lsnpc.arrays import array_format, write_array
    from lsnpc.noise import simulate_noise

    array_format(out, "--out")
    _refuse_input_as_output("--out", out, {"--labels": labels})
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


