"""Downloads against a local HTTP server: verified success, checksum failure, offline errors."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsnpc.data import (
    ChecksumMismatchError,
    DownloadError,
    UnverifiedDownloadWarning,
    download_dataset,
    download_file,
    get_dataset_info,
    load_dataset,
)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self.requests.append(self.path)
        super().do_GET()


@pytest.fixture
def serve() -> Iterator:
    """Start an HTTP server for a folder on 127.0.0.1; yields (base url, list of requested paths)."""
    servers = []

    def start(folder: Path) -> tuple[str, list[str]]:
        handler = type("Handler", (_QuietHandler,), {"requests": []})
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(folder))
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", handler.requests

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_download_dataset_verified_then_loadable(shared_data: Path, tmp_path: Path, serve) -> None:
    # the shared data folder is laid out like a data home, so it can act as a mirror
    url, requests = serve(shared_data)
    home = tmp_path / "home"
    folder = download_dataset("scene", data_home=home, mirror=url, progress=False)
    assert folder == home / "scene"
    assert sorted(p.name for p in folder.iterdir()) == ["scene-test.arff", "scene-train.arff", "scene.xml"]
    assert len(requests) == 3
    assert len(load_dataset("scene", "test", data_home=home)) == 1196
    # present and verified: nothing is fetched again, unless forced
    download_dataset("scene", data_home=home, mirror=url, progress=False)
    assert len(requests) == 3
    download_dataset("scene", data_home=home, mirror=url, progress=False, force=True)
    assert len(requests) == 6


def test_checksum_mismatch_leaves_nothing_behind(shared_data: Path, tmp_path: Path, serve) -> None:
    mirror = tmp_path / "mirror" / "yeast"
    shutil.copytree(shared_data / "yeast", mirror)
    (mirror / "yeast.xml").write_text((mirror / "yeast.xml").read_text().replace("Class1", "ClassX"))
    url, _ = serve(mirror.parent)
    home = tmp_path / "home"
    with pytest.raises(ChecksumMismatchError, match="yeast.xml"):
        download_dataset("yeast", data_home=home, mirror=url, progress=False)
    left = _leftovers(home / "yeast")
    assert "yeast.xml" not in left and not [n for n in left if n.startswith(".")], left


def test_download_file_checks_and_progress(tmp_path: Path, serve) -> None:
    payload = b"0123456789" * 5000
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "blob.bin").write_bytes(payload)
    url, _ = serve(tmp_path / "src")
    good = hashlib.sha256(payload).hexdigest()
    dest = download_file(f"{url}/blob.bin", tmp_path / "out" / "blob.bin", sha256=good, size=len(payload))
    assert dest.read_bytes() == payload
    with pytest.raises(ChecksumMismatchError, match="bytes"):
        download_file(f"{url}/blob.bin", tmp_path / "out" / "b2.bin", size=len(payload) + 1, progress=False)
    with pytest.raises(ChecksumMismatchError, match="sha256"):
        download_file(f"{url}/blob.bin", tmp_path / "out" / "b3.bin", sha256="0" * 64, progress=False)
    with pytest.warns(UnverifiedDownloadWarning, match=good):
        download_file(f"{url}/blob.bin", tmp_path / "out" / "b4.bin", progress=False)
    assert _leftovers(tmp_path / "out") == ["b4.bin", "blob.bin"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_offline_error_says_what_to_put_where(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(DownloadError) as err:
        download_dataset("goemotions", data_home=home, mirror=f"http://127.0.0.1:{_closed_port()}", progress=False)
    message = str(err.value)
    assert str(home / "goemotions") in message
    for remote in get_dataset_info("goemotions").files:
        assert remote.path in message and remote.url in message
    assert _leftovers(home / "goemotions") == []
    assert message.splitlines()[0].startswith("could not download 'goemotions' from")
    assert not home.exists(), "an offline download leaves no (empty) folder behind"


def test_not_downloadable_explains(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be downloaded.*VOCtrainval"):
        download_dataset("voc2007", data_home=tmp_path)
