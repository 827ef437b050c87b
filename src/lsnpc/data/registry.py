"""The one table of known data sets: what they are, where their files go, where to download them.

Each entry says which folder names under the data home may hold the data set (the first is where
:func:`~lsnpc.data.download_dataset` puts it; the others are accepted layouts such as a VOC devkit
or the labels-only folders of ``/work/shared/data``), which files each split needs, and, when the
files can be downloaded, their URLs with sha256 sums and sizes.

Checksums: every URL pinned to a commit whose files we have seen carries its sha256 and size
(scene, yeast, tmc2007-500, GoEmotions; sums from the shared data's PROVENANCE.md files). The other
MULAN sets follow the repository's file naming at the same commit but their sums are not known
here, so the registry has none and their download is *not* verified (a warning says so and prints
the sum of what arrived, to pin it). The Tomato CSV likewise has no sum (its byte identity with
the repository blob, CRLF vs LF, is unverified).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RemoteFile", "DatasetInfo", "list_datasets", "get_dataset_info"]

MULAN_COMMIT = "43f6389095ad71984264db4387a8074b22bc7d4a"
MULAN_RAW = f"https://raw.githubusercontent.com/tsoumakas/mulan/{MULAN_COMMIT}/data/multi-label"
GOEMOTIONS_COMMIT = "b75f9d3a8b76bc1060687925b04ca98a1b8ea66b"
GOEMOTIONS_RAW = (
    f"https://raw.githubusercontent.com/monologg/GoEmotions-pytorch/{GOEMOTIONS_COMMIT}/data/original"
)
TOMATO_COMMIT = "a926ca4fa1e425671efdcb31ba6791ae295cbb4d"
TOMATO_RAW = (
    f"https://raw.githubusercontent.com/mamta-joshi-gehlot/Tomato-Village/{TOMATO_COMMIT}/"
    "Variant-b%28MultiLabel%20Classification%29"
)


@dataclass(frozen=True)
class RemoteFile:
    """One downloadable file.

    Attributes
    ----------
    path : str
        Where it goes, relative to the data set's folder in the data home.
    url : str
        Where it comes from.
    sha256 : str or None
        Expected sha256 (hex); None when unknown (the download is then not verified).
    size : int or None
        Expected size in bytes, when known.
    """

    path: str
    url: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class DatasetInfo:
    """What the registry knows about one data set.

    Attributes
    ----------
    name : str
        Registry name, as passed to ``load_dataset``.
    kind : {"features", "images", "texts"}
        What ``X`` holds once loaded.
    n_labels : int
        L.
    splits : tuple of str
        Splits ``load_dataset`` accepts.
    source : str
        Where the data comes from (paper / repository).
    loader : str
        Which loader reads it (internal dispatch key).
    folders : tuple of str
        Folder names under the data home that may hold it; downloads go to the first.
    required : dict
        split -> files (relative to the folder) that loading that split reads.
    files : tuple of RemoteFile
        Downloadable files (empty: not downloadable).
    n_samples : dict
        split -> number of samples, where verified.
    delegate : dict
        split -> other data set whose same split stands in for it (VOC2012 test = VOC2007 test).
    note : str
        What else a user must know (images to fetch by hand, split conventions).
    """

    name: str
    kind: str
    n_labels: int
    splits: tuple[str, ...]
    source: str
    loader: str
    folders: tuple[str, ...] = ()
    required: dict[str, tuple[str, ...]] = field(default_factory=dict)
    files: tuple[RemoteFile, ...] = ()
    n_samples: dict[str, int] = field(default_factory=dict)
    delegate: dict[str, str] = field(default_factory=dict)
    note: str = ""

    @property
    def downloadable(self) -> bool:
        """Whether :func:`~lsnpc.data.download_dataset` can fetch its files."""
        return bool(self.files)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary (for tables and the CLI)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "n_labels": self.n_labels,
            "splits": list(self.splits),
            "n_samples": dict(self.n_samples),
            "source": self.source,
            "downloadable": self.downloadable,
            "note": self.note,
        }


# name, folder in the MULAN repository, file stem, L, verified {split: n}, {file: (sha256, size)}
_MULAN: tuple[tuple[str, str, str, int, dict[str, int], dict[str, tuple[str, int]]], ...] = (
    ("scene", "scene", "scene", 6, {"train": 1211, "test": 1196}, {
        "scene-train.arff": ("b53ba93bdf412de922e3960389bcee24744fa3e872ce610511fc1d750888b64d", 3127968),
        "scene-test.arff": ("ea38d20296b3ff7e220f477a3b802a9bcb2d768881fe6ee163efbc97ea527a42", 3090742),
        "scene.xml": ("55d8b247b949ad5c52e5a73d8c6775ec6e5469ce9682465b45b333b68ee4bcc5", 285),
    }),
    ("yeast", "yeast", "yeast", 14, {"train": 1500, "test": 917}, {
        "yeast-train.arff": ("e759dc991ff54694a4ff9c4314f3be0d6fd2b1994a4b563f57e416394c6aebbd", 1501117),
        "yeast-test.arff": ("4aaac102bff9669a765bf0b378602e5cc8c3b181048282e2f003117b496d552a", 918515),
        "yeast.xml": ("c3056cc26444b5158b1588d1b73bec9c45429e10f0957ad085903423cb81f247", 526),
    }),
    ("tmc2007-500", "tmc2007", "tmc2007-500", 22, {"train": 21519, "test": 7077}, {
        "tmc2007-500-train.arff": ("edfe7b7615c6f80e54c92a214437610d1ae36560c5cc6c4253b51c434d258273", 3152791),
        "tmc2007-500-test.arff": ("b24f9c3f1eba77c9da0bbaff093ba41d331b7351be0167a8e1e3852c62e25e38", 1054414),
        "tmc2007-500.xml": ("cb6a67c8ae72fd9b47d89f77aa5b7f6cafb4ba9c20b1124c65a95a3f2caec38d", 783),
    }),
    ("emotions", "emotions", "emotions", 6, {}, {}),
    ("birds", "birds", "birds", 19, {}, {}),
    ("enron", "enron", "enron", 53, {}, {}),
    ("medical", "medical", "medical", 45, {}, {}),
    ("genbase", "genbase", "genbase", 27, {}, {}),
    ("corel5k", "corel5k", "Corel5k", 374, {}, {}),
    ("bibtex", "bibtex", "bibtex", 159, {}, {}),
    ("delicious", "delicious", "delicious", 983, {}, {}),
    ("mediamill", "mediamill", "mediamill", 101, {}, {}),
)  # fmt: skip

_GOEMOTIONS_FILES = {
    "train.tsv": ("1c254a142be5c00e80d819b9ae1bbd36d94b2eeb8f4b1271846508d57e57d9c5", 3519053),
    "dev.tsv": ("575489c079c9de1097062a01738f998590d6b7ead66dd1c9fd1d2ba01fd8bc62", 439059),
    "test.tsv": ("0587b2dd8b27b97352adbfc3fb083d46005c8946657fdc2b1ca8b1cc7f1f8be4", 436706),
    "labels.txt": ("45c3ef86782d2a4d7fedcd6d8c111aa0d0e94720689bd164fac94fefb4495a89", 248),
}
_TOMATO_CSV = "Multi-Label dataset - with augmented.csv"


def _mulan_info(
    name: str, repo_dir: str, stem: str, n_labels: int, n: dict[str, int], sums: dict[str, tuple[str, int]]
) -> DatasetInfo:
    names = (f"{stem}-train.arff", f"{stem}-test.arff", f"{stem}.xml")
    files = tuple(
        RemoteFile(f, f"{MULAN_RAW}/{repo_dir}/{f}", *sums.get(f, (None, None))) for f in names
    )
    verified = "sha256-verified" if sums else "no checksum known: download not verified"
    return DatasetInfo(
        name=name,
        kind="features",
        n_labels=n_labels,
        splits=("train", "test"),
        source=f"MULAN (github.com/tsoumakas/mulan @ {MULAN_COMMIT[:7]}, data/multi-label/{repo_dir})",
        loader="mulan",
        folders=(name,) if name == stem else (name, stem),
        required={"train": (names[0], names[2]), "test": (names[1], names[2])},
        files=files,
        n_samples=n,
        note=f"canonical MULAN train/test ARFF; {verified}",
    )


def _registry() -> dict[str, DatasetInfo]:
    infos = [_mulan_info(*row) for row in _MULAN]
    infos += [
        DatasetInfo(
            name="voc2007",
            kind="images",
            n_labels=20,
            splits=("train", "test"),
            source="PASCAL VOC2007 devkit (host.robots.ox.ac.uk/pascal/VOC/voc2007)",
            loader="voc",
            folders=("voc2007", "VOCdevkit/VOC2007", "VOC2007", "voc2007-labels"),
            required={"train": ("ImageSets/Main/trainval.txt",), "test": ("ImageSets/Main/test.txt",)},
            n_samples={"train": 5011, "test": 4952},
            note="train = devkit trainval, test = devkit test; 'difficult' (0) counts as positive; "
            "X = JPEGImages/<id>.jpg. Not downloadable here: extract VOCtrainval_06-Nov-2007.tar and "
            "VOCtest_06-Nov-2007.tar so that <folder>/ImageSets/Main and <folder>/JPEGImages exist.",
        ),
        DatasetInfo(
            name="voc2012",
            kind="images",
            n_labels=20,
            splits=("train", "test"),
            source="PASCAL VOC2012 devkit (host.robots.ox.ac.uk/pascal/VOC/voc2012)",
            loader="voc",
            folders=("voc2012", "VOCdevkit/VOC2012", "VOC2012", "voc2012-labels"),
            required={"train": ("ImageSets/Main/trainval.txt",)},
            delegate={"test": "voc2007"},
            n_samples={"test": 4952},
            note="train = VOC2012 trainval; test = the VOC2007 test set (the authors' VOC2012 'test' "
            "was VOC2012 val, which overlaps training; VOC2012 test labels are not public). "
            "Not downloadable here: extract VOCtrainval_11-May-2012.tar (and VOC2007 for test).",
        ),
        DatasetInfo(
            name="coco2014",
            kind="images",
            n_labels=80,
            splits=("train", "test"),
            source="MS-COCO 2014 (cocodataset.org)",
            loader="coco",
            folders=("coco2014", "coco", "COCO", "mscoco"),
            required={
                "train": ("annotations/instances_train2014.json",),
                "test": ("annotations/instances_val2014.json",),
            },
            note="train = train2014, test = val2014; columns sorted by category id; images without "
            "annotations dropped. Not downloadable here: unzip annotations_trainval2014.zip, "
            "train2014.zip and val2014.zip (images.cocodataset.org) into <folder>.",
        ),
        DatasetInfo(
            name="tomato",
            kind="images",
            n_labels=8,
            splits=("train", "val", "test"),
            source=f"Tomato-Village Variant-b (github.com/mamta-joshi-gehlot/Tomato-Village @ {TOMATO_COMMIT[:7]})",
            loader="tomato",
            folders=("tomato-village-b", "tomato", "Tomato-Village/Variant-b(MultiLabel Classification)"),
            required={s: (_TOMATO_CSV,) for s in ("train", "val", "test")},
            files=(RemoteFile(_TOMATO_CSV, f"{TOMATO_RAW}/Multi-Label%20dataset%20-%20with%20augmented.csv"),),
            n_samples={"train": 3945, "val": 1124, "test": 584},
            note="download fetches the annotation CSV only (no checksum known: not verified); put the "
            "images under <folder>/{train,val,test}/ from the repository's Variant-b folder.",
        ),
        DatasetInfo(
            name="goemotions",
            kind="texts",
            n_labels=28,
            splits=("train", "val", "test"),
            source=f"GoEmotions (Demszky et al. 2020; mirror github.com/monologg/GoEmotions-pytorch @ {GOEMOTIONS_COMMIT[:7]})",
            loader="goemotions",
            folders=("goemotions",),
            required={
                "train": ("train.tsv", "labels.txt"),
                "val": ("dev.tsv", "labels.txt"),
                "test": ("test.tsv", "labels.txt"),
            },
            files=tuple(
                RemoteFile(f, f"{GOEMOTIONS_RAW}/{f}", sha, size)
                for f, (sha, size) in _GOEMOTIONS_FILES.items()
            ),
            n_samples={"train": 43410, "val": 5426, "test": 5427},
            note="val = dev.tsv; sha256-verified",
        ),
        DatasetInfo(
            name="synthetic",
            kind="features",
            n_labels=12,
            splits=("train", "test"),
            source="built in (lsnpc.data.make_synthetic: latent topic model, seed 0)",
            loader="synthetic",
            n_samples={"train": 3000, "test": 1000},
            note="needs no files; 64 features, correlated long-tailed labels",
        ),
    ]
    return {info.name: info for info in infos}


def list_datasets() -> list[DatasetInfo]:
    """Every data set the registry knows, sorted by name.

    Returns
    -------
    list of DatasetInfo
        Each with ``name``, ``kind``, ``n_labels``, ``splits``, ``source``, ``downloadable``
        (and ``as_dict()`` for a JSON-friendly row).
    """
    return sorted(_registry().values(), key=lambda info: info.name)


def get_dataset_info(name: str) -> DatasetInfo:
    """The registry entry for ``name``; a ValueError lists the known names otherwise."""
    registry = _registry()
    if name not in registry:
        raise ValueError(f"unknown data set {name!r}; known data sets: {', '.join(sorted(registry))}")
    return registry[name]
