"""``lsnpc plot-training``: a saved model's training curve as a picture."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import (
    JSON_OPTION,
    _console,
    _print_json,
    _refuse_existing,
    _refuse_input_as_output,
    _user_errors,
    app,
)


@app.command("plot-training")
@_user_errors(path="--out")
def plot_training(
    model: Annotated[Path, typer.Argument(help="A folder written by 'lsnpc fit'.")],
    out: Annotated[Path, typer.Option(help="Where to write the picture: .png, .pdf, .svg or .jpg.")],
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Draw a fitted model's training curve: the loss and the score that chose the epoch, the epoch kept marked."""
    from lsnpc.corrector import LSNPC
    from lsnpc.explain import plot_training as draw

    if not model.is_dir():
        raise FileNotFoundError(f"MODEL: model folder not found: {model}")
    if out.suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ValueError(f"--out must end in .png, .pdf, .svg or .jpg; got {str(out)!r}")
    _refuse_input_as_output("--out", out, {"MODEL": model})
    _refuse_existing(out, force)
    try:
        corrector = LSNPC.load(model)
    except ValueError as exc:
        raise ValueError(f"MODEL {model}: {exc}") from None
    draw(corrector, path=out, overwrite=force)
    kept = corrector.best_epoch_
    if as_json:
        _print_json({"out": str(out), "model": str(model), "best_epoch": kept, "epochs": corrector.epochs_,
                     "selection": corrector.selection_})
        return
    _console().print(f"wrote the training curve of {model} to {out} ({corrector.epochs_} epochs; kept "
                     f"{'the warm start' if kept == 0 else f'epoch {kept}'}: {corrector.selection_})", highlight=False)
