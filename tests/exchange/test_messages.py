"""The message index: one small file per (process, round, recipient) in the sender's own store."""

from __future__ import annotations

import json

import pytest

from exchange import messages
from exchange.errors import ArtifactCorrupted, ArtifactNotFound
from exchange.store import ArtifactStore, MessageRef
from wire.canonical import sha256_digest

PAYLOAD = sha256_digest(b"payload")


def _indexed(tmp_path, pid="p/1"):
    store = ArtifactStore(tmp_path, "Org1MSP")
    ref = MessageRef("Org1MSP", "Org2MSP", PAYLOAD, store.put(b"sealed for Org2"))
    messages.write_entry(store, pid, 7, ref)
    return store, ref


def test_an_entry_lies_in_the_senders_store(tmp_path):
    store, ref = _indexed(tmp_path)
    path = tmp_path / "Org1MSP" / "messages" / "p_1" / "000007" / "Org2MSP.json"
    assert messages.entry_path(store, "p/1", 7, "Org2MSP") == path
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text()) == {"payload_digest": PAYLOAD, "stored": ref.stored.__dict__}
    assert messages.read_entry(store, "p/1", 7, "Org2MSP") == json.loads(path.read_text())
    assert messages.locate(store, "p/1", 7, "Org2MSP", PAYLOAD) == ref


def test_a_message_of_another_sender_is_not_indexed_here(tmp_path):
    store = ArtifactStore(tmp_path, "Org1MSP")
    foreign = MessageRef("Org3MSP", "Org2MSP", PAYLOAD, store.put(b"x"))
    with pytest.raises(ValueError, match="Org3MSP"):
        messages.write_entry(store, "p", 1, foreign)
    assert not (tmp_path / "Org3MSP").exists()


def test_missing_other_and_malformed_entries(tmp_path):
    store, _ = _indexed(tmp_path)
    assert messages.read_entry(store, "p/1", 8, "Org2MSP") is None
    with pytest.raises(ArtifactNotFound):
        messages.locate(store, "p/1", 8, "Org2MSP", PAYLOAD)
    with pytest.raises(ArtifactCorrupted, match="the ledger names"):
        messages.locate(store, "p/1", 7, "Org2MSP", sha256_digest(b"another"))
    path = messages.entry_path(store, "p/1", 7, "Org2MSP")
    path.write_text("{not json")
    with pytest.raises(ArtifactCorrupted, match="not JSON"):
        messages.read_entry(store, "p/1", 7, "Org2MSP")
    path.write_text(json.dumps({"payload_digest": PAYLOAD}))
    with pytest.raises(ArtifactCorrupted, match="no stored artifact"):
        messages.locate(store, "p/1", 7, "Org2MSP", PAYLOAD)
