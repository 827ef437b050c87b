"""A single fit in one picture: the training loss and the score that chose the epoch, per epoch, the epoch kept marked."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

from .._io import atomic_path, user_path

__all__ = ["plot_training"]

_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")

# The selection scores a history can hold: the criterion's name in ``selection_`` -> its keys, each with
# the words of its legend; and the axis label of the kind.
_SCORES: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {
    "val_f1": ((("val_micro_f1", "validation micro-F1"), ("val_macro_f1", "validation macro-F1")),
               "F1 on clean validation labels (higher is better)"),
    "noisy_f1": ((("holdout_noisy_micro_f1", "held-out micro-F1"), ("holdout_noisy_macro_f1", "held-out macro-F1")),
                 "held-out F1 against noisy labels (higher is better)"),
    "noisy_elbo": ((("holdout_neg_elbo", "held-out negative ELBO"),),
                   "held-out negative ELBO (lower is better)"),
}


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None (missing, not a number, NaN or infinite: a point not drawn)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _check_history(history: Any) -> list[Mapping[str, Any]]:
    """The entries of ``history`` that have an epoch number; a ValueError naming ``history`` otherwise."""
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ValueError(f"history must be a list of per-epoch dicts (a fitted LSNPC's history_) or a fitted "  # noqa: TRY004
                         f"corrector, got {type(history).__name__}")
    if not all(isinstance(entry, Mapping) for entry in history):
        raise ValueError("history must be a list of per-epoch dicts (a fitted LSNPC's history_); some entries "
                         "are not dicts")
    entries = [entry for entry in history if _number(entry.get("epoch")) is not None]
    if not entries:
        raise ValueError("history holds no entry with an 'epoch' number: nothing to plot")
    return entries


def _selection_kind(entries: list[Mapping[str, Any]], selection: str | None) -> str | None:
    """Which score chose the epoch: ``selection`` when it names one the history holds; else the first of
    validation F1, held-out F1 and held-out ELBO that it holds (None: none)."""
    held = [kind for kind, (keys, _) in _SCORES.items()
            if any(_number(entry.get(key)) is not None for entry in entries for key, _ in keys)]
    if selection is not None and selection in held:
        return selection
    return held[0] if held else None


def _from_corrector(obj: Any, best_epoch: Any, selection: str | None) -> tuple[Any, Any, str | None]:
    """(history, best epoch, selection criterion) of a fitted corrector; the arguments given win."""
    if not hasattr(obj, "history_"):
        raise ValueError(f"this {type(obj).__name__} is not fitted (it has no history_): call fit first, or pass "
                         "a history")
    if selection is None:
        described = getattr(obj, "selection_", None)
        selection = described.split(":", 1)[0] if isinstance(described, str) else None
    return obj.history_, getattr(obj, "best_epoch_", None) if best_epoch is None else best_epoch, selection


def plot_training(
    history: Any,
    best_epoch: int | None = None,
    *,
    selection: str | None = None,
    ax: Any = None,
    path: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Any:
    """Draw a fit's training curve: the loss per epoch, the score that chose the epoch on a second axis,
    and the epoch kept marked; optionally save it.

    Parameters
    ----------
    history : list of dict, or a fitted corrector
        A fitted LSNPC's ``history_`` (one dict per epoch: "epoch", "phase", "loss", and the selection
        score: "val_micro_f1" / "val_macro_f1", "holdout_noisy_micro_f1" / "holdout_noisy_macro_f1", or
        "holdout_neg_elbo"), or the fitted LSNPC itself, whose ``best_epoch_`` and ``selection_`` are then
        read too. Entries without a loss or a score (the warm start has no training loss; the last
        epoch of a diverged fit has no score) leave those points out.
    best_epoch : int, optional
        The epoch kept (``best_epoch_``, 0 = the warm start), marked with a vertical line; None: no mark.
    selection : "val_f1", "noisy_f1" or "noisy_elbo", optional
        Which score chose the epoch, where the history holds more than one (a fitted corrector says so
        itself); default: the first of validation F1, held-out F1 and held-out ELBO that it holds.
    ax : matplotlib Axes, optional
        Where to draw (its figure is returned); default: a new figure.
    path : path ending in .png, .pdf, .svg or .jpg, optional
        Where to save the figure, atomically (a temporary file beside it, renamed); may start with ``~``.
    overwrite : bool
        Replace an existing file at ``path`` (else FileExistsError).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> history = [{"epoch": 0, "phase": "warm_start", "holdout_neg_elbo": 9.0},
    ...            {"epoch": 1, "phase": "train", "loss": 8.0, "holdout_neg_elbo": 7.5},
    ...            {"epoch": 2, "phase": "train", "loss": 7.0, "holdout_neg_elbo": 7.8}]
    >>> figure = plot_training(history, best_epoch=1)
    >>> figure.axes[1].get_ylabel()
    'held-out negative ELBO (lower is better)'
    """
    if hasattr(history, "history_") or hasattr(history, "fit"):  # a corrector, fitted or not
        history, best_epoch, selection = _from_corrector(history, best_epoch, selection)
    entries = _check_history(history)
    epochs = {int(_number(entry["epoch"])) for entry in entries}  # type: ignore[arg-type]
    if best_epoch is not None:
        if isinstance(best_epoch, bool) or not isinstance(best_epoch, Integral):
            raise ValueError(f"best_epoch must be an integer epoch of history or None, got {best_epoch!r}")
        if int(best_epoch) not in epochs:
            raise ValueError(f"best_epoch={best_epoch} is not an epoch of history (it has epochs "
                             f"{min(epochs)} to {max(epochs)})")
    if selection is not None and selection not in (*_SCORES, "last"):
        raise ValueError(f"selection must be one of {', '.join(_SCORES)} or None, got {selection!r}")
    target = None
    if path is not None:
        target = user_path(path)
        if target.suffix.lower() not in _FORMATS:
            raise ValueError(f"path must end in one of {', '.join(_FORMATS)}, got {str(path)!r}")
        if target.exists() and not overwrite:
            raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):
            raise ValueError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        figure = ax.figure
    else:
        # Figure without pyplot: no global backend or figure registry is touched (Agg draws it).
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7.5, 4.2), layout="constrained")
        ax = figure.subplots()
    _draw(ax, entries, best_epoch, _selection_kind(entries, selection))
    if target is not None:
        with atomic_path(target, suffix=target.suffix) as tmp:
            figure.savefig(tmp, dpi=110, format=target.suffix.lower().lstrip(".").replace("jpg", "jpeg"))
    return figure


def _series(entries: list[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    points = [(float(entry["epoch"]), _number(entry.get(key))) for entry in entries]
    kept = [(x, y) for x, y in points if y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def _draw(ax: Any, entries: list[Mapping[str, Any]], best_epoch: int | None, kind: str | None) -> None:
    """The loss on ``ax``, the ``kind`` of selection score on a twin axis, the kept epoch marked."""
    handles = []
    x, y = _series(entries, "loss")
    if x:
        handles += ax.plot(x, y, color="tab:blue", marker="o", markersize=3,
                           label="training loss (negative ELBO per batch)")
    ax.set_xlabel("epoch (0 = the warm start)")
    ax.set_ylabel("training loss (lower is better)")
    ax.grid(alpha=0.3)
    if kind is not None:
        keys, axis_label = _SCORES[kind]
        twin = ax.twinx()
        for (key, words), color in zip(keys, ("tab:orange", "tab:green"), strict=False):
            x, y = _series(entries, key)
            if x:
                handles += twin.plot(x, y, color=color, marker="s", markersize=3, label=words)
        twin.set_ylabel(axis_label)
    if best_epoch is not None:
        kept = "the warm start" if best_epoch == 0 else f"epoch {best_epoch}"
        handles.append(ax.axvline(best_epoch, color="tab:red", linestyle="--", linewidth=1.2,
                                  label=f"kept: {kept}"))
    what = "and the score that chose the epoch" if kind is not None else "per epoch (no selection score recorded)"
    ax.set_title(f"LSNPC training: loss {what}")
    if handles:
        ax.legend(handles=handles, loc="best", fontsize=8)
