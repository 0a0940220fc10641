"""Execution records as standard attestations: in-toto Statement v1 in a DSSE envelope.

An execution record (one organisation, one round) becomes a Statement whose

* ``subject`` lists the output digests the task signed (new state, each outbox message, the model);
* ``predicate`` is SLSA Provenance v1: ``buildDefinition.resolvedDependencies`` are the inputs --
  the pinned image digest, the data commitment, the previous state and every inbox message;
  ``runDetails`` names the executing organisation's node, the ledger transaction and times, and
  carries the task's signed result, its signature and the task's public key as byproducts so that
  the task signature can be re-checked offline.

The envelope (DSSE v1) is signed by the executing organisation's identity
(:meth:`ledger.identity.Identity.sign`, ECDSA P-256/SHA-256) over the pre-authentication encoding
``PAE(type, body) = "DSSEv1" SP len(type) SP type SP len(body) SP body``. ``keyid`` is the
SHA-256 of the signer's certificate (PEM bytes), so a verifier finds the certificate and checks it
against the organisation's CA (:func:`audit.signatures.check_certificate`).

Every attestation also carries, as the byproduct ``ledger-checkpoint``, a signed checkpoint of the
ledger's chain head when it was made (:mod:`ledger.checkpoint`): block number and header hash,
signed by a consortium identity (verified by :mod:`audit.checkpoints`). Whoever holds the
attestation can later check that the ledger still reaches that block with that hash (``consortia
ledger verify --checkpoint``), so a ledger cut short below the attested record is detected.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec

from audit.signatures import check_record_signature
from executor.task_keys import TaskSignatureInvalid
from ledger.checkpoint import MEDIA_TYPE as CHECKPOINT_MEDIA_TYPE
from ledger.checkpoint import Checkpoint
from ledger.identity import Identity, verify
from wire import bounded_json
from wire.bounded_json import JSONTooDeep
from wire.canonical import canonical_json, sha256_digest

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://consortia.dev/ExecutionRecord/v1"
IN_TOTO_PAYLOAD = "application/vnd.in-toto+json"
CHECKPOINT_BYPRODUCT = "ledger-checkpoint"


class AttestationError(ValueError):
    """An envelope or statement does not verify; the message says what broke."""


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def certificate_keyid(certificate_pem: bytes) -> str:
    return sha256_digest(certificate_pem)


def _hex(digest: str) -> dict[str, str]:
    algo, _, value = digest.partition(":")
    if algo != "sha256" or len(value) != 64:
        raise AttestationError(f"{digest!r} is not a sha256 digest")
    return {"sha256": value}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def strict_b64decode(text: Any, what: str) -> bytes:
    """Decode base64 and insist the text is the canonical encoding of the result (no alternate
    spellings of the same bytes, so a changed character always changes the bytes)."""
    if not isinstance(text, str):
        raise AttestationError(f"{what} is not a base64 string")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise AttestationError(f"{what} is not valid base64") from None
    if _b64(data) != text:
        raise AttestationError(f"{what} is not canonical base64")
    return data


def execution_subjects(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The output digests of a completed execution record, as Statement subjects."""
    result = record.get("result")
    if not result:
        raise AttestationError(
            f"execution of {record.get('organisation')} for round {record.get('round')} "
            f"of {record.get('process_id')} has no result (status {record.get('status')})"
        )
    node = f"{result['process_id']}/{result['round']}/{result['organisation']}"
    outs = result["outputs"]
    subjects = [{"name": f"{node}/state", "digest": _hex(outs["state"])}]
    for m in outs.get("messages") or []:
        subjects.append({"name": f"{node}/message/{m['recipient']}", "digest": _hex(m["digest"])})
    if outs.get("model"):
        subjects.append({"name": f"{node}/model", "digest": _hex(outs["model"]["digest"])})
    return subjects


def execution_dependencies(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The inputs of an execution: pinned image, data commitment, previous state, inbox messages."""
    result = record["result"]
    ins = result["inputs"]
    deps = [
        {"name": "image", "digest": _hex(result["image_digest"])},
        {"name": "data_commitment", "digest": _hex(ins["data_commitment"])},
    ]
    if ins.get("state"):
        deps.append({"name": "state", "digest": _hex(ins["state"])})
    for m in ins.get("messages") or []:
        deps.append({"name": f"message/{m['sender']}", "digest": _hex(m["digest"])})
    return deps


def execution_statement(
    record: dict[str, Any], checkpoint: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The in-toto Statement v1 (SLSA Provenance v1 predicate) of a completed execution record;
    ``checkpoint`` (a signed chain-head checkpoint, JSON form) is carried as a byproduct."""
    subjects = execution_subjects(record)
    result = record["result"]
    statement: dict[str, Any] = {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "process_id": result["process_id"],
                    "round": result["round"],
                    "organisation": result["organisation"],
                    "image_digest": result["image_digest"],
                },
                "internalParameters": {"runtime": result["runtime"]},
                "resolvedDependencies": execution_dependencies(record),
            },
            "runDetails": {
                "builder": {"id": f"https://consortia.dev/node/{result['organisation']}"},
                "metadata": {
                    "invocationId": record.get("completed_tx_id") or record.get("tx_id", ""),
                    "startedOn": result.get("started", ""),
                    "finishedOn": result.get("finished", ""),
                },
                "byproducts": [
                    {
                        "name": "execution-result",
                        "mediaType": "application/json",
                        "content": _b64(canonical_json(result)),
                    },
                    {
                        "name": "task-signature",
                        "mediaType": "application/x-der-ecdsa-signature",
                        "content": record["signature"],
                    },
                    {
                        "name": "task-public-key",
                        "mediaType": "application/x-pem-file",
                        "content": _b64(record["public_key"].encode("ascii")),
                    },
                ],
            },
        },
    }
    if checkpoint is not None:
        statement["predicate"]["runDetails"]["byproducts"].append(
            {
                "name": CHECKPOINT_BYPRODUCT,
                "mediaType": CHECKPOINT_MEDIA_TYPE,
                "content": _b64(canonical_json(checkpoint)),
            }
        )
    return statement


def statement_checkpoint(statement: Any) -> dict[str, Any] | None:
    """The ledger checkpoint a statement carries (JSON form), or None."""
    try:
        found = [
            b
            for b in statement["predicate"]["runDetails"]["byproducts"]
            if b.get("name") == CHECKPOINT_BYPRODUCT
        ]
    except (KeyError, TypeError, AttributeError):
        return None
    if len(found) != 1:
        return None
    body = strict_b64decode(found[0].get("content"), "ledger checkpoint")
    try:
        obj = bounded_json.loads(body, "ledger checkpoint")
    except JSONTooDeep as exc:
        raise AttestationError(str(exc)) from None
    except ValueError:
        raise AttestationError("ledger checkpoint is not JSON") from None
    if canonical_json(obj) != body:
        raise AttestationError("ledger checkpoint is not canonical JSON")
    if not isinstance(obj, dict):
        raise AttestationError("ledger checkpoint is not a JSON object")
    return obj


def sign_envelope(
    payload: dict[str, Any], identity: Identity, payload_type: str = IN_TOTO_PAYLOAD
) -> dict[str, Any]:
    """A DSSE envelope over the canonical JSON of ``payload``, signed by ``identity``."""
    body = canonical_json(payload)
    sig = identity.sign(pae(payload_type, body))
    return {
        "payloadType": payload_type,
        "payload": _b64(body),
        "signatures": [{"keyid": certificate_keyid(identity.certificate_pem), "sig": _b64(sig)}],
    }


def attest_execution(
    record: dict[str, Any], identity: Identity, checkpoint: Checkpoint | Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Sign the Statement of ``record`` (with the ledger ``checkpoint`` it was read at); only the
    executing organisation's identity may."""
    if identity.msp_id != record.get("organisation"):
        raise AttestationError(
            f"an execution record of {record.get('organisation')} is attested by "
            f"{record.get('organisation')} itself, not by {identity.msp_id}"
        )
    if isinstance(checkpoint, Checkpoint):
        checkpoint = checkpoint.to_json()
    return sign_envelope(execution_statement(record, checkpoint), identity)


def open_envelope(
    envelope: Any, certificates: dict[str, bytes], what: str = "envelope"
) -> tuple[dict[str, Any], str]:
    """Verify a DSSE envelope's signature with the certificate named by its keyid.

    ``certificates`` maps keyid -> PEM. Returns (payload object, keyid). Does *not* check the
    certificate's CA (see :func:`audit.signatures.check_certificate`)."""
    if not isinstance(envelope, dict) or set(envelope) != {"payloadType", "payload", "signatures"}:
        raise AttestationError(f"{what} is not a DSSE envelope")
    sigs = envelope["signatures"]
    if (
        not isinstance(sigs, list)
        or len(sigs) != 1
        or not isinstance(sigs[0], dict)
        or set(sigs[0]) != {"keyid", "sig"}
    ):
        raise AttestationError(f"{what} must carry exactly one signature {{keyid, sig}}")
    keyid = sigs[0]["keyid"]
    pem = certificates.get(keyid)
    if pem is None:
        raise AttestationError(f"{what} is signed by unknown key {keyid}")
    if certificate_keyid(pem) != keyid:
        raise AttestationError(f"{what}: certificate does not match its keyid {keyid}")
    body = strict_b64decode(envelope["payload"], f"{what} payload")
    sig = strict_b64decode(sigs[0]["sig"], f"{what} signature")
    try:
        pub = x509.load_pem_x509_certificate(pem).public_key()
    except (ValueError, UnsupportedAlgorithm):
        raise AttestationError(f"{what}: signer certificate is not a valid certificate") from None
    if not isinstance(pub, ec.EllipticCurvePublicKey) or not verify(
        pub, pae(str(envelope["payloadType"]), body), sig
    ):
        raise AttestationError(f"{what}: DSSE signature does not verify")
    try:
        payload = bounded_json.loads(body, f"{what} payload")
    except JSONTooDeep as exc:
        raise AttestationError(str(exc)) from None
    except ValueError:
        raise AttestationError(f"{what} payload is not JSON") from None
    if canonical_json(payload) != body:
        raise AttestationError(f"{what} payload is not canonical JSON")
    return payload, keyid


def check_statement(statement: dict[str, Any], record: dict[str, Any]) -> dict[str, Any] | None:
    """The statement says exactly what the execution record says, and the task signature holds.
    Returns the ledger checkpoint it carries (JSON form, not yet verified:
    :func:`audit.checkpoints.check_checkpoint`)."""
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        raise AttestationError("not an in-toto Statement v1 with a SLSA Provenance v1 predicate")
    checkpoint = statement_checkpoint(statement)
    expected = execution_statement(record, checkpoint)
    if statement != expected:
        for part in ("subject", "predicate"):
            if statement.get(part) != expected[part]:
                raise AttestationError(f"statement {part} differs from the execution record")
        raise AttestationError("statement differs from the execution record")
    try:
        check_record_signature(record)  # the one record-signature check (audit.signatures)
    except TaskSignatureInvalid as exc:
        raise AttestationError(str(exc)) from None
    return checkpoint
