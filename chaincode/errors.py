"""Typed contract errors with stable codes.

A contract raises one of these when a rule is broken; the message names the rule and the
key ("execution result signed by a key not registered for task ..."). Errors cross the
chaincode boundary as canonical JSON (:meth:`ContractError.to_wire`), so the embedded host
and the Fabric Gateway client both re-raise the same typed error on the client side.
"""

from __future__ import annotations

import json
from typing import Any


class ContractError(Exception):
    code = "CONTRACT_ERROR"
    status = 400

    def __init__(self, message: str, **details: Any):
        super().__init__(message)
        self.message = message
        self.details = details

    def to_wire(self) -> str:
        return json.dumps(
            {"code": self.code, "message": self.message, "details": self.details},
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )

    @staticmethod
    def from_wire(text: str) -> ContractError:
        """Rebuild the typed error from its wire form; unknown text becomes a plain ContractError."""
        try:
            obj = json.loads(text)
            cls = _BY_CODE.get(obj["code"], ContractError)
            err = cls(obj["message"], **obj.get("details", {}))
            return err
        except (ValueError, KeyError, TypeError):
            return ContractError(text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class InvalidArgument(ContractError):
    code = "INVALID_ARGUMENT"


class NotFound(ContractError):
    code = "NOT_FOUND"
    status = 404


class AlreadyExists(ContractError):
    code = "ALREADY_EXISTS"
    status = 409


class Forbidden(ContractError):
    """The caller's organisation may not do this (wrong organisation, not a member, not owner)."""

    code = "FORBIDDEN"
    status = 403


class InvalidState(ContractError):
    """The record is not in a state that allows this (closed round, finished process, revoked image)."""

    code = "INVALID_STATE"
    status = 409


class SignatureInvalid(ContractError):
    """A signature does not verify, or was made by a key that is not the registered one."""

    code = "SIGNATURE_INVALID"
    status = 403


class ImageMismatch(ContractError):
    code = "IMAGE_DIGEST_MISMATCH"
    status = 409


class BudgetExceeded(ContractError):
    code = "PRIVACY_BUDGET_EXCEEDED"
    status = 409


class ConsentMissing(ContractError):
    """An organisation has not consented: a member has not accepted the process's terms, or the
    caller's organisation has not approved the process's exact image for its dataset (docs/consent.md)."""

    code = "CONSENT_MISSING"
    status = 409


class PrivateDataMismatch(ContractError):
    """A process's private part (a member's stored copy, or one given in the transient map) does not
    match the digest the public record carries (docs/confidentiality.md)."""

    code = "PRIVATE_DATA_MISMATCH"
    status = 409


class InternalError(ContractError):
    """A bug in the chaincode (never a broken rule); details are in the host's log."""

    code = "INTERNAL"
    status = 500


_BY_CODE = {
    c.code: c
    for c in (
        ContractError,
        InvalidArgument,
        NotFound,
        AlreadyExists,
        Forbidden,
        InvalidState,
        SignatureInvalid,
        ImageMismatch,
        BudgetExceeded,
        ConsentMissing,
        PrivateDataMismatch,
        InternalError,
    )
}
