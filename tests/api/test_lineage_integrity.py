"""Issue 14 item 1: a lineage tells the whole truth when rounds repeat digests.

A collaborative-RF-shaped process: 3 organisations, 6 rounds, every organisation messages every
other, and the SHARE rounds 3-5 leave the state (and the messages) unchanged, so several rounds
output the same digests. The lineage of a model must link each input to the producer of the
exact (digest, round) it consumed and reach round 1: 6 rounds of the owner + 5 of each other
organisation = 16 executions, all of them among the audit bundle's 18.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.follower import sync
from api.index import AuditIndex
from audit.lineage import execution_node_id
from audit.verification import verify_model
from tests.api.conftest import make_gateway
from tests.api.world import ORGS, build_world, ring_process

PID, ROUNDS, SHARE = "crf", 6, frozenset({3, 4, 5})
MODEL = f"{PID}:Org1MSP"
EXPECTED = {
    execution_node_id(PID, r, o) for o in ORGS for r in range(1, ROUNDS + 1) if o == "Org1MSP" or r < ROUNDS
}
runner = CliRunner()


@pytest.fixture(scope="module")
def crf_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("crf")
    w = build_world(root, processes=0)
    ring_process(w, PID, rounds=ROUNDS, all_to_all=True, unchanged_rounds=SHARE)
    yield w
    w.ledger.close()


def test_the_process_really_repeats_digests(crf_world):
    recs = {r: crf_world.clients["Org1MSP"].get_execution(PID, r, "Org1MSP") for r in range(1, ROUNDS + 1)}
    assert recs[3].result.outputs.state == recs[2].result.outputs.state == recs[5].result.outputs.state
    assert recs[4].result.inputs.state == recs[4].result.outputs.state


def test_index_lineage_reaches_round_1_through_unchanged_rounds(crf_world, tmp_path):
    with AuditIndex(tmp_path / "ix.db") as ix:
        sync(ix, crf_world.clients["Org1MSP"])
        lin = ix.lineage(MODEL)
        ids = {n["id"] for n in lin["nodes"]}
        assert ids == EXPECTED and len(ids) == 16
        assert {n["round"] for n in lin["nodes"] if n["organisation"] == "Org2MSP"} == {1, 2, 3, 4, 5}
        # no execution is recorded as producing its own input, and every edge goes back in rounds
        assert all(e["from"] != e["to"] for e in lin["edges"])
        rnd = lambda node: int(node.rsplit("/", 2)[1])  # noqa: E731
        assert all(rnd(e["from"]) == rnd(e["to"]) - 1 for e in lin["edges"])
        assert {
            "from": f"{PID}/3/Org1MSP",
            "to": f"{PID}/4/Org1MSP",
            "kind": "state",
            "digest": crf_world.clients["Org1MSP"].get_execution(PID, 3, "Org1MSP").result.outputs.state,
        } in lin["edges"]
        assert all(x["kind"] == "data_commitment" for x in lin["external_inputs"])
        assert lin["broken_links"] == []
        report = verify_model(crf_world.clients["Org1MSP"], MODEL, index=ix)
        assert report.ok, report.failures
        [complete] = [c for c in report.checks if c["check"] == "lineage complete"]
        assert complete["detail"].startswith("16 executions")
        assert sum(c["check"].startswith("execution ") for c in report.checks) == 16


def test_gateway_lineage_route(crf_world, tmp_path):
    from fastapi.testclient import TestClient

    from api.gateway import create_app

    gw = make_gateway(crf_world, "Org2MSP", tmp_path / "gw")
    with TestClient(create_app(gw), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {gw.tokens.issue('User1')}"
        lin = client.get(f"/api/v1/models/{MODEL}/lineage")
        assert lin.status_code == 200, lin.text
        assert {n["id"] for n in lin.json()["nodes"]} == EXPECTED
        ver = client.post(f"/api/v1/models/{MODEL}/verify")
        assert ver.status_code == 200 and ver.json()["ok"] is True, ver.text
    gw.index.close()


def test_cli_provenance_and_bundle_agree(crf_world, tmp_path):
    crf_world.ledger.close()  # the CLI opens the ledger file itself
    root = crf_world.root

    def cli(*args: str) -> dict:
        res = runner.invoke(app, [*args, "--home", str(root), "--org", "Org1", "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout.strip().splitlines()[-1])

    lin = cli("provenance", "model", MODEL)
    assert {n["id"] for n in lin["nodes"]} == EXPECTED
    assert cli("model", "verify", MODEL)["ok"] is True
    bundle = tmp_path / "bundle"
    assert cli("audit", "export", MODEL, "--out", str(bundle))["executions"] == 18
    in_bundle = {
        execution_node_id(PID, int(p.stem.split("-")[0]), p.stem.split("-", 1)[1])
        for p in (bundle / "records" / "executions").glob("*.json")
    }
    assert len(in_bundle) == 18 and EXPECTED <= in_bundle
    res = runner.invoke(app, ["audit", "verify", str(bundle), "--json"])
    report = json.loads(res.stdout)
    assert res.exit_code == 0 and report["ok"] is True, report
    [complete] = [c for c in report["checks"] if c["check"] == "lineage complete"]
    assert complete["ok"] and complete["detail"].startswith("16 executions")
