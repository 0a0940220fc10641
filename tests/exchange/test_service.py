"""An organisation serving its own store: over HTTPS with mutual TLS (real servers on loopback
addresses, a generated consortium) or in memory to the nodes of the same process, both under one rule."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request

import pytest

from exchange import messages
from exchange.client import ArtifactClient
from exchange.errors import ArtifactCorrupted, ArtifactForbidden, ArtifactNotFound
from exchange.readers import LedgerReaders, StaticReaders
from exchange.service import ArtifactServer, ArtifactService, HostedServices, parse_range
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS
from tests.exchange.conftest import ORGS


def client(srv, consortium, org="Org2MSP", owner="Org1MSP", **kw):
    return ArtifactClient(srv.url, owner, ClientTLS(consortium, org), **kw)


def raw(srv, consortium, path, headers=None, org="Org2MSP", method="GET"):
    """(status, headers, body) of a request with ``org``'s client certificate, by address (urllib)."""
    ctx = ClientTLS(consortium, org).context("Org1MSP")
    ctx.check_hostname = False  # urllib dials by address; the name check is the client's own test
    req = urllib.request.Request(f"{srv.url}{path}", headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, context=ctx) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_message_is_served_to_its_recipient_only(served, consortium):
    srv, store, message, _ = served
    assert client(srv, consortium).get(message) == store.get(message)
    for org in ("Org3MSP", "Org4MSP"):  # another process member, an organisation outside the process
        with pytest.raises(ArtifactForbidden):
            client(srv, consortium, org).get(message)
    with pytest.raises(ArtifactForbidden):  # an unknown digest is a 403 too: nothing leaks
        client(srv, consortium).get("sha256:" + "0" * 64)


def test_model_is_served_to_its_access_list(served, consortium):
    srv, store, _, model = served
    for org in ("Org2MSP", "Org3MSP"):
        assert client(srv, consortium, org).get(model) == store.get(model)
    with pytest.raises(ArtifactForbidden):
        client(srv, consortium, "Org4MSP").get(model)


def test_a_reader_whose_bytes_are_lost_gets_404(served, consortium):
    srv, store, message, _ = served
    store.delete(message)
    with pytest.raises(ArtifactNotFound):
        client(srv, consortium).get(message)
    with pytest.raises(ArtifactForbidden):  # a non-reader still learns nothing
        client(srv, consortium, "Org3MSP").get(message)


def test_range_requests_and_their_limits(served, consortium):
    srv, store, _, model = served
    code, headers, body = raw(srv, consortium, f"/artifacts/{model}", {"Range": "bytes=10-19"})
    assert code == 206 and body == store.get(model)[10:20]
    assert headers["Content-Range"] == "bytes 10-19/3000000"
    code, headers, _ = raw(srv, consortium, f"/artifacts/{model}", {"Range": "bytes=3000000-"})
    assert code == 416 and headers["Content-Range"] == "bytes */3000000"
    code, headers, body = raw(srv, consortium, f"/artifacts/{model}", method="HEAD")
    assert code == 200 and body == b"" and headers["Content-Length"] == "3000000"
    assert headers["ETag"] == f'"{model}"' and headers["Accept-Ranges"] == "bytes"
    assert parse_range(None, 5) is None and parse_range("bytes=2-", 5) == (2, 5)
    assert parse_range("bytes=1-2", 5) == (1, 3)
    for bad in ("bytes=5-", "items=0-1", "bytes=-3", "bytes=3-1"):
        with pytest.raises(ValueError):
            parse_range(bad, 5)


def test_malformed_requests(served, consortium):
    srv, *_ = served
    assert raw(srv, consortium, "/artifacts/sha256:../../etc/passwd")[0] == 400
    assert raw(srv, consortium, "/messages/p/x/Org2MSP")[0] == 400
    assert raw(srv, consortium, "/messages/p/1")[0] == 400
    assert raw(srv, consortium, "/messages/../1/Org2MSP")[0] == 400
    assert raw(srv, consortium, "/elsewhere")[0] == 404


def test_service_listens_on_loopback_only(tmp_path, consortium):
    with pytest.raises(ValueError, match="loopback"):
        ArtifactServer(("0.0.0.0", 0), ArtifactStore(tmp_path, "Org1MSP"), consortium, StaticReaders({}))


def test_ledger_readers_over_https(world, consortium):
    """Org1's service deciding from the ledger: each message and its index entry to its recipient only,
    the model to the access list, nothing to Org4."""
    clients, store, sent, ct = world
    srv = ArtifactServer(
        ("127.0.1.1", 0), store, consortium, LedgerReaders(clients["Org1MSP"], store)
    ).start()
    try:

        def allowed(org, digest):
            try:
                return client(srv, consortium, org).get(digest) == store.get(digest)
            except ArtifactForbidden:
                return False

        for recipient, ref in sent.items():
            got = client(srv, consortium, recipient).message_entry("p", 1, recipient)
            assert got == messages.read_entry(store, "p", 1, recipient)
            for other in set(ORGS[1:]) - {recipient}:
                with pytest.raises(ArtifactForbidden):
                    client(srv, consortium, other).message_entry("p", 1, recipient)
            assert [o for o in ORGS[1:] if allowed(o, ref.stored.digest)] == [recipient]
        with pytest.raises(ArtifactForbidden):  # no such round: refused like any other
            client(srv, consortium).message_entry("p", 9, "Org2MSP")
        assert [o for o in ORGS[1:] if allowed(o, ct)] == ["Org2MSP", "Org3MSP"]
    finally:
        srv.stop()


def test_hosted_services_answer_under_the_same_rule(tmp_path, consortium):
    store = ArtifactStore(tmp_path, "Org1MSP")
    ref = store.put_message(
        b"m",
        process_id="p",
        round=1,
        recipient="Org2MSP",
        recipient_certificate=consortium.encryption_certificate("Org2MSP"),
    )
    messages.write_entry(store, "p", 1, ref)
    hosted = HostedServices()
    assert hosted.peer("Org1MSP", "Org2MSP") is None
    hosted.serve(ArtifactService(store, StaticReaders({ref.stored.digest: ["Org2MSP"]})))
    peer = hosted.peer("Org1MSP", "Org2MSP")
    assert peer is not None and peer.owner == "Org1MSP"
    assert peer.message_entry("p", 1, "Org2MSP") == messages.read_entry(store, "p", 1, "Org2MSP")
    assert peer.get(ref.stored.digest) == store.get(ref.stored.digest)
    outsider = hosted.peer("Org1MSP", "Org3MSP")
    with pytest.raises(ArtifactForbidden):
        outsider.get(ref.stored.digest)
    with pytest.raises(ArtifactForbidden):
        outsider.message_entry("p", 1, "Org2MSP")
    with pytest.raises(ValueError):
        peer.message_entry("../p", 1, "Org2MSP")
    store.path(ref.stored.digest).write_bytes(b"altered")
    with pytest.raises(ArtifactCorrupted):
        peer.get(ref.stored.digest)
    with pytest.raises(ArtifactCorrupted):
        peer.fetch_to(ref.stored.digest, tmp_path / "o2" / "x", tmp_path / "o2")
    assert not (tmp_path / "o2" / "x").exists()


def test_a_silent_or_certificateless_client_blocks_nobody_and_gets_no_answer(served, consortium):
    """A client that connects and sends nothing holds one thread only (another client is answered); a
    client without a certificate gets no answer; a refusal has a JSON body."""
    srv, store, message, _ = served
    host, port = srv.server_address[:2]
    with socket.create_connection((host, port)):
        assert client(srv, consortium).get(message) == store.get(message)
    with pytest.raises((ssl.SSLError, OSError)):
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        with socket.create_connection((host, port)) as sock, ctx.wrap_socket(sock) as tls:
            tls.sendall(b"GET /artifacts/" + message.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            if not tls.recv(100):
                raise OSError("closed without an answer")
    assert json.loads(raw(srv, consortium, "/artifacts/sha256:" + "1" * 64)[2])["error"]
