"""Verification of a model's lineage against the ledger, and the pure checks it is made of."""

from __future__ import annotations

import copy
import json

import pytest

from api.follower import sync
from api.index import AuditIndex
from api.verification import Report, check_execution, check_links, check_model, verify_model_on_ledger


@pytest.fixture(scope="module")
def ledger_view(world):
    ev = lambda fn, *a: json.loads(world.ledger.evaluate(world.consortium.identity("Org1MSP"), fn, *a))  # noqa: E731
    process = ev("LearningProcess:get", "proc-0")
    executions = ev("ExecutionRecord:query", json.dumps({"process_id": "proc-0"}))
    model = ev("Model:get", "proc-0:Org2MSP")
    return process, executions, model


def test_the_ledger_lineage_verifies(world, tmp_path):
    ix = AuditIndex(tmp_path / "ix.db")
    sync(ix, world.clients["Org1MSP"])
    report = verify_model_on_ledger(world.clients["Org1MSP"], ix, "proc-0:Org2MSP")
    assert report.ok, report.failures
    assert sum(c["check"].startswith("execution proc-0/") for c in report.checks) == 6


def test_a_tampered_index_is_caught(world, tmp_path):
    ix = AuditIndex(tmp_path / "ix.db")
    sync(ix, world.clients["Org1MSP"])
    rec = ix.execution("proc-0", 2, "Org2MSP")
    rec["result"]["metrics"]["loss"] = 0.0
    from chaincode.canonical import canonical_json

    with ix.transaction() as t:
        t._con.execute(
            "UPDATE executions SET record = ? WHERE process_id = 'proc-0' AND round = 2 AND "
            "organisation = 'Org2MSP'",
            (canonical_json(rec).decode(),),
        )
    report = verify_model_on_ledger(world.clients["Org1MSP"], ix, "proc-0:Org2MSP")
    assert [c["check"] for c in report.failures] == ["index matches ledger: proc-0/2/Org2MSP"]


def test_check_execution_refusals(ledger_view):
    process, executions, _ = ledger_view
    e = executions[0]
    assert check_execution(e, process)
    bad = copy.deepcopy(e)
    bad["result"]["metrics"]["loss"] = 42.0
    with pytest.raises(Exception, match="task signature"):
        check_execution(bad, process)
    with pytest.raises(ValueError, match="pins"):
        check_execution(e, dict(process, image_digest="sha256:" + "0" * 64))
    with pytest.raises(ValueError, match="not completed"):
        check_execution(dict(e, status="running"), process)


def test_check_links_refuses_a_message_never_sent(ledger_view):
    _, executions, _ = ledger_view
    assert "message links" in check_links(executions)
    broken = copy.deepcopy(executions)
    target = next(e for e in broken if e["round"] == 3)
    target["result"]["inputs"]["messages"][0]["digest"] = "sha256:" + "1" * 64
    with pytest.raises(ValueError, match="never published"):
        check_links(broken)
    stale = copy.deepcopy(executions)
    target = next(e for e in stale if e["round"] == 2)
    target["result"]["inputs"]["state"] = "sha256:" + "2" * 64
    with pytest.raises(ValueError, match="not an earlier output state"):
        check_links(stale)


def test_check_model(ledger_view):
    process, executions, model = ledger_view
    assert check_model(model, process, executions)
    with pytest.raises(ValueError, match="is not the digest"):
        check_model(dict(model, digest="sha256:" + "3" * 64), process, executions)
    with pytest.raises(ValueError, match="no completed last-round"):
        check_model(model, process, [e for e in executions if e["round"] < 3])


def test_report():
    r = Report("x")
    assert not r.ok  # no checks is not a pass
    r.add("a", True)
    r.run("b", lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert not r.ok and [c.row() for c in r.failures] == [{"check": "b", "ok": False, "detail": "boom"}]
    assert r.failures[0]["check"] == "b" and r.failures[0].subject == "b"
    assert r.to_dict()["failures"] == 1 and r.to_dict()["checks"][0] == {
        "check": "a",
        "ok": True,
        "detail": "",
    }
