"""The paper's figure 5: per column an image and the label explained, the base model's map above LSNPC's.

Each column's header lists the image's ground-truth labels as the paper marks them: blue, a label the base
model missed and the correction found; red, a label the base model mis-classified (predicted, absent) and the
correction removed; black, the rest (:func:`label_marks`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._io import atomic_path
from .._validation import (
    check_array,
    check_binary_labels,
    check_probabilities,
    check_scalar,
)

__all__ = ["MISCLASSIFIED", "MISSED", "LabelMark", "gradcam_figure", "label_marks"]

#: The paper's colours: a label the base model missed (blue) or mis-classified (red) that the correction fixed.
MISSED, MISCLASSIFIED, UNCHANGED = "blue", "red", "black"


class LabelMark(NamedTuple):
    """One label in a column's header: its index, name and colour (blue, red or black)."""

    index: int
    name: str
    colour: str


def label_marks(label_names: Sequence[str], true_labels: Any, base_labels: Any, corrected_labels: Any,
                ) -> list[list[LabelMark]]:
    """Per image, the labels its column's header lists, coloured as the paper's figure 5.

    Parameters
    ----------
    label_names : L strings
    true_labels, base_labels, corrected_labels : arrays (n, L) of 0/1
        The ground truth, the base model's decisions and the corrected decisions.

    Returns
    -------
    n lists of :class:`LabelMark`: every ground-truth label (blue where the base model missed it and the
    correction found it, black otherwise), then every label the base model predicted wrongly that the
    correction removed (red).
    """
    truth = check_binary_labels(true_labels, "true_labels")
    base = check_binary_labels(base_labels, "base_labels")
    corrected = check_binary_labels(corrected_labels, "corrected_labels")
    names = list(label_names)
    if not (truth.shape == base.shape == corrected.shape) or truth.shape[1] != len(names):
        raise ValueError(f"true_labels, base_labels and corrected_labels must share one shape (n, {len(names)}) "
                         f"(one column per label name), got {truth.shape}, {base.shape}, {corrected.shape}")
    out = []
    for t, b, c in zip(truth, base, corrected, strict=True):
        marks = [LabelMark(k, names[k], MISSED if (not b[k] and c[k]) else UNCHANGED) for k in np.flatnonzero(t)]
        marks += [LabelMark(k, names[k], MISCLASSIFIED) for k in np.flatnonzero((t == 0) & (b == 1) & (c == 0))]
        out.append(marks)
    return out

_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def _display_images(images: Any) -> np.ndarray:
    """(n, H, W, 3) as floats in [0, 1]: uint8 is scaled, floats must already lie in [0, 1]."""
    array = check_array(images, "images", ndim=4, dtype=None)
    if array.shape[-1] != 3:
        raise ValueError(f"images must be RGB images (n, H, W, 3), got shape {array.shape}")
    if array.dtype == np.uint8:
        return array.astype(np.float32) / 255.0
    array = array.astype(np.float32)
    if array.min() < 0 or array.max() > 1:
        raise ValueError("images must be uint8 or floats in [0, 1] (the picture, not the normalised network input)")
    return array


def _check_maps(maps: Any, name: str, shape: tuple[int, ...] | None) -> np.ndarray:
    array = check_array(maps, name, ndim=4).astype(np.float32)
    if array.min() < 0 or array.max() > 1:
        raise ValueError(f"{name} must hold maps in [0, 1] (as grad_cam returns them)")
    if shape is not None and array.shape != shape:
        raise ValueError(f"{name} must have shape {shape} (like base_maps), got {array.shape}")
    return array


def _optional_probs(probs: Any, name: str, shape: tuple[int, int]) -> np.ndarray | None:
    if probs is None:
        return None
    array = check_probabilities(probs, name)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape} (images, labels shown), got {array.shape}")
    return array


def gradcam_figure(
    path: str | os.PathLike[str],
    images: Any,
    base_maps: Any,
    corrected_maps: Any,
    label_names: Sequence[str],
    *,
    base_probs: Any = None,
    corrected_probs: Any = None,
    true_labels: Any = None,
    marks: Sequence[Sequence[LabelMark]] | None = None,
    row_names: tuple[str, str] = ("base model", "LSNPC"),
    alpha: float = 0.5,
    overwrite: bool = False,
) -> Path:
    """Draw the paper's figure 5: one column per (image, label), the base model's map above LSNPC's; save it.

    Parameters
    ----------
    path : path ending in .png, .pdf, .svg or .jpg
        Where the figure goes; written to a temporary file beside it and renamed. An existing file is
        replaced only with ``overwrite=True``.
    images : array (n, H, W, 3), uint8 or floats in [0, 1]
        The pictures as shown (not the normalised network input), the maps' height and width.
    base_maps, corrected_maps : arrays (n, k, H, W) in [0, 1]
        :func:`~lsnpc.explain.classifier_cams` and :func:`~lsnpc.explain.corrected_cams` for the same
        images and the same k labels.
    label_names : k strings, or n lists of k strings
        The names of the labels explained, in the maps' order (per image when each explains its own).
    base_probs, corrected_probs : arrays (n, k), optional
        The base and corrected probabilities of those labels, printed under each map.
    true_labels : array (n, k) of 0/1, optional
        Whether each label explained is truly present, printed beside its name.
    marks : n sequences of LabelMark, optional
        Each image's header: its ground-truth labels, coloured as the paper's (:func:`label_marks`); without
        it the header is the image's number.
    row_names : two strings
        The rows' names (the base model's, the correction's).
    alpha : float in [0, 1]
        Opacity of the map drawn over the image.

    Returns
    -------
    The path written.
    """
    target = Path(path)
    if target.suffix.lower() not in _FORMATS:
        raise ValueError(f"path must end in one of {', '.join(_FORMATS)}, got {str(target)!r}")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")
    pictures = _display_images(images)
    base = _check_maps(base_maps, "base_maps", None)
    corrected = _check_maps(corrected_maps, "corrected_maps", base.shape)
    n, k, height, width = base.shape
    if pictures.shape[:3] != (n, height, width):
        raise ValueError(f"images must be (n, H, W, 3) = ({n}, {height}, {width}, 3) to match the maps, "
                         f"got {pictures.shape}")
    names = [label_names] if isinstance(label_names, str) else list(label_names)
    if len(names) == n and all(isinstance(row, (list, tuple)) for row in names):  # per image
        if not all(len(row) == k and all(isinstance(s, str) for s in row) for row in names):
            raise ValueError(f"label_names must be {k} strings (one per map), or one such list per image, "
                             f"got {label_names!r}")
        per_image = [list(row) for row in names]
    elif len(names) != k or not all(isinstance(s, str) for s in names):
        raise ValueError(f"label_names must be {k} strings (one per map), or one such list per image, "
                         f"got {label_names!r}")
    else:
        per_image = [names] * n
    p_base = _optional_probs(base_probs, "base_probs", (n, k))
    p_corrected = _optional_probs(corrected_probs, "corrected_probs", (n, k))
    truth = None if true_labels is None else check_binary_labels(true_labels, "true_labels")
    if truth is not None and truth.shape != (n, k):
        raise ValueError(f"true_labels must have shape {(n, k)} (images, labels shown), got {truth.shape}")
    if marks is not None and len(marks) != n:
        raise ValueError(f"marks must hold one list of labels per image ({n}), got {len(marks)}")
    if not (isinstance(row_names, (tuple, list)) and len(row_names) == 2 and all(isinstance(r, str) for r in row_names)):
        raise ValueError(f"row_names must be two strings (the base model's row, the correction's), got {row_names!r}")
    check_scalar(alpha, "alpha", low=0, high=1)

    # Figure without pyplot: no global backend or figure registry is touched.
    from matplotlib.figure import Figure

    longest = max((len(m) for m in marks), default=1) if marks is not None else 1
    fig = Figure(figsize=(2.4 * n * k * width / height + 0.6, 5.4 + 0.18 * longest), layout="constrained")
    axes = fig.subplots(2, n * k, squeeze=False)
    for i in range(n):
        for j in range(k):
            column = i * k + j
            explained = per_image[i][j] + ("" if truth is None else (" (present)" if truth[i, j] else " (absent)"))
            for row, (maps, probs) in enumerate(((base, p_base), (corrected, p_corrected))):
                ax = axes[row][column]
                # aspect auto: the axes fill their cell, so the layout keeps the header's room above them
                ax.imshow(pictures[i], aspect="auto")
                ax.imshow(maps[i, j], cmap="jet", alpha=alpha, vmin=0.0, vmax=1.0, aspect="auto")
                ax.set_xticks([])
                ax.set_yticks([])
                ax.set_xlabel(f"{explained}" + ("" if probs is None else f": p = {probs[i, j]:.2f}"), fontsize=8)
                if column == 0:
                    ax.set_ylabel(row_names[row], fontsize=10)
            top = axes[0][column]
            if marks is None:
                top.set_title(f"image {i}", fontsize=9)
                continue
            # an empty title of as many lines reserves the header's height in the layout
            top.set_title("\n".join("x" for _ in marks[i]) or "x", fontsize=9, pad=2, color="none")
            for line, mark in enumerate(reversed(list(marks[i]))):  # the first label on top
                top.annotate(mark.name, xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0, 3 + 11 * line),
                             textcoords="offset points", ha="center", va="bottom", fontsize=8, color=mark.colour,
                             fontweight="bold" if mark.colour != UNCHANGED else "normal")
    with atomic_path(target, suffix=target.suffix) as tmp:
        fig.savefig(tmp, dpi=110, format=target.suffix.lower().lstrip(".").replace("jpg", "jpeg"))
    return target
