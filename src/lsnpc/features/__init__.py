"""Frozen encoders that turn images or texts into features, and an on-disk feature cache.

- :class:`ImageEncoder`: ResNet-50 (torchvision) or LeViT (timm) — pooled vectors for MLP heads,
  spatial maps for ADD-GCN — with weights from a local file, a checked download, or random init.
- :class:`TextEncoder` / :func:`encode_texts`: sentence-transformers models (all-MiniLM-L6-v2 by
  default), found offline.
- :func:`extract_features`: batches, progress bar, and a memory-mapped ``.npy`` cache.

Heavy libraries (torchvision, timm, Pillow, sentence-transformers) are imported only when a
model is first used.
"""

from __future__ import annotations

from typing import Any

from lsnpc.features._paths import default_cache_dir
from lsnpc.features.cache import Encoder, extract_features, feature_cache_path
from lsnpc.features.image import IMAGE_BACKBONES, ImageEncoder, load_image, preprocess_images
from lsnpc.features.text import TextEncoder, encode_texts, resolve_text_model
from lsnpc.features.weights import (
    PRETRAINED,
    WeightSource,
    fetch_weights,
    load_state_dict_file,
    sha256_file,
)

__all__ = [
    "Encoder",
    "IMAGE_BACKBONES",
    "ImageEncoder",
    "PRETRAINED",
    "TextEncoder",
    "WeightSource",
    "default_cache_dir",
    "encode_texts",
    "extract_features",
    "feature_cache_path",
    "fetch_weights",
    "load_image",
    "load_state_dict_file",
    "make_encoder",
    "preprocess_images",
    "resolve_text_model",
    "sha256_file",
]


def make_encoder(name: str, **kwargs: Any) -> ImageEncoder | TextEncoder:
    """An encoder by name: an image backbone from :data:`IMAGE_BACKBONES`, else a text model.

    ``kwargs`` go to :class:`ImageEncoder` or :class:`TextEncoder`. Used by experiment configs
    (``encoder: resnet50`` or ``encoder: all-MiniLM-L6-v2``).
    """
    if name in IMAGE_BACKBONES:
        return ImageEncoder(name, **kwargs)
    return TextEncoder(name, **kwargs)
