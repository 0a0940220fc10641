"""Model contract rules, through the Ledger interface, including the cryptographic access list."""

from __future__ import annotations

import base64
import hashlib

import pytest

from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from ledger.envelope import DecryptionError, decrypt_payload, encrypt_payload, seal, unseal
from tests.contracts.helpers import digest_of, new_process, run_task

MODEL_BYTES = b"model-weights-" * 50


def _publish(client, consortium, pid, members=("Org1MSP", "Org2MSP")):
    data_key, ciphertext = encrypt_payload(MODEL_BYTES)
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key, b"model-key") for m in members}
    rec = client.publish_model(pid, digest_of("model-" + client.organisation), len(MODEL_BYTES),
                               "sha256:" + hashlib.sha256(ciphertext).hexdigest(), wrapped,
                               metrics={"auc": 0.93}, location="artifact://model")
    return rec, ciphertext


def _finish(org1, org2, pid):
    run_task(org1, pid, 1)
    run_task(org2, pid, 1)
    run_task(org1, pid, 2, model_digest=digest_of("model-Org1MSP"))
    run_task(org2, pid, 2, model_digest=digest_of("model-Org2MSP"))


def test_publish_requires_the_audited_run(org1, org2, consortium, uid):
    pid = new_process(org1, uid, rounds=2)
    with pytest.raises(InvalidState, match="has not completed the last round"):
        _publish(org1, consortium, pid)
    _finish(org1, org2, pid)
    rec, _ = _publish(org1, consortium, pid)
    assert rec.owner == "Org1MSP" and rec.access == ("Org1MSP", "Org2MSP") and rec.metrics == {"auc": 0.93}
    assert rec.id == f"{pid}:Org1MSP" and rec.round == 2
    with pytest.raises(AlreadyExists):
        _publish(org1, consortium, pid)


def test_publish_refuses_a_digest_the_run_did_not_sign(org1, org2, consortium, uid):
    pid = new_process(org1, uid, rounds=2)
    _finish(org1, org2, pid)
    data_key, ct = encrypt_payload(b"other")
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key) for m in ("Org1MSP", "Org2MSP")}
    with pytest.raises(ImageMismatch, match="not the model"):
        org1.publish_model(pid, digest_of("something else"), 5, digest_of("ct"), wrapped)
    with pytest.raises(InvalidArgument, match="exactly the consortium"):
        org1.publish_model(pid, digest_of("model-Org1MSP"), 5, digest_of("ct"), {"Org1MSP": wrapped["Org1MSP"]})


def test_access_list_holds_in_contract_and_cryptographically(org1, org2, org3, consortium, uid):
    pid = new_process(org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, ciphertext = _publish(org1, consortium, pid)
    # Org2 (on the list) can read the record and open its sealed data key
    seen = org2.get_model(rec.id)
    key2 = unseal(consortium.encryption_key("Org2MSP"), base64.b64decode(seen.wrapped_key), b"model-key")
    assert decrypt_payload(key2, ciphertext) == MODEL_BYTES
    # Org3 (not on the list) cannot read the record, and cannot open Org2's sealed key either
    with pytest.raises(Forbidden, match="not on the access list"):
        org3.get_model(rec.id)
    with pytest.raises(Forbidden):
        org3.model_history(rec.id)
    with pytest.raises(DecryptionError):
        unseal(consortium.encryption_key("Org3MSP"), base64.b64decode(seen.wrapped_key), b"model-key")
    assert rec.id not in {m.id for m in org3.list_models()}
    assert rec.id in {m.id for m in org2.list_models()}


def test_grant_and_revoke_by_owner_only(org1, org2, org3, consortium, uid):
    pid = new_process(org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, ciphertext = _publish(org1, consortium, pid)
    own_key = unseal(consortium.encryption_key("Org1MSP"), base64.b64decode(org1.get_model(rec.id).wrapped_key), b"model-key")
    sealed3 = seal(consortium.encryption_certificate("Org3MSP"), own_key, b"model-key")
    with pytest.raises(Forbidden, match="only the owner"):
        org2.grant_model(rec.id, "Org3MSP", sealed3)
    granted = org1.grant_model(rec.id, "Org3MSP", sealed3)
    assert granted.access == ("Org1MSP", "Org2MSP", "Org3MSP")
    got3 = org3.get_model(rec.id)
    k3 = unseal(consortium.encryption_key("Org3MSP"), base64.b64decode(got3.wrapped_key), b"model-key")
    assert decrypt_payload(k3, ciphertext) == MODEL_BYTES
    with pytest.raises(AlreadyExists):
        org1.grant_model(rec.id, "Org3MSP", sealed3)
    with pytest.raises(Forbidden):
        org3.revoke_model(rec.id, "Org2MSP")
    with pytest.raises(InvalidArgument, match="own access"):
        org1.revoke_model(rec.id, "Org1MSP")
    revoked = org1.revoke_model(rec.id, "Org3MSP")
    assert revoked.access == ("Org1MSP", "Org2MSP")
    with pytest.raises(Forbidden):
        org3.get_model(rec.id)
    with pytest.raises(NotFound):
        org1.revoke_model(rec.id, "Org3MSP")
    hist = org1.model_history(rec.id)
    assert [len(h.value["access"]) for h in hist] == [2, 3, 2]
    # history never shows another organisation's sealed key
    assert all("wrapped_keys" not in h.value for h in hist)


def test_get_unknown_model(org1, uid):
    with pytest.raises(NotFound):
        org1.get_model(f"none-{uid}")
