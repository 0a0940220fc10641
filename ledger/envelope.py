"""Envelope encryption to organisations (messages, model payloads, wrapped data keys).

* :func:`seal` / :func:`unseal`: ECIES to an organisation's key-agreement certificate --
  ephemeral P-256 ECDH, HKDF-SHA256, AES-256-GCM. Only the holder of the recipient's private
  key can open a sealed blob; any change to it makes opening fail.
* :func:`encrypt_payload` / :func:`decrypt_payload`: AES-256-GCM under a fresh random data key.
  A model payload is encrypted once; its data key is sealed for each organisation on the
  model's access list (granting adds a sealed key, revoking removes it).

Format of a sealed blob: ``b"CSE1" || ephemeral public key (65 bytes, uncompressed) || nonce
(12) || AES-GCM ciphertext+tag``; ``info``/``aad`` bind it to its purpose.
"""

from __future__ import annotations

import os

from cryptography import x509
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEAL_MAGIC = b"CSE1"
PAYLOAD_MAGIC = b"CPE1"


class DecryptionError(ValueError):
    """The blob cannot be opened with this key (wrong recipient, or altered)."""


def _public_key(recipient: x509.Certificate | ec.EllipticCurvePublicKey) -> ec.EllipticCurvePublicKey:
    key = recipient.public_key() if isinstance(recipient, x509.Certificate) else recipient
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("recipient must hold a P-256 key")
    return key


def _kdf(shared: bytes, eph: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=eph, info=b"consortia-seal|" + info).derive(shared)


def seal(
    recipient: x509.Certificate | ec.EllipticCurvePublicKey, plaintext: bytes, info: bytes = b""
) -> bytes:
    """Encrypt ``plaintext`` so that only ``recipient``'s private key opens it."""
    pub = _public_key(recipient)
    eph = ec.generate_private_key(ec.SECP256R1())
    eph_bytes = eph.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    key = _kdf(eph.exchange(ec.ECDH(), pub), eph_bytes, info)
    nonce = os.urandom(12)
    return SEAL_MAGIC + eph_bytes + nonce + AESGCM(key).encrypt(nonce, plaintext, info)


def unseal(private_key: ec.EllipticCurvePrivateKey, blob: bytes, info: bytes = b"") -> bytes:
    if len(blob) < 4 + 65 + 12 + 16 or blob[:4] != SEAL_MAGIC:
        raise DecryptionError("not a sealed blob")
    eph_bytes, nonce, ct = blob[4:69], blob[69:81], blob[81:]
    try:
        eph = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), eph_bytes)
        key = _kdf(private_key.exchange(ec.ECDH(), eph), eph_bytes, info)
        return AESGCM(key).decrypt(nonce, ct, info)
    except (InvalidTag, ValueError):
        raise DecryptionError("cannot open sealed blob: not addressed to this key, or altered") from None


def encrypt_payload(plaintext: bytes, aad: bytes = b"") -> tuple[bytes, bytes]:
    """Encrypt under a fresh data key; returns (data_key, ciphertext)."""
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    return data_key, PAYLOAD_MAGIC + nonce + AESGCM(data_key).encrypt(nonce, plaintext, aad)


def decrypt_payload(data_key: bytes, ciphertext: bytes, aad: bytes = b"") -> bytes:
    if len(ciphertext) < 4 + 12 + 16 or ciphertext[:4] != PAYLOAD_MAGIC:
        raise DecryptionError("not an encrypted payload")
    try:
        return AESGCM(data_key).decrypt(ciphertext[4:16], ciphertext[16:], aad)
    except InvalidTag:
        raise DecryptionError("payload does not decrypt under this data key (wrong key or altered)") from None
