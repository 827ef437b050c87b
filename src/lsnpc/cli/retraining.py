"""``lsnpc retrain`` and ``lsnpc correct-labels``: a better model from noisy labels, or the corrected labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    DEVICE_OPTION,
    JSON_OPTION,
    THREADS_HELP,
    _check_device,
    _check_label_arrays,
    _console,
    _print_json,
    _progress,
    _read,
    _refuse_existing,
    _refuse_input_as_output,
    _user_errors,
    app,
)

_RETRAIN_FLAGS = dict(X="--features", y="--labels", X_val="--val-features", y_val="--val-labels", cv="--cv",
                      val_folds="--val-folds", n_threads="--threads", random_state="--seed", device="--device")


@app.command()
@_user_errors(**_RETRAIN_FLAGS)
def retrain(
    features: Annotated[Path, typer.Option(help="Training features X, shape (n, d).")],
    labels: Annotated[Path, typer.Option(help="Their (noisy) 0/1 labels, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Folder to save the model in (a new folder, or one saved by 'lsnpc "
                                           "retrain' before, replaced only with --force).")],
    val_features: Annotated[Path | None, typer.Option(help="Features of clean validation rows (never trained on): "
                                                           "they test LSNPC's corrections, choose the threshold, "
                                                           "and a single model over the mean where one is clearly "
                                                           "better (10 rows or more).")] = None,
    val_labels: Annotated[Path | None, typer.Option(help="Their clean 0/1 labels.")] = None,
    cv: Annotated[int, typer.Option(help="Folds of the out-of-fold probabilities the correction reads.")] = 5,
    val_folds: Annotated[int, typer.Option(help="Parts the validation rows are scored in, each at a threshold "
                                                "chosen on the others.")] = 5,
    post_hoc: Annotated[bool, typer.Option("--post-hoc/--no-post-hoc", help="Also use each model followed by "
                                           "LSNPC (slower).")] = True,
    epochs: Annotated[int | None, typer.Option(help="Epochs of lsnpc's MLP (default: the library's).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same model.")] = 0,
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace a model saved before at --out.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Train lsnpc's MLP on corrected labels (lsnpc.CorrectedLabelsClassifier) and save it.

    The labels are corrected from the MLP's out-of-fold probabilities (LSNPC's label posterior); a fresh
    MLP learns from the rows the correction left unchanged, another from --labels, and (--post-hoc) LSNPC
    corrects each, tested on the clean --val-* rows; with them, LSNPC post-hoc also corrects the --labels MLP
    from its own probabilities. The model predicts with the mean of the three corrections' probabilities (of
    the two models and their two corrections without --val-*), or with one of them where those rows find it
    clearly better, at the threshold chosen there (0.5 without --val-*). The summary says what was kept and
    how it scored against the MLP trained on --labels.
    """
    from lsnpc.classifiers import MLPClassifier
    from lsnpc.retrain import CorrectedLabelsClassifier
    from lsnpc.retrain.persistence import check_save_target

    _refuse_input_as_output("--out", out, {"--features": features, "--labels": labels,
                                           "--val-features": val_features, "--val-labels": val_labels})
    _check_device(device)
    try:
        check_save_target(out, overwrite=force)  # before the training, not after
    except FileExistsError as exc:
        raise FileExistsError(f"--out: {exc}") from None
    if (val_features is None) != (val_labels is None):
        raise ValueError("--val-features and --val-labels must be given together")
    X, _ = _read(features, "--features")
    Y, _ = _read(labels, "--labels")
    kwargs: dict[str, Any] = {}
    if val_features is not None:
        kwargs.update(X_val=_read(val_features, "--val-features")[0], y_val=_read(val_labels, "--val-labels")[0])
    mlp = MLPClassifier(random_state=seed, device=device, n_threads=threads, **({"epochs": epochs} if epochs else {}))
    model = CorrectedLabelsClassifier(mlp, cv=cv, val_folds=val_folds, post_hoc=post_hoc, random_state=seed,
                                      device=device, n_threads=threads)
    with _progress("training", unit="steps") as update:
        def on_step(step: str, done: int, total: int) -> None:
            update(done, total, description=step)

        model.fit(X, Y, on_step=on_step, **kwargs)
    model.save(out, overwrite=force)
    report = model.report_
    if as_json:
        _print_json({"out": str(out), "report": report.to_dict(), "gain_micro_f1": report.gain_micro_f1,
                     "gain_macro_f1": report.gain_macro_f1, "summary": report.summary()})
        return
    console = _console()
    console.print(report.summary())
    console.print(f"saved to {out}; 'lsnpc.CorrectedLabelsClassifier.load' reads it")


@app.command("correct-labels")
@_user_errors(X="--features", pred_probs="--probs", features="--features", cv="--cv", n_threads="--threads",
              device="--device", min_positive_fraction="--min-positive-fraction")
def correct_labels(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), of the labelled rows.")],
    labels: Annotated[Path, typer.Option(help="The given (possibly wrong) 0/1 labels, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Where to write the corrected labels (.npy, .csv or .parquet); never "
                                           "one of the inputs.")],
    probs: Annotated[Path | None, typer.Option(help="A model's out-of-fold probabilities on the rows, shape (n, L). "
                                                    "Default: those of lsnpc's MLP, --cv folds.")] = None,
    cv: Annotated[int, typer.Option(help="Folds of the out-of-fold probabilities (without --probs).")] = 5,
    min_positive_fraction: Annotated[float, typer.Option(
        help="No label ends with fewer positives than this fraction of its given ones: where the correction "
             "would leave fewer, the label's given positives come back (0: the correction as it is).")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same labels.")] = 0,
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists (never an input).")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Write corrected training labels, for retraining a model of your own on them.

    Each given positive is moved to the label it most likely came from under the noise LSNPC estimates
    (itself when it looks right), so rows keep their number of labels and their place; a label the correction
    would leave with fewer than --min-positive-fraction of its given positives keeps them all (a model retrained
    on the labels would lose it otherwise).
    """
    import numpy as np

    from lsnpc._validation import check_multilabel, check_same_n_samples
    from lsnpc.arrays import array_format, write_array
    from lsnpc.label_issues import correct_labels as correct

    array_format(out, "--out")
    _refuse_input_as_output("--out", out, {"--features": features, "--labels": labels, "--probs": probs})
    _check_device(device)
    _refuse_existing(out, force)
    steps = ["reading the arrays", "out-of-fold probabilities", "correcting the labels", "writing them"]
    with _progress(steps[0], unit="steps") as update:
        update(0, len(steps))
        X, _ = _read(features, "--features")
        Y, names = _read(labels, "--labels")
        if probs is None:  # checked here: "labels" is too common a word to rename in the library's messages
            P = None
            Y = check_multilabel(Y, "--labels", min_samples=2)
            check_same_n_samples(**{"--features": X, "--labels": Y})
        else:
            Y, P = _check_label_arrays(X, Y, _read(probs, "--probs")[0])
        update(1, len(steps), description=steps[1])
        if P is None:
            from lsnpc.classifiers import MLPClassifier
            from lsnpc.model_selection import cross_val_pred_probs

            mlp = MLPClassifier(random_state=seed, device=device, n_threads=threads)
            P = cross_val_pred_probs(mlp, X, Y, cv=cv, random_state=seed,
                                     on_fold=lambda done, total: update(1, len(steps),
                                                                        description=f"{steps[1]}: fold {done}/{total}"))
        update(2, len(steps), description=steps[2])
        corrected = correct(Y, P, features=X, random_state=seed, device=device, n_threads=threads,
                            min_positive_fraction=min_positive_fraction)
        update(3, len(steps), description=steps[3])
        write_array(out, corrected, columns=names)
        update(4, len(steps))
    given = np.asarray(Y).astype(np.int64)
    changed = int((corrected != given).sum())
    summary = {"out": str(out), "n_rows": int(given.shape[0]), "n_labels": int(given.shape[1]), "changed": changed,
               "rows_changed": int((corrected != given).any(axis=1).sum())}
    if as_json:
        _print_json(summary)
        return
    _console().print(f"changed {changed} of {given.size} label entries ({changed / given.size:.2%}), in "
                     f"{summary['rows_changed']} of {given.shape[0]} rows; the corrected labels are in {out}")
