"""The weight download path, against a local HTTP server (there is no internet in CI)."""

from __future__ import annotations

import functools
import hashlib
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lsnpc.features import WeightSource, fetch_weights, sha256_file


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - keep pytest output clean
        pass


@pytest.fixture
def http_server(tmp_path):
    """Serve ``tmp_path/served`` on 127.0.0.1; yields (folder, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _source(url: str, name: str, sha256: str | None) -> WeightSource:
    return WeightSource(url=f"{url}/{name}", sha256=sha256, filename=name, tag="t")


def test_fetch_checks_the_sha256_and_writes_the_file(http_server, tmp_path):
    root, url = http_server
    payload = np.random.default_rng(0).bytes(3 * (1 << 16) + 123)  # several read chunks
    (root / "w.bin").write_bytes(payload)
    cache = tmp_path / "cache"
    source = _source(url, "w.bin", hashlib.sha256(payload).hexdigest())
    out = fetch_weights(source, cache_dir=cache, progress=True)
    assert out == cache / "w.bin" and out.read_bytes() == payload
    assert _leftovers(cache) == ["w.bin"]  # no temporary file left beside it


def test_checksum_failure_leaves_nothing_behind(http_server, tmp_path):
    from lsnpc.data.download import ChecksumMismatchError

    root, url = http_server
    (root / "w.bin").write_bytes(b"tampered weights")
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumMismatchError, match="mismatch"):
        fetch_weights(_source(url, "w.bin", "0" * 64), cache_dir=cache, progress=False)
    assert _leftovers(cache) == []


def test_a_good_cached_file_is_not_fetched_again_and_a_bad_one_is(http_server, tmp_path):
    root, url = http_server
    good = hashlib.sha256(b"good").hexdigest()
    (tmp_path / "w.bin").write_bytes(b"good")
    # nothing is served, so any fetch would fail: a verified file is reused
    assert fetch_weights(_source(url, "w.bin", good), cache_dir=tmp_path, progress=False).is_file()
    (tmp_path / "w.bin").write_bytes(b"corrupted")
    (root / "w.bin").write_bytes(b"good")
    fetch_weights(_source(url, "w.bin", good), cache_dir=tmp_path, progress=False)
    assert (tmp_path / "w.bin").read_bytes() == b"good"


def test_unreachable_or_missing_urls_raise_a_connection_error_saying_what_to_do(http_server, tmp_path):
    _, url = http_server
    with pytest.raises(ConnectionError, match="could not download .*local path as weights="):
        fetch_weights(_source(url, "nope.bin", "0" * 64), cache_dir=tmp_path, progress=False)
    assert _leftovers(tmp_path) == ["served"]


def test_unverified_download_warns_but_keeps_the_file(http_server, tmp_path):
    root, url = http_server
    (root / "w.bin").write_bytes(b"abc")
    with pytest.warns(UserWarning, match="not verified"):
        out = fetch_weights(_source(url, "w.bin", None), cache_dir=tmp_path / "c", progress=False)
    assert sha256_file(out) == hashlib.sha256(b"abc").hexdigest()


def test_image_encoder_downloads_registered_style_weights_once(http_server, tmp_path):
    pytest.importorskip("timm")
    pytest.importorskip("PIL")
    from PIL import Image
    from safetensors.torch import save_file

    from lsnpc.features import ImageEncoder

    root, url = http_server
    reference = ImageEncoder("levit_128s", weights=None, seed=7, num_threads=1)
    state = {k: v.contiguous() for k, v in reference.model.state_dict().items()}
    save_file(state, str(root / "levit.safetensors"))
    source = WeightSource(
        url=f"{url}/levit.safetensors",
        sha256=sha256_file(root / "levit.safetensors"),
        filename="levit_128s.test.safetensors",
        tag="test",
    )
    weights_dir = tmp_path / "weights"
    encoder = ImageEncoder(
        "levit_128s", weights=source, weights_dir=weights_dir, progress=False, num_threads=1
    )
    assert encoder.weights_id == f"test-{source.sha256[:12]}"
    image = [Image.new("RGB", (40, 30), (10, 200, 30))]
    np.testing.assert_array_equal(encoder.encode(image), reference.encode(image))
    assert _leftovers(weights_dir) == ["levit_128s.test.safetensors"]
    # second time: served file gone, the cached download is verified and reused
    (root / "levit.safetensors").unlink()
    assert fetch_weights(source, cache_dir=weights_dir, progress=False).is_file()
