"""How a published model is encrypted: one label binds the ciphertext and its data keys to (process,
owner, model digest) (docs/models.md).

The final model is encrypted once under a fresh data key (:func:`exchange.sealing.encrypt_payload`) with
associated data :func:`model_aad`; the data key is sealed to each organisation on the access list
(:func:`exchange.sealing.seal`) with ``info`` :func:`model_key_info`. The node agent seals
(:func:`seal_model`); ``executor.process.collect_models`` and the gateway open (:func:`open_model`,
:func:`open_data_key`) and re-seal on a grant or a revocation -- all with these two labels.

A *record* is anything naming ``process_id``, ``owner`` and ``digest`` (the model's plaintext digest):
a Model record as a dict (the gateway's view) or as :class:`ledger.client.ModelRecord`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from exchange.errors import DecryptionError
from exchange.sealing import decrypt_payload, encrypt_payload, seal, unseal
from ledger.errors import Forbidden
from ledger.identity import Consortium


def _field(record: Any, name: str) -> str:
    return str(record[name] if isinstance(record, Mapping) else getattr(record, name))


def model_aad(record: Any) -> bytes:
    """Associated data of a model's ciphertext: ``consortia-model|<process>|<owner>|<digest>``."""
    process_id, owner, digest = (_field(record, k) for k in ("process_id", "owner", "digest"))
    return f"consortia-model|{process_id}|{owner}|{digest}".encode()


def model_key_info(record: Any) -> bytes:
    """``info`` with which the model's data key is sealed to each organisation."""
    return b"consortia-model-key|" + model_aad(record)


def seal_model(
    payload: bytes, record: Any, consortium: Consortium, organisations: Iterable[str]
) -> tuple[bytes, dict[str, bytes]]:
    """Encrypt ``payload`` under a fresh data key; (ciphertext, data key sealed to each organisation)."""
    data_key, ciphertext = encrypt_payload(payload, model_aad(record))
    info = model_key_info(record)
    certificates = consortium.encryption_certificates(organisations)
    return ciphertext, {o: seal(cert, data_key, info) for o, cert in certificates.items()}


def open_model(
    ciphertext: bytes, sealed_key: bytes, private_key: ec.EllipticCurvePrivateKey, record: Any
) -> bytes:
    """The plaintext model: the data key unsealed with ``private_key``, then the ciphertext opened."""
    data_key = unseal(private_key, sealed_key, model_key_info(record))
    return decrypt_payload(data_key, ciphertext, model_aad(record))


def open_data_key(consortium: Consortium, msp_id: str, record: Mapping[str, Any]) -> bytes:
    """The data key of model ``record`` (a dict naming ``id`` and ``wrapped_key``: the copy sealed for
    ``msp_id`` on the ledger), opened with ``msp_id``'s key-agreement key. :class:`Forbidden` when
    ``msp_id`` holds no sealed key or its key does not open it. The gateway (download, revocation with
    key rotation) and the CLI (``model grant``) both open it here."""
    if not record.get("wrapped_key"):
        raise Forbidden(f"{msp_id} holds no sealed key for model {record['id']}")
    try:
        return unseal(
            consortium.encryption_key(msp_id), base64.b64decode(record["wrapped_key"]), model_key_info(record)
        )
    except DecryptionError as exc:
        raise Forbidden(
            f"the data key of model {record['id']} sealed for {msp_id} does not open: {exc}"
        ) from None
