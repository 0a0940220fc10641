"""Content-addressed artifact store; messages sealed to their recipient organisation."""

from __future__ import annotations

import os

import pytest

from executor.artifacts import ArtifactStore, open_message, sha256_digest
from executor.errors import ArtifactCorrupted, ArtifactNotFound
from ledger.envelope import DecryptionError


def test_put_get_is_content_addressed_and_idempotent(tmp_path):
    s = ArtifactStore(tmp_path, "Org1MSP")
    ref = s.put(b"state bytes")
    assert ref.digest == sha256_digest(b"state bytes") and ref.size == 11 and ref.producer == "Org1MSP"
    assert s.put(b"state bytes") == ref
    assert s.get(ref.digest) == b"state bytes" and s.has(ref.digest)
    assert ArtifactStore.fetch(ref) == b"state bytes"
    with pytest.raises(ArtifactNotFound):
        s.get(sha256_digest(b"other"))
    with pytest.raises(ValueError):
        s.get("sha256:xyz")


def test_retrieval_detects_altered_bytes(tmp_path):
    s = ArtifactStore(tmp_path, "Org1MSP")
    ref = s.put(b"payload")
    path = s._path(ref.digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"paYload")
    with pytest.raises(ArtifactCorrupted):
        s.get(ref.digest)


def test_invalid_organisation_names_are_refused(tmp_path):
    for bad in ("", "../x", ".hidden"):
        with pytest.raises(ValueError):
            ArtifactStore(tmp_path, bad)


def test_message_opens_only_for_its_recipient(tmp_path, consortium):
    sender = ArtifactStore(tmp_path, "Org1MSP")
    ref = sender.put_message(
        b"secret share",
        process_id="p1",
        round=3,
        recipient="Org2MSP",
        recipient_certificate=consortium.encryption_certificate("Org2MSP"),
    )
    assert ref.payload_digest == sha256_digest(b"secret share")
    sealed = sender.get(ref.stored.digest)
    assert b"secret share" not in sealed
    assert (
        open_message(
            ref,
            process_id="p1",
            round=3,
            recipient="Org2MSP",
            recipient_key=consortium.encryption_key("Org2MSP"),
        )
        == b"secret share"
    )
    # a non-recipient organisation cannot decrypt it, even when it pretends to be the recipient
    with pytest.raises(DecryptionError):
        open_message(
            ref,
            process_id="p1",
            round=3,
            recipient="Org2MSP",
            recipient_key=consortium.encryption_key("Org3MSP"),
        )
    with pytest.raises(DecryptionError):
        open_message(
            ref,
            process_id="p1",
            round=3,
            recipient="Org3MSP",
            recipient_key=consortium.encryption_key("Org3MSP"),
        )


def test_message_cannot_be_replayed_into_another_round_or_sender(tmp_path, consortium):
    sender = ArtifactStore(tmp_path, "Org1MSP")
    ref = sender.put_message(
        b"m",
        process_id="p1",
        round=1,
        recipient="Org2MSP",
        recipient_certificate=consortium.encryption_certificate("Org2MSP"),
    )
    key = consortium.encryption_key("Org2MSP")
    with pytest.raises(DecryptionError):
        open_message(ref, process_id="p1", round=2, recipient="Org2MSP", recipient_key=key)
    forged = type(ref)(
        sender="Org3MSP", recipient="Org2MSP", payload_digest=ref.payload_digest, stored=ref.stored
    )
    with pytest.raises(DecryptionError):
        open_message(forged, process_id="p1", round=1, recipient="Org2MSP", recipient_key=key)


def test_files_are_0600_in_0700_directories(tmp_path):
    """Issue 14 item 6: nothing in an organisation's store is readable by other users."""
    s = ArtifactStore(tmp_path, "Org1MSP")
    ref = s.put(b"sealed bytes")
    assert s._path(ref.digest).stat().st_mode & 0o777 == 0o600
    for d in (tmp_path / "Org1MSP", s.base, s._path(ref.digest).parent):
        assert d.stat().st_mode & 0o777 == 0o700, d


def test_private_artifacts_are_sealed_to_their_owner(tmp_path, consortium):
    s = ArtifactStore(tmp_path, "Org1MSP")
    state = b"private state of Org1 " * 20
    digest = s.put_private(state, consortium.encryption_certificate("Org1MSP"))
    assert digest == sha256_digest(state) and s.has_private(digest)
    assert s.put_private(state, consortium.encryption_certificate("Org1MSP")) == digest  # idempotent
    path = s.private_path(digest)
    assert state not in path.read_bytes() and path.stat().st_mode & 0o777 == 0o600
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
