"""Sealing to an organisation (HPKE, RFC 9180) and data-key encryption: only the recipient opens, any
change is detected, and seals made before HPKE (CSE1) still open."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from exchange.errors import DecryptionError
from exchange.sealing import (
    LEGACY_SEAL_TAG,
    SEAL_TAG,
    decrypt_payload,
    encrypt_payload,
    seal,
    unseal,
)

FIXTURE = Path(__file__).parent / "fixtures" / "envelope-cse1.json"


def test_seal_roundtrip_and_non_recipient():
    alice, bob = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    blob = seal(alice.public_key(), b"secret message", b"msg")
    assert blob[:4] == SEAL_TAG == b"CSE2" and b"secret message" not in blob
    assert len(blob) == 4 + 65 + len(b"secret message") + 16  # tag, HPKE enc, ciphertext and AEAD tag
    assert unseal(alice, blob, b"msg") == b"secret message"
    with pytest.raises(DecryptionError):
        unseal(bob, blob, b"msg")
    with pytest.raises(DecryptionError):
        unseal(alice, blob, b"other-purpose")
    assert seal(alice.public_key(), b"secret message", b"msg") != blob  # fresh ephemeral key each time


def test_a_certificate_or_its_key_both_name_the_recipient(consortium):
    cert = consortium.encryption_certificate("Org1MSP")
    key = consortium.encryption_key("Org1MSP")
    for recipient in (cert, cert.public_key()):
        assert unseal(key, seal(recipient, b"x", b"i"), b"i") == b"x"


def test_only_p256_recipients():
    with pytest.raises(ValueError, match="P-256"):
        seal(ec.generate_private_key(ec.SECP384R1()).public_key(), b"x")


@pytest.mark.parametrize("pos", [0, 3, 4, 10, 68, 69, 85, -1])
def test_any_changed_byte_fails(pos):
    k = ec.generate_private_key(ec.SECP256R1())
    blob = bytearray(seal(k.public_key(), b"x" * 40))
    blob[pos] ^= 0x80
    with pytest.raises(DecryptionError):
        unseal(k, bytes(blob))


@pytest.mark.parametrize(
    "blob", [b"", b"CSE2", b"CSE2" + bytes(80), b"CSE1" + bytes(96), b"XXXX" + bytes(120)]
)
def test_truncated_or_foreign_blobs_are_refused(blob):
    with pytest.raises(DecryptionError):
        unseal(ec.generate_private_key(ec.SECP256R1()), blob)


def _fixture():
    data = json.loads(FIXTURE.read_text())
    key = serialization.load_pem_private_key(data["recipient_key_pem"].encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return data, key


def test_seals_made_before_hpke_still_open():
    """Bytes made by the ECIES envelope this replaced (ledger/envelope.py at adc5b36; the fixture says
    how): each opens with its info, not with another, not with another key, not once altered."""
    data, key = _fixture()
    assert data["seals"]
    for case in data["seals"]:
        sealed, info = bytes.fromhex(case["sealed"]), bytes.fromhex(case["info"])
        assert sealed[:4] == LEGACY_SEAL_TAG
        assert unseal(key, sealed, info) == bytes.fromhex(case["plaintext"])
        with pytest.raises(DecryptionError):
            unseal(key, sealed, info + b"x")
        with pytest.raises(DecryptionError):
            unseal(ec.generate_private_key(ec.SECP256R1()), sealed, info)
        altered = bytearray(sealed)
        altered[-1] ^= 1
        with pytest.raises(DecryptionError):
            unseal(key, bytes(altered), info)


def test_payloads_encrypted_before_still_decrypt():
    data, _ = _fixture()
    p = data["payload"]
    got = decrypt_payload(
        bytes.fromhex(p["data_key"]), bytes.fromhex(p["ciphertext"]), bytes.fromhex(p["aad"])
    )
    assert got == bytes.fromhex(p["plaintext"])


def test_a_resealed_old_key_is_in_the_new_format():
    """A data key sealed before (CSE1, e.g. a Model record's wrapped key) opened and sealed again to a
    grantee comes out as CSE2, and both open."""
    data, key = _fixture()
    case = data["seals"][3]
    data_key = unseal(key, bytes.fromhex(case["sealed"]), bytes.fromhex(case["info"]))
    again = seal(key.public_key(), data_key, bytes.fromhex(case["info"]))
    assert again[:4] == SEAL_TAG and unseal(key, again, bytes.fromhex(case["info"])) == data_key


def test_payload_encryption():
    key, ct = encrypt_payload(b"model bytes", b"aad")
    assert ct[:4] == b"CPE1"
    assert decrypt_payload(key, ct, b"aad") == b"model bytes"
    with pytest.raises(DecryptionError):
        decrypt_payload(key, ct, b"other")
    with pytest.raises(DecryptionError):
        decrypt_payload(bytes(32), ct, b"aad")
    with pytest.raises(DecryptionError):
        decrypt_payload(bytes(7), ct, b"aad")  # not a key at all
    with pytest.raises(DecryptionError):
        decrypt_payload(key, ct[:20], b"aad")
    bad = bytearray(ct)
    bad[-1] ^= 1
    with pytest.raises(DecryptionError):
        decrypt_payload(key, bytes(bad), b"aad")
