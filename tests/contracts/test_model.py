"""Model contract rules, through the Ledger interface, including the cryptographic access list."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from exchange.errors import DecryptionError
from exchange.sealing import decrypt_payload, encrypt_payload, seal, unseal
from tests.contracts.helpers import digest_of, new_process, run_task

MODEL_BYTES = b"model-weights-" * 50


def _publish(client, consortium, pid, members=("Org1MSP", "Org2MSP")):
    data_key, ciphertext = encrypt_payload(MODEL_BYTES)
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key, b"model-key") for m in members}
    rec = client.publish_model(
        pid,
        digest_of("model-" + client.organisation),
        len(MODEL_BYTES),
        "sha256:" + hashlib.sha256(ciphertext).hexdigest(),
        wrapped,
        metrics={"auc": 0.93},
        location="artifact://model",
    )
    return rec, ciphertext


def _rotation(consortium, members, plaintext=MODEL_BYTES):
    """A fresh data key, the payload re-encrypted under it, the key sealed for ``members``."""
    data_key, ciphertext = encrypt_payload(plaintext)
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key, b"model-key") for m in members}
    return "sha256:" + hashlib.sha256(ciphertext).hexdigest(), wrapped, ciphertext


def _finish(org1, org2, pid):
    run_task(org1, pid, 1)
    run_task(org2, pid, 1)
    run_task(org1, pid, 2, model_digest=digest_of("model-Org1MSP"))
    run_task(org2, pid, 2, model_digest=digest_of("model-Org2MSP"))


def test_publish_requires_the_audited_run(admins, org1, org2, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    with pytest.raises(InvalidState, match="has not completed the last round"):
        _publish(org1, consortium, pid)
    _finish(org1, org2, pid)
    rec, _ = _publish(org1, consortium, pid)
    assert rec.owner == "Org1MSP" and rec.access == ("Org1MSP", "Org2MSP") and rec.metrics == {"auc": 0.93}
    assert rec.id == f"{pid}:Org1MSP" and rec.round == 2
    with pytest.raises(AlreadyExists):
        _publish(org1, consortium, pid)


def test_publish_refuses_a_digest_the_run_did_not_sign(admins, org1, org2, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    data_key, ct = encrypt_payload(b"other")
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key) for m in ("Org1MSP", "Org2MSP")}
    with pytest.raises(ImageMismatch, match="not the model"):
        org1.publish_model(pid, digest_of("something else"), 5, digest_of("ct"), wrapped)
    with pytest.raises(InvalidArgument, match="exactly the consortium"):
        org1.publish_model(
            pid, digest_of("model-Org1MSP"), 5, digest_of("ct"), {"Org1MSP": wrapped["Org1MSP"]}
        )


def test_access_list_holds_in_contract_and_cryptographically(admins, org1, org2, org3, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
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


def test_grant_and_revoke_by_owner_only(admins, org1, org2, org3, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, ciphertext = _publish(org1, consortium, pid)
    own_key = unseal(
        consortium.encryption_key("Org1MSP"),
        base64.b64decode(org1.get_model(rec.id).wrapped_key),
        b"model-key",
    )
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
    new_ct_digest, new_keys, _ = _rotation(consortium, ("Org1MSP", "Org2MSP"))
    with pytest.raises(Forbidden):
        org3.revoke_model(rec.id, "Org2MSP", new_ct_digest, new_keys)
    with pytest.raises(InvalidArgument, match="own access"):
        org1.revoke_model(rec.id, "Org1MSP", new_ct_digest, new_keys)
    revoked = org1.revoke_model(rec.id, "Org3MSP", new_ct_digest, new_keys)
    assert revoked.access == ("Org1MSP", "Org2MSP")
    with pytest.raises(Forbidden):
        org3.get_model(rec.id)
    with pytest.raises(NotFound):
        org1.revoke_model(rec.id, "Org3MSP", *_rotation(consortium, ("Org1MSP", "Org2MSP"))[:2])
    hist = org1.model_history(rec.id)
    assert [len(h.value["access"]) for h in hist] == [2, 3, 2]
    # history never shows another organisation's sealed key
    assert all("wrapped_keys" not in h.value for h in hist)


def test_get_unknown_model(org1, uid):
    with pytest.raises(NotFound):
        org1.get_model(f"none-{uid}")


def test_revocation_rotates_the_data_key(admins, org1, org2, org3, consortium, uid):
    """A revoked member's previously fetched sealed key opens nothing that is stored afterwards;
    the remaining members open the new ciphertext with their new sealed keys."""
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, old_ciphertext = _publish(org1, consortium, pid)
    own_key = unseal(
        consortium.encryption_key("Org1MSP"),
        base64.b64decode(org1.get_model(rec.id).wrapped_key),
        b"model-key",
    )
    org1.grant_model(
        rec.id, "Org3MSP", seal(consortium.encryption_certificate("Org3MSP"), own_key, b"model-key")
    )
    # Org3 fetches its sealed key while it has access, and keeps it
    old_key3 = unseal(
        consortium.encryption_key("Org3MSP"),
        base64.b64decode(org3.get_model(rec.id).wrapped_key),
        b"model-key",
    )
    assert decrypt_payload(old_key3, old_ciphertext) == MODEL_BYTES
    remaining = ("Org1MSP", "Org2MSP")
    new_digest, new_keys, new_ciphertext = _rotation(consortium, remaining)
    # a revocation that does not rotate, or seals the new key for the wrong list, is refused
    with pytest.raises(InvalidArgument, match="must replace its ciphertext"):
        org1.revoke_model(rec.id, "Org3MSP", rec.ciphertext_digest, new_keys)
    with pytest.raises(InvalidArgument, match="exactly the remaining"):
        org1.revoke_model(rec.id, "Org3MSP", new_digest, dict(new_keys, Org3MSP=new_keys["Org2MSP"]))
    with pytest.raises(InvalidArgument, match="exactly the remaining"):
        org1.revoke_model(rec.id, "Org3MSP", new_digest, {"Org1MSP": new_keys["Org1MSP"]})
    with pytest.raises(InvalidArgument):
        org1.ledger.submit(org1.identity, "Model:revoke", rec.id, "Org3MSP")  # no rotation at all
    assert org3.get_model(rec.id).access == (
        "Org1MSP",
        "Org2MSP",
        "Org3MSP",
    )  # refused attempts changed nothing
    revoked = org1.revoke_model(rec.id, "Org3MSP", new_digest, new_keys)
    assert revoked.ciphertext_digest == new_digest != rec.ciphertext_digest
    assert revoked.key_version == 2 and rec.key_version == 1
    # the revoked member's old key does not open what is stored now
    with pytest.raises(DecryptionError):
        decrypt_payload(old_key3, new_ciphertext)
    # the remaining members' new sealed keys do
    for client in (org1, org2):
        seen = client.get_model(rec.id)
        assert seen.ciphertext_digest == new_digest
        k = unseal(
            consortium.encryption_key(client.organisation), base64.b64decode(seen.wrapped_key), b"model-key"
        )
        assert k != own_key and decrypt_payload(k, new_ciphertext) == MODEL_BYTES
        with pytest.raises(DecryptionError):  # and the old key is gone from the ledger for them too
            decrypt_payload(own_key, new_ciphertext)
    with pytest.raises(Forbidden):
        org3.get_model(rec.id)


def test_events_tell_non_members_no_digests(admins, ledger, org1, org2, org3, consortium, uid):
    """Chaincode events reach every channel member: a process's events carry identifiers only, so
    Org3 (not in the process) learns no state, message or model digest and no location from them."""
    start = ledger.block_height(org3.identity)
    pid = new_process(admins, org1, uid, rounds=2)
    results = [
        run_task(org1, pid, 1, recipients=("Org2MSP",)),
        run_task(org2, pid, 1, recipients=("Org1MSP",)),
        run_task(org1, pid, 2, model_digest=digest_of("model-Org1MSP")),
        run_task(org2, pid, 2, model_digest=digest_of("model-Org2MSP")),
    ]
    rec, _ = _publish(org1, consortium, pid)
    secrets = {rec.digest, rec.ciphertext_digest, "artifact://model"}
    for r in results:
        secrets.add(r["outputs"]["state"])
        secrets.update(m["digest"] for m in r["outputs"]["messages"])
    end = ledger.block_height(org3.identity)
    seen = []
    for ev in ledger.events(org3.identity, start_block=start, timeout=3.0):
        if ev.block_number >= end:
            break
        seen.append(ev)
        if ev.block_number == end - 1 and ev.name == "ModelPublished":
            break
    names = [e.name for e in seen]
    assert names.count("TaskCompleted") == 4 and "ModelPublished" in names and "ProcessCreated" in names
    for ev in seen:
        if ev.name.startswith("Image"):
            continue  # the image registry is readable by every channel member (Image:get)
        text = ev.payload.decode()
        assert "sha256:" not in text and not any(s in text for s in secrets), (ev.name, text)
        assert set(json.loads(text)) <= {"id", "process_id", "round", "organisation", "owner", "status"}, text
