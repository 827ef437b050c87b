"""Where lsnpc keeps downloaded weights and cached features."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir", "resolve_cache_dir"]


def default_cache_dir() -> Path:
    """The cache root: ``$LSNPC_CACHE`` if set, else the platform's user cache dir for lsnpc.

    Read at call time (not import time) so a user or a test can point it elsewhere.
    """
    env = os.environ.get("LSNPC_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lsnpc"))


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None, sub: str) -> Path:
    """``cache_dir`` if given, else ``default_cache_dir() / sub``."""
    if cache_dir is None:
        return default_cache_dir() / sub
    return Path(cache_dir).expanduser()
