"""Envelope encryption: only the recipient opens; any change is detected."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from ledger.envelope import DecryptionError, decrypt_payload, encrypt_payload, seal, unseal


def test_seal_roundtrip_and_non_recipient():
    alice, bob = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    blob = seal(alice.public_key(), b"secret message", b"msg")
    assert unseal(alice, blob, b"msg") == b"secret message"
    with pytest.raises(DecryptionError):
        unseal(bob, blob, b"msg")
    with pytest.raises(DecryptionError):
        unseal(alice, blob, b"other-purpose")
    assert seal(alice.public_key(), b"secret message", b"msg") != blob  # fresh ephemeral key each time


@pytest.mark.parametrize("pos", [0, 10, 70, 85, -1])
def test_any_changed_byte_fails(pos):
    k = ec.generate_private_key(ec.SECP256R1())
    blob = bytearray(seal(k.public_key(), b"x" * 40))
    blob[pos] ^= 0x80
    with pytest.raises(DecryptionError):
        unseal(k, bytes(blob))


def test_payload_encryption():
    key, ct = encrypt_payload(b"model bytes", b"aad")
    assert decrypt_payload(key, ct, b"aad") == b"model bytes"
    with pytest.raises(DecryptionError):
        decrypt_payload(key, ct, b"other")
    with pytest.raises(DecryptionError):
        decrypt_payload(bytes(32), ct, b"aad")
    bad = bytearray(ct)
    bad[-1] ^= 1
    with pytest.raises(DecryptionError):
        decrypt_payload(key, bytes(bad), b"aad")
