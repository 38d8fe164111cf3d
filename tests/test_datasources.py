"""Downloads of benchmark data: checksums, trust on first use, unpacking, and the messages that
point users at a local copy. Served by an HTTP server on 127.0.0.1, never the internet."""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_plsqlbench.datasources import data_cache_dir, download, source_kind
from pytest_plsqlbench.errors import DataError, UsageError
from pytest_plsqlbench.manifests import Source, discover
from pytest_plsqlbench.settings import DataSettings


class Files:
    """What the server serves (path -> bytes) and which paths were asked for."""

    def __init__(self) -> None:
        self.content: dict[str, bytes] = {}
        self.requests: list[str] = []


@pytest.fixture
def served() -> Iterator[tuple[str, Files]]:
    files = Files()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            files.requests.append(self.path)
            body = files.content.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", files
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def data(tmp_path: Path) -> DataSettings:
    return DataSettings(cache=tmp_path / "cache")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


DATA = b'{"task_id": "T/1"}\n'


def test_pinned_checksum_download_is_kept_and_not_fetched_again(served, data: DataSettings) -> None:
    base, files = served
    files.content["/data.jsonl"] = DATA
    source = Source("demo", url=f"{base}/data.jsonl", sha256=sha(DATA), file="data.jsonl")
    path = download(source, data, "demo")
    assert path.name == "data.jsonl" and path.read_bytes() == DATA
    assert download(source, data, "demo") == path
    assert files.requests == ["/data.jsonl"]


def test_checksum_mismatch_is_refused_and_leaves_nothing_behind(served, data: DataSettings) -> None:
    base, files = served
    files.content["/data.jsonl"] = DATA
    source = Source("demo", url=f"{base}/data.jsonl", sha256=sha(b"another file"), file="data.jsonl")
    with pytest.raises(DataError, match=f"checksum mismatch for {base}/data.jsonl: expected sha256 {sha(b'another file')}"):
        download(source, data, "demo")
    root = data_cache_dir(data) / "downloads" / "demo"
    assert not list(root.glob("*/.complete")) and not list(root.glob(".dl-*"))
    # Once the right file is served, the same source downloads.
    files.content["/data.jsonl"] = b"another file"
    assert download(source, data, "demo").read_bytes() == b"another file"


def test_unpinned_source_records_its_first_checksum_and_refuses_a_changed_copy(
    served, data: DataSettings
) -> None:
    base, files = served
    files.content["/data.jsonl"] = DATA
    source = Source("demo", url=f"{base}/data.jsonl", file="data.jsonl")
    path = download(source, data, "demo")
    recorded = list((data_cache_dir(data) / "downloads" / "demo").glob("*.sha256"))
    assert [p.read_text().strip() for p in recorded] == [sha(DATA)]
    # The cached copy is dropped and upstream changed: the new file is not taken silently.
    shutil.rmtree(path.parent.parent)
    files.content["/data.jsonl"] = DATA + b'{"task_id": "T/2"}\n'
    with pytest.raises(DataError, match=f"expected sha256 {sha(DATA)}"):
        download(source, data, "demo")


def test_gzip_and_release_archives_are_unpacked(served, data: DataSettings) -> None:
    base, files = served
    packed = gzip.compress(DATA)
    files.content["/MbppPlus.jsonl.gz"] = packed
    gz = Source("mbppplus", url=f"{base}/MbppPlus.jsonl.gz", sha256=sha(packed), file="MbppPlus.jsonl")
    assert download(gz, data, "mbpp-plus").read_bytes() == DATA

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("plsqlbench-abc123/datasets/mbpp/mbpp_plsql.jsonl")
        info.size = len(DATA)
        tar.addfile(info, io.BytesIO(DATA))
    files.content["/release.tar.gz"] = buf.getvalue()
    release = Source("plsqlbench", url=f"{base}/release.tar.gz", sha256=sha(buf.getvalue()), kind="release")
    root = download(release, data, "mbpp")
    assert root.name == "plsqlbench-abc123"  # the archive's one top-level folder
    assert (root / "datasets/mbpp/mbpp_plsql.jsonl").read_bytes() == DATA


def test_missing_url_or_failed_download_names_the_local_copy_option(served, data: DataSettings) -> None:
    base, _ = served
    with pytest.raises(UsageError, match=r"needs data source 'demo': give a local copy with --plsql-source demo=PATH"):
        download(Source("demo"), data, "demo")
    with pytest.raises(UsageError, match=r"cannot download .*; point --plsql-data DIR at a local copy"):
        # The family's name for the core kind ``release`` (tasks/spider.yaml's) is understood.
        download(Source("plsqlbench", url=f"{base}/missing.tar.gz", kind="plsqlbench"), data, "spider")


def test_source_kinds_are_the_cores_or_a_registered_familys() -> None:
    """The bundled manifests' kinds resolve (``plsqlbench`` through the family's ``sources``);
    an unknown kind is one line naming it."""
    kinds = {m.source.kind: source_kind(m.source) for m in discover().values() if m.source is not None}
    assert kinds == {"file": "file", "plsqlbench": "release"}
    with pytest.raises(UsageError, match=r"data source 'x': unknown kind 'tarball' \(the core's: file, release"):
        source_kind(Source("x", kind="tarball"))
