"""``lsnpc plot-training``: a saved model's training curve as a picture; ``lsnpc gradcam``: the paper's figure 5."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import (
    DEVICE_OPTION,
    JSON_OPTION,
    _check_device,
    _console,
    _print_json,
    _refuse_existing,
    _refuse_input_as_output,
    _status,
    _user_errors,
    app,
)


def _check_picture_out(out: Path, inputs: dict[str, Path], force: bool) -> None:
    """--out must name a picture file (.png, .pdf, .svg, .jpg) that is none of the command's ``inputs`` and, without
    --force, does not exist yet."""
    if out.suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ValueError(f"--out must end in .png, .pdf, .svg or .jpg; got {str(out)!r}")
    _refuse_input_as_output("--out", out, inputs)
    _refuse_existing(out, force)


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
    _check_picture_out(out, {"MODEL": model}, force)
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


@app.command("gradcam")
@_user_errors(weights="--weights", images="IMAGES (its 'images' array)", labels="IMAGES (its 'labels' array)",
              n_show="--show", mlp_epochs="--mlp-epochs", lsnpc_epochs="--lsnpc-epochs", noise_rate="--noise-rate",
              noise_kind="--noise-kind")
def gradcam(
    images: Annotated[Path, typer.Argument(help="An .npz file: 'images' (n, H, H, 3) uint8 pictures, 'labels' (n, L) "
                                                "clean 0/1; optionally 'label_names' (L) and 'noisy_labels' (n, L).")],
    out: Annotated[Path, typer.Option(help="Where to write the figure: .png, .pdf, .svg or .jpg.")],
    weights: Annotated[str, typer.Option(help="ResNet-50 weights: imagenet, a weight file, or none (random, "
                                              "for trying the command).")] = "imagenet",
    noise_kind: Annotated[str, typer.Option(help="Noise put on the labels when the file holds no noisy_labels.")] = "symmetric",
    noise_rate: Annotated[float, typer.Option(help="Its rate, in [0, 1).")] = 0.3,
    show: Annotated[int, typer.Option(help="How many images (columns) to draw; those the correction fixed first.")] = 5,
    mlp_epochs: Annotated[int, typer.Option(help="Training epochs of the base model MLP_r.")] = 20,
    lsnpc_epochs: Annotated[int | None, typer.Option(help="Training epochs of LSNPC (default: the library's).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the noise, the models and a random ResNet.")] = 0,
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Draw the paper's figure 5: GradCAM of the base model (MLP_r over ResNet-50) above LSNPC's, one column per image.

    Both models train on noisy labels; LSNPC's data encoder is a fine-tuned copy of the ResNet. Each column's
    header lists the image's true labels: blue, missed by the base model and found by the correction; red,
    mis-classified by the base model and removed by the correction. A correction that has collapsed (the
    same probability for every label) is drawn with a warning.
    """
    import numpy as np

    from lsnpc.explain.paper_figure import draw_figure5

    if not images.is_file():
        raise FileNotFoundError(f"IMAGES: file not found: {images}")
    _check_picture_out(out, {"IMAGES": images}, force)
    _check_device(device)
    with np.load(images, allow_pickle=False) as arrays:
        missing = [key for key in ("images", "labels") if key not in arrays]
        if missing:
            raise ValueError(f"IMAGES {images} must hold arrays 'images' and 'labels'; it lacks {missing} "
                             f"(it holds {sorted(arrays.files)})")
        data = {key: arrays[key] for key in arrays.files}
    names = [str(s) for s in data["label_names"]] if "label_names" in data else None
    with _status("training MLP_r and LSNPC, then GradCAM ..."):
        result = draw_figure5(out, data["images"], data["labels"], label_names=names,
                              noisy_labels=data.get("noisy_labels"), noise_kind=noise_kind, noise_rate=noise_rate,
                              weights=None if weights == "none" else weights, n_show=show, mlp_epochs=mlp_epochs,
                              lsnpc_epochs=lsnpc_epochs, seed=seed, device=device, overwrite=force)
    summary = {"out": str(result.path), "images_shown": result.shown, "labels_explained": result.explained,
               "labels_fixed": result.n_fixed, "collapsed": result.collapse is not None,
               "base_micro_f1": result.base_micro_f1, "lsnpc_micro_f1": result.corrected_micro_f1,
               "lsnpc_selection": result.corrector_selection,
               "marks": [[{"label": m.name, "colour": m.colour} for m in row] for row in result.marks]}
    if as_json:
        _print_json(summary)
        return
    _console().print(f"wrote figure 5 to {result.path}: images {result.shown} (labels explained: "
                     f"{', '.join(result.explained)}); the correction fixed {result.n_fixed} label decision(s) over "
                     f"all images (blue: missed, red: mis-classified by the base model); micro-F1 base "
                     f"{result.base_micro_f1:.3f}, LSNPC {result.corrected_micro_f1:.3f}", highlight=False)
