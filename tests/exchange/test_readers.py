"""Who may read an organisation's artifacts, from the ledger: a message its recipient only once the
sender's completed record names it, a model ciphertext its access list (a revocation at once), the
organisation itself everything, anyone else nothing."""

from __future__ import annotations

import json

from exchange import messages
from exchange.readers import LedgerReaders, StaticReaders
from exchange.sealing import seal
from tests.exchange.conftest import ORGS
from wire.canonical import sha256_digest


class CountingClient:
    """Org1's client, counting the execution records it reads."""

    def __init__(self, client):
        self._client, self.executions = client, 0

    def get_execution(self, *args):
        self.executions += 1
        return self._client.get_execution(*args)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_message_is_readable_by_its_recipient_only(world):
    clients, store, sent, _ = world
    readers = LedgerReaders(clients["Org1MSP"], store)
    for recipient, ref in sent.items():
        stored = ref.stored.digest
        assert [o for o in ORGS if readers.may_read(o, stored)] == ["Org1MSP", recipient]
        entry = messages.read_entry(store, "p", 1, recipient)
        assert [o for o in ORGS if readers.may_read_message(o, "p", 1, recipient, entry)] == [recipient]


def test_an_entry_the_ledger_does_not_confirm_is_readable_by_nobody(world):
    clients, store, sent, _ = world
    readers = LedgerReaders(clients["Org1MSP"], store)
    stray = store.put(b"not on the ledger").digest
    entry = {"payload_digest": stray, "stored": {"digest": stray}}
    (store.home / "messages" / "p" / "000009").mkdir(parents=True)
    (store.home / "messages" / "p" / "000009" / "Org2MSP.json").write_text(json.dumps(entry))
    assert [o for o in ORGS if readers.may_read(o, stray)] == ["Org1MSP"]
    assert not readers.may_read_message("Org2MSP", "p", 9, "Org2MSP", entry)
    forged = {"payload_digest": sha256_digest(b"other"), "stored": sent["Org2MSP"].stored.__dict__}
    assert not readers.may_read_message("Org2MSP", "p", 1, "Org2MSP", forged)  # not what the record names
    assert not readers.may_read_message("Org2MSP", "p", 1, "Org2MSP", {"payload_digest": 1})  # malformed


def test_a_completed_record_is_read_once(world):
    clients, store, sent, _ = world
    counting = CountingClient(clients["Org1MSP"])
    readers = LedgerReaders(counting, store)
    for recipient in sent:
        entry = messages.read_entry(store, "p", 1, recipient)
        assert readers.may_read_message(recipient, "p", 1, recipient, entry)
        assert readers.may_read(recipient, sent[recipient].stored.digest)
    assert counting.executions == 1


def test_a_model_is_readable_by_its_access_list_and_a_revocation_counts_at_once(world, consortium):
    clients, store, _, ct = world
    readers = LedgerReaders(clients["Org1MSP"], store)
    assert [o for o in ORGS if readers.may_read(o, ct)] == ["Org1MSP", "Org2MSP", "Org3MSP"]
    new = store.put(b"re-encrypted").digest
    keys = {o: seal(consortium.encryption_certificate(o), bytes(32)) for o in ("Org1MSP", "Org2MSP")}
    clients["Org1MSP"].revoke_model("p:Org1MSP", "Org3MSP", new, keys)
    assert [o for o in ORGS if readers.may_read(o, new)] == ["Org1MSP", "Org2MSP"]
    assert not readers.may_read("Org2MSP", ct)  # the old ciphertext is no longer the model's


def test_static_readers():
    d = sha256_digest(b"x")
    readers = StaticReaders({d: ["Org2MSP"]})
    assert readers.may_read("Org2MSP", d) and not readers.may_read("Org3MSP", d)
    entry = {"payload_digest": sha256_digest(b"p"), "stored": {"digest": d}}
    assert readers.may_read_message("Org2MSP", "p", 1, "Org2MSP", entry)
    assert not readers.may_read_message("Org3MSP", "p", 1, "Org2MSP", entry)
    assert not readers.may_read_message("Org2MSP", "p", 1, "Org2MSP", {"stored": None})
