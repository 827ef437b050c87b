"""Multilabel data sets: loaders, one registry, the paper's splits, downloads.

>>> from lsnpc.data import load_dataset, split_dataset
>>> train = load_dataset("synthetic", "train")
>>> train.X.shape, train.Y.shape
((3000, 64), (3000, 12))
>>> parts = split_dataset(train, random_state=0)
>>> [len(parts[k]) for k in ("train", "val0", "val1")]
[2700, 150, 150]
"""

from lsnpc.data.coco import load_coco
from lsnpc.data.dataset import MultilabelDataset
from lsnpc.data.download import (
    ChecksumMismatchError,
    DownloadError,
    UnverifiedDownloadWarning,
    download_dataset,
    download_file,
    sha256_of,
)
from lsnpc.data.home import DATA_HOME_ENV, DatasetNotFoundError, get_data_home
from lsnpc.data.loading import load_dataset, locate_dataset
from lsnpc.data.mulan import load_mulan, read_mulan_label_names
from lsnpc.data.registry import DatasetInfo, RemoteFile, get_dataset_info, list_datasets
from lsnpc.data.splits import paper_splits, split_dataset
from lsnpc.data.synthetic import make_synthetic
from lsnpc.data.text import load_goemotions
from lsnpc.data.tomato import load_tomato
from lsnpc.data.voc import VOC_CLASSES, load_voc

__all__ = [
    "MultilabelDataset",
    "DatasetInfo",
    "RemoteFile",
    "load_dataset",
    "list_datasets",
    "get_dataset_info",
    "locate_dataset",
    "get_data_home",
    "DATA_HOME_ENV",
    "DatasetNotFoundError",
    "download_dataset",
    "download_file",
    "sha256_of",
    "ChecksumMismatchError",
    "DownloadError",
    "UnverifiedDownloadWarning",
    "paper_splits",
    "split_dataset",
    "make_synthetic",
    "load_mulan",
    "read_mulan_label_names",
    "load_voc",
    "VOC_CLASSES",
    "load_coco",
    "load_tomato",
    "load_goemotions",
]
