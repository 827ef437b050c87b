"""Frozen image backbones (ResNet-50, LeViT) that turn images into feature vectors or maps.

Preprocessing follows the paper's code at evaluation time: each image is converted to RGB and
resized ("warped", aspect ratio not kept) to ``image_size`` × ``image_size`` pixels with bilinear
interpolation, scaled to [0, 1] and normalised with the ImageNet mean (0.485, 0.456, 0.406) and
standard deviation (0.229, 0.224, 0.225). No crop and no augmentation.

Outputs
-------
``output="pooled"``
    One vector per image: the global average of the last feature map — 2048-d for ResNet-50,
    384-d for LeViT-192 (the paper's LeViT), 512-d for LeViT-256, 768-d for LeViT-384.
``output="spatial"``
    The last feature map, (C, H, W): 2048 × 7 × 7 for ResNet-50 at 224 px (what ADD-GCN
    consumes), 384 × 4 × 4 for LeViT-192 (its 16 final tokens laid back on their grid).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lsnpc._torch import resolve_device, seeded
from lsnpc._validation import check_in_choices, check_scalar
from lsnpc._torch import num_threads as torch_threads
from lsnpc.features.weights import (
    PRETRAINED,
    STATE_DICT_SUFFIXES,
    WeightSource,
    fetch_weights,
    file_weights_id,
    load_state_dict_file,
    pretrained_source,
)

__all__ = ["ImageEncoder", "IMAGE_BACKBONES", "load_image", "preprocess_images"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

ImageLike = Any  # a path (str / os.PathLike) or a PIL.Image.Image


@dataclass(frozen=True)
class _BackboneSpec:
    channels: int  # C of the last feature map (= pooled dim)
    native_size: int
    fixed_size: bool  # LeViT's attention biases are tied to its input resolution
    halvings: int  # how often the input side is halved (rounding up) on the way to the last map
    classifier_prefixes: tuple[str, ...]


IMAGE_BACKBONES: dict[str, _BackboneSpec] = {
    "resnet50": _BackboneSpec(2048, 224, False, 5, ("fc.",)),
    "levit_128s": _BackboneSpec(384, 224, True, 6, ("head.", "head_dist.")),
    "levit_128": _BackboneSpec(384, 224, True, 6, ("head.", "head_dist.")),
    "levit_192": _BackboneSpec(384, 224, True, 6, ("head.", "head_dist.")),
    "levit_256": _BackboneSpec(512, 224, True, 6, ("head.", "head_dist.")),
    "levit_384": _BackboneSpec(768, 224, True, 6, ("head.", "head_dist.")),
}


def load_image(image: ImageLike, image_size: int) -> np.ndarray:
    """Open ``image`` (a path or a PIL image) as RGB, warped to (image_size, image_size, 3) uint8."""
    from PIL import Image

    if isinstance(image, Image.Image):
        rgb = image.convert("RGB")
    elif isinstance(image, (str, os.PathLike)):
        with Image.open(image) as opened:  # grey, palette, RGBA, CMYK all become RGB
            rgb = opened.convert("RGB")
    else:
        raise ValueError(f"images must be file paths or PIL images, got {type(image).__name__}")
    return np.asarray(rgb.resize((image_size, image_size), Image.Resampling.BILINEAR), dtype=np.uint8)


def _normalise(batch_uint8: torch.Tensor, device: torch.device) -> torch.Tensor:
    """(n, H, W, 3) uint8 → (n, 3, H, W) float32 with ImageNet mean/std, on ``device``."""
    x = batch_uint8.to(device).permute(0, 3, 1, 2).float().div_(255.0)
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    return (x - mean) / std


def preprocess_images(
    images: Sequence[ImageLike], image_size: int = 224, *, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """The paper's evaluation preprocessing: returns a float32 tensor (n, 3, image_size, image_size)."""
    arrays = [load_image(img, image_size) for img in images]
    return _normalise(torch.from_numpy(np.stack(arrays)), resolve_device(device))


class ImageEncoder:
    """A frozen image backbone producing pooled vectors or spatial maps.

    The network is built (and its weights read or downloaded) on first use, so an encoder whose
    features are already cached never loads a model.

    Parameters
    ----------
    backbone : str
        ``"resnet50"`` (torchvision) or a timm LeViT: ``"levit_192"`` (the paper's, 384-d),
        ``"levit_128s"``, ``"levit_128"``, ``"levit_256"``, ``"levit_384"``.
    weights : str, path, WeightSource or None
        ``"imagenet"`` (default: torchvision's ``IMAGENET1K_V1`` ResNet-50, Facebook's distilled
        LeViT), a registered tag such as ``"IMAGENET1K_V2"``, a local ``.safetensors`` /
        ``.pth`` file holding a state dict of the whole classifier, a :class:`WeightSource`
        (e.g. a mirror URL with its sha256), or ``None`` for random initialisation (tests).
        Downloads go into ``weights_dir`` once and are checked against their SHA-256.
    output : {"pooled", "spatial"}
        Vectors (n, C) or maps (n, C, H, W); see the module docstring.
    image_size : int or None
        Side of the square network input; default the backbone's native 224. LeViT accepts
        only its native size.
    seed : int
        Seed of the random initialisation (used when ``weights=None``).
    weights_dir : path or None
        Download cache; default ``$LSNPC_CACHE/weights`` or the user cache dir.
    num_workers : int
        Threads that open and resize images while the network runs.
    num_threads : int or None
        torch intra-op threads during each forward pass (restored after); None keeps torch's
        setting.
    progress : bool
        Show a progress bar while downloading weights.
    """

    modality = "images"

    def __init__(
        self,
        backbone: str = "resnet50",
        *,
        weights: str | os.PathLike[str] | WeightSource | None = "imagenet",
        output: str = "pooled",
        image_size: int | None = None,
        seed: int = 0,
        weights_dir: str | os.PathLike[str] | None = None,
        num_workers: int = 4,
        num_threads: int | None = None,
        progress: bool = True,
    ) -> None:
        check_in_choices(backbone, "backbone", list(IMAGE_BACKBONES))
        check_in_choices(output, "output", ["pooled", "spatial"])
        spec = IMAGE_BACKBONES[backbone]
        if image_size is None:
            image_size = spec.native_size
        check_scalar(image_size, "image_size", kind=Integral, low=32)
        if spec.fixed_size and image_size != spec.native_size:
            raise ValueError(
                f"{backbone} accepts only its fixed input size {spec.native_size}, "
                f"got image_size={image_size}"
            )
        check_scalar(seed, "seed", kind=Integral, low=0)
        check_scalar(num_workers, "num_workers", kind=Integral, low=1)
        if num_threads is not None:
            check_scalar(num_threads, "num_threads", kind=Integral, low=1)
        self.backbone = backbone
        self.weights = weights
        self.output = output
        self.image_size = image_size
        self.seed = seed
        self.weights_dir = weights_dir
        self.num_workers = num_workers
        self.num_threads = num_threads
        self.progress = progress
        self._spec = spec
        self._weights_kind, self._weights_ref = self._classify_weights(weights)
        self._model: nn.Module | None = None

    # ----------------------------------------------------------------- identity
    @property
    def name(self) -> str:
        return self.backbone

    @property
    def dim(self) -> int:
        """Channels C: the length of a pooled vector, the first axis of a spatial map."""
        return self._spec.channels

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of one image's output: (C,) pooled, (C, H, W) spatial."""
        if self.output == "pooled":
            return (self.dim,)
        side = self.image_size
        for _ in range(self._spec.halvings):
            side = math.ceil(side / 2)
        return (self.dim, side, side)

    @property
    def weights_id(self) -> str:
        """Identifies the weights' content, for feature-cache keys."""
        kind, ref = self._weights_kind, self._weights_ref
        if kind == "random":
            return f"random-seed{self.seed}"
        if kind == "file":
            return file_weights_id(ref)
        if ref.sha256 is not None:
            return f"{ref.tag}-{ref.sha256[:12]}"
        return f"{ref.tag}-url{hashlib.sha256(ref.url.encode()).hexdigest()[:12]}"

    @property
    def preprocess_id(self) -> str:
        return f"warp{self.image_size}-imagenetnorm"

    def with_output(self, output: str) -> ImageEncoder:
        """The same encoder giving ``output`` ("pooled" or "spatial"), sharing the loaded network."""
        other = ImageEncoder(
            self.backbone,
            weights=self.weights,
            output=output,
            image_size=self.image_size,
            seed=self.seed,
            weights_dir=self.weights_dir,
            num_workers=self.num_workers,
            num_threads=self.num_threads,
            progress=self.progress,
        )
        other._model = self._model
        return other

    def __repr__(self) -> str:
        return (
            f"ImageEncoder({self.backbone!r}, weights={self.weights!r}, output={self.output!r}, "
            f"image_size={self.image_size})"
        )

    # ----------------------------------------------------------------- network
    def _classify_weights(self, weights: Any) -> tuple[str, Any]:
        if weights is None:
            return "random", None
        if isinstance(weights, WeightSource):
            return "source", weights
        if isinstance(weights, os.PathLike):
            return "file", Path(weights)
        if isinstance(weights, str):
            tags = {"imagenet", *PRETRAINED.get(self.backbone, {})}
            if weights in tags:
                return "source", pretrained_source(self.backbone, weights)
            if Path(weights).suffix in STATE_DICT_SUFFIXES or Path(weights).exists():
                return "file", Path(weights)
            raise ValueError(
                f"weights={weights!r} is neither a weights file nor a known name for "
                f"{self.backbone!r} (known: {sorted(tags)}); pass a .safetensors/.pth path or None"
            )
        raise ValueError(
            f"weights must be a name, a file path, a WeightSource or None, got {type(weights).__name__}"
        )

    def _build(self) -> nn.Module:
        if self.backbone == "resnet50":
            from torchvision.models import resnet50

            return resnet50(weights=None)
        import timm

        return timm.create_model(self.backbone, pretrained=False)

    @property
    def model(self) -> nn.Module:
        """The whole backbone network (classifier head included), in eval mode; loaded on demand."""
        if self._model is None:
            with seeded(self.seed):
                model = self._build()
            if self._weights_kind != "random":
                path = self._weights_ref
                if self._weights_kind == "source":
                    path = fetch_weights(path, cache_dir=self.weights_dir, progress=self.progress)
                self._load_trunk(model, load_state_dict_file(path), path)
            self._model = model.eval().requires_grad_(False)
        return self._model

    def _load_trunk(self, model: nn.Module, state: dict[str, torch.Tensor], origin: Any) -> None:
        """Load every trunk weight strictly; the classifier head may differ (or be absent)."""
        prefixes = self._spec.classifier_prefixes
        # timm stores LeViT's attention-bias index tables in some old files; they are rebuilt.
        state = {
            k: v
            for k, v in state.items()
            if not k.startswith(prefixes) and "attention_bias_idxs" not in k
        }
        try:
            missing, unexpected = model.load_state_dict(state, strict=False)
        except RuntimeError as exc:  # shape mismatches
            raise ValueError(f"weights in {origin} do not fit {self.backbone}: {exc}") from exc
        missing = [k for k in missing if not k.startswith(prefixes)]
        if missing or unexpected:
            raise ValueError(
                f"weights in {origin} do not fit {self.backbone}: "
                f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
            )

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        model = self.model
        if self.backbone == "resnet50":
            x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
            fmap = model.layer4(model.layer3(model.layer2(model.layer1(x))))
        else:
            fmap = model.forward_features(x)
            if fmap.ndim == 3:  # LeViT in linear mode: (n, tokens, C) on a square grid
                n, tokens, channels = fmap.shape
                side = math.isqrt(tokens)
                fmap = fmap.transpose(1, 2).reshape(n, channels, side, side)
        return fmap.mean(dim=(2, 3)) if self.output == "pooled" else fmap

    # ----------------------------------------------------------------- encoding
    def iter_encode(
        self, images: Sequence[ImageLike], *, batch_size: int = 32, device: str | torch.device = "cpu"
    ) -> Iterator[np.ndarray]:
        """Yield float32 outputs batch by batch, (b, C) or (b, C, H, W), in input order.

        Images of the next batch are opened and resized on ``num_workers`` threads while the
        network runs on the current one; at most two batches are held in memory.
        """
        check_scalar(batch_size, "batch_size", kind=Integral, low=1)
        dev = resolve_device(device)
        self.model.to(dev)
        items = list(images)
        batches = iter([items[i : i + batch_size] for i in range(0, len(items), batch_size)])
        with ThreadPoolExecutor(max_workers=self.num_workers) as pool:

            def submit(batch: Sequence[ImageLike]) -> list:
                return [pool.submit(load_image, img, self.image_size) for img in batch]

            pending = deque(submit(b) for b in (next(batches, None), next(batches, None)) if b)
            while pending:
                futures = pending.popleft()
                upcoming = next(batches, None)
                if upcoming is not None:
                    pending.append(submit(upcoming))
                pixels = torch.from_numpy(np.stack([f.result() for f in futures]))
                with torch.inference_mode(), torch_threads(self.num_threads):
                    out = self._forward(_normalise(pixels, dev))
                yield out.float().cpu().numpy()

    def encode(
        self, images: Sequence[ImageLike], *, batch_size: int = 32, device: str | torch.device = "cpu"
    ) -> np.ndarray:
        """Encode images (paths or PIL images).

        Returns
        -------
        ndarray of float32, shape (n, C) for ``output="pooled"`` or (n, C, H, W) for "spatial".
        """
        parts = list(self.iter_encode(images, batch_size=batch_size, device=device))
        if not parts:
            return np.empty((0, *self.output_shape), dtype=np.float32)
        return np.concatenate(parts)
