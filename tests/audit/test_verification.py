"""audit.verification: a model verified against the ledger -- its records, its lineage by the one
rule, each execution's history and block -- and, given, the audit index's copy and the local image.
(The artifact checks on a real process: tests/e2e/test_lineage.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from api.follower import sync
from api.index import AuditIndex
from audit.verification import transaction_locator, transaction_validity, verify_model
from chaincode.canonical import canonical_json
from ledger.client import ConsortiaClient, HistoryEntry
from tests.audit.ledgers import WithoutTransactionLookup

MODEL = "proc-0:Org2MSP"


@pytest.fixture
def index(world, tmp_path):
    ix = AuditIndex(tmp_path / "ix.db")
    sync(ix, world.clients["Org1MSP"])
    yield ix
    ix.close()


def test_the_ledger_lineage_verifies(world, index):
    report = verify_model(world.clients["Org1MSP"], MODEL, index=index)
    assert report.ok, report.failures
    assert sum(c["check"].startswith("execution proc-0/") for c in report.checks) == 6
    assert report.counts() == {
        "index": 7,
        "lineage": 1,
        "chain": 1,
        "model": 1,
        "process": 1,
        "execution": 6,
        "history": 6,
        "block": 1,
    }
    private = next(c for c in report.checks if c["check"] == "private terms")
    assert "carried, matching the on-chain hash sha256:" in private["detail"]
    assert report.facts["lineage"] == [
        "proc-0/1/Org1MSP",
        "proc-0/1/Org2MSP",
        "proc-0/1/Org3MSP",
        "proc-0/2/Org1MSP",
        "proc-0/2/Org2MSP",
        "proc-0/3/Org2MSP",
    ]
    assert report.facts["owner"] == "Org2MSP" and report.to_dict()["facts"]["model_id"] == MODEL
    [blocks] = [c for c in report.checks if c.kind == "block"]
    assert blocks.detail == "15 transactions"  # model, process, image, 6 x (create, complete)


def test_a_tampered_index_is_caught(world, index):
    rec = index.execution("proc-0", 2, "Org2MSP")
    rec["result"]["metrics"]["loss"] = 0.0
    with index.transaction() as t:
        t._con.execute(
            "UPDATE executions SET record = ? WHERE process_id = 'proc-0' AND round = 2 AND "
            "organisation = 'Org2MSP'",
            (canonical_json(rec).decode(),),
        )
    report = verify_model(world.clients["Org1MSP"], MODEL, index=index)
    assert [c["check"] for c in report.failures] == ["index matches ledger: proc-0/2/Org2MSP"]


def test_an_index_with_another_lineage_is_caught(world, index):
    class ShortLineage:
        def __getattr__(self, name: str) -> Any:
            return getattr(index, name)

        def lineage(self, model_id: str) -> dict[str, Any] | None:
            found = index.lineage(model_id)
            assert found is not None
            return dict(found, nodes=[n for n in found["nodes"] if n["id"] != "proc-0/1/Org3MSP"])

    report = verify_model(world.clients["Org1MSP"], MODEL, index=ShortLineage())
    [failed] = report.failures
    assert failed.subject == "lineage complete" and "missing ['proc-0/1/Org3MSP']" in failed.detail


def test_without_an_index_on_either_kind_of_host(world, index):
    report = verify_model(world.clients["Org3MSP"], MODEL)
    assert report.ok and "index" not in report.counts() and report.counts()["block"] == 1
    blind = ConsortiaClient(WithoutTransactionLookup(world.ledger), world.consortium.identity("Org3MSP"))
    assert transaction_locator(blind.ledger) is None
    report = verify_model(blind, MODEL)  # the blocks cannot be found: that check is not made, not passed
    assert report.ok and "block" not in report.counts()
    report = verify_model(blind, MODEL, index=index)  # the index found them, from the events it followed
    assert report.ok and report.counts()["block"] == 1


def test_transaction_validity(world, index):
    client = world.clients["Org1MSP"]
    model = client.get_model(MODEL)
    for valid in (transaction_validity(client), transaction_validity(client, index)):
        assert valid(model.tx_id) is True and valid("no-such-tx") is None
    blind = ConsortiaClient(WithoutTransactionLookup(world.ledger), world.consortium.identity("Org1MSP"))
    assert transaction_validity(blind)(model.tx_id) is None


def test_a_local_image_with_another_digest(world):
    image = world.clients["Org1MSP"].get_image("rf:1")
    report = verify_model(
        world.clients["Org1MSP"], MODEL, local_image_digest=lambda ref: "sha256:" + "0" * 64
    )
    assert [c.subject for c in report.failures] == [f"local image {image.reference}"]
    assert verify_model(world.clients["Org1MSP"], MODEL, local_image_digest=lambda ref: image.digest).ok


def test_a_record_written_more_than_once_fails_its_history(world):
    class Rewritten(ConsortiaClient):
        def execution_history(self, process_id: str, round: int, organisation: str) -> list[HistoryEntry]:
            versions = super().execution_history(process_id, round, organisation)
            return versions + versions[-1:] if (round, organisation) == (2, "Org1MSP") else versions

    client = Rewritten(world.ledger, world.consortium.identity("Org1MSP"))
    [failed] = verify_model(client, MODEL).failures
    assert failed.subject == "history proc-0/2/Org1MSP" and "completed', 'completed" in failed.detail
    assert "history" not in verify_model(client, MODEL, history=False).counts()
