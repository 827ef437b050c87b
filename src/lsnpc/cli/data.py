"""``lsnpc noise``, ``lsnpc evaluate`` and ``lsnpc datasets``: labels, metrics and data sets."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

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
    model: Annotated[Path | None, typer.Option(help="A folder written by 'lsnpc fit': score at that model's own "
                                                    "thresholds, as its predictions label (e.g. --probs written by "
                                                    "'lsnpc correct').")] = None,
    threshold: Annotated[float | None, typer.Option(help="Probability at or above which a label is predicted, the "
                                                         "same for every label (default: --model's thresholds, "
                                                         "else 0.5).")] = None,
    thresholds: Annotated[Path | None, typer.Option(help="One threshold per label: a .npy, .csv or .json file of L "
                                                         "numbers (a CSV header or a JSON object names the labels, "
                                                         "matched to --probs' column names).")] = None,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Score predicted probabilities against true labels (micro/macro-F1, mAP, LRAP, losses).

    The threshold-based scores (F1, Hamming loss, subset accuracy) use --threshold or --thresholds when given,
    else the thresholds of --model (its threshold_, and the rare labels' own), else 0.5; the output says which.
    """
    import numpy as np

    from lsnpc.metrics import evaluate as evaluate_metrics

    if threshold is not None and thresholds is not None:
        raise ValueError("give --threshold (one for every label) or --thresholds (one per label), not both")
    Y, _ = _read(labels, "--labels")
    P, columns = _read(probs, "--probs")
    n_labels = P.shape[1] if P.ndim == 2 else 1
    if thresholds is not None:
        used: float | np.ndarray = _read_thresholds(thresholds, n_labels, columns)
        source = f"--thresholds {thresholds}"
    elif threshold is not None:
        used, source = threshold, "--threshold" + (f", instead of --model {model}'s" if model is not None else "")
    elif model is not None:
        used, source = _model_thresholds(model, n_labels), f"--model {model}'s own, as its predictions label"
    else:
        used = 0.5
        source = "the default; --model DIR scores at a fitted model's own, --threshold or --thresholds set others"
    scores = evaluate_metrics(Y, P, threshold=used)
    per_label = np.ndim(used) == 1 and bool(np.ptp(used) > 0)
    value: float | list[float] = ([float(t) for t in np.asarray(used)] if per_label
                                  else float(np.asarray(used).flat[0]))
    without_positive = int((np.asarray(Y).reshape(len(Y), -1).sum(axis=0) == 0).sum())
    if as_json:
        _print_json({**scores, "threshold": value, "threshold_source": source,
                     "labels_without_positive": without_positive})
        return
    from rich.table import Table

    from lsnpc.experiments.report import METRIC_TITLES

    table = Table(title=f"{probs.name} against {labels.name}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, score in scores.items():
        table.add_row(METRIC_TITLES.get(key, key), "undefined" if np.isnan(score) else f"{score:.4f}")
    console = _console()
    console.print(table)
    console.print(f"{_describe_thresholds(value, columns)} ({source})", highlight=False)
    if without_positive:
        console.print(_no_positive_note(without_positive, n_labels, scores), highlight=False)


def _read_thresholds(path: Path, n_labels: int, columns: list[str] | None) -> Any:
    """--thresholds: one number in [0, 1] per label of --probs, from .npy, .csv or .json; names (a CSV header,
    a JSON object's keys) are matched to --probs' column names (or to 0 .. L-1 without them)."""
    import json

    import numpy as np

    from lsnpc.arrays import read_array

    suffix = path.suffix.lower()
    names: list[str] | None = None
    if suffix == ".json":
        if not path.is_file():
            raise FileNotFoundError(f"--thresholds: file not found: {path}")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"--thresholds: could not read {path}: {exc}") from None
        if isinstance(raw, dict):
            names, raw = [str(k) for k in raw], list(raw.values())
    elif suffix in (".npy", ".csv"):
        raw, names = read_array(path, "--thresholds")
    else:
        raise ValueError(f"--thresholds must end in .npy, .csv or .json; got {str(path)!r}")
    try:
        values = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"--thresholds must hold numbers, one per label; {path} holds {raw!r:.80}") from None
    if values.ndim == 2 and values.shape[0] == 1:  # one row, under a header of label names
        values = values[0]
    elif values.ndim == 2 and values.shape[1] == 1:  # one column (its header names the column, not labels)
        values, names = values[:, 0], None
    if values.shape != (n_labels,):
        raise ValueError(f"--thresholds must hold one number per label of --probs ({n_labels}); {path} holds "
                         f"shape {values.shape}")
    if not np.isfinite(values).all() or values.min() < 0 or values.max() > 1:
        raise ValueError(f"--thresholds must hold numbers in [0, 1]; {path} holds {values.min():g} to {values.max():g}")
    if names is not None:
        expected = columns if columns is not None else [str(j) for j in range(n_labels)]
        if sorted(names) != sorted(expected):
            raise ValueError(f"--thresholds names the labels {', '.join(names[:5])}, but --probs' columns are "
                             f"{', '.join(expected[:5])}: give the same names, or the numbers alone in --probs' order")
        by_name = dict(zip(names, values, strict=True))
        values = np.array([by_name[name] for name in expected])
    return values


def _model_thresholds(model: Path, n_labels: int) -> Any:
    """The threshold a saved LSNPC's ``predict`` uses (``threshold_``)."""
    from lsnpc.corrector import LSNPC

    if not model.is_dir():
        raise FileNotFoundError(f"--model: model folder not found: {model}")
    try:
        corrector = LSNPC.load(model)
    except ValueError as exc:
        raise ValueError(f"--model: {exc}") from None
    if corrector.n_labels_ != n_labels:
        raise ValueError(f"--model was fitted on {corrector.n_labels_} labels, but --probs has {n_labels}")
    return float(corrector.threshold_)


def _describe_thresholds(value: float | list[float], columns: list[str] | None) -> str:
    """One line saying at which probability each label was predicted."""
    if not isinstance(value, list):
        return f"threshold: a label is predicted at probability >= {value:g}"
    from collections import Counter

    common, count = Counter(value).most_common(1)[0]
    named = [(columns[j] if columns else f"label {j}", t) for j, t in enumerate(value)]
    other = named if count == 1 else [(name, t) for name, t in named if t != common]
    shown = ", ".join(f"{name} at {t:g}" for name, t in other[:5]) + (", ..." if len(other) > 5 else "")
    if count == 1:
        return f"thresholds: a label is predicted at probability >= its own, one per label: {shown}"
    return (f"thresholds: a label is predicted at probability >= {common:g}, {len(other)} of {len(value)} labels at "
            f"their own: {shown}")


def _no_positive_note(without_positive: int, n_labels: int, scores: dict[str, float]) -> str:
    """Why mAP (and one-error) read as they do when some labels have no positive at all."""
    if without_positive == n_labels:
        also = ", and so is one-error" if math.isnan(scores["one_error"]) else ""
        return f"note: no label has a positive in --labels, so mAP (the labels' mean average precision) is undefined{also}"
    return (f"note: {without_positive} of {n_labels} labels have no positive in --labels; mAP averages the other "
            f"{n_labels - without_positive} (average precision is undefined without a positive)")


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


