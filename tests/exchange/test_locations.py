"""The one locations resolver: an organisation hosted in this process first, then an explicit endpoint,
then its membership record on the ledger (TLS CA checked); a service out of reach is waited for and its
record read again; nothing else is a location."""

from __future__ import annotations

import threading
import time

import pytest

from exchange import messages
from exchange.client import ArtifactClient
from exchange.errors import ArtifactForbidden, ArtifactUnreachable, LocationRefused, LocationUnknown
from exchange.locations import Locations, parse_endpoints, publish_own_membership, tls_ca_digest
from exchange.readers import StaticReaders
from exchange.service import ArtifactServer, ArtifactService, HostedPeer, HostedServices
from exchange.store import ArtifactStore, MessageRef
from exchange.tls import ClientTLS
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger

PAYLOAD = "sha256:" + "ab" * 32


@pytest.fixture
def ledger(tmp_path, consortium):
    led = EmbeddedLedger(tmp_path / "ledger.sqlite", consortium)
    yield led
    led.close()


def test_endpoints_found_on_the_ledger(ledger, consortium):
    """An endpoint is published once (re-publishing the same is a no-op), found by the others, overridden
    by an explicit mapping, and refused when its TLS CA digest is not the one trusted."""
    org1, org2 = (ConsortiaClient(ledger, consortium.identity(o)) for o in ("Org1MSP", "Org2MSP"))
    locations = Locations(ClientTLS(consortium, "Org2MSP"), client=org2, miss_ttl=0)
    assert locations.endpoint("Org1MSP") is None
    with pytest.raises(LocationUnknown):
        locations.peer("Org1MSP")
    first = publish_own_membership(org1, consortium, "https://127.0.1.1:8443")
    assert publish_own_membership(org1, consortium, "https://127.0.1.1:8443").tx_id == first.tx_id
    assert first.tls_ca_digest == tls_ca_digest(consortium, "Org1MSP")
    assert locations.endpoint("Org1MSP") == "https://127.0.1.1:8443"
    peer = locations.peer("Org1MSP")
    assert isinstance(peer, ArtifactClient) and peer.owner == "Org1MSP" and locations.peer("Org1MSP") is peer
    moved = publish_own_membership(org1, consortium, "https://127.0.1.1:9443")
    assert moved.version == first.version + 1
    assert locations.endpoint("Org1MSP") == "https://127.0.1.1:8443"  # kept for the run ...
    locations.unreachable("Org1MSP")
    assert locations.endpoint("Org1MSP") == "https://127.0.1.1:9443"  # ... until it cannot be reached
    assert locations.peer("Org1MSP").endpoint == "https://127.0.1.1:9443"
    override = Locations(
        ClientTLS(consortium, "Org2MSP"), client=org2, endpoints={"Org1MSP": "https://127.0.1.1:7000"}
    )
    assert override.endpoint("Org1MSP") == "https://127.0.1.1:7000"
    org1.publish_membership("https://127.0.1.1:9443", "sha256:" + "00" * 32)
    with pytest.raises(LocationRefused, match="TLS CA"):
        Locations(ClientTLS(consortium, "Org2MSP"), client=org2).endpoint("Org1MSP")


def test_a_missing_record_is_asked_again_after_a_while(ledger, consortium):
    org1, org2 = (ConsortiaClient(ledger, consortium.identity(o)) for o in ("Org1MSP", "Org2MSP"))
    locations = Locations(ClientTLS(consortium, "Org2MSP"), client=org2, miss_ttl=60)
    assert locations.endpoint("Org1MSP") is None
    publish_own_membership(org1, consortium, "https://127.0.1.1:8443")
    assert locations.endpoint("Org1MSP") is None  # remembered as missing
    locations.miss_ttl = 0
    assert locations.endpoint("Org1MSP") == "https://127.0.1.1:8443"


def test_an_organisation_hosted_here_comes_first(tmp_path, consortium):
    hosted = HostedServices()
    hosted.serve(ArtifactService(ArtifactStore(tmp_path, "Org1MSP"), StaticReaders({})))
    locations = Locations(
        ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": "https://127.0.1.1:8443"}, hosted=hosted
    )
    peer = locations.peer("Org1MSP")
    assert isinstance(peer, HostedPeer) and peer.caller == "Org2MSP"
    with pytest.raises(LocationUnknown):  # neither hosted here nor given, and no ledger to ask
        locations.peer("Org3MSP")
    locations.endpoints["Org3MSP"] = "https://127.0.3.1:8443"
    assert isinstance(locations.peer("Org3MSP"), ArtifactClient)


def test_peer_endpoints_from_the_command_line():
    assert parse_endpoints(["Org2MSP=https://127.0.2.1:8443"]) == {"Org2MSP": "https://127.0.2.1:8443"}
    assert parse_endpoints(None) == {}
    for bad in (
        "Org2MSP=/srv/org2/artifacts",
        "Org2MSP=file:///srv/org2",
        "https://127.0.2.1:8443",
        "=https://x:1",
    ):
        with pytest.raises(LocationRefused):  # never a path
            parse_endpoints([bad])


def _indexed_message(tmp_path):
    """Org1's store with a sealed message to Org2 indexed for round 1 of process p; (store, digest)."""
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    ref = store.put(b"sealed for Org2")
    messages.write_entry(store, "p", 1, MessageRef("Org1MSP", "Org2MSP", PAYLOAD, ref))
    return store, ref.digest


def _fetch_message(peer):
    entry = peer.message_entry("p", 1, "Org2MSP")
    return peer.get(entry["stored"]["digest"])


def test_a_sender_whose_node_is_down_is_waited_for(tmp_path, consortium):
    """The sender's service is down when the recipient asks (its node restarting): the recipient waits
    with backoff and gets the message once the service is back on its address."""
    store, digest = _indexed_message(tmp_path)
    readers = StaticReaders({digest: ["Org2MSP"]})
    first = ArtifactServer(("127.0.1.1", 0), store, consortium, readers).start()
    address = first.server_address
    first.stop()  # the node goes down
    locations = Locations(ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": first.url}, patience=60)
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(sealed=locations.reach("Org1MSP", _fetch_message)))
    t0 = time.monotonic()
    t.start()
    time.sleep(2.0)
    assert t.is_alive() and not got  # still waiting for Org1
    again = ArtifactServer(address, store, consortium, readers).start()  # the node is back
    try:
        t.join(30)
        assert got["sealed"] == b"sealed for Org2"
        assert time.monotonic() - t0 >= 2.0
    finally:
        again.stop()
        locations.close()


def test_a_sender_that_moved_is_found_again_on_the_ledger(tmp_path, consortium, ledger):
    """A node restarted on another port publishes its new endpoint: a recipient that cached the old one
    reads the record again once the old address cannot be reached."""
    store, digest = _indexed_message(tmp_path)
    readers = StaticReaders({digest: ["Org2MSP"]})
    org1, org2 = (ConsortiaClient(ledger, consortium.identity(o)) for o in ("Org1MSP", "Org2MSP"))
    old = ArtifactServer(("127.0.1.1", 0), store, consortium, readers).start()
    publish_own_membership(org1, consortium, old.url)
    locations = Locations(ClientTLS(consortium, "Org2MSP"), client=org2, patience=30)
    assert locations.reach("Org1MSP", _fetch_message) == b"sealed for Org2"
    old.stop()
    new = ArtifactServer(("127.0.1.1", 0), store, consortium, readers).start()
    try:
        publish_own_membership(org1, consortium, new.url)
        assert locations.reach("Org1MSP", _fetch_message) == b"sealed for Org2"
        assert locations.endpoint("Org1MSP") == new.url
    finally:
        new.stop()
        locations.close()


def test_a_sender_that_stays_unreachable_is_given_up_after_the_patience(tmp_path, consortium):
    store, digest = _indexed_message(tmp_path)
    srv = ArtifactServer(("127.0.1.1", 0), store, consortium, StaticReaders({digest: ["Org2MSP"]})).start()
    srv.stop()
    locations = Locations(ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": srv.url}, patience=1.5)
    with pytest.raises(ArtifactUnreachable, match=r"Org1MSP.*still unreachable after 2 s"):
        locations.reach("Org1MSP", _fetch_message)
    # an answer is not waited for: Org3 asking for Org2's message is refused at once
    srv = ArtifactServer(("127.0.1.1", 0), store, consortium, StaticReaders({digest: ["Org2MSP"]})).start()
    try:
        wrong = Locations(ClientTLS(consortium, "Org3MSP"), endpoints={"Org1MSP": srv.url}, patience=60)
        t0 = time.monotonic()
        with pytest.raises(ArtifactForbidden):
            wrong.reach("Org1MSP", _fetch_message)
        assert time.monotonic() - t0 < 30
    finally:
        srv.stop()
