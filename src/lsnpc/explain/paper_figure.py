"""The paper's figure 5 from a folder of pictures: a base model over a ResNet, LSNPC over a copy of it, GradCAM.

:func:`draw_figure5` runs the paper's setting end to end on images a user holds with their clean labels:
ResNet-50 features, MLP_r (a linear head) trained on noisy labels, LSNPC whose data encoder is a copy of the
ResNet and MLP_r's trunk (fine-tuned, as the paper does), then the GradCAM maps of both for the images where
the correction changed a decision, drawn by :func:`~lsnpc.explain.gradcam_figure` with the paper's marking.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_array, check_binary_labels, check_scalar
from .figure import MISCLASSIFIED, MISSED, LabelMark, gradcam_figure, label_marks
from .gradcam import (
    classifier_cams,
    collapse_message,
    corrected_cams,
    corrected_probabilities,
    resnet_backbone,
)

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "Figure5", "draw_figure5"]

#: The normalisation torchvision's ImageNet ResNets expect.
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@dataclass
class Figure5:
    """What :func:`draw_figure5` drew: the file, the images shown, the label explained in each, the headers."""

    path: Path
    shown: list[int]
    explained: list[str]
    marks: list[list[LabelMark]]
    n_fixed: int
    collapse: str | None
    base_micro_f1: float
    corrected_micro_f1: float
    corrector_selection: str = field(default="")


def _network_input(pictures: np.ndarray) -> np.ndarray:
    return ((pictures.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2).copy()


def _features(backbone: Any, x: np.ndarray, batch: int = 32) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.concatenate([backbone(torch.as_tensor(x[i:i + batch])).numpy() for i in range(0, len(x), batch)])


def _choose(marks: list[list[LabelMark]], corrected: np.ndarray, n_show: int) -> tuple[list[int], list[int]]:
    """The images to show (those whose decisions the correction fixed first) and the label to explain in each
    (the first it fixed, else its most probable ground-truth label after correction)."""
    fixed = [sum(m.colour in (MISSED, MISCLASSIFIED) for m in row) for row in marks]
    order = sorted(range(len(marks)), key=lambda i: (-fixed[i], i))[:n_show]
    labels = []
    for i in order:
        changed = [m.index for m in marks[i] if m.colour in (MISSED, MISCLASSIFIED)]
        present = [m.index for m in marks[i]]
        labels.append(changed[0] if changed else (max(present, key=lambda k: corrected[i, k]) if present
                                                  else int(np.argmax(corrected[i]))))
    return order, labels


def draw_figure5(
    path: str | os.PathLike[str],
    images: Any,
    labels: Any,
    *,
    label_names: Sequence[str] | None = None,
    noisy_labels: Any = None,
    noise_kind: str = "symmetric",
    noise_rate: float = 0.3,
    weights: Any = "imagenet",
    n_show: int = 5,
    mlp_epochs: int = 20,
    lsnpc_epochs: int | None = None,
    batch_size: int = 16,
    seed: int = 0,
    device: str = "cpu",
    overwrite: bool = False,
) -> Figure5:
    """Train MLP_r and LSNPC on ``images`` with noisy labels and draw the paper's figure 5 for them.

    Parameters
    ----------
    path : path ending in .png, .pdf, .svg or .jpg
        Where the figure goes (never replaced without ``overwrite``).
    images : array (n, H, W, 3) uint8
        The pictures (square; 224 × 224 as the paper's ResNet-50 reads them).
    labels : array (n, L) of 0/1
        Their clean labels: the ground truth of the headers and of the marking.
    label_names : L strings, optional
        Default ``label0``, ``label1``, ...
    noisy_labels : array (n, L) of 0/1, optional
        The labels both models train on; default: ``labels`` with ``noise_kind`` noise at ``noise_rate``.
    weights : "imagenet", a weight file, or None
        The ResNet-50's weights (:class:`lsnpc.features.ImageEncoder`; None: random, for tests).
    n_show : int
        How many images (columns) to draw.
    mlp_epochs, lsnpc_epochs, batch_size : int
        Training of MLP_r and of LSNPC (None: LSNPC's default epochs).
    seed : int
        Seeds the noise, both models and the ResNet's random initialisation.

    Returns
    -------
    Figure5. A correction that has collapsed (the same probability for every label) is drawn, with a
    UserWarning and the reason in ``collapse``.
    """
    import torch
    from torch import nn

    from ..classifiers import MLPClassifier
    from ..corrector import LSNPC
    from ..features import ImageEncoder
    from ..metrics import micro_f1
    from ..noise import simulate_noise

    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")
    pictures = check_array(images, "images", ndim=4, dtype=None)
    if pictures.dtype != np.uint8 or pictures.shape[-1] != 3 or pictures.shape[1] != pictures.shape[2]:
        raise ValueError(f"images must be square RGB pictures (n, H, H, 3) of uint8, got {pictures.shape} "
                         f"{pictures.dtype}")
    truth = check_binary_labels(labels, "labels")
    if len(truth) != len(pictures):
        raise ValueError(f"labels must have one row per image ({len(pictures)}), got {len(truth)}")
    names = list(label_names) if label_names is not None else [f"label{k}" for k in range(truth.shape[1])]
    if len(names) != truth.shape[1]:
        raise ValueError(f"label_names must name the {truth.shape[1]} labels, got {len(names)}")
    check_scalar(n_show, "n_show", low=1)
    if noisy_labels is None:
        noisy, _ = simulate_noise(truth, noise_kind, noise_rate, random_state=seed)
    else:
        noisy = check_binary_labels(noisy_labels, "noisy_labels")
        if noisy.shape != truth.shape:
            raise ValueError(f"noisy_labels must have labels' shape {truth.shape}, got {noisy.shape}")

    x = _network_input(pictures)
    backbone = resnet_backbone(ImageEncoder("resnet50", weights=weights, seed=seed, progress=False).model).eval()
    features = _features(backbone, x)
    base = MLPClassifier(hidden_dims=(), epochs=mlp_epochs, random_state=seed, device=device).fit(features, noisy)
    probs = base.predict_proba(features)
    # LSNPC's data encoder: a trainable copy of the ResNet with MLP_r's trunk, as the paper fine-tunes it
    encoder = nn.Sequential(copy.deepcopy(backbone).requires_grad_(True), base.trunk_)
    corrector = LSNPC(encoder=encoder, batch_size=batch_size, student=False, random_state=seed, device=device,
                      **({"epochs": lsnpc_epochs} if lsnpc_epochs is not None else {}))
    corrector.fit(x, probs, labels=noisy)
    base_pred = (probs >= 0.5).astype(np.int64)
    corrected_pred = corrector.predict(x, probs)
    raw = corrected_probabilities(corrector, x, probs)
    marks = label_marks(names, truth, base_pred, corrected_pred)
    shown, explained = _choose(marks, raw, n_show)
    needed = sorted(set(explained))
    picked = torch.as_tensor(x[shown])
    with warnings.catch_warnings():  # the collapse is said once, below, not by every call
        warnings.simplefilter("ignore", UserWarning)
        base_maps = classifier_cams(base, backbone, picked, needed)
        lsnpc_maps = corrected_cams(corrector, picked, probs[shown], needed, layer="0.layer4")
    column = [needed.index(k) for k in explained]
    rows = np.arange(len(shown))
    collapse = collapse_message(raw)
    if collapse is not None:
        warnings.warn(collapse, UserWarning, stacklevel=2)
    gradcam_figure(target, pictures[shown], base_maps[rows, column][:, None], lsnpc_maps[rows, column][:, None],
                   [[names[k]] for k in explained], base_probs=probs[shown, explained][:, None],
                   corrected_probs=raw[shown, explained][:, None], marks=[marks[i] for i in shown],
                   row_names=("MLP_r (base)", "LSNPC"), overwrite=overwrite)
    n_fixed = sum(m.colour in (MISSED, MISCLASSIFIED) for row in marks for m in row)
    return Figure5(path=target, shown=shown, explained=[names[k] for k in explained], marks=[marks[i] for i in shown],
                   n_fixed=n_fixed, collapse=collapse, base_micro_f1=micro_f1(truth, probs),
                   corrected_micro_f1=micro_f1(truth, corrector.predict_proba(x, probs), threshold=corrector.threshold_),
                   corrector_selection=str(corrector.selection_))
