"""The chaincode stub: the only I/O a contract has (Fabric's ``ChaincodeStubInterface``).

Contracts in :mod:`chaincode` see the world exclusively through this protocol, so the same
classes run on the embedded ledger (:mod:`ledger.embedded`) and as chaincode-as-a-service on a
real Fabric peer (the Fabric host implements this protocol over the chaincode gRPC protocol).
Semantics follow Fabric: reads see the committed world state only (not this transaction's own
writes); writes are buffered in the write set and applied at commit if MVCC validation passes;
a key's key-level endorsement policy (``set_state_validation_parameter``) is metadata beside its
value: kept when the value is written, dropped when the key is deleted, and every write to a key
that has one is validated against it instead of the chaincode's policy; ``get_history_for_key`` returns committed versions, oldest first, or newest first (the order of
Fabric's own history iterator) with ``newest_first=True``; an iterator that is not read to its end
is closed by its reader (``close()``), so a host can stop reading history where the reader stops.

Private data (Fabric's private data collections, docs/confidentiality.md): the only collections are
Fabric's implicit per-organisation collections, :func:`implicit_collection` (``_implicit_org_<MSPID>``),
one per organisation of the channel. A private write puts the clear-text value in the transaction's
private write set, which reaches only the peers of the collection's organisation; the block carries
the SHA-256 of the key and of the value (the hashed write set), which every peer keeps as hashed state.
``get_private_data`` reads the executing peer's own copy and works only for the collection of the
executing organisation (:meth:`ChaincodeStub.get_msp_id`): any other raises
:class:`PrivateDataUnavailable`, as does a copy whose version is not the one the hashes attest.
``get_private_data_hash`` reads the hashed state (any collection). ``purge_private_data`` deletes the
key like ``del_private_data`` and also every earlier version of its value from the private stores;
the blocks keep the hashes. Key-level endorsement policies of private keys are hashed-state metadata
and are enforced at validation like those of public keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

COMPOSITE_KEY_NAMESPACE = "\x00"
MIN_UNICODE_RUNE = "\x00"
MAX_UNICODE_RUNE = "\U0010ffff"
IMPLICIT_COLLECTION_PREFIX = "_implicit_org_"


def implicit_collection(msp_id: str) -> str:
    """The name of organisation ``msp_id``'s implicit private data collection (Fabric's)."""
    if not msp_id:
        raise ValueError("an implicit collection belongs to an organisation: MSP id is empty")
    return IMPLICIT_COLLECTION_PREFIX + msp_id


def collection_organisation(collection: str) -> str | None:
    """The MSP id whose implicit collection ``collection`` is, or None for any other name."""
    if collection.startswith(IMPLICIT_COLLECTION_PREFIX) and len(collection) > len(
        IMPLICIT_COLLECTION_PREFIX
    ):
        return collection[len(IMPLICIT_COLLECTION_PREFIX) :]
    return None


class PrivateDataUnavailable(RuntimeError):
    """The executing peer does not hold this private value: the collection is not its organisation's,
    or its copy is not the version the hashed state attests (Fabric: "private data matching public hash
    version is not available")."""


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes


@dataclass(frozen=True)
class KeyModification:
    """One committed version of a key (Fabric's ``queryresult.KeyModification``)."""

    tx_id: str
    value: bytes
    timestamp: float  # seconds since the epoch, from the transaction header
    is_delete: bool


@runtime_checkable
class ChaincodeStub(Protocol):
    def get_tx_id(self) -> str: ...

    def get_channel_id(self) -> str: ...

    def get_tx_timestamp(self) -> float:
        """Seconds since the epoch of the client's proposal (same at every endorser)."""
        ...

    def get_creator(self) -> bytes:
        """Serialized identity of the submitter: ``msp.SerializedIdentity`` protobuf bytes
        (mspid + PEM certificate), exactly as Fabric hands it to chaincode."""
        ...

    def get_state(self, key: str) -> bytes | None: ...

    def put_state(self, key: str, value: bytes) -> None: ...

    def del_state(self, key: str) -> None: ...

    def get_state_by_range(self, start_key: str, end_key: str) -> Iterator[KeyValue]: ...

    def get_state_by_partial_composite_key(
        self, object_type: str, attributes: list[str]
    ) -> Iterator[KeyValue]: ...

    def get_history_for_key(self, key: str, *, newest_first: bool = False) -> Iterator[KeyModification]: ...

    def set_state_validation_parameter(self, key: str, policy: bytes) -> None:
        """Set the key-level endorsement policy of ``key`` (Fabric's ``SetStateValidationParameter``:
        ``VALIDATION_PARAMETER`` metadata, a serialized ``SignaturePolicyEnvelope``; empty bytes
        remove it). Buffered like a write; the write is validated against the policy the key had."""
        ...

    def get_state_validation_parameter(self, key: str) -> bytes | None:
        """The committed key-level endorsement policy of ``key`` (None if it has none)."""
        ...

    def set_event(self, name: str, payload: bytes) -> None: ...

    def get_transient(self) -> dict[str, bytes]: ...

    def get_msp_id(self) -> str:
        """The MSP id of the organisation whose peer executes this transaction (fabric-chaincode-go
        ``shim.GetMSPID``): whose implicit collection ``get_private_data`` can read."""
        ...

    # ---- private data (module docstring)
    def get_private_data(self, collection: str, key: str) -> bytes | None: ...

    def put_private_data(self, collection: str, key: str, value: bytes) -> None: ...

    def del_private_data(self, collection: str, key: str) -> None: ...

    def purge_private_data(self, collection: str, key: str) -> None:
        """Delete ``key`` and purge every version of its value from the private stores (Fabric 2.5
        ``PurgePrivateData``); the blocks keep the hashes of what was written."""
        ...

    def get_private_data_hash(self, collection: str, key: str) -> bytes | None:
        """The SHA-256 of the committed value of a private key (hashed state; any collection)."""
        ...

    def set_private_data_validation_parameter(self, collection: str, key: str, policy: bytes) -> None: ...

    def get_private_data_validation_parameter(self, collection: str, key: str) -> bytes | None: ...


class TransactionHeader:
    """The transaction-context half of :class:`ChaincodeStub` (tx id, channel, proposal timestamp,
    creator, transient map) over the values each ledger host reads from the proposal."""

    def __init__(
        self,
        tx_id: str,
        channel_id: str,
        timestamp: float,
        creator: bytes,
        transient: Mapping[str, bytes] | None = None,
        msp_id: str = "",
    ) -> None:
        self._tx_id = tx_id
        self._msp_id = msp_id
        self._channel_id = channel_id
        self._timestamp = timestamp
        self._creator = creator
        self._transient = dict(transient or {})

    def get_tx_id(self) -> str:
        return self._tx_id

    def get_channel_id(self) -> str:
        return self._channel_id

    def get_tx_timestamp(self) -> float:
        return self._timestamp

    def get_creator(self) -> bytes:
        return self._creator

    def get_transient(self) -> dict[str, bytes]:
        return dict(self._transient)

    def get_msp_id(self) -> str:
        if not self._msp_id:
            raise PrivateDataUnavailable("the executing peer's organisation is not known to this chaincode")
        return self._msp_id


def create_composite_key(object_type: str, attributes: list[str]) -> str:
    """Fabric's composite key: ``\\x00 type \\x00 attr1 \\x00 attr2 \\x00 ...``."""
    _validate_composite_key_attribute(object_type)
    key = COMPOSITE_KEY_NAMESPACE + object_type + MIN_UNICODE_RUNE
    for a in attributes:
        _validate_composite_key_attribute(a)
        key += a + MIN_UNICODE_RUNE
    return key


def split_composite_key(key: str) -> tuple[str, list[str]]:
    if not key.startswith(COMPOSITE_KEY_NAMESPACE):
        raise ValueError("not a composite key")
    parts = key[1:].split(MIN_UNICODE_RUNE)
    return parts[0], parts[1:-1]


def _validate_composite_key_attribute(s: str) -> None:
    if not isinstance(s, str):
        raise TypeError("composite key attributes must be str")
    if MIN_UNICODE_RUNE in s or MAX_UNICODE_RUNE in s:
        raise ValueError(f"composite key attribute contains a reserved character: {s!r}")
