"""How a published model is encrypted: one label binds the ciphertext to (process, owner, model digest)
(docs/models.md).

The final model is encrypted once under a fresh data key (AES-GCM, :func:`ledger.envelope.encrypt_payload`)
with associated data :func:`model_aad`; the data key is sealed to each organisation on the access list
(:func:`ledger.envelope.seal`) with ``info`` :func:`model_key_info`. The node agent seals
(:func:`seal_model`), :func:`executor.process.collect_models` and the gateway open
(:func:`open_model`) and re-seal on revocation -- all with these two labels.

A *record* is anything naming ``process_id``, ``owner`` and ``digest`` (the model's plaintext digest):
a Model record as a dict (the gateway's view) or as :class:`ledger.client.ModelRecord`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledger.envelope import decrypt_payload, encrypt_payload, seal, unseal
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
    return ciphertext, {o: seal(consortium.encryption_certificate(o), data_key, info) for o in organisations}


def open_model(ciphertext: bytes, sealed_key: bytes, private_key: Any, record: Any) -> bytes:
    """The plaintext model: the data key unsealed with ``private_key``, then the ciphertext opened."""
    data_key = unseal(private_key, sealed_key, model_key_info(record))
    return decrypt_payload(data_key, ciphertext, model_aad(record))
