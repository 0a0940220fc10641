"""Journey over a process really run by the executor's node agents (sandbox runtime, the
average-consensus image): the audit index, lineage verification, model download with the
executor's encryption convention, and the offline audit bundle all hold on real records."""

from __future__ import annotations

import json

from api.follower import sync
from audit.bundles import export_bundle, verify_bundle
from audit.verification import verify_model
from tests.api.conftest import make_gateway

ORGS = ["Org1MSP", "Org2MSP", "Org3MSP"]


def test_lineage_of_an_executed_model_verifies(executed, tmp_path):
    from api.index import AuditIndex

    ix = AuditIndex(tmp_path / "ix.db")
    client = executed.clients["Org2MSP"]
    sync(ix, client)
    assert ix.process("p-exec")["status"] == "completed" and ix.executions("p-exec").total == 9
    lineage = ix.lineage("p-exec:Org2MSP")
    assert lineage["root"] == "p-exec/3/Org2MSP" and len(lineage["nodes"]) > 3
    assert any(e["kind"] == "message" for e in lineage["edges"])
    report = verify_model(client, "p-exec:Org2MSP", index=ix)
    assert report.ok, report.failures


def test_download_of_an_executed_model(executed, tmp_path):
    from fastapi.testclient import TestClient

    from api.gateway import create_app

    gw = make_gateway(executed, "Org3MSP", tmp_path / "gw")
    token = gw.tokens.issue("User1")
    with TestClient(create_app(gw)) as http:
        http.headers["Authorization"] = f"Bearer {token}"
        r = http.get("/api/v1/models/p-exec:Org1MSP/download")
        assert r.status_code == 200, r.text
        record = json.loads(
            executed.ledger.evaluate(executed.consortium.identity("Org3MSP"), "Model:get", "p-exec:Org1MSP")
        )
        import hashlib

        assert "sha256:" + hashlib.sha256(r.content).hexdigest() == record["digest"]
        assert http.post("/api/v1/models/p-exec:Org1MSP/verify").json()["ok"]
    gw.index.close()


def test_audit_bundle_of_an_executed_model(executed, tmp_path):
    cons = executed.consortium
    cas = {o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in cons.organisations}
    summary = export_bundle(
        tmp_path / "b",
        executed.clients["Org1MSP"],
        "p-exec:Org1MSP",
        signers={o: cons.identity(o) for o in ORGS},
        ca_certificates=cas,
    )
    assert summary["attestations"] == 9
    report = verify_bundle(tmp_path / "b", cas)
    assert report.ok, report.failures
