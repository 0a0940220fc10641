"""The signature checks an auditor runs on what others signed.

* :func:`check_record_signature` -- the one check of an execution record's task signature (seed 003
  §IV-C): the task key registered in the record before the task ran signed the canonical JSON of its
  result. It is built on the signing primitive :func:`executor.task_keys.check_task_signature`
  (low-S ECDSA P-256/SHA-256, as the execution-record contract checks it), which the node also uses
  on a task's own manifest. Used by the lineage checks, the attestations and the explorer.
* :func:`check_certificate` -- a certificate was issued and signed by a CA (the signers of DSSE
  envelopes and checkpoints, the clients of the gateway's mutual TLS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec

from executor.task_keys import TaskSignatureInvalid, check_task_signature
from ledger.client import ExecutionResult, signed_result


class CertificateInvalid(ValueError):
    """A certificate is unreadable or not issued by the CA it is checked against (the message says
    which)."""


def check_record_signature(record: Mapping[str, Any] | Any) -> None:
    """The task signature of an execution record (a typed record or its canonical JSON dict) holds:
    its registered task key signed the canonical JSON of its result. Raises
    :class:`~executor.task_keys.TaskSignatureInvalid` naming the record. A result with
    ``confidential_sha256`` is checked in its public form, with or without its confidential part
    joined: a non-member verifies the public record alone (docs/confidentiality.md)."""
    get = record.get if isinstance(record, Mapping) else lambda k: getattr(record, k, None)
    result = get("result")
    # what the task key signed: a confidential result's public form (a member's read joins its part)
    signed = result.signed_form() if isinstance(result, ExecutionResult) else signed_result(result)
    try:
        check_task_signature(get("public_key") or "", signed, get("signature") or "")
        _check_joined_part(result, get("confidential_salt"))
    except TaskSignatureInvalid as exc:
        raise TaskSignatureInvalid(
            f"task signature of {get('organisation')} for round {get('round')} of {get('process_id')}: {exc}"
        ) from None


def _check_joined_part(result: Any, salt: Any) -> None:
    """A confidential result read with its part joined: the part (metrics, data commitment, validation
    scores, the messages' senders and recipients, with the record's ``confidential_salt``) must hash to the signed ``confidential_sha256``,
    which the signature covers. A public result (nothing joined) has nothing more to check."""
    if result is None:
        return
    data = result.json_object() if isinstance(result, ExecutionResult) else result
    if not isinstance(data, Mapping) or data.get("confidential_sha256") is None:
        return
    inputs = data.get("inputs") or {}
    if "metrics" not in data and "validation" not in data and "data_commitment" not in inputs:
        return
    try:
        joined = result if isinstance(result, ExecutionResult) else ExecutionResult.model_validate(data)
        part = joined.confidential_part(salt)
    except ValueError:
        raise TaskSignatureInvalid(
            "its joined confidential part is incomplete (it does not verify)"
        ) from None
    if part.digest() != data["confidential_sha256"]:
        raise TaskSignatureInvalid(
            "its joined confidential part does not verify: it does not hash to the signed confidential_sha256"
        )


def check_certificate(cert_pem: bytes, ca_pem: bytes, what: str) -> x509.Certificate:
    """The certificate, after checking it is issued and signed by the CA (P-256 CAs, as cryptogen
    issues them). Raises :class:`CertificateInvalid` naming ``what``."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
    except (ValueError, UnsupportedAlgorithm):
        raise CertificateInvalid(f"{what}: certificate or CA certificate is not valid PEM") from None
    if cert.issuer != ca.subject:
        raise CertificateInvalid(f"{what}: certificate is not issued by the CA {ca.subject.rfc4514_string()}")
    pub = ca.public_key()
    algorithm = cert.signature_hash_algorithm
    if not isinstance(pub, ec.EllipticCurvePublicKey) or algorithm is None:
        raise CertificateInvalid(f"{what}: the CA key is not an ECDSA key")
    try:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
    except (InvalidSignature, TypeError, ValueError, UnsupportedAlgorithm):
        raise CertificateInvalid(f"{what}: certificate signature does not verify against its CA") from None
    return cert
