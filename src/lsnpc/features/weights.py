"""Pretrained backbone weights: where they come from, how they are fetched and read.

Weights are read without unpickling arbitrary objects: ``.safetensors`` through safetensors, and
``.pth``/``.pt``/``.bin`` through ``torch.load(weights_only=True)`` (tensors and plain containers
only), which is what torchvision's published files need.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from lsnpc.features._paths import resolve_cache_dir

__all__ = [
    "WeightSource",
    "PRETRAINED",
    "pretrained_source",
    "load_state_dict_file",
    "fetch_weights",
    "sha256_file",
]

STATE_DICT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")


@dataclass(frozen=True)
class WeightSource:
    """A downloadable weight file.

    Attributes
    ----------
    url : str
        Where to fetch it (``http(s)://`` or ``file://``; a mirror works as well as the original).
    sha256 : str or None
        Expected hex digest; ``None`` when no digest is published (the file is then unverified).
    filename : str
        Name of the file in the weights cache.
    tag : str
        Short human name of these weights, e.g. ``"IMAGENET1K_V1"``; part of cache keys.
    """

    url: str
    sha256: str | None
    filename: str
    tag: str


def _levit_source(arch: str) -> WeightSource:
    # timm publishes LeViT weights (in its own key layout) on the Hugging Face hub; no digest is
    # listed beside timm's model config, so these downloads are unverified (a warning says so).
    tag = "fb_dist_in1k"
    return WeightSource(
        url=f"https://huggingface.co/timm/{arch}.{tag}/resolve/main/model.safetensors",
        sha256=None,
        filename=f"{arch}.{tag}.safetensors",
        tag=tag,
    )


# The digests of torchvision's files are published as the 8-character prefix in their names
# (torch.hub checks that prefix); the full values below extend those prefixes.
PRETRAINED: dict[str, dict[str, WeightSource]] = {
    "resnet50": {
        "IMAGENET1K_V1": WeightSource(
            url="https://download.pytorch.org/models/resnet50-0676ba61.pth",
            sha256="0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a",
            filename="resnet50-0676ba61.pth",
            tag="IMAGENET1K_V1",
        ),
        "IMAGENET1K_V2": WeightSource(
            url="https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
            sha256="11ad3fa62ca79e40addfd354a8ec4b7c75143b3038b8d2a807fbc68deab379ca",
            filename="resnet50-11ad3fa6.pth",
            tag="IMAGENET1K_V2",
        ),
    },
    **{
        arch: {"fb_dist_in1k": _levit_source(arch)}
        for arch in ("levit_128s", "levit_128", "levit_192", "levit_256", "levit_384")
    },
}

# "imagenet" means the weights the paper's code used: torchvision's original ResNet-50 release
# (``pretrained=True``) and Facebook's distilled LeViT.
_IMAGENET_DEFAULT = {"resnet50": "IMAGENET1K_V1"}


def pretrained_source(backbone: str, tag: str = "imagenet") -> WeightSource:
    """The :class:`WeightSource` for ``backbone``'s pretrained ``tag`` (``"imagenet"`` = default)."""
    options = PRETRAINED.get(backbone)
    if options is None:
        raise ValueError(
            f"no pretrained weights are registered for backbone {backbone!r}; "
            f"known: {sorted(PRETRAINED)}. Pass weights='path/to/file' or weights=None"
        )
    if tag == "imagenet":
        tag = _IMAGENET_DEFAULT.get(backbone, next(iter(options)))
    if tag not in options:
        raise ValueError(
            f"weights={tag!r} is not known for {backbone!r}; choose 'imagenet', "
            + ", ".join(repr(t) for t in options)
            + ", a local file path, or None"
        )
    return options[tag]


def fetch_weights(
    source: WeightSource,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> Path:
    """Download ``source`` into the weights cache (once) and return the local file's path.

    A file already in the cache is used when its SHA-256 matches (any file is accepted for an
    unverified source); a file that does not match is downloaded again. The download itself is
    the project's single download function, :func:`lsnpc.data.download.download_file`
    (Rich progress bar, checksum checked before the file appears under its name).

    Parameters
    ----------
    source : WeightSource
    cache_dir : path or None
        Default ``$LSNPC_CACHE/weights`` (or the user cache dir's ``weights``).
    progress : bool
        Show the download's progress bar.

    Raises
    ------
    lsnpc.data.download.ChecksumMismatchError
        The downloaded bytes do not match ``source.sha256``; nothing is kept.
    ConnectionError
        The file could not be fetched (offline, HTTP error); the message says what to do.
    """
    from lsnpc.data.download import ChecksumMismatchError, download_file, sha256_of

    target = resolve_cache_dir(cache_dir, "weights") / source.filename
    if target.is_file() and (source.sha256 is None or sha256_of(target) == source.sha256):
        return target
    try:
        return download_file(source.url, target, sha256=source.sha256, progress=progress)
    except ChecksumMismatchError:
        raise
    except OSError as exc:  # urllib's URLError/HTTPError are OSErrors
        raise ConnectionError(
            f"could not download {source.url}: {exc}. If this machine is offline, fetch the "
            f"file elsewhere, check its sha256 ({source.sha256 or 'not published'}), and pass "
            f"its local path as weights=... (or put it at {target})."
        ) from exc


def load_state_dict_file(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a state dict from ``.safetensors`` or ``.pth``/``.pt``/``.bin`` without unpickling code.

    Checkpoints that wrap the weights as ``{"state_dict": ...}`` or ``{"model": ...}`` are
    unwrapped, and a ``module.`` prefix (left by DataParallel) is dropped.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"weights file not found: {file}")
    if file.suffix not in STATE_DICT_SUFFIXES:
        raise ValueError(
            f"weights file must end in one of {', '.join(STATE_DICT_SUFFIXES)}, got {file.name!r}"
        )
    if file.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(file))
    else:
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle errors come in many types
            raise ValueError(f"could not read weights from {file}: {exc}") from exc
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{file} does not hold a state dict (a mapping of names to tensors)")
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    from lsnpc.data.download import sha256_of

    return sha256_of(path)


def file_weights_id(path: str | os.PathLike[str]) -> str:
    """A short id of a weights file's content, for cache keys."""
    return "sha256-" + sha256_file(path)[:16]
