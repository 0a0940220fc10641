"""Opening, sharing and re-keying the encrypted final models (docs/api.md "Deviations and
decisions", docs/models.md).

The executor's convention (:mod:`executor.model_seal`, whose ``model_aad`` and ``model_key_info`` this
module uses): a model's payload is encrypted with
``encrypt_payload(plaintext, aad)``, ``aad = "consortia-model|<process>|<owner>|<model digest>"``,
and its data key is sealed to each organisation on the access list with
``info = "consortia-model-key|" + aad``. The gateway and the CLI open a model, seal its data key to
a grantee, and rotate the key on revocation through this module."""

from __future__ import annotations

from typing import Any

from api.artifacts import ArtifactMissing, DigestMismatch, fetch_verified, sha256_digest, store_at
from api.gateway.state import Gateway, record
from api.sealing import open_data_key
from executor.model_seal import model_aad, model_key_info
from ledger.client import ConsortiaClient
from ledger.envelope import DecryptionError, decrypt_payload, encrypt_payload, seal
from ledger.errors import Forbidden, InvalidArgument, NotFound


def data_key(gw: Gateway, record: dict[str, Any]) -> bytes:
    """The model's data key as sealed for this organisation (:func:`api.sealing.open_data_key`)."""
    return open_data_key(gw.consortium, gw.msp_id, record, model_key_info(record))


def open_model_payload(gw: Gateway, record: dict[str, Any]) -> bytes:
    """Fetch the encrypted model (this organisation's store, else the store the record's location
    names), check the ciphertext digest, open it with this organisation's sealed data key and check
    the plaintext against the model's on-chain digest."""
    try:
        ciphertext = fetch_verified(gw.artifacts, record["ciphertext_digest"])
    except ArtifactMissing:
        remote = store_at(record.get("location") or "")
        if remote is None:
            raise
        ciphertext = fetch_verified(remote, record["ciphertext_digest"])
    try:
        plaintext = decrypt_payload(data_key(gw, record), ciphertext, model_aad(record))
    except DecryptionError as exc:
        raise DigestMismatch(f"model {record['id']} does not decrypt: {exc}") from None
    if sha256_digest(plaintext) != record["digest"]:
        raise DigestMismatch(
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


def _model_store(gw: Gateway, record: dict[str, Any]) -> tuple[Any, str]:
    """Where the owner keeps the model's ciphertext: the store its ``location`` names (the owner's
    own store, which other members fetch from), else this gateway's store. (store, location)"""
    remote = store_at(record.get("location") or "")
    if remote is not None and remote.home.is_dir():
        return remote, record["location"]
    local = gw.artifacts
    return local, str(getattr(local, "location", "") or record.get("location") or "")


def revoke_with_rotation(gw: Gateway, c: ConsortiaClient, model_id: str, organisation: str) -> Any:
    """Revoke ``organisation``'s access to a model this organisation owns, so that it revokes
    (issue: a sealed key fetched before revocation must open nothing stored afterwards):

    1. open the current ciphertext with the owner's sealed key (digest checked);
    2. encrypt it again under a fresh data key and store the new ciphertext;
    3. ``Model:revoke`` with the new ciphertext digest and the new key sealed for exactly the
       remaining access list -- the contract replaces every sealed key and the ciphertext digest;
    4. delete the old ciphertext from the owner's stores.

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
    store, location = _model_store(gw, rec)
    new_digest = store.put(ciphertext)
    new_digest = new_digest if isinstance(new_digest, str) else new_digest.digest
    try:
        revoked = c.revoke_model(model_id, organisation, new_digest, wrapped, location=location)
    except BaseException:
        store.delete(new_digest)
        raise
    for s in {id(store): store, id(gw.artifacts): gw.artifacts}.values():
        delete = getattr(s, "delete", None)
        if delete is not None:
            delete(rec["ciphertext_digest"])
    return revoked
