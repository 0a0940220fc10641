"""The ``Ledger`` interface: how off-chain code reaches the chain (docs/design.md "One chaincode,
two ledger hosts"; docs/ledger.md).

Two verbs cover most use -- :meth:`Ledger.submit` (endorse, order, wait for commit) and
:meth:`Ledger.evaluate` (query one peer, nothing is written) -- plus chaincode events and block
queries. Every call names the identity it acts for; nothing of SQLite or gRPC leaks through.
Functions are named ``"Contract:function"`` (e.g. ``"Image:register"``); arguments are strings
(canonical JSON for structured values). Both hosts raise the same errors:
:class:`chaincode.errors.ContractError` subclasses for broken contract rules, and
:mod:`ledger.errors` for transaction-level failures.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ledger.identity import Identity


@dataclass(frozen=True)
class SubmitResult:
    tx_id: str
    block_number: int
    result: bytes
    validation_code: str = "VALID"


@dataclass(frozen=True)
class ChaincodeEvent:
    block_number: int
    tx_id: str
    chaincode: str
    name: str
    payload: bytes


@dataclass(frozen=True)
class BlockInfo:
    number: int
    header_hash: str  # hex sha256 of the block header
    previous_hash: str  # header_hash of block number-1 ("" for the genesis block)
    data_hash: str  # hex sha256 over the block's transactions
    tx_ids: tuple[str, ...] = ()
    validation_codes: tuple[str, ...] = ()
    timestamp: float = 0.0


@dataclass(frozen=True)
class TransactionWrites:
    """What one transaction of a block wrote to the public state, as the block carries it."""

    validation_code: str
    writes: Mapping[str, Mapping[str, bytes | None]]  # namespace -> key -> value (None: a delete)


@dataclass(frozen=True)
class BlockContent:
    """A whole block read back from its bytes (a ledger host's ``raw_blocks``): the header fields its
    hash covers, that hash recomputed from them, whether the block's data hashes to the header's data
    hash, and each transaction's public writes (by transaction id; the valid one where an id
    repeats). ``audit.write_sets`` proves a record against it."""

    header: Mapping[str, Any]
    header_hash: str
    data_hash_matches: bool
    transactions: Mapping[str, TransactionWrites]


@runtime_checkable
class Ledger(Protocol):
    channel: str
    chaincode: str

    def submit(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
        timeout: float = 60.0,
    ) -> SubmitResult:
        """Endorse, order and commit a transaction; return when it is committed valid.

        ``transient``: the proposal's transient map, which the contract reads and which is never part
        of the transaction: private values travel there, never in ``args`` (docs/confidentiality.md).

        Raises a ContractError if the contract refused at endorsement, MVCCConflict /
        EndorsementPolicyFailure / TransactionInvalid if the transaction was invalidated at
        commit, AccessDenied for an identity the channel does not accept."""
        ...

    def evaluate(self, identity: Identity, function: str, *args: str) -> bytes:
        """Run a read-only transaction on one peer and return its result."""
        ...

    def events(
        self, identity: Identity, start_block: int = 0, timeout: float | None = None
    ) -> Iterator[ChaincodeEvent]:
        """Chaincode events of committed valid transactions from ``start_block`` on, in order.
        Blocks waiting for new events; stops after ``timeout`` seconds without one (None: never).
        The events already committed when the call is made are delivered first, so ``timeout=0``
        yields what is committed now and returns; while the host is unreachable the iteration
        still ends after ``timeout`` seconds."""
        ...

    def block_height(self, identity: Identity) -> int:
        """Number of blocks in the channel (the next block's number)."""
        ...

    def block(self, identity: Identity, number: int) -> BlockInfo: ...

    def close(self) -> None: ...
