"""The client of another organisation's artifact service (httpx): streaming, resume with Range,
verification, refusals, mutual TLS with the owner's name, kept-alive connections, bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from exchange.client import ArtifactClient, https_endpoint
from exchange.errors import (
    ArtifactCorrupted,
    ArtifactForbidden,
    ArtifactNotFound,
    ArtifactUnreachable,
    LocationRefused,
)
from exchange.readers import StaticReaders
from exchange.service import ArtifactHandler, ArtifactServer
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def client(srv, consortium, org="Org2MSP", owner="Org1MSP", **kw):
    return ArtifactClient(srv.url, owner, ClientTLS(consortium, org), **kw)


def local(tmp_path, org="Org2MSP"):
    return ArtifactStore(tmp_path / f"local-{org}", org)


def test_endpoints_are_https_host_port_only():
    assert https_endpoint("https://127.0.1.1:8443") == "https://127.0.1.1:8443"
    assert https_endpoint("https://peer0.org1.example.com/") == "https://peer0.org1.example.com:443"
    assert https_endpoint("https://[::1]:8443") == "https://[::1]:8443"
    for bad in (
        "file:///srv/org1/artifacts/Org1MSP",
        "/srv/org1/artifacts",
        "http://127.0.1.1:8443",
        "https://127.0.1.1:8443/artifacts",
        "https://user@127.0.1.1:8443",
        "https://127.0.1.1:notaport",
        "https://",
    ):
        with pytest.raises(LocationRefused):
            https_endpoint(bad)
        with pytest.raises(LocationRefused):
            ArtifactClient(bad, "Org1MSP", None)  # type: ignore[arg-type]


def test_fetch_to_streams_into_place(served, consortium, tmp_path):
    srv, store, _, model = served
    dest = local(tmp_path)
    path = client(srv, consortium).fetch_to(model, dest.path(model), dest.home)
    assert path == dest.path(model) and dest.get(model) == store.get(model)
    assert path.stat().st_mode & 0o777 == 0o600


def test_tampered_bytes_on_the_server_are_refused_and_nothing_is_kept(served, consortium, tmp_path):
    srv, store, _, model = served
    path = store.path(model)
    data = bytearray(path.read_bytes())
    data[1234] ^= 1
    path.write_bytes(bytes(data))
    dest = local(tmp_path)
    with pytest.raises(ArtifactCorrupted):
        client(srv, consortium).fetch_to(model, dest.path(model), dest.home)
    with pytest.raises(ArtifactCorrupted):
        client(srv, consortium).get(model)
    assert not dest.has(model)
    assert not [p for p in dest.base.rglob("*") if p.is_file()]  # no temporary file left behind


def test_a_refusal_keeps_nothing(served, consortium, tmp_path):
    srv, _, _, model = served
    dest = local(tmp_path, "Org4MSP")
    with pytest.raises(ArtifactForbidden):
        client(srv, consortium, "Org4MSP").fetch_to(model, dest.path(model), dest.home)
    assert not [p for p in dest.home.rglob("*") if p.is_file()]


class CutOnce(ArtifactHandler):
    """Closes the connection after 1 MB of the first full transfer; records the Range headers."""

    cut = True
    ranges: list = []

    def send_body(self, f, length):
        type(self).ranges.append(self.headers.get("Range"))
        if type(self).cut:
            type(self).cut = False
            self.wfile.write(f.read(1_000_000))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        super().send_body(f, length)


class CutOnceIgnoringRanges(CutOnce):
    """The same cut, then the whole body again whatever the Range header asks (a server without ranges)."""

    cut = True
    ranges: list = []

    def do_GET(self):
        if "Range" in self.headers:
            del self.headers["Range"]
            type(self).ranges.append("ignored")
        super().do_GET()


@pytest.mark.parametrize("handler", [CutOnce, CutOnceIgnoringRanges])
def test_broken_transfer_resumes(tmp_path, consortium, handler):
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    model = store.put(os.urandom(3_000_000)).digest
    srv = ArtifactServer(
        ("127.0.1.1", 0), store, consortium, StaticReaders({model: ["Org2MSP"]}), handler=handler
    ).start()
    try:
        dest = local(tmp_path)
        client(srv, consortium, backoff=0.01).fetch_to(model, dest.path(model), dest.home)
        assert dest.get(model) == store.get(model)
        if handler is CutOnce:
            assert handler.ranges[0] is None and handler.ranges[1].startswith("bytes=")
            assert int(handler.ranges[1][6:-1]) > 0  # resumed where the cut left it, not from 0
        else:
            assert handler.ranges == [None, "ignored", None]  # answered whole: started over, still verified
    finally:
        srv.stop()


def test_a_missing_artifact_and_an_unreachable_service(served, consortium, tmp_path):
    srv, store, message, _ = served
    store.delete(message)
    with pytest.raises(ArtifactNotFound):
        client(srv, consortium).get(message)
    srv.stop()
    with pytest.raises(ArtifactUnreachable, match="after 2 attempts"):
        client(srv, consortium, retries=1, backoff=0.01).get(message)
    with pytest.raises(ArtifactUnreachable, match="no message index"):
        client(srv, consortium).message_entry("p", 1, "Org2MSP")


def test_client_refuses_a_server_of_another_organisation(served, consortium):
    srv, _, message, _ = served  # Org1's service, but the client expects Org3's certificate
    with pytest.raises(ArtifactUnreachable, match="after 1 attempts"):
        client(srv, consortium, owner="Org3MSP", retries=0).get(message)


class Counting(ArtifactHandler):
    connections = 0

    def setup(self):
        type(self).connections += 1
        super().setup()


def test_connections_are_kept_alive(tmp_path, consortium):
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    digests = [store.put(os.urandom(1000)).digest for _ in range(5)]
    srv = ArtifactServer(
        ("127.0.1.1", 0),
        store,
        consortium,
        StaticReaders({d: ["Org2MSP"] for d in digests}),
        handler=Counting,
    ).start()
    try:
        c = client(srv, consortium)
        assert [c.get(d) for d in digests] == [store.get(d) for d in digests]
        assert Counting.connections == 1  # one TLS handshake for five artifacts
        c.close()
        assert c.get(digests[0]) == store.get(digests[0]) and Counting.connections == 2
    finally:
        srv.stop()


class HugeEntry(ArtifactHandler):
    def _message_entry(self):
        body = b'{"x": "' + b"a" * 100_000 + b'"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_index_entry_is_small_json(tmp_path, consortium):
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    srv = ArtifactServer(("127.0.1.1", 0), store, consortium, StaticReaders({}), handler=HugeEntry).start()
    try:
        with pytest.raises(ArtifactCorrupted, match="over 65536 bytes"):
            client(srv, consortium).message_entry("p", 1, "Org2MSP")
    finally:
        srv.stop()


def test_fifty_megabytes_with_bounded_client_memory():
    """benchmarks.artifact_fetch in a subprocess: the client's RSS growth (VmHWM after resetting it
    through /proc/self/clear_refs, minus VmRSS before) while fetching 50 MB stays under 100 MB."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.artifact_fetch", "--mb", "50"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["artifact_mb"] == 50.0
    assert figures["peak_rss_mb"] < 100, figures
    assert figures["artifact_fetch_mb_s"] > 0
