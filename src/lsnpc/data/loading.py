"""``load_dataset``: find a data set's files in the data home and read one split."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from lsnpc.data.coco import load_coco
from lsnpc.data.dataset import MultilabelDataset
from lsnpc.data.home import DatasetNotFoundError, get_data_home
from lsnpc.data.mulan import load_mulan
from lsnpc.data.registry import DatasetInfo, get_dataset_info
from lsnpc.data.synthetic import make_synthetic
from lsnpc.data.text import load_goemotions
from lsnpc.data.tomato import load_tomato
from lsnpc.data.voc import load_voc

__all__ = ["load_dataset", "locate_dataset", "missing_files_message"]


def missing_files_message(info: DatasetInfo, split: str, home: Path) -> str:
    """Say exactly which files to put where (and how to download them, if the registry can)."""
    needed = info.required.get(split, ())
    target = home / info.folders[0]
    lines = [
        f"data set {info.name!r} (split {split!r}) not found in the data home {home}.",
        "Put these files there:",
        *(f"  {target / f}" for f in needed),
    ]
    if len(info.folders) > 1:
        lines.append(
            "(also accepted in place of "
            f"{info.folders[0]}/: {', '.join(f + '/' for f in info.folders[1:])})"
        )
    if info.downloadable:
        lines.append(f"or fetch them with lsnpc.data.download_dataset({info.name!r}).")
        lines += [f"  {f.path}  <-  {f.url}" for f in info.files if f.path in needed]
    if info.note:
        lines.append(f"Note: {info.note}")
    lines.append(
        "Choose the data home with the data_home argument or the LSNPC_DATA environment variable."
    )
    return "\n".join(lines)


def locate_dataset(name: str, split: str = "train", *, data_home: str | os.PathLike[str] | None = None) -> Path:
    """Return the folder under the data home that holds what ``split`` of ``name`` needs.

    Raises
    ------
    DatasetNotFoundError
        If no accepted folder has the files; the message lists them with their full paths.
    """
    info = get_dataset_info(name)
    home = get_data_home(data_home)
    needed = info.required.get(split, ())
    for folder in info.folders:
        candidate = home / folder
        if all((candidate / f).is_file() for f in needed):
            return candidate
    raise DatasetNotFoundError(missing_files_message(info, split, home))


def load_dataset(
    name: str, split: str = "train", *, data_home: str | os.PathLike[str] | None = None
) -> MultilabelDataset:
    """Load one split of a registered data set.

    Parameters
    ----------
    name : str
        A registry name (see :func:`~lsnpc.data.list_datasets`), e.g. ``"scene"``, ``"voc2007"``,
        ``"goemotions"``, ``"synthetic"``.
    split : str
        One of the data set's splits (``"train"``, ``"test"``, and ``"val"`` where the source has
        one). Validation and clean splits carved from ``"train"`` come from
        :func:`~lsnpc.data.split_dataset`.
    data_home : path-like, optional
        Folder holding the data sets (default: ``$LSNPC_DATA``, else the user cache folder).
        Loading only reads; the data home may be read-only.

    Returns
    -------
    MultilabelDataset

    Raises
    ------
    ValueError
        Unknown name or split.
    DatasetNotFoundError
        The files are not in the data home (the message says which files to put where).
    """
    info = get_dataset_info(name)
    if split not in info.splits:
        raise ValueError(f"split must be one of {info.splits} for {name!r}, got {split!r}")
    if split in info.delegate:
        stand_in = load_dataset(info.delegate[split], split, data_home=data_home)
        return dataclasses.replace(stand_in, name=info.name)
    if info.loader == "synthetic":
        return make_synthetic()[split]
    root = locate_dataset(name, split, data_home=data_home)
    if info.loader == "mulan":
        arff_file, xml_file = info.required[split]
        return load_mulan(root / arff_file, root / xml_file, name=info.name, split=split)
    if info.loader == "voc":
        return load_voc(root, "trainval" if split == "train" else split, name=info.name, split=split)
    if info.loader == "coco":
        return load_coco(root, split, name=info.name)
    if info.loader == "tomato":
        return load_tomato(root, split)
    if info.loader == "goemotions":
        return load_goemotions(root, split)
    raise AssertionError(f"registry entry {name!r} names an unknown loader {info.loader!r}")
