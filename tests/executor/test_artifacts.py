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
    ref = sender.put_message(b"secret share", process_id="p1", round=3, recipient="Org2MSP",
                             recipient_certificate=consortium.encryption_certificate("Org2MSP"))
    assert ref.payload_digest == sha256_digest(b"secret share")
    sealed = sender.get(ref.stored.digest)
    assert b"secret share" not in sealed
    assert open_message(ref, process_id="p1", round=3, recipient="Org2MSP",
                        recipient_key=consortium.encryption_key("Org2MSP")) == b"secret share"
    # a non-recipient organisation cannot decrypt it, even when it pretends to be the recipient
    with pytest.raises(DecryptionError):
        open_message(ref, process_id="p1", round=3, recipient="Org2MSP",
                     recipient_key=consortium.encryption_key("Org3MSP"))
    with pytest.raises(DecryptionError):
        open_message(ref, process_id="p1", round=3, recipient="Org3MSP",
                     recipient_key=consortium.encryption_key("Org3MSP"))


def test_message_cannot_be_replayed_into_another_round_or_sender(tmp_path, consortium):
    sender = ArtifactStore(tmp_path, "Org1MSP")
    ref = sender.put_message(b"m", process_id="p1", round=1, recipient="Org2MSP",
                             recipient_certificate=consortium.encryption_certificate("Org2MSP"))
    key = consortium.encryption_key("Org2MSP")
    with pytest.raises(DecryptionError):
        open_message(ref, process_id="p1", round=2, recipient="Org2MSP", recipient_key=key)
    forged = type(ref)(sender="Org3MSP", recipient="Org2MSP", payload_digest=ref.payload_digest, stored=ref.stored)
    with pytest.raises(DecryptionError):
        open_message(forged, process_id="p1", round=1, recipient="Org2MSP", recipient_key=key)
