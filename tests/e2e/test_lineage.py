"""audit.verification on a real process (sandbox tasks, sealed artifacts in the stores): a genuine
model's lineage verifies with its artifacts; each kind of tampering is caught."""

from __future__ import annotations

import json

import pytest

from audit.signatures import check_record_signature
from audit.verification import verify_model
from exchange.store import ArtifactStore
from executor.node.supervisor import run_process
from executor.process import ProcessSpec, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from executor.task_keys import TaskSignatureInvalid
from home.platform import Platform
from tests.e2e.conftest import ORGS3, dpsda_case

PID = "p-lineage"
MODEL = f"{PID}:Org1MSP"


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
    spec = ProcessSpec(PID, image.record.id, ORGS3, case.topology, case.params, case.rounds, "train")
    launch(client, spec, consent=p.admins(ORGS3))
    out = run_process(p, PID, SandboxRuntime)
    assert out.status == "completed", out
    yield p, image, case
    p.ledger.close()


def keys(p):
    return {o: p.consortium.encryption_key(o) for o in ORGS3}


def test_genuine_lineage_verifies_back_to_round_one(done):
    p, image, case = done
    rep = verify_model(
        p.client("Org1MSP"),
        MODEL,
        store_root=p.store_root,
        recipient_keys=keys(p),
        local_image_digest=lambda ref: image.digest,
    )
    assert rep.ok, rep.failures
    # ring over 3 organisations: everyone's earlier records are ancestors of Org1's model
    lineage = rep.facts["lineage"]
    assert set(lineage) == {
        f"{PID}/{r}/{o}"
        for o in ORGS3
        for r in range(1, case.rounds + 1)
        if (o, r) != ("Org2MSP", case.rounds) and (o, r) != ("Org3MSP", case.rounds)
    }
    counts = rep.counts()
    assert counts["execution"] == counts["history"] == len(lineage)
    assert counts["artifact"] >= 2 * len(lineage)  # each state and at least one message per execution
    assert counts["model"] == 3  # signed digest and estimators, plaintext, ciphertext
    assert json.loads(json.dumps(rep.to_dict()))["ok"] is True


def test_altered_result_fails_the_signature_check(done):
    p, _, _ = done
    rec = p.client("Org2MSP").get_execution(PID, 2, "Org2MSP")
    check_record_signature(rec)
    assert rec.result is not None
    forged = rec.result.replace(metrics={**rec.result.metrics, "regret": 0.0})
    with pytest.raises(TaskSignatureInvalid, match="does not verify"):
        check_record_signature(rec.replace(result=forged))


def test_local_image_with_another_digest_fails(done):
    p, image, _ = done
    rep = verify_model(
        p.client("Org1MSP"),
        MODEL,
        store_root=p.store_root,
        recipient_keys=keys(p),
        local_image_digest=lambda ref: "sha256:" + "0" * 64,
        history=False,
    )
    assert [c.subject for c in rep.failures] == [f"local image {image.reference}"]


def test_corrupted_state_artifact_is_caught(done):
    p, _, _ = done
    digest = p.client("Org3MSP").get_execution(PID, 2, "Org3MSP").result.outputs.state
    path = ArtifactStore(p.store_root, "Org3MSP").private_path(digest)  # sealed to Org3
    original = path.read_bytes()
    path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        rep = verify_model(
            p.client("Org1MSP"), MODEL, store_root=p.store_root, recipient_keys=keys(p), history=False
        )
        assert [c.subject for c in rep.failures] == [f"state of {PID}/2/Org3MSP"]
    finally:
        path.write_bytes(original)


def test_message_opened_with_the_wrong_key_or_missing_is_caught(done):
    p, _, _ = done
    wrong = dict(keys(p), Org1MSP=p.consortium.encryption_key("Org2MSP"))
    rep = verify_model(
        p.client("Org1MSP"), MODEL, store_root=p.store_root, recipient_keys=wrong, history=False
    )
    # everything sealed to Org1 fails to open: messages addressed to it, its own states and model
    assert any(c.subject.endswith(" to Org1MSP") for c in rep.failures)
    assert all(
        c.subject.startswith("message ")
        and c.subject.endswith(" to Org1MSP")
        or c.subject.startswith("state of ")
        and c.subject.endswith("/Org1MSP")
        or c.subject == f"model {MODEL} plaintext"
        for c in rep.failures
    ), rep.failures
    index = p.store_root / "Org2MSP" / "messages" / PID / f"{1:06d}" / "Org1MSP.json"
    if not index.exists():  # ring: pick any message Org2 sent in round 1
        index = next((p.store_root / "Org2MSP" / "messages" / PID / f"{1:06d}").iterdir())
    saved = index.read_bytes()
    index.unlink()
    try:
        rep = verify_model(
            p.client("Org1MSP"), MODEL, store_root=p.store_root, recipient_keys=keys(p), history=False
        )
        assert any("not in the sender's store" in c.detail for c in rep.failures)
    finally:
        index.write_bytes(saved)
