"""The content-addressed store: every read verified against its digest; states and models sealed to
their owner, messages to their recipient; another organisation's artifacts only through its service,
never its files."""

from __future__ import annotations

import os

import pytest

from exchange import messages
from exchange.errors import (
    ArtifactCorrupted,
    ArtifactForbidden,
    ArtifactNotFound,
    DecryptionError,
    LocationRefused,
    LocationUnknown,
)
from exchange.locations import Locations
from exchange.readers import StaticReaders
from exchange.service import ArtifactService, HostedServices
from exchange.store import (
    ArtifactRef,
    ArtifactSource,
    ArtifactStore,
    MessageRef,
    fetch_verified,
    open_sealed_message,
)
from exchange.tls import ClientTLS
from wire.canonical import sha256_digest


def test_put_get_is_content_addressed_and_idempotent(tmp_path):
    s = ArtifactStore(tmp_path, "Org1MSP")
    ref = s.put(b"state bytes")
    assert ref.digest == sha256_digest(b"state bytes") and ref.size == 11 and ref.producer == "Org1MSP"
    assert s.put(b"state bytes") == ref and isinstance(s, ArtifactSource)
    assert s.get(ref.digest) == b"state bytes" and s.has(ref.digest)
    assert s.fetch("Org1MSP", ref.digest) == b"state bytes"  # its own: read here
    assert s.fetch_into("Org1MSP", ref.digest) == s.path(ref.digest)
    with pytest.raises(ArtifactNotFound):
        s.get(sha256_digest(b"other"))
    with pytest.raises(ArtifactNotFound):  # its own and absent: never asked of anyone else
        s.fetch_into("Org1MSP", sha256_digest(b"other"))
    for bad in ("sha256:xyz", "sha256:../../etc/passwd"):
        with pytest.raises(ValueError):
            s.get(bad)


def test_retrieval_detects_altered_bytes(tmp_path):
    s = ArtifactStore(tmp_path, "Org1MSP")
    ref = s.put(b"payload")
    path = s.path(ref.digest)
    path.write_bytes(b"paYload")
    with pytest.raises(ArtifactCorrupted):
        s.get(ref.digest)
    with pytest.raises(ArtifactCorrupted):
        fetch_verified(s, ref.digest)


def test_invalid_organisation_names_are_refused(tmp_path):
    for bad in ("", "../x", ".hidden"):
        with pytest.raises(ValueError):
            ArtifactStore(tmp_path, bad)


def test_files_are_0600_in_0700_directories(tmp_path):
    """Issue 14 item 6: nothing in an organisation's store is readable by other users."""
    s = ArtifactStore.at(tmp_path / "Org1MSP", create=False)
    ref = s.put(b"sealed bytes")
    assert s.path(ref.digest).stat().st_mode & 0o777 == 0o600
    for d in (tmp_path / "Org1MSP", s.base, s.path(ref.digest).parent):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert s.delete(ref.digest) and not s.has(ref.digest) and not s.delete(ref.digest)


def test_a_served_store_names_its_service_as_location(tmp_path):
    assert ArtifactStore(tmp_path, "Org1MSP", endpoint="https://127.0.1.1:8443").put(b"x").location == (
        "https://127.0.1.1:8443"
    )
    assert ArtifactStore(tmp_path, "Org1MSP").put(b"x").location == ""  # serves nothing: no location


def test_any_object_with_get_plugs_in():
    class Memory:
        def __init__(self):
            self.blobs = {sha256_digest(b"x"): b"x", sha256_digest(b"y"): b"z"}

        def get(self, digest):
            return self.blobs[digest]

    assert fetch_verified(Memory(), sha256_digest(b"x")) == b"x"
    with pytest.raises(ArtifactNotFound):
        fetch_verified(Memory(), sha256_digest(b"absent"))
    with pytest.raises(ArtifactCorrupted):
        fetch_verified(Memory(), sha256_digest(b"y"))


def test_private_artifacts_are_sealed_to_their_owner(tmp_path, consortium):
    s = ArtifactStore(tmp_path, "Org1MSP")
    state = b"private state of Org1 " * 20
    digest = s.put_private(state, consortium.encryption_certificate("Org1MSP"))
    assert digest == sha256_digest(state) and s.has_private(digest)
    assert s.put_private(state, consortium.encryption_certificate("Org1MSP")) == digest  # idempotent
    path = s.private_path(digest)
    assert state not in path.read_bytes() and path.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes()[:4] == b"CSE2"
    assert all(state not in f.read_bytes() for f in tmp_path.rglob("*") if f.is_file())
    assert s.get_private(digest, consortium.encryption_key("Org1MSP")) == state
    with pytest.raises(ArtifactCorrupted):  # another organisation's key does not open it
        s.get_private(digest, consortium.encryption_key("Org2MSP"))
    # a sealed blob moved under another digest (or another organisation's store) does not open
    other = sha256_digest(b"other")
    s.private_path(other).parent.mkdir(parents=True, exist_ok=True)
    s.private_path(other).write_bytes(path.read_bytes())
    with pytest.raises(ArtifactCorrupted):
        s.get_private(other, consortium.encryption_key("Org1MSP"))
    moved = ArtifactStore(tmp_path, "Org2MSP")
    moved.private_path(digest).parent.mkdir(parents=True, exist_ok=True)
    moved.private_path(digest).write_bytes(path.read_bytes())
    with pytest.raises(ArtifactCorrupted):
        moved.get_private(digest, consortium.encryption_key("Org1MSP"))
    with pytest.raises(ArtifactNotFound):
        s.get_private(sha256_digest(b"absent"), consortium.encryption_key("Org1MSP"))


def _sent(tmp_path, consortium, payload=b"secret share", rnd=3):
    sender = ArtifactStore(tmp_path, "Org1MSP")
    ref = sender.put_message(
        payload,
        process_id="p1",
        round=rnd,
        recipient="Org2MSP",
        recipient_certificate=consortium.encryption_certificate("Org2MSP"),
    )
    return sender, ref


def test_message_opens_only_for_its_recipient(tmp_path, consortium):
    sender, ref = _sent(tmp_path, consortium)
    assert ref.payload_digest == sha256_digest(b"secret share") and ref.sender == "Org1MSP"
    sealed = sender.get(ref.stored.digest)
    assert b"secret share" not in sealed

    def open_with(org, message=ref, rnd=3):
        key = consortium.encryption_key(org)
        return open_sealed_message(sealed, message, process_id="p1", round=rnd, recipient_key=key)

    assert open_with("Org2MSP") == b"secret share"
    with pytest.raises(DecryptionError):  # a non-recipient cannot open it, even posing as the recipient
        open_with("Org3MSP")
    with pytest.raises(DecryptionError):  # nor replay it into another round ...
        open_with("Org2MSP", rnd=2)
    forged = MessageRef("Org3MSP", "Org2MSP", ref.payload_digest, ref.stored)  # ... or another sender
    with pytest.raises(DecryptionError):
        open_with("Org2MSP", forged)


def _hosted(tmp_path, consortium, sender, ref, readers=None):
    """Org1's service hosted in this process, its message indexed for round 3; Org2's store reaching it."""
    messages.write_entry(sender, "p1", 3, ref)
    hosted = HostedServices()
    hosted.serve(ArtifactService(sender, readers or StaticReaders({ref.stored.digest: ["Org2MSP"]})))
    locations = Locations(ClientTLS(consortium, "Org2MSP"), hosted=hosted)
    return ArtifactStore(tmp_path / "org2", "Org2MSP", locations=locations)


def test_a_message_is_received_through_the_senders_service(tmp_path, consortium):
    sender, ref = _sent(tmp_path, consortium)
    recipient = _hosted(tmp_path, consortium, sender, ref)
    key = consortium.encryption_key("Org2MSP")
    got = recipient.receive_message(
        "Org1MSP", process_id="p1", round=3, payload_digest=ref.payload_digest, recipient_key=key
    )
    assert got == b"secret share"
    assert not recipient.has(ref.stored.digest)  # handed over in memory, not copied
    with pytest.raises(ArtifactCorrupted, match="the ledger names"):  # the sender indexes another message
        recipient.receive_message(
            "Org1MSP", process_id="p1", round=3, payload_digest=sha256_digest(b"x"), recipient_key=key
        )
    with pytest.raises(ArtifactForbidden):  # no such entry: refused, nothing leaks
        recipient.receive_message(
            "Org1MSP", process_id="p1", round=4, payload_digest=ref.payload_digest, recipient_key=key
        )
    with pytest.raises(LocationUnknown):  # Org3 is neither hosted here nor on a ledger
        recipient.receive_message(
            "Org3MSP", process_id="p1", round=3, payload_digest=ref.payload_digest, recipient_key=key
        )


def test_an_altered_message_in_the_senders_store_is_refused(tmp_path, consortium):
    sender, ref = _sent(tmp_path, consortium)
    recipient = _hosted(tmp_path, consortium, sender, ref)
    path = sender.path(ref.stored.digest)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactCorrupted):
        recipient.receive_message(
            "Org1MSP",
            process_id="p1",
            round=3,
            payload_digest=ref.payload_digest,
            recipient_key=consortium.encryption_key("Org2MSP"),
        )


def test_another_organisations_files_are_never_opened(tmp_path, consortium):
    """Org1's artifact lies in Org1's folder beside Org2's, and a reference names that folder as its
    location: Org2's store still reads only its own files. Without a location for Org1 it cannot have
    the bytes (LocationUnknown); a path is refused as a location (LocationRefused)."""
    org1 = ArtifactStore(tmp_path, "Org1MSP")
    ref = org1.put(b"Org1's model ciphertext")
    by_path = ArtifactRef(ref.digest, ref.size, "Org1MSP", org1.home.resolve().as_uri())
    assert by_path.location.startswith("file://") and (tmp_path / "Org1MSP").is_dir()
    alone = ArtifactStore(tmp_path, "Org2MSP")  # no locations at all
    with pytest.raises(LocationUnknown):
        alone.fetch(by_path.producer, by_path.digest)
    with pytest.raises(LocationUnknown):
        alone.fetch_into(by_path.producer, by_path.digest)
    with_ledgerless = ArtifactStore(
        tmp_path, "Org2MSP", locations=Locations(ClientTLS(consortium, "Org2MSP"))
    )
    with pytest.raises(LocationUnknown, match="no artifact location"):
        with_ledgerless.fetch("Org1MSP", ref.digest)
    for path_location in (by_path.location, str(org1.home), "/srv/org1/artifacts", "http://127.0.1.1:8443"):
        with pytest.raises(LocationRefused):
            Locations(ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": path_location})
    assert not alone.has(ref.digest) and not with_ledgerless.has(ref.digest)


def test_a_model_is_fetched_into_the_store_from_its_owners_service(tmp_path, consortium):
    org1 = ArtifactStore(tmp_path, "Org1MSP")
    ref = org1.put(os.urandom(3 * (1 << 20) + 5))  # several chunks
    hosted = HostedServices()
    hosted.serve(ArtifactService(org1, StaticReaders({ref.digest: ["Org2MSP"]})))
    org2 = ArtifactStore(
        tmp_path, "Org2MSP", locations=Locations(ClientTLS(consortium, "Org2MSP"), hosted=hosted)
    )
    path = org2.fetch_into("Org1MSP", ref.digest)
    assert path == org2.path(ref.digest) and path.stat().st_mode & 0o777 == 0o600
    assert org2.get(ref.digest) == org1.get(ref.digest) and org2.fetch("Org1MSP", ref.digest) == org1.get(
        ref.digest
    )
    org3 = ArtifactStore(
        tmp_path, "Org3MSP", locations=Locations(ClientTLS(consortium, "Org3MSP"), hosted=hosted)
    )
    with pytest.raises(ArtifactForbidden):  # not a reader
        org3.fetch_into("Org1MSP", ref.digest)
    assert not [p for p in org3.base.rglob("*") if p.is_file()]  # nothing kept, no temporary file
