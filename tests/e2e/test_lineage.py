"""executor.lineage: a genuine model's lineage verifies; each kind of tampering is caught."""

from __future__ import annotations

import dataclasses
import json

import pytest

from exchange.store import ArtifactStore
from executor.lineage import _signature_valid, verify_model_lineage
from executor.process import Platform, ProcessSpec, launch, map_dataset, prepare_image, run_process
from executor.runtimes.sandbox import SandboxRuntime
from tests.e2e.conftest import ORGS3, dpsda_case

PID = "p-lineage"


@pytest.fixture(scope="module")
def done(tmp_path_factory, consortium):
    from ledger.embedded import EmbeddedLedger

    root = tmp_path_factory.mktemp("lineage")
    p = Platform(EmbeddedLedger(root / "ledger.sqlite", consortium), consortium, root, root / "ledger.sqlite")
    case = dpsda_case()
    client = p.client("Org1MSP")
    image = prepare_image(client, case.image, "sandbox")
    for o in ORGS3:
        map_dataset(p.data_root, o, "train", case.datasets[o])
    launch(client, ProcessSpec(PID, image.record.id, ORGS3, case.topology, case.params, case.rounds, "train"))
    out = run_process(p, PID, SandboxRuntime)
    assert out.status == "completed", out
    yield p, image, case
    p.ledger.close()


def keys(p):
    return {o: p.consortium.encryption_key(o) for o in ORGS3}


def test_genuine_lineage_verifies_back_to_round_one(done):
    p, image, case = done
    rep = verify_model_lineage(
        p.client("Org1MSP"),
        PID,
        "Org1MSP",
        p.store_root,
        keys(p),
        local_image_digest=lambda ref: image.digest,
    )
    assert rep.ok, rep.failures
    # ring over 3 organisations: everyone's earlier records are ancestors of Org1's model
    assert set(rep.records) == {
        (o, r)
        for o in ORGS3
        for r in range(1, case.rounds + 1)
        if (o, r) != ("Org2MSP", case.rounds) and (o, r) != ("Org3MSP", case.rounds)
    }
    counts = rep.counts()
    assert counts["signature"] == len(rep.records) and counts["history"] == len(rep.records)
    assert json.loads(json.dumps(rep.to_json()))["ok"] is True


def test_altered_result_fails_the_signature_check(done):
    p, _, _ = done
    rec = p.client("Org2MSP").get_execution(PID, 2, "Org2MSP")
    assert _signature_valid(rec) == (True, "")
    forged = dict(rec.result, metrics={**rec.result["metrics"], "regret": 0.0})
    ok, why = _signature_valid(dataclasses.replace(rec, result=forged))
    assert not ok and "does not verify" in why


def test_local_image_with_another_digest_fails(done):
    p, image, _ = done
    rep = verify_model_lineage(
        p.client("Org1MSP"),
        PID,
        "Org1MSP",
        p.store_root,
        keys(p),
        local_image_digest=lambda ref: "sha256:" + "0" * 64,
        check_history=False,
    )
    assert [c.subject for c in rep.failures] == [f"local image {image.reference}"]


def test_corrupted_state_artifact_is_caught(done):
    p, _, _ = done
    digest = p.client("Org3MSP").get_execution(PID, 2, "Org3MSP").result["outputs"]["state"]
    path = ArtifactStore(p.store_root, "Org3MSP").private_path(digest)  # sealed to Org3
    original = path.read_bytes()
    path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        rep = verify_model_lineage(
            p.client("Org1MSP"), PID, "Org1MSP", p.store_root, keys(p), check_history=False
        )
        assert [c.subject for c in rep.failures] == ["Org3MSP round 2 state"]
    finally:
        path.write_bytes(original)


def test_message_opened_with_the_wrong_key_or_missing_is_caught(done):
    p, _, _ = done
    wrong = dict(keys(p), Org1MSP=p.consortium.encryption_key("Org2MSP"))
    rep = verify_model_lineage(p.client("Org1MSP"), PID, "Org1MSP", p.store_root, wrong, check_history=False)
    # everything sealed to Org1 fails to open: messages addressed to it, its own states and model
    assert any("message to Org1MSP" in c.subject for c in rep.failures)
    assert all(
        "message to Org1MSP" in c.subject
        or c.subject.startswith("Org1MSP round")
        and "state" in c.subject
        or c.subject == f"model {PID}:Org1MSP plaintext"
        for c in rep.failures
    ), rep.failures
    index = p.store_root / "Org2MSP" / "messages" / PID / f"{1:06d}" / "Org1MSP.json"
    if not index.exists():  # ring: pick any message Org2 sent in round 1
        index = next((p.store_root / "Org2MSP" / "messages" / PID / f"{1:06d}").iterdir())
    saved = index.read_bytes()
    index.unlink()
    try:
        rep = verify_model_lineage(
            p.client("Org1MSP"), PID, "Org1MSP", p.store_root, keys(p), check_history=False
        )
        assert any("not in the sender's store" in c.detail for c in rep.failures)
    finally:
        index.write_bytes(saved)
