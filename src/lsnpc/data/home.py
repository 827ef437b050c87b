"""Where data sets live on disk: the data home, and errors that say which files go where."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["get_data_home", "DatasetNotFoundError", "DATA_HOME_ENV"]

#: Environment variable naming the data home when no ``data_home`` argument is given.
DATA_HOME_ENV = "LSNPC_DATA"


class DatasetNotFoundError(FileNotFoundError):
    """A data set's files are not in the data home; the message says which files to put where."""


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the data home folder.

    Order: the ``data_home`` argument, else the ``LSNPC_DATA`` environment variable, else the
    user cache folder (``platformdirs.user_cache_dir("lsnpc") / "datasets"``). The folder is not
    created here: a data home may be read-only (loading never writes to it).

    Parameters
    ----------
    data_home : path-like, optional
        Explicit data home.

    Returns
    -------
    Path
        The data home (absolute, user-expanded).
    """
    if data_home is None:
        env = os.environ.get(DATA_HOME_ENV)
        if env:
            data_home = env
        else:
            data_home = Path(platformdirs.user_cache_dir("lsnpc")) / "datasets"
    return Path(data_home).expanduser().resolve()
