"""Model contract rules, through the Ledger interface, including the cryptographic access list."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import time
import uuid

import pytest

from chaincode.errors import (
    AlreadyExists,
    Forbidden,
    ImageMismatch,
    InvalidArgument,
    InvalidState,
    NotFound,
    PrivateDataMismatch,
)
from chaincode.records import ModelPrivate
from exchange.errors import DecryptionError
from exchange.sealing import decrypt_payload, encrypt_payload, seal, unseal
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.embedded.store import private_store_path
from tests.contracts.helpers import digest_of, new_process, run_task
from tests.contracts.test_private_terms import MEMBERS, _holding, _org_files
from tests.support.fabric import eventually

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
    # the publisher's peer has committed the model; Org3's may commit it a moment later (its events
    # stream waits for it), so the end is the publisher's height, not Org3's
    end = ledger.block_height(org1.identity)
    seen = []
    for ev in ledger.events(org3.identity, start_block=start, timeout=30.0):
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


# ---- a private model (docs/confidentiality.md): location, size, metrics and estimators in the
# implicit collections of the access list, the salted hash on the public record
def _private_publish(client, consortium, pid):
    """Publish ``client``'s model with a location and estimators no other test writes; the needles."""
    tag = uuid.uuid4().hex
    location, estimators = f"artifact://models/loc-{tag}", [{"tree": f"est-{tag}", "depth": 3}]
    data_key, ciphertext = encrypt_payload(MODEL_BYTES)
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key, b"model-key") for m in MEMBERS}
    rec = client.publish_model(
        pid,
        digest_of("model-" + client.organisation),
        len(MODEL_BYTES),
        "sha256:" + hashlib.sha256(ciphertext).hexdigest(),
        wrapped,
        metrics={"auc": 0.93},
        location=location,
        estimators=estimators,
    )
    return rec, location, estimators, [f"loc-{tag}".encode(), f"est-{tag}".encode()]


def _grant_org3(org1, consortium, model_id):
    """Org1 grants Org3 its model: the data key Org1 unseals, sealed for Org3."""
    own = unseal(
        consortium.encryption_key("Org1MSP"),
        base64.b64decode(org1.get_model(model_id).wrapped_key),
        b"model-key",
    )
    org1.grant_model(
        model_id, "Org3MSP", seal(consortium.encryption_certificate("Org3MSP"), own, b"model-key")
    )


def test_a_private_model_is_read_by_its_access_list_and_held_by_no_one_else(
    host_name, ledger, admins, org1, org2, org3, consortium, uid
):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, location, estimators, needles = _private_publish(org1, consortium, pid)
    assert rec.location == location and rec.private_sha256 == rec.private_part().digest()
    for member in (org1, org2):
        read = eventually(lambda member=member: member.get_model(rec.id))
        assert read.location == location and list(read.estimators) == estimators
        assert read.metrics == {"auc": 0.93} and read.size == len(MODEL_BYTES)
        assert read.private_sha256 == rec.private_sha256
        assert next(m for m in member.list_models() if m.id == rec.id).location == location
        assert member.model_history(rec.id)[-1].value["location"] == location
    with pytest.raises(Forbidden, match="not on the access list"):
        org3.get_model(rec.id)
    if host_name == "embedded":
        ledger.close()  # the WAL is checkpointed: every byte is in the files searched
    org3_files, org1_files = _org_files(host_name, ledger, 3), _org_files(host_name, ledger, 1)
    for needle in needles:
        assert _holding(org3_files, needle) == [], needle
        assert _holding(org1_files, needle), needle  # the positive control


def test_private_model_fields_in_the_arguments_are_refused(admins, org1, org2, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    data_key, ciphertext = encrypt_payload(MODEL_BYTES)
    spec = {
        "process_id": pid,
        "digest": digest_of("model-Org1MSP"),
        "ciphertext_digest": "sha256:" + hashlib.sha256(ciphertext).hexdigest(),
        "wrapped_keys": {
            m: base64.b64encode(seal(consortium.encryption_certificate(m), data_key, b"model-key")).decode()
            for m in MEMBERS
        },
    }
    with pytest.raises(InvalidArgument, match="location are private"):
        org1.ledger.submit(org1.identity, "Model:publish", json.dumps({**spec, "location": "artifact://x"}))
    with pytest.raises(InvalidArgument, match="transient map under 'model_private'"):
        org1.ledger.submit(org1.identity, "Model:publish", json.dumps(spec))
    with pytest.raises(NotFound):
        org1.get_model(f"{pid}:Org1MSP")


def test_grant_and_revoke_keep_the_private_copies_right(admins, org1, org2, org3, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, location, _, _ = _private_publish(org1, consortium, pid)
    _grant_org3(org1, consortium, rec.id)
    assert eventually(lambda: org3.get_model(rec.id)).location == location  # the grantee's own copy
    moved = location + "-moved"
    ct_digest, keys, _ = _rotation(consortium, MEMBERS)
    revoked = org1.revoke_model(rec.id, "Org3MSP", ct_digest, keys, location=moved)
    assert revoked.location == moved and revoked.private_sha256 != rec.private_sha256
    for member in (org1, org2):  # every remaining copy rewritten, with a fresh salt
        read = eventually(lambda member=member: member.get_model(rec.id))
        while read.private_sha256 != revoked.private_sha256:  # Org2's peer commits a moment later
            time.sleep(0.5)
            read = member.get_model(rec.id)
        assert read.location == moved and read.private_salt != rec.private_salt
    with pytest.raises(Forbidden):
        org3.get_model(rec.id)
    # the owner cannot move the model through the public rotation argument
    ct_digest, keys, _ = _rotation(consortium, ("Org1MSP",))
    rotation = {
        "ciphertext_digest": ct_digest,
        "wrapped_keys": {m: base64.b64encode(k).decode() for m, k in keys.items()},
    }
    with pytest.raises(InvalidArgument, match="private location"):
        org1.ledger.submit(
            org1.identity,
            "Model:revoke",
            rec.id,
            "Org2MSP",
            json.dumps({**rotation, "location": "artifact://x"}),
        )


def test_a_private_model_copy_altered_in_a_store_is_detected(embedded_consortium, tmp_path, uid):
    """Embedded host: Org2's stored copy of the model's private part is rewritten; its read names the
    model and the hash, while Org1's copy still reads."""
    with EmbeddedLedger(tmp_path / "l.db", embedded_consortium, batch_timeout=0.002) as led:
        org1, org2 = (ConsortiaClient(led, embedded_consortium.identity(o)) for o in ("Org1", "Org2"))
        admins = {m: ConsortiaClient(led, embedded_consortium.identity(m[:-3], "Admin")) for m in MEMBERS}
        pid = new_process(admins, org1, uid, rounds=2)
        _finish(org1, org2, pid)
        rec, location, _, _ = _private_publish(org1, embedded_consortium, pid)
        store = sqlite3.connect(private_store_path(led.path, "Org2MSP"))
        try:
            where = "instr(value, ?) > 0"
            (value,) = store.execute(
                f"SELECT value FROM private_writes WHERE {where}", (b'"estimators"',)
            ).fetchone()
            altered = ModelPrivate.from_json(value).replace(location="artifact://elsewhere")
            changed = store.execute(
                f"UPDATE private_writes SET value = ? WHERE {where}", (altered.canonical(), b'"estimators"')
            )
            assert changed.rowcount == 1
            store.commit()
        finally:
            store.close()
        with pytest.raises(PrivateDataMismatch, match=f"private copy of model {rec.id} .* on-chain hash"):
            org2.get_model(rec.id)
        with pytest.raises(PrivateDataMismatch):
            org2.model_history(rec.id)
        assert org1.get_model(rec.id).location == location


def test_purge_removes_a_private_model_copies_and_the_hash_stays(
    host_name, ledger, admins, org1, org2, consortium, uid
):
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, _, _, needles = _private_publish(org1, consortium, pid)
    org1.complete_process(pid)
    purged = org2.purge_process_private(pid)
    for member in (org1, org2):
        read = eventually(lambda member=member: member.get_model(rec.id))
        while read.private_purged is None:  # Org1's peer commits the purge a moment later on Fabric
            time.sleep(0.5)
            read = member.get_model(rec.id)
        assert read.private_purged == purged.private_purged and read.private_sha256 == rec.private_sha256
        assert read.location == "" and read.estimators == () and read.wrapped_key is not None
    if host_name == "embedded":  # the stores keep no copy (SQLite's secure_delete; the WAL checkpointed)
        ledger.close()
        for org in (1, 2):
            for needle in needles:
                assert _holding([private_store_path(ledger.path, f"Org{org}MSP")], needle) == [], needle


def test_purge_reaches_a_grantee_outside_the_process(
    host_name, ledger, admins, org1, org2, org3, consortium, uid
):
    """Org1 grants its private model to Org3, which is not a member of the process; a member's purge
    also purges Org3's copy (Org3's peer endorses: the purge writes its collection), and Org3 then
    reads the public record, hash-attested."""
    pid = new_process(admins, org1, uid, rounds=2)
    _finish(org1, org2, pid)
    rec, location, _, needles = _private_publish(org1, consortium, pid)
    _grant_org3(org1, consortium, rec.id)
    assert eventually(lambda: org3.get_model(rec.id)).location == location
    org1.complete_process(pid)
    assert org2.purge_endorsers(pid) == ["Org1MSP", "Org2MSP", "Org3MSP"]
    purged = org2.purge_process_private(pid)
    read = org3.get_model(rec.id)
    while read.private_purged is None:  # Org3's peer commits the purge a moment later on Fabric
        time.sleep(0.5)
        read = org3.get_model(rec.id)
    assert read.private_purged == purged.private_purged and read.location == ""
    if host_name == "embedded":  # Org3's store keeps no copy
        ledger.close()
        for needle in needles:
            assert _holding([private_store_path(ledger.path, "Org3MSP")], needle) == [], needle
