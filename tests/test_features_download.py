"""The weight download path, against a local HTTP server (there is no internet in CI)."""

from __future__ import annotations

import functools
import hashlib
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lsnpc.features import ChecksumError, WeightSource, download_file, fetch_weights, sha256_file


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


def test_download_checks_the_sha256_and_writes_the_file(http_server, tmp_path):
    root, url = http_server
    payload = np.random.default_rng(0).bytes(3 * (1 << 20) + 123)  # several read chunks
    (root / "w.bin").write_bytes(payload)
    dest = tmp_path / "cache" / "w.bin"
    out = download_file(
        f"{url}/w.bin", dest, sha256=hashlib.sha256(payload).hexdigest(), progress=True
    )
    assert out == dest and dest.read_bytes() == payload
    assert _leftovers(dest.parent) == ["w.bin"]  # no temporary file left beside it


def test_checksum_failure_leaves_nothing_behind(http_server, tmp_path):
    root, url = http_server
    (root / "w.bin").write_bytes(b"tampered weights")
    dest = tmp_path / "cache" / "w.bin"
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        download_file(f"{url}/w.bin", dest, sha256="0" * 64, progress=False)
    assert not dest.exists()
    assert _leftovers(dest.parent) == []


def test_a_good_cached_file_is_not_fetched_again_and_a_bad_one_is(http_server, tmp_path):
    root, url = http_server
    (root / "w.bin").write_bytes(b"good")
    good = hashlib.sha256(b"good").hexdigest()
    dest = tmp_path / "w.bin"
    dest.write_bytes(b"good")
    # the URL does not exist, so any fetch would fail: a verified file is reused
    assert download_file(f"{url}/missing.bin", dest, sha256=good, progress=False) == dest
    dest.write_bytes(b"corrupted")
    download_file(f"{url}/w.bin", dest, sha256=good, progress=False)
    assert dest.read_bytes() == b"good"


def test_unreachable_or_missing_urls_raise_connection_error(http_server, tmp_path):
    _, url = http_server
    with pytest.raises(ConnectionError, match="could not download .*pass its local path"):
        download_file(f"{url}/nope.bin", tmp_path / "x.bin", sha256="0" * 64, progress=False)
    assert not (tmp_path / "x.bin").exists()


def test_unverified_download_warns_and_a_malformed_digest_is_refused(http_server, tmp_path):
    root, url = http_server
    (root / "w.bin").write_bytes(b"abc")
    with pytest.warns(UserWarning, match="without a known SHA-256"):
        download_file(f"{url}/w.bin", tmp_path / "w.bin", sha256=None, progress=False)
    assert sha256_file(tmp_path / "w.bin") == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(ValueError, match="64 hexadecimal"):
        download_file(f"{url}/w.bin", tmp_path / "v.bin", sha256="abc", progress=False)


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
