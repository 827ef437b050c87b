"""``lsnpc demo``, ``lsnpc fit`` and ``lsnpc correct``: LSNPC end to end, fitted and saved, applied."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    DEVICE_OPTION, JSON_OPTION, THREADS_HELP, _OWN_FLAGS, _check_device, _check_label_arrays, _console,
    _metrics_table, _parse_sets, _print_json, _progress, _read, _refuse_existing, _refuse_input_as_output, _status,
    _user_errors, app,
)

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
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Run the whole pipeline once: noisy labels -> base MLP -> KNN and LSNPC -> metrics on clean test labels.

    The base MLP is trained on noisy labels (and chooses its epoch on noisy validation labels);
    KNN and LSNPC (no clean label anywhere) correct its test-set probabilities. LSNPC is given the noisy
    training labels, as a user would (``fit(labels=...)``): they choose its epoch. Beside them, the base MLP
    at the threshold the noisy labels' count implies (as LSNPC's own no-label plan chooses its threshold)
    shows how much of the gain is a threshold and how much the correction.
    """
    from lsnpc.experiments import ConfigError, expand_runs, get_component, group_runs, parse_config, run_group

    _check_device(device)
    raw = {
        "name": "demo", "device": device, "seeds": [seed],
        "datasets": [{"name": dataset, "data_home": str(data_home) if data_home else None, "max_train": max_train}],
        "noise": [{"kind": noise_kind, "rate": noise_rate}],
        "classifiers": [{"name": "mlp", "params": {"epochs": mlp_epochs} if mlp_epochs else {}}],
        "post_processors": ["none", "count-threshold", "knn", {"name": "lsnpc", "params": {
            "noisy_labels": True, **({"epochs": lsnpc_epochs} if lsnpc_epochs else {})}}],
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
    base = f"base {get_component('mlp').title}"
    names = {name: base if name == "none" else f"{base} @ count threshold" if name == "count-threshold"
             else f"+ {get_component(name).title}" for name in (r["processor_name"] for r in result.rows)}
    metrics = ["micro_f1", "macro_f1", "map", "lrap", "hamming_loss", "ranking_loss"]
    first_row = result.rows[0]
    lsnpc_row = next(r for r in result.rows if r["processor_name"] == "lsnpc")
    count_row = next(r for r in result.rows if r["processor_name"] == "count-threshold")
    if as_json:
        _print_json({
            "dataset": dataset, "seed": seed, "noise_kind": noise_kind, "noise_rate": noise_rate,
            "noise_realised_rate": first_row["noise_realised_rate"], "n_train": first_row["n_train"],
            "n_test": first_row["n_test"], "n_labels": first_row["n_labels"], "seconds": seconds,
            "methods": {names[r["processor_name"]].lstrip("+ "): {m: r[m] for m in metrics} for r in result.rows},
            "lsnpc_selection": lsnpc_row["selection"], "lsnpc_threshold": lsnpc_row["threshold"],
            "count_threshold": count_row["threshold"],
        })
        return
    console = _console()
    rows = [(names[r["processor_name"]], r) for r in result.rows]
    title = (f"{dataset}: {first_row['n_train']} noisy training / {first_row['n_test']} clean test samples, "
             f"{first_row['n_labels']} labels, {noise_kind} noise {noise_rate:.0%} (realised "
             f"{first_row['noise_realised_rate']:.1%}), seed {seed}")
    console.print(_metrics_table(title, rows, metrics))
    console.print("base MLP: trained on noisy labels; + KNN / + LSNPC: its test probabilities corrected "
                  "without any clean label (LSNPC's epoch chosen, and its output tested, on the noisy training "
                  f"labels; it labels at probability >= {lsnpc_row['threshold']:g}). {base} @ count threshold: the "
                  f"base probabilities, uncorrected, labelled at >= {count_row['threshold']:g}, the threshold the "
                  "noisy training labels' count implies, chosen as LSNPC's no-label plan chooses its own: from "
                  f"{base} to it is the threshold's gain, from it to LSNPC the correction's. Higher is better "
                  "except Hamming and ranking loss; the best of each column is green.")
    console.print(f"took {seconds:.1f} s (features + noise {first_row['time_data_s']:.1f} s, "
                  f"base MLP {first_row['time_classifier_s']:.1f} s, "
                  + ", ".join(f"{names[r['processor_name']][2:]} {r['time_fit_s']:.1f} s"
                              for r in result.rows if r["processor_name"] not in ("none", "count-threshold")) + ")")



_FIT_FLAGS = {"latent": "--latent", "epochs": "--epochs", **_OWN_FLAGS}
_FIT_ERRORS = dict(X="--features", pred_probs="--probs", X_clean="--clean-features", y_clean="--clean-labels",
                   pred_probs_clean="--clean-probs", X_val="--val-features", y_val="--val-labels",
                   pred_probs_val="--val-probs", X_unlabelled="--unlabelled-features",
                   pred_probs_unlabelled="--unlabelled-probs", **_FIT_FLAGS)



def _running_next(phase: Any, epoch: int, total: int, entry: Any, *, student: bool) -> str:
    """What ``lsnpc fit`` does next, for its progress bar, once the step whose history ``entry`` (of ``phase``,
    ``epoch`` of ``total``) reports has finished: the warm start, each training epoch, the student's fit, the
    choice of blend and threshold (``student``: whether the fit has a student), each prefixed by its network where
    the fit trains several. A phase this does not know is shown by its own name."""
    from rich.markup import escape

    diverged = isinstance(entry, dict) and bool(entry.get("diverged"))
    network, networks = (entry.get("network"), entry.get("networks")) if isinstance(entry, dict) else (None, None)
    of = f"network {network}/{networks}: " if network is not None else ""
    if phase == "warm_start":
        return f"{of}training epoch 1/{total}"
    if phase == "train" and epoch < total and not diverged:
        return f"{of}training epoch {epoch + 1}/{total}"
    if phase == "train" and student:  # the last epoch, or training stopped
        return f"{of}fitting the student"
    if phase in ("train", "student") and network is not None and network < networks:
        return f"network {network + 1}/{networks}: training"
    if phase in ("train", "student"):
        return "choosing blend and threshold"
    if phase == "decide":
        return "saving the model"
    return escape(str(phase).replace("_", " ")) if phase else "fitting LSNPC"


def _optional_group(name: str, paths: tuple[Path | None, ...],
                    parts: tuple[str, ...] = ("features", "labels", "probs")) -> list[Any] | None:
    """The arrays of the flags ``--{name}-{part}`` (one path a part), or None when none is given."""
    given = [p is not None for p in paths]
    if not any(given):
        return None
    if not all(given):
        flags = [f"--{name}-{part}" for part in parts]
        raise ValueError(f"{', '.join(flags[:-1])} and {flags[-1]} must be given together")
    return [_read(p, f"--{name}-{what}")[0] for p, what in zip(paths, parts, strict=True)]


@app.command()
@_user_errors(**_FIT_ERRORS)
def fit(
    features: Annotated[Path, typer.Option(help="Features X, shape (n, d), for the samples the classifier scored.")],
    probs: Annotated[Path, typer.Option(help="The classifier's predicted probabilities P, shape (n, L).")],
    out: Annotated[Path, typer.Option(help="Folder to save the fitted LSNPC model in (a new folder, or a model "
                                           "saved before, replaced only with --force).")],
    labels: Annotated[Path | None, typer.Option(help="The samples' observed (noisy) 0/1 labels, shape (n, L), e.g. "
                                                     "those the classifier was trained on: without a validation "
                                                     "set of 10 rows or more they choose the checkpoint, test the "
                                                     "output and set the threshold (never trained on).")] = None,
    clean_features: Annotated[Path | None, typer.Option(help="Semi-supervised: features of a small clean set.")] = None,
    clean_labels: Annotated[Path | None, typer.Option(help="Semi-supervised: its clean 0/1 labels.")] = None,
    clean_probs: Annotated[Path | None, typer.Option(help="Semi-supervised: the classifier's probabilities on it.")] = None,
    val_features: Annotated[Path | None, typer.Option(help="Features of a validation set with clean labels: from 10 "
                                                           "rows it chooses the checkpoint, tests the blend with the "
                                                           "base model and sets the threshold; a smaller one is "
                                                           "trained on as a clean set.")] = None,
    val_labels: Annotated[Path | None, typer.Option(help="Model selection: its clean 0/1 labels.")] = None,
    val_probs: Annotated[Path | None, typer.Option(help="Model selection: the classifier's probabilities on it.")] = None,
    unlabelled_features: Annotated[Path | None, typer.Option(
        help="Features of rows the classifier was not trained on, without labels (new rows, the rows to predict): "
             "without a validation set the threshold is set by the label count on these rows, not on the "
             "training rows a memorising classifier is too sure of.")] = None,
    unlabelled_probs: Annotated[Path | None, typer.Option(help="The classifier's probabilities on those rows.")] = None,
    latent: Annotated[str, typer.Option(help="Latent family: student, gauss or learned (learned ν).")] = "student",
    epochs: Annotated[int | None, typer.Option(help="Training epochs (default: the library's).")] = None,
    paper: Annotated[bool, typer.Option("--paper", help="Use the paper's exact recipe (LSNPC.paper()).")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="NAME=VALUE",
                                                   help="Any other LSNPC parameter, NAME=VALUE (repeatable), "
                                                        "e.g. --set beta=0.01 --set nu0=3.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the model's initialisation and sampling.")] = 0,
    device: Annotated[str, DEVICE_OPTION] = "cpu",
    threads: Annotated[int, typer.Option(help=THREADS_HELP)] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace a model saved before at --out.")] = False,
    as_json: Annotated[bool, JSON_OPTION] = False,
) -> None:
    """Fit LSNPC on your own features and predicted probabilities; save it to a folder.

    Without a clean set this is the unsupervised LSNPC; --clean-* makes it semi-supervised.
    Without --val-* the checkpoint is chosen with no clean label: by F1 against --labels on held-out
    samples when they are given, else by the ELBO of held-out samples.
    """
    from lsnpc.corrector import LSNPC
    from lsnpc.corrector.persistence import check_save_target

    _refuse_input_as_output("--out", out, {
        "--features": features, "--probs": probs, "--labels": labels, "--clean-features": clean_features,
        "--clean-labels": clean_labels, "--clean-probs": clean_probs, "--val-features": val_features,
        "--val-labels": val_labels, "--val-probs": val_probs, "--unlabelled-features": unlabelled_features,
        "--unlabelled-probs": unlabelled_probs})
    _check_device(device)
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
    if labels is not None:  # checked here: "labels" is too common a word to rename in the library's messages
        kwargs["labels"] = _check_label_arrays(X, _read(labels, "--labels")[0], P)[0]
    clean = _optional_group("clean", (clean_features, clean_labels, clean_probs))
    if clean is not None:
        kwargs.update(X_clean=clean[0], y_clean=clean[1], pred_probs_clean=clean[2])
    val = _optional_group("val", (val_features, val_labels, val_probs))
    if val is not None:
        kwargs.update(X_val=val[0], y_val=val[1], pred_probs_val=val[2])
    unlabelled = _optional_group("unlabelled", (unlabelled_features, unlabelled_probs), ("features", "probs"))
    if unlabelled is not None:
        kwargs.update(X_unlabelled=unlabelled[0], pred_probs_unlabelled=unlabelled[1])
    start = time.perf_counter()
    with _progress("warm start" if model.warm_start else "training epoch 1", unit="epoch") as update:
        shown = [0, None]  # the bar's count: epochs trained, of how many

        def on_epoch(epoch: int, total: int, entry: dict[str, Any]) -> None:
            phase = entry.get("phase") if isinstance(entry, dict) else None
            if phase in ("warm_start", "train"):
                shown[:] = [epoch, total]
            update(shown[0], shown[1], _running_next(phase, epoch, total, entry, student=bool(model.student)))

        try:
            model.fit(X, P, on_epoch=on_epoch, **kwargs)
        except ValueError as exc:  # a parameter given with --set is named as such
            if str(exc).split(" ", 1)[0] in set(params) - set(_FIT_FLAGS):
                raise ValueError(f"--set {exc}") from None
            raise
    model.save(out, overwrite=force)
    if as_json:
        _print_json({"model": str(out), "epochs": model.epochs_, "best_epoch": model.best_epoch_,
                     "selection": model.selection_, "base_weight": model.base_weight_, "threshold": model.threshold_,
                     "report": model.report_.to_dict(), "summary": model.report_.summary(),
                     "seconds": time.perf_counter() - start})
        return
    console = _console()
    console.print(f"saved the fitted model to {out}")
    console.print(model.report_.summary())


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
    from lsnpc.arrays import array_format, write_array

    if not model.is_dir():
        raise FileNotFoundError(f"--model: model folder not found: {model}")
    target = out if out is not None else probs.with_name(f"{probs.stem}.corrected{probs.suffix}")
    array_format(target, "--out")
    _refuse_input_as_output("--out", target, {"--model": model, "--features": features, "--probs": probs})
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
                     "base_weight": corrector.base_weight_, "threshold": corrector.threshold_})
        return
    _console().print(f"wrote corrected probabilities {corrected.shape[0]}x{corrected.shape[1]} to {target}; the model "
                     f"predicts a label at probability >= {corrector.threshold_:g}")


