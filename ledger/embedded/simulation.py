"""Transaction simulation: the chaincode stub of the embedded host (Fabric's TxSimulator).

Reads come from one consistent snapshot of the committed world state and are recorded in the
read set with their versions; range reads are recorded with the keys and versions they
returned (for phantom detection at commit); writes are buffered in the write set and are not
visible to the transaction's own reads, exactly as on a Fabric peer.

Private data (:mod:`chaincode.stub`): reads of the executing organisation's own collection come from
its private store and are recorded in the hashed read set (collection, key hash, version of the hashed
state); writes go to the private write set, whose clear text (:meth:`TxSimulator.private_values`)
travels beside the transaction to the collection's organisation, while the transaction itself carries
only the hashes (:meth:`TxSimulator.rwset`).
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from typing import Any

from chaincode.stub import (
    MAX_UNICODE_RUNE,
    ChaincodeStub,
    KeyModification,
    KeyValue,
    PrivateDataUnavailable,
    TransactionHeader,
    collection_organisation,
    create_composite_key,
)
from ledger.embedded.blocks import sha256_hex
from ledger.embedded.store import Store

Version = tuple[int, int]
PrivateKey = tuple[str, str]  # (collection, key)


def key_hash(key: str) -> str:
    """The hashed write set's name of a private key: hex SHA-256 of its UTF-8 bytes (Fabric's)."""
    return sha256_hex(key.encode("utf-8"))


class TxSimulator(TransactionHeader, ChaincodeStub):
    def __init__(
        self,
        con: sqlite3.Connection,
        *,
        tx_id: str,
        channel: str,
        timestamp: float,
        creator: bytes,
        transient: dict[str, bytes] | None = None,
        msp_id: str = "",
        collections: frozenset[str] = frozenset(),
        private: sqlite3.Connection | None = None,
    ):
        super().__init__(tx_id, channel, timestamp, creator, transient, msp_id)
        self._con = con
        self._collections = collections  # the implicit collections of the channel's organisations
        self._private = private  # the executing organisation's private store (a read snapshot)
        self.private_reads: dict[PrivateKey, Version | None] = {}
        self.private_writes: dict[PrivateKey, bytes | None] = {}
        self.private_purges: set[PrivateKey] = set()
        self.private_metadata_writes: dict[PrivateKey, bytes | None] = {}
        self._private_policies: dict[PrivateKey, bytes | None] = {}
        # whether the contract read a private value: then another organisation's peer, reading its own
        # copy, simulates differently (the ledger re-simulates on each endorser to find out)
        self.read_private_values = False
        self.reads: dict[str, Version | None] = {}
        self.range_reads: list[tuple[str, str, list[tuple[str, Version]]]] = []
        self.writes: dict[str, bytes | None] = {}
        self.metadata_writes: dict[str, bytes | None] = {}  # key-level policies set (None: removed)
        self._policies: dict[str, bytes | None] = {}  # committed key-level policies read
        self.event: tuple[str, bytes] | None = None

    # ---- state
    @staticmethod
    def _check_key(key: str) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError("key must be a non-empty string")

    def get_state(self, key: str) -> bytes | None:
        self._check_key(key)
        row = Store.get_state(self._con, key.encode("utf-8"))
        if key not in self.reads:
            self.reads[key] = None if row is None else row[1]
        return None if row is None else row[0]

    def put_state(self, key: str, value: bytes) -> None:
        self._check_key(key)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError("state values are bytes")
        self.writes[key] = bytes(value)
        # the key's policy, read in this snapshot for the endorsement plan (as Fabric's simulator does)
        self.committed_policy(key)

    def del_state(self, key: str) -> None:
        self._check_key(key)
        self.writes[key] = None
        self.committed_policy(key)

    def set_state_validation_parameter(self, key: str, policy: bytes) -> None:
        self._check_key(key)
        if not isinstance(policy, (bytes, bytearray)):
            raise TypeError("a validation parameter is bytes")
        self.metadata_writes[key] = bytes(policy) or None
        self.committed_policy(key)

    def get_state_validation_parameter(self, key: str) -> bytes | None:
        """The committed policy of ``key``; like Fabric's ``GetStateMetadata``, it records a read of
        the key's version."""
        self._check_key(key)
        if key not in self.reads:
            row = Store.get_state(self._con, key.encode("utf-8"))
            self.reads[key] = None if row is None else row[1]
        return self.committed_policy(key)

    def committed_policy(self, key: str) -> bytes | None:
        if key not in self._policies:
            found = Store.policies(self._con, [key.encode("utf-8")])
            self._policies[key] = found.get(key.encode("utf-8"))
        return self._policies[key]

    def written_keys(self) -> list[str]:
        """Every key whose value or policy this transaction writes (what its endorsement must satisfy)."""
        return sorted(set(self.writes) | set(self.metadata_writes))

    # ---- private data
    def _check_private(self, collection: str, key: str) -> PrivateKey:
        self._check_key(key)
        if collection not in self._collections:
            raise ValueError(f"no private data collection {collection!r} on this channel")
        return collection, key

    def _hashed_read(self, pk: PrivateKey) -> tuple[str, Version] | None:
        found = Store.private_hash(self._con, pk[0], key_hash(pk[1]))
        if pk not in self.private_reads:
            self.private_reads[pk] = None if found is None else found[1]
        return found

    def get_private_data(self, collection: str, key: str) -> bytes | None:
        pk = self._check_private(collection, key)
        self.read_private_values = True
        if collection_organisation(collection) != self._msp_id or self._private is None:
            raise PrivateDataUnavailable(
                f"collection {collection} is not held by the executing organisation {self._msp_id or '?'}"
            )
        found = self._hashed_read(pk)
        if found is None:
            return None
        row = self._private.execute(  # the version the hashed state attests, not merely the latest
            "SELECT value FROM private_writes WHERE collection = ? AND key = ? AND block = ? AND txnum = ?",
            (collection, key.encode("utf-8"), *found[1]),
        ).fetchone()
        if row is None or row[0] is None:
            raise PrivateDataUnavailable(
                f"private data matching public hash version is not available: {collection} key {key!r}"
            )
        return bytes(row[0])

    def get_private_data_hash(self, collection: str, key: str) -> bytes | None:
        found = self._hashed_read(self._check_private(collection, key))
        return None if found is None else bytes.fromhex(found[0])

    def put_private_data(self, collection: str, key: str, value: bytes) -> None:
        pk = self._check_private(collection, key)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError("private data values are bytes")
        self.private_writes[pk] = bytes(value)
        self.private_purges.discard(pk)
        self.committed_private_policy(pk)

    def del_private_data(self, collection: str, key: str) -> None:
        pk = self._check_private(collection, key)
        self.private_writes[pk] = None
        self.committed_private_policy(pk)

    def purge_private_data(self, collection: str, key: str) -> None:
        pk = self._check_private(collection, key)
        self.private_writes[pk] = None
        self.private_purges.add(pk)
        self.committed_private_policy(pk)

    def set_private_data_validation_parameter(self, collection: str, key: str, policy: bytes) -> None:
        pk = self._check_private(collection, key)
        if not isinstance(policy, (bytes, bytearray)):
            raise TypeError("a validation parameter is bytes")
        self.private_metadata_writes[pk] = bytes(policy) or None
        self.committed_private_policy(pk)

    def get_private_data_validation_parameter(self, collection: str, key: str) -> bytes | None:
        pk = self._check_private(collection, key)
        self._hashed_read(pk)
        return self.committed_private_policy(pk)

    def committed_private_policy(self, pk: PrivateKey) -> bytes | None:
        if pk not in self._private_policies:
            self._private_policies[pk] = Store.private_policy(self._con, pk[0], key_hash(pk[1]))
        return self._private_policies[pk]

    def written_private_keys(self) -> list[PrivateKey]:
        return sorted(set(self.private_writes) | set(self.private_metadata_writes))

    def private_values(self) -> dict[str, dict[str, bytes | None]]:
        """The clear-text private write set, by collection (None: deleted or purged). It travels
        beside the transaction, never in it."""
        out: dict[str, dict[str, bytes | None]] = {}
        for (collection, key), value in sorted(self.private_writes.items()):
            out.setdefault(collection, {})[key] = value
        return out

    def get_state_by_range(self, start_key: str, end_key: str) -> Iterator[KeyValue]:
        """The range's key values, read and recorded in the read set at the call, handed over in one
        batch (as Fabric's peer hands the shim a page of results): iterating them calls back into
        the host no more."""
        rows = Store.range(self._con, start_key.encode("utf-8"), end_key.encode("utf-8"))
        keys = [k.decode("utf-8") for k, _, _ in rows]
        self.range_reads.append(
            (start_key, end_key, [(k, v) for k, (_, _, v) in zip(keys, rows, strict=True)])
        )
        return iter([KeyValue(k, value) for k, (_, value, _) in zip(keys, rows, strict=True)])

    def get_state_by_partial_composite_key(
        self, object_type: str, attributes: list[str]
    ) -> Iterator[KeyValue]:
        start = create_composite_key(object_type, attributes)
        return self.get_state_by_range(start, start + MAX_UNICODE_RUNE)

    def get_history_for_key(self, key: str, *, newest_first: bool = False) -> Iterator[KeyModification]:
        """The key's committed versions in commit order (or reversed), read row by row from the
        ``history`` table's primary key: a reader that stops early reads no further rows."""
        order = "block DESC, txnum DESC" if newest_first else "block, txnum"
        cur = self._con.execute(
            f"SELECT tx_id, value, timestamp, is_delete FROM history WHERE key = ? ORDER BY {order}",
            (key.encode("utf-8"),),
        )
        try:
            for tx_id, value, ts, is_delete in cur:
                yield KeyModification(tx_id, value or b"", ts, bool(is_delete))
        finally:
            cur.close()

    # ---- events
    def set_event(self, name: str, payload: bytes) -> None:
        if not name:
            raise ValueError("event name must not be empty")
        self.event = (name, bytes(payload))  # Fabric keeps one event per transaction: the last set

    # ---- the read/write set as recorded in the transaction
    def rwset(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "reads": [[k, list(v) if v is not None else None] for k, v in sorted(self.reads.items())],
            "range_reads": [[s, e, [[k, list(v)] for k, v in kv]] for s, e, kv in self.range_reads],
            "writes": [
                [k, None if v is None else base64.b64encode(v).decode("ascii")]
                for k, v in sorted(self.writes.items())
            ],
        }
        if self.metadata_writes:  # absent when empty: transactions without policies keep their bytes
            out["metadata_writes"] = [
                [k, None if v is None else base64.b64encode(v).decode("ascii")]
                for k, v in sorted(self.metadata_writes.items())
            ]
        if self.private_reads or self.private_writes or self.private_metadata_writes:
            out["private"] = self.hashed_rwset()
        return out

    def hashed_rwset(self) -> dict[str, Any]:
        """The private part of the read/write set as the block carries it: hashes only (Fabric's
        hashed rwset): reads (collection, key hash, version), writes (collection, key hash, value
        hash or None for a delete, purge flag), key-level policies set (collection, key hash, policy)."""
        return {
            "reads": [
                [c, key_hash(k), None if v is None else list(v)]
                for (c, k), v in sorted(self.private_reads.items())
            ],
            "writes": [
                [c, key_hash(k), None if v is None else sha256_hex(v), (c, k) in self.private_purges]
                for (c, k), v in sorted(self.private_writes.items())
            ],
            "metadata_writes": [
                [c, key_hash(k), None if p is None else base64.b64encode(p).decode("ascii")]
                for (c, k), p in sorted(self.private_metadata_writes.items())
            ],
        }
