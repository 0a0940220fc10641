"""Opening, sharing and re-keying the encrypted final models (docs/api.md "Deviations and
decisions", docs/models.md).

The convention is :mod:`exchange.model_seal`'s: a model's payload is encrypted with
``encrypt_payload(plaintext, model_aad(record))`` and its data key is sealed to each organisation on the
access list with ``info = model_key_info(record)``. The gateway and the CLI open a model, seal its data
key to a grantee, and rotate the key on revocation through this module."""

from __future__ import annotations

from typing import Any

from api.gateway.state import Gateway, record
from exchange.errors import ArtifactCorrupted, DecryptionError
from exchange.model_seal import model_aad, model_key_info, open_data_key
from exchange.sealing import PAYLOAD_OVERHEAD, decrypt_payload, encrypt_payload, seal
from ledger.client import ConsortiaClient
from ledger.errors import Forbidden, InvalidArgument, NotFound
from wire.canonical import sha256_digest


def data_key(gw: Gateway, record: dict[str, Any]) -> bytes:
    """The model's data key as sealed for this organisation (:func:`exchange.model_seal.open_data_key`)."""
    return open_data_key(gw.consortium, gw.msp_id, record)


def open_model_payload(gw: Gateway, record: dict[str, Any]) -> bytes:
    """The plaintext model: its ciphertext from this organisation's store, else fetched from the owner's
    artifact service (found by the store's locations; the copy is kept in this store), checked against
    the ciphertext digest, opened with this organisation's sealed data key and checked against the
    model's on-chain digest."""
    digest = record["ciphertext_digest"]
    size = record.get("size")  # the model in the clear: its ciphertext is PAYLOAD_OVERHEAD longer
    gw.artifacts.fetch_into(
        record["owner"], digest, size + PAYLOAD_OVERHEAD if isinstance(size, int) and size >= 0 else None
    )
    ciphertext = gw.artifacts.get(digest)
    try:
        plaintext = decrypt_payload(data_key(gw, record), ciphertext, model_aad(record))
    except DecryptionError as exc:
        raise ArtifactCorrupted(f"model {record['id']} does not decrypt: {exc}") from None
    if sha256_digest(plaintext) != record["digest"]:
        raise ArtifactCorrupted(
            f"model {record['id']} decrypts to {sha256_digest(plaintext)}, the ledger says {record['digest']}"
        )
    return plaintext


def owned_model(c: ConsortiaClient, model_id: str) -> dict[str, Any]:
    """The model record, if the caller's organisation owns it (only the owner changes its access list)."""
    rec = record(c.get_model(model_id))
    if rec["owner"] != c.organisation:
        raise Forbidden(
            f"model {model_id} is owned by {rec['owner']}; only the owner may change its access list"
        )
    return rec


def grant_with_sealed_key(gw: Gateway, c: ConsortiaClient, model_id: str, organisation: str) -> Any:
    """Add ``organisation`` to the access list of a model this organisation owns, sealing the
    model's data key to its key-agreement certificate (the same ``info`` as the executor's)."""
    rec = owned_model(c, model_id)
    try:
        cert = gw.consortium.encryption_certificate(organisation)
    except KeyError:
        raise NotFound(f"{organisation} is not an organisation of this consortium") from None
    wrapped = seal(cert, data_key(gw, rec), model_key_info(rec))
    return c.grant_model(model_id, organisation, wrapped)


def revoke_with_rotation(gw: Gateway, c: ConsortiaClient, model_id: str, organisation: str) -> Any:
    """Revoke ``organisation``'s access to a model this organisation owns, so that it revokes
    (issue: a sealed key fetched before revocation must open nothing stored afterwards):

    1. open the current ciphertext with the owner's sealed key (digest checked);
    2. encrypt it again under a fresh data key and store the new ciphertext;
    3. ``Model:revoke`` with the new ciphertext digest and the new key sealed for exactly the
       remaining access list -- the contract replaces every sealed key and the ciphertext digest;
    4. delete the old ciphertext from the owner's store.

    A failed revocation deletes the new ciphertext and leaves the model as it was. Copies the
    revoked organisation made before (plaintext or old ciphertext with its old key) are beyond
    reach: see docs/models.md."""
    rec = owned_model(c, model_id)
    if organisation == rec["owner"]:
        raise InvalidArgument("the owner cannot revoke its own access")
    if organisation not in rec["access"]:
        raise NotFound(f"{organisation} has no access to model {model_id}")
    plaintext = open_model_payload(gw, rec)
    remaining = [o for o in rec["access"] if o != organisation]
    new_key, ciphertext = encrypt_payload(plaintext, model_aad(rec))
    try:
        wrapped = {
            o: seal(gw.consortium.encryption_certificate(o), new_key, model_key_info(rec)) for o in remaining
        }
    except KeyError as exc:
        raise NotFound(f"{exc} on the access list of {model_id} has no key-agreement certificate") from None
    store = gw.artifacts  # the owner's own store, which its artifact service serves
    new_digest = store.put(ciphertext).digest
    try:
        revoked = c.revoke_model(
            model_id, organisation, new_digest, wrapped, location=store.location or rec.get("location") or ""
        )
    except BaseException:
        store.delete(new_digest)
        raise
    store.delete(rec["ciphertext_digest"])
    return revoked
