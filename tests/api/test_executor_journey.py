"""Journey over a process really run by the executor's node agents (sandbox runtime, the
average-consensus image): the audit index, lineage verification, model download with the
executor's encryption convention, and the offline audit bundle all hold on real records."""

from __future__ import annotations

import json
import shutil
import threading

import pytest

from algorithms.task_runtime import save_dataset
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium
from api.bundle import export_bundle, verify_bundle
from api.follower import sync
from api.verification import verify_model_on_ledger
from tests.api.conftest import make_gateway
from tests.api.world import World

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the sandbox runtime needs bubblewrap")
ORGS = ["Org1MSP", "Org2MSP", "Org3MSP"]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from executor.images import ImageRecipe, build_bundle
    from executor.node_agent import NodeAgent
    from executor.runtimes.sandbox import SandboxRuntime
    from tests.executor.conftest import make_dataset
    root = tmp_path_factory.mktemp("executed")
    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2", "Org3"])
    led = EmbeddedLedger(root / "ledger.db", consortium, batch_timeout=0.002)
    for i, o in enumerate(ORGS):
        (root / "data" / o / "default").mkdir(parents=True)
        save_dataset(root / "data" / o / "default" / "dataset.npz", make_dataset(10 + i, shift=float(i)))
    recipe = ImageRecipe.named("average-consensus")
    image = build_bundle(recipe)
    c1 = ConsortiaClient(led, consortium.identity("Org1MSP"))
    c1.register_image("avg", "1", recipe.algorithm, image.digest, image.reference)
    c1.create_process("p-exec", "avg:1", ORGS, {"kind": "ring", "seed": 11}, 3,
                      hyperparameters={"eps": 0.3, "noise": 0.1})
    c1.start_process("p-exec")
    errors = []

    def run(org):
        try:
            NodeAgent(led, consortium.identity(org), consortium, SandboxRuntime(), root / "data" / org,
                      root / "store", root / "state").run_until_idle("p-exec", timeout=300)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(o,)) for o in ORGS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    clients = {o: ConsortiaClient(led, consortium.identity(o)) for o in ORGS}
    from api.artifacts import DirectoryArtifactStore
    w = World(consortium, led, clients, {o: DirectoryArtifactStore(root / "store" / o) for o in ORGS}, root)
    yield w
    led.close()


def test_lineage_of_an_executed_model_verifies(executed, tmp_path):
    from api.index import AuditIndex
    ix = AuditIndex(tmp_path / "ix.db")
    client = executed.clients["Org2MSP"]
    sync(ix, client)
    assert ix.process("p-exec")["status"] == "completed" and ix.executions("p-exec").total == 9
    lineage = ix.lineage("p-exec:Org2MSP")
    assert lineage["root"] == "p-exec/3/Org2MSP" and len(lineage["nodes"]) > 3
    assert any(e["kind"] == "message" for e in lineage["edges"])
    report = verify_model_on_ledger(client, ix, "p-exec:Org2MSP")
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
        record = json.loads(executed.ledger.evaluate(executed.consortium.identity("Org3MSP"), "Model:get", "p-exec:Org1MSP"))
        import hashlib
        assert "sha256:" + hashlib.sha256(r.content).hexdigest() == record["digest"]
        assert http.post("/api/v1/models/p-exec:Org1MSP/verify").json()["ok"]
    gw.index.close()


def test_audit_bundle_of_an_executed_model(executed, tmp_path):
    cons = executed.consortium
    cas = {o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in cons.organisations}
    summary = export_bundle(tmp_path / "b", executed.clients["Org1MSP"], "p-exec:Org1MSP",
                            signers={o: cons.identity(o) for o in ORGS}, ca_certificates=cas)
    assert summary["attestations"] == 9
    report = verify_bundle(tmp_path / "b", cas)
    assert report.ok, report.failures
