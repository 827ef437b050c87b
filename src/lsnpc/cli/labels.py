"""``lsnpc label-issues``: wrong training labels found and corrected."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    DEVICE_OPTION, JSON_OPTION, THREADS_HELP, _check_device, _check_label_arrays, _console, _parse_sets, _print_json,
    _progress, _read, _refuse_existing, _refuse_input_as_output, _user_errors, app,
)


@app.command("label-issues")
@_user_errors
def label_issues(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), of the labelled rows.")],
    labels: Annotated[Path, typer.Option(help="The given (possibly wrong) 0/1 labels, shape (n, L); a CSV header "
                                              "names the labels.")],
    probs: Annotated[Path, typer.Option(help="A model's out-of-fold probabilities on the rows, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Where to write the ranked issues (CSV: row, label, given, suggested, "
                                           "score).")],
    as_json: Annotated[bool, JSON_OPTION] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Any LSNPC parameter, NAME=VALUE (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same issues.")] = 0,
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
) -> None:
    """Find the labels that look wrong and suggest what they should be (LSNPC's label posterior).

    Writes every flagged entry, most suspicious first (score = how likely the given label is right),
    and prints how many entries, rows and labels are affected.
    """
    if out.suffix.lower() != ".csv":
        raise ValueError(f"--out must end in .csv; got {str(out)!r}")
    _refuse_input_as_output("--out", out, {"--features": features, "--labels": labels, "--probs": probs})
    _refuse_existing(out, force)
    _check_device(device)
    steps = ("reading the arrays", "fitting LSNPC", "scoring the labels", "writing the table")
    with _progress(steps[0], unit="steps") as update:
        update(0, len(steps))
        X, _ = _read(features, "--features")
        Y, names = _read(labels, "--labels")
        P, _ = _read(probs, "--probs")
        update(1, len(steps), description=steps[1])
        from lsnpc.label_issues import fit_corrector

        params = {**_parse_sets(set_), "random_state": seed, "device": device, "n_threads": threads}
        corrector, given = fit_corrector(*_check_label_arrays(X, Y, P), features=X, **params)
        update(2, len(steps), description=steps[2])
        review = corrector.review_labels(X, given, P)
        update(3, len(steps), description=steps[3])
        summary = _write_issues(out, given, review["suggested"], review["scores"], names)
        update(4, len(steps))
    if as_json:
        _print_json(summary)
        return
    console = _console()
    console.print(f"{summary['entries']} label entries look wrong ({summary['entries_share']:.2%} of "
                  f"{summary['n_rows']} x {summary['n_labels']}), in {summary['rows']} rows and {summary['labels']} "
                  f"labels; written, most suspicious first, to {out}")
    if summary["worst_labels"]:
        console.print("labels with the most issues: " + ", ".join(
            f"{w['label']} ({w['issues']})" for w in summary["worst_labels"]))


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

