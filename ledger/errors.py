"""Errors a ledger client sees: the contracts' rule violations and the hosts' transaction errors.

Contract rule violations are :class:`ContractError` subclasses (defined in ``chaincode.errors``,
re-exported here) and are raised as such by both hosts; the :class:`LedgerError` classes are about
the transaction itself. ``api`` and ``executor`` import both from here, never from ``chaincode``.

:func:`transient` is the one place that tells an outage (ride it out: the same call may succeed
later) from an answer (a refusal that stays the same however often it is asked).
"""

from __future__ import annotations

from chaincode.errors import (
    AlreadyExists,
    BudgetExceeded,
    ConsentMissing,
    ContractError,
    Forbidden,
    ImageMismatch,
    InternalError,
    InvalidArgument,
    InvalidState,
    NotFound,
    PrivateDataMismatch,
    SignatureInvalid,
)

__all__ = [
    # contract rule violations (chaincode.errors)
    "AlreadyExists",
    "BudgetExceeded",
    "ConsentMissing",
    "ContractError",
    "Forbidden",
    "ImageMismatch",
    "InternalError",
    "InvalidArgument",
    "InvalidState",
    "NotFound",
    "PrivateDataMismatch",
    "SignatureInvalid",
    # ledger-host errors
    "AccessDenied",
    "CheckpointInvalid",
    "CommitTimeout",
    "EndorsementFailure",
    "EndorsementPolicyFailure",
    "LedgerCorrupted",
    "LedgerError",
    "LedgerUnavailable",
    "MVCCConflict",
    "TransactionInvalid",
    "outcome_unknown",
    "transient",
]


class LedgerError(Exception):
    """Base class of ledger-host errors."""


class LedgerUnavailable(LedgerError):
    """The ledger could not be reached for now: the organisation's own peer (its Gateway), the peers
    an endorsement needs, or the orderers are down or unreachable (Fabric: gRPC ``UNAVAILABLE`` or
    ``DEADLINE_EXCEEDED``, connection refused, "no orderers could successfully process transaction"),
    or the embedded ledger's file cannot be used (busy, I/O error). The same call may succeed later.

    ``endpoint``: what could not be reached (e.g. the peer's ``host:port``), "" if unknown.
    ``outcome_unknown``: a transaction had been handed over when the connection failed, so it may
    still commit; the caller resolves it by reading the ledger or by submitting again (the contracts
    refuse a duplicate ``create_task``/``complete_task``), never by writing a different record."""

    def __init__(self, message: str, *, endpoint: str = "", outcome_unknown: bool = False):
        super().__init__(message)
        self.endpoint = endpoint
        self.outcome_unknown = outcome_unknown


class AccessDenied(LedgerError):
    """The submitting identity is not valid for this channel (unknown MSP, bad certificate, bad
    proposal signature)."""


class EndorsementFailure(LedgerError):
    """Endorsement could not be collected (peers unreachable, endorsements disagree)."""


class TransactionInvalid(LedgerError):
    """The transaction was ordered but invalidated at commit (Fabric's TxValidationCode)."""

    def __init__(self, tx_id: str, validation_code: str, message: str = ""):
        super().__init__(message or f"transaction {tx_id} invalid: {validation_code}")
        self.tx_id = tx_id
        self.validation_code = validation_code


class MVCCConflict(TransactionInvalid):
    """MVCC_READ_CONFLICT or PHANTOM_READ_CONFLICT: a key read was changed by an earlier
    transaction in the same or an earlier block. Retrying the whole transaction is safe."""


class EndorsementPolicyFailure(TransactionInvalid):
    """ENDORSEMENT_POLICY_FAILURE: too few or invalid endorsements."""


class CommitTimeout(LedgerError):
    """The transaction was submitted but its commit status did not arrive in time."""

    def __init__(self, tx_id: str, timeout: float):
        super().__init__(f"no commit status for {tx_id} within {timeout} s")
        self.tx_id = tx_id


class LedgerCorrupted(LedgerError):
    """The ledger-file verification (``audit.ledger_file``) found a block, signature or state that does
    not check out."""

    def __init__(self, message: str, block_number: int | None = None):
        super().__init__(message)
        self.block_number = block_number


class CheckpointInvalid(LedgerError):
    """A chain-head checkpoint is malformed, or its signature does not verify against the
    consortium's certificates (the checkpoint, not the ledger, is at fault)."""


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a ledger outage to ride out -- :class:`LedgerUnavailable`, or a
    :class:`CommitTimeout` (sent, commit status not seen) -- rather than an answer: a contract's
    refusal, a refused identity or signature, an invalidated transaction (an MVCC conflict is retried
    by the caller as such: it is an answer about that transaction, not about reachability)."""
    return isinstance(exc, (LedgerUnavailable, CommitTimeout))


def outcome_unknown(exc: BaseException) -> bool:
    """Whether a transaction may have been committed although the call failed with ``exc`` (a
    :func:`transient` error raised after the transaction was handed to the orderers)."""
    return isinstance(exc, CommitTimeout) or (isinstance(exc, LedgerUnavailable) and exc.outcome_unknown)
