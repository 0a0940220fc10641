"""Task keys: fresh per task, handed over privately, destroyed after the run, never shown."""

from __future__ import annotations

import os
import stat

from executor.task_keys import KEY_FILE, TASK_UID, TaskKey, destroy_key_dir, verify_task_signature
from ledger.identity import load_public_key_pem, verify


def test_each_task_gets_a_fresh_p256_key():
    a, b = TaskKey.generate(), TaskKey.generate()
    assert a.public_key_pem != b.public_key_pem
    assert load_public_key_pem(a.public_key_pem).curve.name == "secp256r1"


def test_signature_is_low_s_and_verifies_only_with_its_key():
    k = TaskKey.generate()
    for i in range(20):  # low-S normalisation applies to every signature
        sig = k.sign(b"result %d" % i)
        assert verify(k.private_key.public_key(), b"result %d" % i, sig)
    assert verify_task_signature(k.public_key_pem, b"x", k.sign(b"x"))
    assert not verify_task_signature(k.public_key_pem, b"y", k.sign(b"x"))
    assert not verify_task_signature(TaskKey.generate().public_key_pem, b"x", k.sign(b"x"))
    assert not verify_task_signature("not a pem", b"x", k.sign(b"x"))


def test_repr_never_shows_the_private_key():
    k = TaskKey.generate()
    pem = k.private_pem().decode()
    assert "PRIVATE" not in repr(k) and pem.splitlines()[1] not in repr(k)


def test_hand_over_is_private_and_destroy_removes_it(tmp_path):
    k = TaskKey.generate()
    path = k.hand_over(tmp_path / "key")
    assert path.name == KEY_FILE and path.read_bytes() == k.private_pem()
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o400
    assert stat.S_IMODE(os.stat(tmp_path / "key").st_mode) == 0o500
    if os.geteuid() == 0:
        assert st.st_uid == TASK_UID
    destroy_key_dir(tmp_path / "key")
    assert not (tmp_path / "key").exists()
    destroy_key_dir(tmp_path / "key")  # idempotent


def test_hand_over_to_own_uid(tmp_path):
    k = TaskKey.generate()
    path = k.hand_over(tmp_path / "key", uid=None)
    assert os.stat(path).st_uid == os.geteuid()


def test_one_check_for_manifests_and_results():
    """executor.task_keys.check_task_signature is the one off-chain task-signature check: raw bytes
    (a manifest) or a JSON value (a record's result, signed as canonical JSON), DER or base64. The
    record-level check built on it: tests/audit/test_signatures.py."""
    import base64

    import pytest

    from executor.task_keys import TaskSignatureInvalid, check_task_signature
    from wire.canonical import canonical_json

    k = TaskKey.generate()
    digest = "sha256:" + "0" * 64
    result = {
        "process_id": "p",
        "round": 1,
        "organisation": "Org1MSP",
        "image_digest": digest,
        "runtime": "sandbox",
        "inputs": {"state": None, "messages": [], "data_commitment": digest},
        "outputs": {"state": digest, "messages": [{"recipient": "Org2MSP", "digest": digest, "size": 3}]},
        "metrics": {"loss": 0.5},
    }
    sig = k.sign(canonical_json(result))
    check_task_signature(k.public_key_pem, canonical_json(result), sig)
    check_task_signature(k.public_key_pem, result, base64.b64encode(sig).decode())
    with pytest.raises(TaskSignatureInvalid, match="does not verify"):
        check_task_signature(k.public_key_pem, {**result, "round": 2}, sig)
    with pytest.raises(TaskSignatureInvalid, match="not base64"):
        check_task_signature(k.public_key_pem, result, "not base64!")
    with pytest.raises(TaskSignatureInvalid, match="malformed task key"):
        check_task_signature("not a pem", result, sig)
