"""GradCAM maps (Selvaraju et al., 2017) of a base classifier over a CNN and of LSNPC's correction.

GradCAM for label k at a convolutional layer with activations A (n, C, h, w): the channel weights are
the spatial means of ∂score_k / ∂A, the map is ReLU(Σ_c weight_c · A_c), upsampled bilinearly to the
input's height and width and divided by its maximum (a map that is zero everywhere stays zero).

The score is the label's probability. For the base model that gives the same normalised map as its
logit would (the sigmoid's slope is one positive factor per image). For LSNPC the score is the corrected
probability E[y_k | x, ŷ] of eq. 9 exactly as prediction computes it (``LatentShiftModel.correct``):
a Monte-Carlo mean over the model's fixed draws (or a design drawn from ``seed``), so the score is one
differentiable function of the image and its gradient is well defined. The base model's
probabilities ŷ are an input of the correction, held fixed: the map shows what LSNPC's own data
encoder (a fine-tuned copy of the CNN, ``LSNPC(encoder=...)``) attends to.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from numbers import Integral
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._torch import as_tensor
from .._validation import check_array, check_is_fitted, check_probabilities, check_scalar
from ..corrector import LSNPC
from ..corrector.model import LatentShiftModel
from ..corrector.montecarlo import monte_carlo_design

__all__ = ["resnet_backbone", "grad_cam", "classifier_cams", "corrected_cams", "corrected_probabilities",
           "collapse_message", "COLLAPSE_SPREAD"]

#: A correction whose probabilities differ across an image's labels by less than this (median over images)
#: has collapsed: it says the same for every label (an under-trained fit gives p ≈ 0.4 everywhere), so its
#: maps explain no decision.
COLLAPSE_SPREAD = 0.05

ScoreFunction = Callable[[torch.Tensor], torch.Tensor]


def resnet_backbone(resnet: nn.Module, *, pooled: bool = True) -> nn.Sequential:
    """A torchvision ResNet as one module over images, its blocks named as in the ResNet.

    ``resnet``: e.g. ``torchvision.models.resnet50()`` or ``lsnpc.features.ImageEncoder("resnet50").model``
    (its classification head is left out). Returns a module mapping images (n, 3, H, W) to the pooled
    embedding (n, 2048) (``pooled=True``, what MLP_r's head reads) or to the last feature map
    (n, 2048, H/32, W/32) (what ADD-GCN reads). The modules are shared with ``resnet``, not copied;
    ``"layer4"`` names the last convolutional block, GradCAM's usual layer.
    """
    names = ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4")
    missing = [n for n in names if not isinstance(getattr(resnet, n, None), nn.Module)]
    if missing:
        raise ValueError(f"resnet must be a torchvision ResNet (with {', '.join(names)}); "
                         f"{type(resnet).__name__} lacks {', '.join(missing)}")
    blocks: OrderedDict[str, nn.Module] = OrderedDict((n, getattr(resnet, n)) for n in names)
    if pooled:
        blocks["pool"] = nn.AdaptiveAvgPool2d(1)
        blocks["flatten"] = nn.Flatten(1)
    return nn.Sequential(blocks)


def _find_layer(network: nn.Module, name: str) -> nn.Module:
    """The submodule of ``network`` called ``name`` (a dotted path as in ``named_modules()``)."""
    modules = dict(network.named_modules())
    if not isinstance(name, str) or not name or name not in modules:
        top = [n for n, _ in network.named_children()]
        raise ValueError(f"layer must name a submodule of the network, e.g. one of {top}; got {name!r}")
    return modules[name]


@contextlib.contextmanager
def _eval_mode(*modules: nn.Module) -> Iterator[None]:
    """Eval mode in the body (BatchNorm must not use or update batch statistics), each module's own
    mode restored after."""
    saved = [(m, m.training) for module in modules for m in module.modules()]
    for module in modules:
        module.eval()
    try:
        yield
    finally:
        for m, training in saved:
            m.training = training


def _device_of(module: nn.Module) -> torch.device:
    tensor = next(iter(module.parameters()), None)
    if tensor is None:
        tensor = next(iter(module.buffers()), None)
    return tensor.device if tensor is not None else torch.device("cpu")


def _check_images(images: Any) -> torch.Tensor:
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    return as_tensor(check_array(images, "images", ndim=4))


def _check_labels(labels: Any, n_labels: int) -> list[int]:
    values: list[Any] = []
    if isinstance(labels, Integral):
        values = [labels]
    elif isinstance(labels, (Sequence, np.ndarray)) and not isinstance(labels, str):
        values = list(np.ravel(np.asarray(labels, dtype=object)))
    if not values or not all(isinstance(k, Integral) and not isinstance(k, bool) for k in values):
        raise ValueError(f"labels must be a label index or a non-empty sequence of them, got {labels!r}")
    bad = [int(k) for k in values if not 0 <= k < n_labels]
    if bad:
        raise ValueError(f"labels must lie in [0, {n_labels}) (the model has {n_labels} labels), got {bad}")
    return [int(k) for k in values]


def grad_cam(score: ScoreFunction, layer: nn.Module, images: Any, labels: int | Sequence[int]) -> np.ndarray:
    """GradCAM maps of ``score``'s labels at ``layer`` (see the module docstring).

    Parameters
    ----------
    score : callable
        Maps images (n, C_in, H, W) to per-label scores (n, L), e.g. probabilities; it must run
        ``layer`` once, and each image's scores must depend on that image alone (eval mode).
    layer : torch.nn.Module
        A module inside the network whose output is a feature map (n, C, h, w).
    images : array or tensor (n, C_in, H, W)
        The network's input (already normalised); passed to ``score`` on ``layer``'s device.
    labels : int or sequence of int
        The label indices to explain, k of them.

    Returns
    -------
    ndarray (n, k, H, W) float32 in [0, 1]: map j of image i is where label ``labels[j]``'s score of image
    i draws on, peak 1 (or zero everywhere when no location raises the score).
    """
    x = _check_images(images).to(_device_of(layer))
    captured: list[torch.Tensor] = []

    def keep(module: nn.Module, args: Any, output: Any) -> torch.Tensor:
        if not isinstance(output, torch.Tensor) or output.ndim != 4:
            shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
            raise ValueError(f"layer must output a feature map (n, C, h, w), got {shape}")
        if not output.requires_grad:  # a frozen backbone: the map itself becomes the leaf to differentiate
            output = output.detach().requires_grad_()
        captured.append(output)
        return output

    handle = layer.register_forward_hook(keep)
    try:
        with torch.enable_grad():
            scores = score(x)
    finally:
        handle.remove()
    if len(captured) != 1:
        raise ValueError(f"layer must run exactly once per call of the network, it ran {len(captured)} times")
    if scores.ndim != 2 or scores.shape[0] != len(x):
        raise ValueError(f"score must return (n_images, n_labels) = ({len(x)}, L), got {tuple(scores.shape)}")
    targets = _check_labels(labels, scores.shape[1])
    activations = captured[0]
    maps = []
    for j, k in enumerate(targets):
        (grad,) = torch.autograd.grad(
            scores[:, k].sum(), activations, retain_graph=j + 1 < len(targets), allow_unused=True
        )
        if grad is None:  # the score does not depend on this layer at all
            grad = torch.zeros_like(activations)
        weights = grad.mean(dim=(2, 3), keepdim=True)
        maps.append(torch.relu((weights * activations).sum(dim=1)))
    cams = torch.stack(maps, dim=1).detach()
    cams = F.interpolate(cams, size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)
    peak = cams.amax(dim=(2, 3), keepdim=True)
    cams = torch.where(peak > 0, cams / peak.clamp(min=torch.finfo(cams.dtype).tiny), torch.zeros_like(cams))
    return cams.clamp_(0.0, 1.0).cpu().numpy().astype(np.float32)


def classifier_cams(
    classifier: Any, backbone: nn.Module, images: Any, labels: int | Sequence[int], *, layer: str = "layer4"
) -> np.ndarray:
    """GradCAM maps (n, k, H, W) of a base classifier that reads a CNN's output.

    ``classifier``: a fitted lsnpc classifier (its ``network_`` is used: e.g. ``MLPClassifier`` over
    pooled ResNet-50 features, or ``ADDGCN`` over its feature maps) or a torch module giving logits.
    ``backbone``: the CNN that produced the classifier's features from images (e.g.
    :func:`resnet_backbone`); the network explained is ``classifier(backbone(images))``. ``layer``
    names the backbone's layer to map (``"layer4"`` for a ResNet). Scores are the label probabilities.
    """
    head = getattr(classifier, "network_", classifier)
    if not isinstance(head, nn.Module):
        raise ValueError(f"classifier must be a fitted lsnpc classifier or a torch module, got {type(classifier).__name__}")
    if not isinstance(backbone, nn.Module):
        raise ValueError(f"backbone must be a torch module mapping images to features, got {type(backbone).__name__}")
    target = _find_layer(backbone, layer)
    device = _device_of(backbone)

    def score(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(head(backbone(x.to(device))))

    with _eval_mode(backbone, head):
        return grad_cam(score, target, images, labels)


def _correction(model: LatentShiftModel, x: torch.Tensor, noisy: torch.Tensor, feed: str,
                draws: torch.Tensor | None) -> torch.Tensor:
    """E[y | x, ŷ] of eq. 9 as prediction computes it, differentiable (eval mode): (n, L) probabilities.
    ``draws``: the Monte-Carlo uniforms, None for the model's own."""
    return model.correct(x, noisy, feed=feed, uniforms=draws)


def _check_corrector(corrector: Any, images: torch.Tensor, pred_probs: Any) -> tuple[torch.Tensor, LatentShiftModel]:
    if not isinstance(corrector, LSNPC):
        raise ValueError(f"corrector must be a fitted LSNPC, got {type(corrector).__name__}")
    check_is_fitted(corrector, "model_")
    if len(corrector.models_) > 1:
        raise ValueError(f"corrector averages {len(corrector.models_)} networks (n_fits={corrector.n_fits}); a Grad-CAM "
                         "map explains one network: fit it with n_fits=1 to explain it")
    if corrector.encoder is None:
        raise ValueError(
            "corrector was fitted without encoder=: its data encoder is an MLP over feature vectors, "
            "not a CNN over images; fit LSNPC(encoder=<a copy of the base model's CNN>) on the images"
        )
    if tuple(images.shape[1:]) != tuple(corrector.input_shape_):
        raise ValueError(f"images must have per-image shape {corrector.input_shape_} (as in fit), "
                         f"got {tuple(images.shape[1:])}")
    probs = check_probabilities(pred_probs, "pred_probs")
    if probs.shape != (len(images), corrector.n_labels_):
        raise ValueError(f"pred_probs must have shape ({len(images)}, {corrector.n_labels_}) "
                         f"(one row of base probabilities per image), got {probs.shape}")
    return as_tensor(probs, dtype=torch.float32), corrector.model_


def _prepare(
    corrector: Any, images: Any, pred_probs: Any, n_samples: int | None, seed: int | None
) -> tuple[torch.Tensor, torch.Tensor, LatentShiftModel, torch.Tensor | None]:
    """Checked (images on the CPU, ŷ on the model's device, the model, the Monte-Carlo uniforms: None for
    the model's own when neither ``seed`` nor ``n_samples`` is given, else a design of ``n_samples``
    (default ``corrector.n_samples``) drawn from ``seed`` (default 0))."""
    x = _check_images(images)
    noisy, model = _check_corrector(corrector, x, pred_probs)
    if seed is None and n_samples is None:
        return x, noisy.to(_device_of(model)), model, None
    n_samples = corrector.n_samples if n_samples is None else n_samples
    seed = 0 if seed is None else seed
    check_scalar(n_samples, "n_samples", kind=Integral, low=1)
    check_scalar(seed, "seed", kind=Integral, low=0)
    dims = model.monte_carlo_uniforms.shape[1]
    draws = monte_carlo_design(int(n_samples), dims, torch.Generator().manual_seed(int(seed)))
    return x, noisy.to(_device_of(model)), model, draws.to(_device_of(model))


def corrected_probabilities(corrector: LSNPC, images: Any, pred_probs: Any, *, seed: int | None = None,
                            n_samples: int | None = None) -> np.ndarray:
    """The correction GradCAM differentiates: (n, L) probabilities, the raw correction (no guard blend).
    By default with the model's own draws — what ``predict_proba`` corrects; ``seed`` / ``n_samples``
    draw another design instead."""
    x, noisy, model, draws = _prepare(corrector, images, pred_probs, n_samples, seed)
    with _eval_mode(model), torch.no_grad():
        return _correction(model, x.to(noisy.device), noisy, corrector.predict_feed, draws).cpu().numpy()


def collapse_message(corrected: Any) -> str | None:
    """Why the correction ``corrected`` (n, L) explains nothing, or None: its probabilities barely vary across
    each image's labels (median spread below :data:`COLLAPSE_SPREAD`)."""
    probs = check_probabilities(corrected, "corrected")
    if probs.shape[1] < 2:
        return None
    spread = float(np.median(probs.max(1) - probs.min(1)))
    if spread >= COLLAPSE_SPREAD:
        return None
    return (f"the correction has collapsed: its probabilities are nearly the same for every label (p ≈ "
            f"{float(np.median(probs)):.2f}; across an image's labels they differ by {spread:.3f}, median over "
            f"{len(probs)} images), so its maps explain no decision; train it longer or check its fit")


def corrected_cams(
    corrector: LSNPC,
    images: Any,
    pred_probs: Any,
    labels: int | Sequence[int],
    *,
    layer: str = "layer4",
    seed: int | None = None,
    n_samples: int | None = None,
) -> np.ndarray:
    """GradCAM maps (n, k, H, W) of LSNPC's corrected probabilities at a layer of its data encoder.

    ``corrector``: an LSNPC fitted with ``encoder=`` a CNN over images (a copy of the base model's
    backbone, as in the paper); ``layer`` names the layer inside that encoder (``"layer4"`` when it is
    :func:`resnet_backbone`, possibly wrapped in ``nn.Sequential`` — then e.g. ``"0.layer4"``).
    ``pred_probs`` (n, L): the base model's probabilities on the images, the correction's input ŷ.
    The Monte-Carlo draws are the model's own (those of ``predict_proba``); ``seed`` / ``n_samples``
    (default ``corrector.n_samples``) draw another design instead.

    A correction that has collapsed (the same probability for every label, :func:`collapse_message`) gets a
    warning: its maps are blank or arbitrary.

    The map explains the correction itself: the blend (1 − w) · corrected + w · base scales its
    dependence on the image by 1 − w, which the normalisation removes; with w = 1 (the fit handed back
    the base model, ``base_weight_``) a warning says the correction is not what ``predict_proba`` returns.
    """
    x, noisy, model, draws = _prepare(corrector, images, pred_probs, n_samples, seed)
    target = _find_layer(model.data_encoder, layer)
    if corrector.base_weight_ == 1.0:
        warnings.warn("the fit hands back the base model's probabilities (base_weight_ 1): these maps "
                      "explain a correction that predict_proba does not return", UserWarning, stacklevel=2)
    with _eval_mode(model), torch.no_grad():
        message = collapse_message(_correction(model, x.to(noisy.device), noisy, corrector.predict_feed, draws).cpu().numpy())
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=2)

    def score(images_: torch.Tensor) -> torch.Tensor:
        return _correction(model, images_.to(noisy.device), noisy, corrector.predict_feed, draws)

    with _eval_mode(model):
        return grad_cam(score, target, x, labels)
