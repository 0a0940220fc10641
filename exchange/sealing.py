"""Sealing to an organisation, and encryption under a data key (docs/artifacts.md "Sealing").

* :func:`seal` / :func:`unseal`: HPKE (RFC 9180) base mode to an organisation's key-agreement certificate
  (P-256): DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-256-GCM -- ``cryptography``'s
  ``hpke.Suite(KEM.P256, KDF.HKDF_SHA256, AEAD.AES_256_GCM)``. Only the holder of the recipient's
  private key opens a sealed blob; any change to it, or another ``info``, makes opening fail.
* :func:`encrypt_payload` / :func:`decrypt_payload`: AES-256-GCM under a fresh random data key. A model
  payload is encrypted once; its data key is sealed to each organisation on the model's access list
  (granting adds a sealed key, revoking removes it).

Formats (the first four bytes name the format)::

    sealed   CSE2 || enc (65 bytes, the KEM's uncompressed ephemeral point) || AES-GCM ciphertext+tag
             HPKE info = "consortia-seal|" + info
    payload  CPE1 || nonce (12) || AES-GCM ciphertext+tag          (aad = the caller's label)

New seals are ``CSE2``. :func:`unseal` still opens ``CSE1``, the format sealed before HPKE (ECIES:
ephemeral P-256 ECDH, HKDF-SHA256 with the ephemeral point as salt and ``"consortia-seal|" + info``,
AES-256-GCM with ``info`` as associated data; ``CSE1 || point (65) || nonce (12) || ciphertext+tag``),
so stores, journals and sealed model keys on the ledger written before stay readable.

Both report their time into :mod:`wire.timing` (``sealing``), whoever calls them: the store, the task
journal, a published model's keys.
"""

from __future__ import annotations

import os

from cryptography import x509
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, hpke
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from exchange.errors import DecryptionError
from wire import timing

SEAL_TAG = b"CSE2"  #: HPKE seals (written)
LEGACY_SEAL_TAG = b"CSE1"  #: ECIES seals (read only)
PAYLOAD_TAG = b"CPE1"  #: a payload under a data key

_SUITE = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_256_GCM)
_ENC = hpke.KEM.P256.enc_length()  # 65
_TAG_BYTES = 16
_INFO = b"consortia-seal|"
MAX_SEAL_OVERHEAD = 4 + 65 + 12 + _TAG_BYTES
"""Bytes a seal adds to its plaintext, at most (``CSE1``: tag, point, nonce, GCM tag; ``CSE2`` adds 85)."""
PAYLOAD_OVERHEAD = 4 + 12 + _TAG_BYTES  #: bytes :func:`encrypt_payload` adds to its plaintext

Recipient = x509.Certificate | ec.EllipticCurvePublicKey


def _public_key(recipient: Recipient) -> ec.EllipticCurvePublicKey:
    key = recipient.public_key() if isinstance(recipient, x509.Certificate) else recipient
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("recipient must hold a P-256 key")
    return key


def seal(recipient: Recipient, plaintext: bytes, info: bytes = b"") -> bytes:
    """Encrypt ``plaintext`` so that only ``recipient``'s private key opens it, bound to ``info``."""
    with timing.section("sealing"):
        return SEAL_TAG + _SUITE.encrypt(plaintext, _public_key(recipient), _INFO + info)


def unseal(private_key: ec.EllipticCurvePrivateKey, blob: bytes, info: bytes = b"") -> bytes:
    """The plaintext of a sealed blob (either format); :class:`DecryptionError` if it is not addressed
    to ``private_key``, was sealed with another ``info``, or was altered."""
    tag = blob[:4]
    with timing.section("sealing"):
        try:
            if tag == SEAL_TAG and len(blob) >= 4 + _ENC + _TAG_BYTES:
                return _SUITE.decrypt(memoryview(blob)[4:], private_key, _INFO + info)
            if tag == LEGACY_SEAL_TAG and len(blob) >= 4 + 65 + 12 + _TAG_BYTES:
                return _unseal_legacy(private_key, blob, info)
        except (InvalidTag, ValueError, TypeError):
            raise DecryptionError("cannot open sealed blob: not addressed to this key, or altered") from None
    raise DecryptionError("not a sealed blob")


def _unseal_legacy(private_key: ec.EllipticCurvePrivateKey, blob: bytes, info: bytes) -> bytes:
    """Open a ``CSE1`` blob (ECIES, sealed before HPKE)."""
    point, nonce, ciphertext = blob[4:69], blob[69:81], blob[81:]
    ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    shared = private_key.exchange(ec.ECDH(), ephemeral)
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=point, info=_INFO + info).derive(shared)
    return AESGCM(key).decrypt(nonce, ciphertext, info)


def encrypt_payload(plaintext: bytes, aad: bytes = b"") -> tuple[bytes, bytes]:
    """Encrypt under a fresh data key; returns (data_key, ciphertext)."""
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    return data_key, PAYLOAD_TAG + nonce + AESGCM(data_key).encrypt(nonce, plaintext, aad)


def decrypt_payload(data_key: bytes, ciphertext: bytes, aad: bytes = b"") -> bytes:
    """The plaintext of :func:`encrypt_payload`'s ciphertext; :class:`DecryptionError` if the key or
    ``aad`` is not the one it was encrypted with, or it was altered."""
    if len(ciphertext) < 4 + 12 + _TAG_BYTES or ciphertext[:4] != PAYLOAD_TAG:
        raise DecryptionError("not an encrypted payload")
    try:
        return AESGCM(data_key).decrypt(ciphertext[4:16], ciphertext[16:], aad)
    except (InvalidTag, ValueError):
        raise DecryptionError("payload does not decrypt under this data key (wrong key or altered)") from None
