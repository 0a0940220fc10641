"""Every fetch is bounded (issue 33 item 3): a sender that indexed a 178-byte message and served it as
``Content-Length: 1 TiB`` had 96 MiB accepted. Now a recipient takes at most the size the sender's
index entry names (itself bounded by the size the sender's task signed on the ledger) and at most the
node's configured maximum; it stops reading there, keeps nothing, and says who sent what and how much.
The hostile senders here are real HTTPS artifact services (mutual TLS) that lie in their headers."""

from __future__ import annotations

import json
import os

import pytest

from exchange import messages
from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES, ArtifactClient
from exchange.errors import ArtifactError
from exchange.locations import Locations
from exchange.readers import StaticReaders
from exchange.service import ArtifactHandler, ArtifactServer, ArtifactService, HostedServices
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS

PAYLOAD = b"x" * 93  # sealed (HPKE, +85 bytes): a 178-byte message, as in the review
JUNK = 256 << 20  # what a hostile sender is ready to push
TOO_LARGE = "ARTIFACT_TOO_LARGE"


def hostile(mode: str) -> type[ArtifactHandler]:
    """Org1's service, honest about its index, lying about the artifact: ``huge`` announces 1 TiB,
    ``longer`` announces the true length and sends JUNK more, ``chunked`` sends JUNK with no length."""

    class Hostile(ArtifactHandler):
        written = 0

        def do_GET(self) -> None:
            if not self.path.startswith("/artifacts/"):
                return super().do_GET()
            real = self.server.store.get(self.path[len("/artifacts/") :])
            self.send_response(200)
            if mode == "huge":
                self.send_header("Content-Length", str(1 << 40))
            elif mode == "longer":
                self.send_header("Content-Length", str(len(real)))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            block = os.urandom(1 << 20)
            try:
                if mode == "chunked":
                    for _ in range(JUNK // len(block)):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                        type(self).written += len(block)
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(real)
                    for _ in range(JUNK // len(block)):
                        self.wfile.write(block)
                        type(self).written += len(block)
            except OSError:  # the recipient hung up: what a bounded reader does
                pass

    return Hostile


def sender(tmp_path, consortium, handler: type[ArtifactHandler] = ArtifactHandler):
    """Org1's store with its round-3 message to Org2 indexed, served over HTTPS by ``handler``."""
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    ref = store.put_message(
        PAYLOAD,
        process_id="p1",
        round=3,
        recipient="Org2MSP",
        recipient_certificate=consortium.encryption_certificate("Org2MSP"),
    )
    messages.write_entry(store, "p1", 3, ref)
    readers = StaticReaders({ref.stored.digest: ["Org2MSP"]})
    return ArtifactServer(("127.0.1.1", 0), store, consortium, readers, handler=handler).start(), store, ref


def recipient(tmp_path, consortium, url, **kw) -> ArtifactStore:
    locations = Locations(ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": url}, patience=0, **kw)
    return ArtifactStore(tmp_path / "org2", "Org2MSP", locations=locations)


def receive(store: ArtifactStore, ref, consortium, **kw) -> bytes:
    return store.receive_message(
        "Org1MSP",
        process_id="p1",
        round=3,
        payload_digest=ref.payload_digest,
        recipient_key=consortium.encryption_key("Org2MSP"),
        **kw,
    )


def nothing_kept(store: ArtifactStore) -> bool:
    return not [p for p in store.home.rglob("*") if p.is_file()]


@pytest.mark.parametrize("mode", ["huge", "chunked"])
def test_a_sender_serving_more_than_it_indexed_is_cut_off(tmp_path, consortium, mode):
    handler = hostile(mode)
    srv, _, ref = sender(tmp_path, consortium, handler)
    assert ref.stored.size == 178
    try:
        org2 = recipient(tmp_path, consortium, srv.url)
        with pytest.raises(ArtifactError) as err:
            receive(org2, ref, consortium)
        e = err.value
        assert e.code == TOO_LARGE, repr(e)
        assert (e.owner, e.digest, e.limit) == ("Org1MSP", ref.stored.digest, 178)
        assert "Org1MSP" in str(e) and ref.stored.digest in str(e) and "178" in str(e)
        if mode == "huge":
            assert e.size == 1 << 40  # refused on the announced length, before a byte was read
        else:
            assert 178 < e.size <= 178 + (1 << 20)  # read up to the bound and stopped there
        assert handler.written < JUNK  # the sender was cut off, not read to the end
        assert nothing_kept(org2)
        # the same through a model fetch into the store (streamed to a file): nothing kept there either
        with pytest.raises(ArtifactError) as err:
            org2.fetch_into("Org1MSP", ref.stored.digest, ref.stored.size)
        assert err.value.code == TOO_LARGE and nothing_kept(org2)
    finally:
        srv.stop()


def test_a_body_longer_than_announced_is_never_read_past_its_length(tmp_path, consortium):
    handler = hostile("longer")
    srv, _, ref = sender(tmp_path, consortium, handler)
    try:
        org2 = recipient(tmp_path, consortium, srv.url)
        assert receive(org2, ref, consortium) == PAYLOAD  # the 178 bytes announced, the rest unread
        assert handler.written < JUNK
        path = org2.fetch_into("Org1MSP", ref.stored.digest, ref.stored.size)  # a fresh connection
        assert path.stat().st_size == 178
    finally:
        srv.stop()


def test_an_index_entry_naming_less_than_it_serves_bounds_the_fetch(tmp_path, consortium):
    """The sender's service is honest HTTP but its index names 100 bytes for a 178-byte artifact: the
    bound is the index's, over HTTPS and in memory alike."""
    srv, store, ref = sender(tmp_path, consortium)
    entry = messages.entry_path(store, "p1", 3, "Org2MSP")
    data = json.loads(entry.read_text())
    data["stored"]["size"] = 100
    entry.write_text(json.dumps(data))
    hosted = HostedServices()
    hosted.serve(ArtifactService(store, StaticReaders({ref.stored.digest: ["Org2MSP"]})))
    in_memory = ArtifactStore(
        tmp_path / "mem", "Org2MSP", locations=Locations(ClientTLS(consortium, "Org2MSP"), hosted=hosted)
    )
    try:
        for org2 in (recipient(tmp_path, consortium, srv.url), in_memory):
            with pytest.raises(ArtifactError) as err:
                receive(org2, ref, consortium)
            assert err.value.code == TOO_LARGE and (err.value.limit, err.value.size) == (100, 178)
            assert nothing_kept(org2)
    finally:
        srv.stop()


def test_an_index_entry_larger_than_the_signed_size_allows_is_not_fetched(tmp_path, consortium):
    """The sender's task signed a 93-byte payload on the ledger; its index names a sealed size far over
    what sealing 93 bytes makes: refused before any fetch."""
    handler = hostile("huge")
    srv, store, ref = sender(tmp_path, consortium, handler)
    entry = messages.entry_path(store, "p1", 3, "Org2MSP")
    data = json.loads(entry.read_text())
    data["stored"]["size"] = 1 << 40
    entry.write_text(json.dumps(data))
    try:
        org2 = recipient(tmp_path, consortium, srv.url)
        with pytest.raises(ArtifactError) as err:
            receive(org2, ref, consortium, payload_size=len(PAYLOAD))
        assert err.value.code == TOO_LARGE and err.value.size == 1 << 40 and err.value.limit < 200
        assert handler.written == 0 and nothing_kept(org2)
        # without the signed size (a record written before sizes were signed) the node's maximum holds
        with pytest.raises(ArtifactError) as err:
            receive(recipient(tmp_path, consortium, srv.url), ref, consortium)
        assert err.value.code == TOO_LARGE and err.value.limit == DEFAULT_MAX_ARTIFACT_BYTES
    finally:
        srv.stop()


def test_the_configured_maximum_bounds_every_fetch(tmp_path, consortium):
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    big = store.put(os.urandom(3 << 20)).digest
    srv = ArtifactServer(("127.0.1.1", 0), store, consortium, StaticReaders({big: ["Org2MSP"]})).start()
    try:
        small = ArtifactClient(srv.url, "Org1MSP", ClientTLS(consortium, "Org2MSP"), max_bytes=1 << 20)
        for fetch in (lambda: small.get(big), lambda: small.get(big, 3 << 20)):
            with pytest.raises(ArtifactError) as err:
                fetch()
            assert err.value.code == TOO_LARGE and err.value.limit == 1 << 20
            assert "max_artifact_bytes" in str(err.value)
        dest = ArtifactStore(
            tmp_path / "org2",
            "Org2MSP",
            locations=Locations(
                ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": srv.url}, max_bytes=1 << 20
            ),
        )
        with pytest.raises(ArtifactError):
            dest.fetch_into("Org1MSP", big)
        assert nothing_kept(dest)
        roomy = ArtifactClient(srv.url, "Org1MSP", ClientTLS(consortium, "Org2MSP"), max_bytes=4 << 20)
        assert roomy.get(big, 3 << 20) == store.get(big)
    finally:
        srv.stop()
