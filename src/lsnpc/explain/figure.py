"""The report figure of the paper's figure 5: an image, the base model's map and LSNPC's map, side by side."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_path
from .._validation import check_array, check_binary_labels, check_probabilities, check_scalar

__all__ = ["gradcam_figure"]

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
    alpha: float = 0.5,
    overwrite: bool = False,
) -> Path:
    """Draw one row per (image, label): the image, the base model's map, LSNPC's map; save it atomically.

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
    label_names : k strings
        The names of the labels explained, in the maps' order.
    base_probs, corrected_probs : arrays (n, k), optional
        The base and corrected probabilities of those labels, printed above each map.
    true_labels : array (n, k) of 0/1, optional
        Whether each label is truly present, printed beside its name (the paper marks the labels the
        base model missed or mislabelled and LSNPC corrected).
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
    if len(names) != k or not all(isinstance(s, str) for s in names):
        raise ValueError(f"label_names must be {k} strings (one per map), got {label_names!r}")
    p_base = _optional_probs(base_probs, "base_probs", (n, k))
    p_corrected = _optional_probs(corrected_probs, "corrected_probs", (n, k))
    truth = None if true_labels is None else check_binary_labels(true_labels, "true_labels")
    if truth is not None and truth.shape != (n, k):
        raise ValueError(f"true_labels must have shape {(n, k)} (images, labels shown), got {truth.shape}")
    check_scalar(alpha, "alpha", low=0, high=1)

    # Figure without pyplot: no global backend or figure registry is touched.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 2.6 * n * k), layout="constrained")
    axes = fig.subplots(n * k, 3, squeeze=False)
    for i in range(n):
        for j in range(k):
            row = axes[i * k + j]
            name = names[j] + ("" if truth is None else (" (present)" if truth[i, j] else " (absent)"))
            for ax, title, cam, probs in (
                (row[0], f"image {i}: {name}", None, None),
                (row[1], "base model", base[i, j], p_base),
                (row[2], "LSNPC", corrected[i, j], p_corrected),
            ):
                ax.imshow(pictures[i])
                if cam is not None:
                    ax.imshow(cam, cmap="jet", alpha=alpha, vmin=0.0, vmax=1.0)
                if probs is not None:
                    title += f"  p = {probs[i, j]:.2f}"
                ax.set_title(title, fontsize=9)
                ax.set_axis_off()
    with atomic_path(target, suffix=target.suffix) as tmp:
        fig.savefig(tmp, dpi=110, format=target.suffix.lower().lstrip(".").replace("jpg", "jpeg"))
    return target
