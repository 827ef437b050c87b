"""extract_features: batching, the on-disk cache (hits, misses, atomic writes), pass-through."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("timm")
PIL_Image = pytest.importorskip("PIL.Image")

from lsnpc.data import MultilabelDataset  # noqa: E402
from lsnpc.features import ImageEncoder, extract_features, feature_cache_path  # noqa: E402


@pytest.fixture(scope="module")
def encoder() -> ImageEncoder:
    """The smallest LeViT (384-d) with random weights, loaded once, one torch thread."""
    enc = ImageEncoder("levit_128s", weights=None, seed=0, num_threads=1)
    enc.model  # noqa: B018
    return enc


def _image_dataset(folder, n: int = 5, split: str = "train", seed: int = 0) -> MultilabelDataset:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        path = folder / f"{split}_{i}.png"
        PIL_Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    Y = rng.integers(0, 2, size=(n, 3))
    return MultilabelDataset(paths, Y, ["a", "b", "c"], "toy", split, kind="images")


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_second_call_hits_the_cache_and_returns_a_read_only_memmap(encoder, tmp_path):
    data = _image_dataset(tmp_path / "img")
    cache = tmp_path / "cache"
    first = extract_features(data, encoder, batch_size=2, cache_dir=cache, progress=True)
    assert first.shape == (5, 384) and first.dtype == np.float32
    path = feature_cache_path(data, encoder, cache_dir=cache)
    assert path.is_file() and path.parent == cache / "toy" / "train"
    stamp = path.stat().st_mtime_ns
    second = extract_features(data, encoder, batch_size=2, cache_dir=cache, progress=False)
    assert isinstance(second, np.memmap) and not second.flags.writeable
    np.testing.assert_array_equal(first, second)
    assert path.stat().st_mtime_ns == stamp  # read, not rewritten
    # the cached values are the encoder's values, batched however
    np.testing.assert_allclose(second, encoder.encode(data.X, batch_size=5), rtol=1e-4, atol=1e-5)
    assert [f for f in _files(cache) if not f.endswith(".npy")] == []
    assert all(not name.split("/")[-1].startswith(".") for name in _files(cache))


def test_a_cache_hit_does_not_need_the_network(encoder, tmp_path):
    data = _image_dataset(tmp_path / "img", n=3)
    cache = tmp_path / "cache"
    expected = extract_features(data, encoder, cache_dir=cache, progress=False)
    fresh = ImageEncoder("levit_128s", weights=None, seed=0)  # network not built yet
    got = extract_features(data, fresh, cache_dir=cache, progress=False)
    np.testing.assert_array_equal(got, expected)
    assert fresh._model is None


def test_any_change_of_key_is_a_miss(encoder, tmp_path):
    cache = tmp_path / "cache"
    train = _image_dataset(tmp_path / "img", n=3)
    base = extract_features(train, encoder, cache_dir=cache, progress=False)
    other_seed = ImageEncoder("levit_128s", weights=None, seed=1, num_threads=1)
    changed = [
        (_image_dataset(tmp_path / "img", n=3, split="test"), encoder),  # split
        (_image_dataset(tmp_path / "img2", n=4), encoder),  # n
        (train, other_seed),  # weights
        (train, encoder.with_output("spatial")),  # output kind
    ]
    paths = {feature_cache_path(train, encoder, cache_dir=cache)}
    for data, enc in changed:
        paths.add(feature_cache_path(data, enc, cache_dir=cache))
    assert len(paths) == 1 + len(changed)
    spatial = extract_features(train, encoder.with_output("spatial"), cache_dir=cache, progress=False)
    assert spatial.shape == (3, 384, 4, 4)
    reseeded = extract_features(train, other_seed, cache_dir=cache, progress=False)
    assert not np.allclose(reseeded, base)
    assert len(_files(cache)) == 3


def test_float16_storage_is_its_own_entry(encoder, tmp_path):
    data = _image_dataset(tmp_path / "img", n=3)
    cache = tmp_path / "cache"
    full = extract_features(data, encoder, cache_dir=cache, progress=False)
    half = extract_features(data, encoder, cache_dir=cache, progress=False, dtype=np.float16)
    again = extract_features(data, encoder, cache_dir=cache, progress=False, dtype=np.float16)
    assert half.dtype == again.dtype == np.float16 and isinstance(again, np.memmap)
    np.testing.assert_allclose(half, full, rtol=2e-3, atol=2e-3)
    assert len(_files(cache)) == 2
    with pytest.raises(ValueError, match="floating-point"):
        extract_features(data, encoder, cache_dir=cache, dtype=np.int32)


def test_a_failure_mid_way_leaves_no_file_behind(encoder, tmp_path):
    data = _image_dataset(tmp_path / "img", n=5)
    broken = MultilabelDataset(
        [*data.X[:4], str(tmp_path / "missing.png")], data.Y, data.label_names, "toy", "train",
        kind="images",
    )
    cache = tmp_path / "cache"
    with pytest.raises(FileNotFoundError):
        extract_features(broken, encoder, batch_size=2, cache_dir=cache, progress=False)
    assert _files(cache) == []  # neither the entry nor its temporary file


def test_uncached_extraction_and_the_environment_default(encoder, tmp_path, monkeypatch):
    data = _image_dataset(tmp_path / "img", n=3)
    monkeypatch.setenv("LSNPC_CACHE", str(tmp_path / "envcache"))
    X = extract_features(data, encoder, cache=False, progress=False)
    assert not isinstance(X, np.memmap) and X.shape == (3, 384)
    assert not (tmp_path / "envcache").exists()
    cached = extract_features(data, encoder, progress=False)
    assert (tmp_path / "envcache" / "features" / "toy" / "train").is_dir()
    np.testing.assert_array_equal(X, cached)


def test_feature_datasets_pass_through_and_mismatches_are_refused(encoder, tmp_path):
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    features = MultilabelDataset(X, np.zeros((4, 2), int), ["a", "b"], "toy", "train")
    assert extract_features(features, None, cache_dir=tmp_path) is features.X
    assert _files(tmp_path) == []
    texts = MultilabelDataset(["x", "y"], np.zeros((2, 2), int), ["a", "b"], "toy", "train", kind="texts")
    with pytest.raises(ValueError, match="encodes images, but data set 'toy' holds texts"):
        extract_features(texts, encoder, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="encoder is required"):
        extract_features(texts, None, cache_dir=tmp_path)
