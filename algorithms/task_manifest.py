"""The signed result of a task (the ExecutionRecord contract's result schema; docs/executor.md "Task
runtime file contract"; seed 003 §IV-B): the manifest of what a task read and wrote, as digests, its
salted data commitment, and its low-S ECDSA signature with the task key.

This module imports only ``cryptography``, the standard library, :mod:`algorithms.step` and
:mod:`algorithms.task_spec` (it runs inside images).
"""

from __future__ import annotations

import datetime
import hashlib
import math
from collections.abc import Mapping
from typing import Any

from algorithms.step import SDK_VERSION
from algorithms.task_spec import TaskInputError, TaskSpec

_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def data_commitment(salt_hex: str, data_bytes: bytes) -> str:
    """Salted hash of the dataset file: ``sha256(salt || bytes)`` (docs/executor.md, "Task runtime file contract")."""
    return "sha256:" + hashlib.sha256(bytes.fromhex(salt_hex) + data_bytes).hexdigest()


def sign_low_s(private_key_pem: bytes, data: bytes) -> bytes:
    """DER ECDSA P-256/SHA-256 signature, normalised to low S (same rule as ledger.identity)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

    key = serialization.load_pem_private_key(private_key_pem, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise TaskInputError("task key must be an ECDSA P-256 private key")
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    if s > _P256_ORDER // 2:
        s = _P256_ORDER - s
    return encode_dss_signature(r, s)


def metrics_json(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics as finite floats; non-finite values are left out (canonical JSON has no NaN)."""
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        v = float(v)
        if math.isfinite(v):
            out[str(k)] = v
    return out


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_manifest(
    spec: TaskSpec,
    *,
    previous_state: str | None,
    inbox: Mapping[str, str],
    data_commitment: str,
    state: str,
    outbox: Mapping[str, tuple[str, int]],
    model: tuple[str, int] | None,
    metrics: Mapping[str, Any],
    started: str,
    finished: str,
    numeric_profile: Mapping[str, Any],
    outbox_provenance: Mapping[str, Mapping[str, Any]] | None = None,
    model_provenance: Mapping[str, Any] | None = None,
    validation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The execution result a task signs (the ExecutionRecord contract's result schema):
    what it read and what it wrote, as digests, plus its metrics, its own start/end times, the
    numeric profile it computed under (``{name, version, digest}``,
    :meth:`algorithms.numeric_profile.NumericProfile.record`) and the version of the algorithm SDK it
    ran with (``sdk``, :data:`algorithms.step.SDK_VERSION`).

    ``outbox_provenance`` / ``model_provenance``: extra signed fields of an output message / the
    model that the algorithm declares (:func:`payload_provenance`), e.g. the ids and digests of
    the shared estimators a collaborative-RF message or model carries.

    ``validation`` (the last round of a process with a validation slice): ``{metric, collaborative,
    isolated, rows}``, what the member's collaborative model and the model it would have got alone score on
    its validation slice (:class:`algorithms.validation.Assessment`); absent otherwise."""
    outbox_provenance = outbox_provenance or {}
    result = {
        "process_id": spec.process_id,
        "round": spec.round,
        "organisation": spec.organisation,
        "image_digest": spec.image_digest,
        "runtime": spec.runtime,
        "inputs": {
            "state": previous_state,
            "messages": [{"sender": s, "digest": d} for s, d in sorted(inbox.items())],
            "data_commitment": data_commitment,
        },
        "outputs": {
            "state": state,
            "messages": [
                {**dict(outbox_provenance.get(r, {})), "recipient": r, "digest": d, "size": n}
                for r, (d, n) in sorted(outbox.items())
            ],
            "model": None
            if model is None
            else {**dict(model_provenance or {}), "digest": model[0], "size": model[1]},
        },
        "metrics": metrics_json(metrics),
        "numeric_profile": dict(numeric_profile),
        "sdk": SDK_VERSION,
        "started": started,
        "finished": finished,
    }
    if validation is not None:
        result["validation"] = dict(validation)
    return result
