"""Gateway gRPC errors -> the typed errors both ledger hosts raise.

The Gateway reports failures as a gRPC status whose ``grpc-status-details-bin`` trailer is a
``google.rpc.Status`` (from ``googleapis-common-protos``) carrying one
``gateway.ErrorDetail{address, msp_id, message}`` per failing peer or orderer (fabric-gateway
``pkg/client/errors.go``). A contract refusal travels as the
chaincode response message, which our chaincode service sets to ``ContractError.to_wire()``;
it is found in those messages and rebuilt with ``ContractError.from_wire``.

What counts as the ledger being *unreachable* (:class:`ledger.errors.LedgerUnavailable`, ridden out by
the node agent) rather than refusing is decided here once, by :func:`unreachable`.
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
    LedgerUnavailable,
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

# gRPC codes of a call that did not reach an answer: the peer (or, through its Gateway, the orderers)
# could not be connected to, or did not answer in time
_UNREACHABLE_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# what a Gateway says in an error detail about a peer or an orderer it could not reach (Fabric 2.5/3.x,
# grpc-go transport errors), e.g. an endorsement ABORTED because another organisation's peer is down
_UNREACHABLE = re.compile(
    r"code = (Unavailable|DeadlineExceeded)|failed to connect|connection refused|connection reset|"
    r"connection error|error while dialing|transport is closing|context deadline exceeded|"
    r"no orderers could successfully process|no orderer nodes available|broken pipe|"
    r"no route to host|unable to connect|"
    # the Gateway knows too few reachable peers to satisfy the policy (peers down, or a restarted peer
    # whose discovery has not yet learnt the others)
    r"no combination of peers can be derived|no peer combination can satisfy|no peers available|"
    # an organisation the caller asked to endorse (private data: every member) has no reachable peer
    r"failed to find any endorsing peers",
    re.IGNORECASE,
)
_ORDERERS = re.compile(r"\borderers?\b", re.IGNORECASE)
# stages after which the transaction may have reached the orderers: a failure leaves its outcome unknown
_SENT = ("submit", "commit")


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


#: what a SmartBFT orderer answers for a transaction it already holds (in its request pool, or ordered)
ALREADY_PROCESSED = "request already processed"


def held_by_orderers(err: grpc.RpcError) -> bool:
    """Whether a BFT ``Submit`` refused as ``UNAVAILABLE`` was refused only because orderers already
    hold the transaction. The Gateway sends a transaction to every orderer of a BFT channel and
    reports success only when a quorum (3 of 4) accepted it; an orderer that received it first from
    the leader (it forwards requests), or saw it ordered already, answers ``SERVICE_UNAVAILABLE``
    "request already processed". When every orderer that refused said so, the transaction is in the
    ordering service's hands: it will be (or was) ordered, so the caller waits for its commit."""
    code = err.code() if callable(getattr(err, "code", None)) else None
    if code != grpc.StatusCode.UNAVAILABLE:
        return False
    details = error_details(err)
    return bool(details) and all(ALREADY_PROCESSED in d.message for d in details)


def describe(err: grpc.RpcError) -> str:
    """One line naming the status and every failing peer (no payloads)."""
    code = err.code().name if callable(getattr(err, "code", None)) and err.code() else "UNKNOWN"
    text = f"{code}: {err.details() if callable(getattr(err, 'details', None)) else err}"
    for d in error_details(err):
        text += f"; {d.msp_id}@{d.address}: {d.message}"
    return text


def unreachable(err: grpc.RpcError) -> bool:
    """Whether ``err`` says that something could not be reached -- the caller's peer (gRPC
    ``UNAVAILABLE``/``DEADLINE_EXCEEDED`` on its own connection), or, in the Gateway's error details,
    another organisation's peer or the orderers -- rather than that something refused. A contract
    refusal or a refused identity is never unreachable (:func:`translate` tests those first)."""
    code = err.code() if callable(getattr(err, "code", None)) else None
    if code in _UNREACHABLE_CODES:
        return True
    details = err.details() if callable(getattr(err, "details", None)) else str(err)
    return any(_UNREACHABLE.search(m or "") for m in [details, *(d.message for d in error_details(err))])


def translate(err: grpc.RpcError, stage: str, endpoint: str = "") -> Exception:
    """Map a Gateway error of ``stage`` (evaluate/endorse/submit/commit/events) to a typed error;
    ``endpoint``: the Gateway (peer ``host:port``) the call went to, named by
    :class:`~ledger.errors.LedgerUnavailable`."""
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
    if unreachable(err):
        failing = sorted({d.address for d in error_details(err) if _UNREACHABLE.search(d.message)})
        where = ", ".join(failing) if failing else endpoint
        if any(_ORDERERS.search(m) for m in messages):  # the peer answered: its orderers did not
            where = " ".join(["orderers", *failing]) + (f" (through peer {endpoint})" if endpoint else "")
        return LedgerUnavailable(f"{stage} failed: {summary}", endpoint=where, outcome_unknown=stage in _SENT)
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
