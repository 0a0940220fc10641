"""audit.artifacts: what a lineage's signed records name is in the organisations' stores, with the
signed digests -- opened with the owner's or recipient's key when given, else checked for presence
and integrity only. (On a real process: tests/e2e/test_lineage.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.artifacts import check_artifacts
from audit.report import Report
from exchange import messages
from exchange.store import ArtifactStore


@pytest.fixture
def stores(world, tmp_path):
    """Org1's round-1 state, message to Org2 and model, stored the way the node agent stores them."""
    c = world.consortium
    root = tmp_path / "stores"
    org1 = ArtifactStore(root, "Org1MSP")
    ArtifactStore(root, "Org2MSP")
    state = org1.put_private(b"state of Org1 after round 1", c.encryption_certificate("Org1MSP"))
    ref = org1.put_message(
        b"hello Org2",
        process_id="p",
        round=1,
        recipient="Org2MSP",
        recipient_certificate=c.encryption_certificate("Org2MSP"),
    )
    messages.write_entry(org1, "p", 1, ref)
    model_digest = org1.put_private(b"the model of Org1", c.encryption_certificate("Org1MSP"))
    ciphertext = org1.put(b"the model, encrypted for the consortium").digest
    record = {
        "process_id": "p",
        "round": 1,
        "organisation": "Org1MSP",
        "result": {
            "outputs": {"state": state, "messages": [{"recipient": "Org2MSP", "digest": ref.payload_digest}]}
        },
    }
    model = {"id": "p:Org1MSP", "owner": "Org1MSP", "digest": model_digest, "ciphertext_digest": ciphertext}
    keys = {o: c.encryption_key(o) for o in ("Org1MSP", "Org2MSP")}
    return root, record, model, keys, ref


def audit(root: Path, record: dict, model: dict, keys: dict) -> Report:
    report = Report("artifacts")
    check_artifacts(report, [record], model, root, keys)
    return report


def test_genuine_artifacts_open_with_the_keys(stores):
    root, record, model, keys, _ = stores
    report = audit(root, record, model, keys)
    assert report.ok, report.failures
    assert [(c.kind, c.subject) for c in report.checks] == [
        ("artifact", "state of p/1/Org1MSP"),
        ("artifact", "message p/1/Org1MSP to Org2MSP"),
        ("model", "model p:Org1MSP plaintext"),
        ("model", "model p:Org1MSP ciphertext"),
    ]
    assert report.checks[1].detail == "opened; payload digest matches"


def test_without_keys_only_presence_and_integrity(stores):
    root, record, model, _, _ = stores
    report = audit(root, record, model, {})
    assert report.ok, report.failures
    assert "present (contents checked with the owner's key only)" in report.checks[0].detail
    assert report.checks[1].detail == "sealed; integrity only"


def test_a_changed_state_fails_when_opened(stores):
    root, record, model, keys, _ = stores
    path = ArtifactStore(root, "Org1MSP", create=False).private_path(record["result"]["outputs"]["state"])
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert [c.subject for c in audit(root, record, model, keys).failures] == ["state of p/1/Org1MSP"]
    # without the owner's key a sealed state can only be seen to be there
    assert audit(root, record, model, {}).ok


def test_a_message_opened_with_another_key_or_changed_or_missing(stores):
    root, record, model, keys, ref = stores
    wrong = dict(keys, Org2MSP=keys["Org1MSP"])
    [failed] = audit(root, record, model, wrong).failures
    assert failed.subject == "message p/1/Org1MSP to Org2MSP" and "DecryptionError" in failed.detail
    sealed = ArtifactStore(root, "Org1MSP", create=False).path(ref.stored.digest)
    data = sealed.read_bytes()
    sealed.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    for given in (keys, {}):  # the store re-hashes what it hands out, key or not
        [failed] = audit(root, record, model, given).failures
        assert failed.subject == "message p/1/Org1MSP to Org2MSP" and "ArtifactCorrupted" in failed.detail
    sealed.write_bytes(data)
    messages.entry_path(ArtifactStore(root, "Org1MSP", create=False), "p", 1, "Org2MSP").unlink()
    [failed] = audit(root, record, model, keys).failures
    assert "not in the sender's store" in failed.detail


def test_a_missing_model_or_ciphertext(stores):
    root, record, model, keys, _ = stores
    report = audit(root, record, dict(model, ciphertext_digest="sha256:" + "0" * 64), keys)
    assert [c.subject for c in report.failures] == ["model p:Org1MSP ciphertext"]
    report = audit(root, record, dict(model, digest="sha256:" + "1" * 64), {})
    assert [c.subject for c in report.failures] == ["model p:Org1MSP plaintext"]
    assert "not in the store of Org1MSP" in report.failures[0].detail
