"""Gateway gRPC errors -> the typed errors both ledger hosts raise.

The Gateway reports failures as a gRPC status whose ``grpc-status-details-bin`` trailer is a
``google.rpc.Status`` (from ``googleapis-common-protos``) carrying one
``gateway.ErrorDetail{address, msp_id, message}`` per failing peer or orderer (fabric-gateway
``pkg/client/errors.go``). A contract refusal travels as the
chaincode response message, which our chaincode service sets to ``ContractError.to_wire()``;
it is found in those messages and rebuilt with ``ContractError.from_wire``.
"""

from __future__ import annotations

import json
import re

import grpc
from fabric_protos.gateway import gateway_pb2
from fabric_protos.peer import transaction_pb2
from google.protobuf.message import DecodeError
from google.rpc import status_pb2

from chaincode.errors import ContractError
from ledger.errors import (
    AccessDenied,
    EndorsementFailure,
    EndorsementPolicyFailure,
    LedgerError,
    MVCCConflict,
    TransactionInvalid,
)

_STATUS_DETAILS_KEY = "grpc-status-details-bin"
_ACCESS_DENIED = re.compile(
    r"access denied|creator.*(unknown|not valid|invalid)|"
    r"(identity|certificate).*(not valid|invalid|unknown)|"
    r"MSP \S+ is unknown|could not deserialize|signature (is )?invalid|"
    r"failed evaluating policy|verify.*signature|"
    r"expected MSP ID .* received",
    re.IGNORECASE,
)


def error_details(err: grpc.RpcError) -> list[gateway_pb2.ErrorDetail]:
    """The ``gateway.ErrorDetail`` entries of a Gateway gRPC error (empty if none). A trailer or a
    detail that is not well-formed protobuf is skipped: the error is still translated from its
    status and the details that did decode."""
    md = getattr(err, "trailing_metadata", None)
    if md is None:
        return []
    details: list[gateway_pb2.ErrorDetail] = []
    for key, value in md() or ():
        if key != _STATUS_DETAILS_KEY:
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            continue
        for any_detail in status.details:
            detail = gateway_pb2.ErrorDetail()
            try:
                if any_detail.Unpack(detail):  # False for a detail of another type
                    details.append(detail)
            except DecodeError:
                continue
    return details


_DECODER = json.JSONDecoder()


def _contract_error(text: str) -> ContractError | None:
    """The ContractError whose wire JSON is embedded in ``text`` (a peer message may wrap it in
    other words), or None. Each ``{`` is tried as the start of a JSON value with
    ``JSONDecoder.raw_decode``, which reads strings as strings -- braces inside an id or a message
    never end the object early -- and the first object of the wire form's shape wins."""
    i = text.find("{")
    while i >= 0:
        try:
            obj, _ = _DECODER.raw_decode(text, i)
        except ValueError:
            obj = None
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("code"), str)
            and isinstance(obj.get("message"), str)
            and isinstance(obj.get("details", {}), dict)
        ):
            return ContractError.from_wire(json.dumps(obj))
        i = text.find("{", i + 1)
    return None


def describe(err: grpc.RpcError) -> str:
    """One line naming the status and every failing peer (no payloads)."""
    code = err.code().name if callable(getattr(err, "code", None)) and err.code() else "UNKNOWN"
    text = f"{code}: {err.details() if callable(getattr(err, 'details', None)) else err}"
    for d in error_details(err):
        text += f"; {d.msp_id}@{d.address}: {d.message}"
    return text


def translate(err: grpc.RpcError, stage: str) -> Exception:
    """Map a Gateway error of ``stage`` (evaluate/endorse/submit/commit/events) to a typed error."""
    messages = [err.details() or ""] if callable(getattr(err, "details", None)) else [str(err)]
    messages += [d.message for d in error_details(err)]
    for m in messages:
        ce = _contract_error(m)
        if ce is not None:
            return ce
    summary = describe(err)
    code = err.code() if callable(getattr(err, "code", None)) else None
    if code == grpc.StatusCode.PERMISSION_DENIED or any(_ACCESS_DENIED.search(m) for m in messages):
        return AccessDenied(f"{stage} refused: {summary}")
    if stage in ("endorse", "evaluate"):
        return EndorsementFailure(f"{stage} failed: {summary}")
    return LedgerError(f"{stage} failed: {summary}")


def validation_error(tx_id: str, code: int) -> TransactionInvalid:
    """The typed error for a non-VALID ``TxValidationCode``."""
    name = (
        transaction_pb2.TxValidationCode.Name(code)
        if code in transaction_pb2.TxValidationCode.values()
        else str(code)
    )
    if name in ("MVCC_READ_CONFLICT", "PHANTOM_READ_CONFLICT"):
        return MVCCConflict(tx_id, name)
    if name == "ENDORSEMENT_POLICY_FAILURE":
        return EndorsementPolicyFailure(tx_id, name)
    return TransactionInvalid(tx_id, name)
