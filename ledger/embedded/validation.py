"""Commit-time validation of the embedded host, as a Fabric peer's committer does it:

1. duplicate transaction id -> DUPLICATE_TXID;
2. the client's identity and its signature over the envelope -> BAD_CREATOR_SIGNATURE (steps 2-4 do
   not depend on the state: :func:`check_endorsed`, which the embedded ledger runs when a transaction
   is queued, on the submitting thread, without verifying again the signatures it has just made, so that
   the committer only re-checks the certificates' validity at the block's time);
3. tx id = sha256(nonce || creator), response bound to the proposal -> BAD_PROPOSAL_TXID / INVALID_OTHER_REASON;
4. endorsements: valid peer identities, valid signatures -> ENDORSEMENT_POLICY_FAILURE; then, as
   Fabric's key-level validator (VSCC) does, every key the transaction writes (its value or its
   key-level policy) that has a key-level policy -- as committed, or as set by an earlier valid
   transaction of the block, which invalidates this one (Fabric's ``ValidationParameterUpdatedError``) --
   needs the endorsements to satisfy that policy, and if any written key has none (or nothing is
   written), the chaincode's endorsement policy must hold -> ENDORSEMENT_POLICY_FAILURE;
5. MVCC: every key read still has the version read, given the valid transactions before it in
   the same block -> MVCC_READ_CONFLICT; every range read returns the same keys and versions
   -> PHANTOM_READ_CONFLICT.

Private data is validated on its hashes only (Fabric's hashed read/write set): the hashed reads'
versions (MVCC), and for each private key written its key-level policy, else its collection's
endorsement policy (an implicit collection's: its organisation's peer), else the chaincode's. The
clear-text values are not part of the block; the ledger hands them to their collection's organisation
once the transaction is valid (:meth:`ledger.embedded.ledger.EmbeddedLedger._disseminate`).

The same code validates new blocks at commit and replays the chain in ``audit.ledger_file``.
"""

from __future__ import annotations

import binascii
import datetime as dt
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chaincode.canonical import canonical_json
from ledger.embedded import blocks as B
from ledger.embedded.policy import EndorsementPolicy, Endorser, collection_policy, key_policy_satisfied
from ledger.embedded.store import Store
from ledger.errors import AccessDenied
from ledger.identity import MembershipService

Version = tuple[int, int]
HashedKey = tuple[str, str]  # (collection, hex SHA-256 of the key)


class StateView:
    """Committed versions plus the writes of earlier valid transactions of the current block."""

    def __init__(
        self,
        get_version: Callable[[str], Version | None],
        get_range: Callable[[str, str], list[tuple[str, Version]]],
    ):
        self._get_version = get_version
        self._get_range = get_range
        self._con: sqlite3.Connection | None = None
        self.updates: dict[str, tuple[bytes | None, Version]] = {}
        self.known: dict[str, Version | None] = {}  # committed versions read ahead (prefetch)
        self.policy_updates: dict[str, bytes | None] = {}  # key-level policies set by the block
        self.known_policies: dict[str, bytes | None] = {}  # committed key-level policies read ahead
        # the hashed state of private data: (value hash or None, version) written by the block so far
        self.private_updates: dict[HashedKey, tuple[str | None, Version]] = {}
        self.private_policy_updates: dict[HashedKey, bytes | None] = {}
        self.private_purges: set[HashedKey] = set()

    def prefetch(self, con: sqlite3.Connection, keys: Iterable[str]) -> None:
        """Read the committed versions of ``keys`` now, in a few queries (the block's read keys)."""
        wanted = sorted(set(keys) - set(self.known))
        found = Store.versions(con, [k.encode("utf-8") for k in wanted])
        for k in wanted:
            self.known[k] = found.get(k.encode("utf-8"))

    def prefetch_policies(self, con: sqlite3.Connection, keys: Iterable[str]) -> None:
        """Read the committed key-level policies of ``keys`` now (the block's written keys)."""
        self._con = con
        wanted = sorted(set(keys) - set(self.known_policies))
        found = Store.policies(con, [k.encode("utf-8") for k in wanted])
        for k in wanted:
            self.known_policies[k] = found.get(k.encode("utf-8"))

    def policy(self, key: str) -> bytes | None:
        """The key-level policy of ``key``: as set by the block so far, else as committed."""
        if key in self.policy_updates:
            return self.policy_updates[key]
        if key not in self.known_policies and self._con is not None:
            self.prefetch_policies(self._con, [key])
        return self.known_policies.get(key)

    @classmethod
    def of(cls, con: sqlite3.Connection) -> StateView:
        """The view of the world state stored behind ``con``."""

        def get_version(key: str) -> Version | None:
            row = Store.get_state(con, key.encode("utf-8"))
            return None if row is None else row[1]

        def get_range(start: str, end: str) -> list[tuple[str, Version]]:
            return [(k.decode("utf-8"), v) for k, _, v in Store.range(con, start.encode(), end.encode())]

        view = cls(get_version, get_range)
        view._con = con
        return view

    def private_version(self, hk: HashedKey) -> Version | None:
        if hk in self.private_updates:
            value, version = self.private_updates[hk]
            return None if value is None else version
        found = None if self._con is None else Store.private_hash(self._con, *hk)
        return None if found is None else found[1]

    def private_policy(self, hk: HashedKey) -> bytes | None:
        if hk in self.private_policy_updates:
            return self.private_policy_updates[hk]
        return None if self._con is None else Store.private_policy(self._con, *hk)

    def version(self, key: str) -> Version | None:
        if key in self.updates:
            value, version = self.updates[key]
            return None if value is None else version
        if key in self.known:
            return self.known[key]
        return self._get_version(key)

    def range(self, start: str, end: str) -> list[tuple[str, Version]]:
        rows = dict(self._get_range(start, end))
        for k, (value, version) in self.updates.items():
            if k >= start and (not end or k < end):
                if value is None:
                    rows.pop(k, None)
                else:
                    rows[k] = version
        # sort bytewise like the store
        return sorted(rows.items(), key=lambda kv: kv[0].encode("utf-8"))


def check_endorsed(
    tx: dict[str, Any],
    *,
    membership: MembershipService,
    channel: str,
    chaincode: str,
    at: dt.datetime | None = None,
    signatures: bool = True,
) -> str | None:
    """Steps 2-4, which do not depend on the state: the code ``tx`` fails with, or None if it passes.
    Certificates must be valid at ``at`` (default now).

    ``signatures=False`` is for a transaction this process has just built (the embedded ledger's
    submit): the creator's key signed its proposal, which was verified, and the endorsers' keys were
    shown to match their certificates, so their fresh signatures are not verified again here.
    Identities, roles and binding are still checked; a block replay (``audit.ledger_file``) verifies
    every signature. The endorsement policies depend on the state (key-level policies):
    :func:`check_policies`, at commit."""

    # ``data``, what the creator or an endorser signed, is encoded only when signatures are verified
    def signer(serialized: bytes, data: bytes, signature: str) -> tuple[str, str]:
        if not signatures:
            msp_id, _, role = membership.deserialize(serialized, at=at)
            return msp_id, role
        return membership.verify_signature(serialized, data, B.unb64(signature), at=at)

    try:
        proposal, response = tx["proposal"], tx["response"]
        creator = B.unb64(proposal["creator"])
        try:
            _, role = signer(creator, B.signed_part(tx) if signatures else b"", tx["signature"])
        except AccessDenied:
            return B.BAD_CREATOR_SIGNATURE
        if role not in ("client", "admin"):
            return B.BAD_CREATOR_SIGNATURE
        if B.compute_tx_id(B.unb64(proposal["nonce"]), creator) != proposal["tx_id"]:
            return B.BAD_PROPOSAL_TXID
        if proposal["channel"] != channel or proposal["chaincode"] != chaincode:
            return B.INVALID_OTHER_REASON
        if response["proposal_hash"] != B.sha256_hex(canonical_json(proposal)) or response["status"] != 200:
            return B.INVALID_OTHER_REASON
        # what every endorser signed (then its identity)
        signed_response = canonical_json(response) if signatures else b""
        for e in tx["endorsements"]:
            endorser = B.unb64(e["endorser"])
            try:
                msp_id, role = signer(
                    endorser,
                    B.endorsement_message(signed_response, endorser) if signatures else b"",
                    e["signature"],
                )
            except AccessDenied:
                return B.ENDORSEMENT_POLICY_FAILURE
            if role != "peer":
                return B.ENDORSEMENT_POLICY_FAILURE
        return None
    except (KeyError, TypeError, ValueError, IndexError, binascii.Error):
        return B.INVALID_OTHER_REASON


def endorsers_of(tx: dict[str, Any], membership: MembershipService, at: dt.datetime | None) -> list[Endorser]:
    """(MSP id, role) of each endorsement of ``tx`` whose identities :func:`check_endorsed` judged
    (cached identities: no signature is verified here)."""
    out: list[Endorser] = []
    for e in tx["endorsements"]:
        msp_id, _, role = membership.deserialize(B.unb64(e["endorser"]), at=at)
        out.append((msp_id, role))
    return out


def written_keys(rwset: dict[str, Any]) -> set[str]:
    """The keys whose value or key-level policy a read/write set writes."""
    return {str(k) for k, _ in rwset["writes"]} | {str(k) for k, _ in rwset.get("metadata_writes", ())}


def written_private_keys(rwset: dict[str, Any]) -> set[HashedKey]:
    """The hashed private keys whose value or key-level policy a read/write set writes."""
    private = rwset.get("private")
    if not private:
        return set()
    return {(str(c), str(h)) for c, h, *_ in private["writes"]} | {
        (str(c), str(h)) for c, h, _ in private["metadata_writes"]
    }


def check_policies(
    rwset: dict[str, Any], endorsers: list[Endorser], policy: EndorsementPolicy, view: StateView
) -> str | None:
    """Fabric's key-level validation of a transaction's endorsements (step 4 of the module docstring):
    ENDORSEMENT_POLICY_FAILURE, or None when every policy that applies holds."""
    needs_chaincode_policy = False
    keys = written_keys(rwset)
    for key in keys:
        if key in view.policy_updates:  # an earlier transaction of the block changed its policy
            return B.ENDORSEMENT_POLICY_FAILURE
        key_policy = view.policy(key)
        if key_policy is None:
            needs_chaincode_policy = True
        elif not key_policy_satisfied(key_policy, endorsers):
            return B.ENDORSEMENT_POLICY_FAILURE
    private = written_private_keys(rwset)
    for hk in private:
        if hk in view.private_policy_updates:
            return B.ENDORSEMENT_POLICY_FAILURE
        key_policy = view.private_policy(hk) or collection_policy(hk[0])
        if key_policy is None:
            needs_chaincode_policy = True
        elif not key_policy_satisfied(key_policy, endorsers):
            return B.ENDORSEMENT_POLICY_FAILURE
    if (needs_chaincode_policy or not (keys or private)) and not policy.satisfied_by(
        {msp for msp, role in endorsers if role == "peer"}
    ):
        return B.ENDORSEMENT_POLICY_FAILURE
    return None


def still_valid(tx: dict[str, Any], membership: MembershipService, at: dt.datetime | None) -> bool:
    """Whether every identity of ``tx`` that :func:`check_endorsed` judged (its creator and its
    endorsers) has a certificate valid at ``at`` too (cached identities: a time comparison each)."""
    try:
        for serialized in (tx["proposal"]["creator"], *(e["endorser"] for e in tx["endorsements"])):
            membership.deserialize(B.unb64(serialized), at=at)
        return True
    except (AccessDenied, KeyError, TypeError, ValueError, binascii.Error):
        return False


def validate_transaction(
    tx: dict[str, Any],
    *,
    membership: MembershipService,
    policy: EndorsementPolicy,
    view: StateView,
    seen_tx_ids: Callable[[str], bool],
    channel: str,
    chaincode: str,
    at: dt.datetime | None = None,
    endorsed: bool = False,
) -> str:
    """Return the validation code of ``tx`` (does not apply its writes). Certificates must be
    valid at ``at``: the block's timestamp (default now). ``endorsed``: :func:`check_endorsed` already
    passed for these very bytes (checked when it was queued, :meth:`EmbeddedLedger.submit_async`);
    then its signatures are not verified again, only its certificates' validity at ``at``."""
    try:
        tx_id = tx["proposal"]["tx_id"]
        if seen_tx_ids(tx_id):
            return B.DUPLICATE_TXID
        if not (endorsed and still_valid(tx, membership, at)):
            code = check_endorsed(tx, membership=membership, channel=channel, chaincode=chaincode, at=at)
            if code is not None:
                return code
        rwset = tx["response"]["rwset"]
        code = check_policies(rwset, endorsers_of(tx, membership, at), policy, view)
        if code is not None:
            return code
        for key, version in rwset["reads"]:
            expected = None if version is None else (version[0], version[1])
            if view.version(key) != expected:
                return B.MVCC_READ_CONFLICT
        for start, end, kv in rwset["range_reads"]:
            if view.range(start, end) != [(k, (v[0], v[1])) for k, v in kv]:
                return B.PHANTOM_READ_CONFLICT
        for collection, hashed, version in rwset.get("private", {}).get("reads", ()):
            expected = None if version is None else (version[0], version[1])
            if view.private_version((str(collection), str(hashed))) != expected:
                return B.MVCC_READ_CONFLICT
        return B.VALID
    except (KeyError, TypeError, ValueError, IndexError, binascii.Error, AccessDenied):
        return B.INVALID_OTHER_REASON


def writes_of(tx: dict[str, Any]) -> Iterable[tuple[str, bytes | None]]:
    for key, value in tx["response"]["rwset"]["writes"]:
        yield key, (None if value is None else B.unb64(value))


@dataclass
class BlockOutcome:
    """The validation codes of a block's transactions and the index rows of its valid ones."""

    codes: list[str]
    view: StateView
    history_rows: list[tuple[Any, ...]] = field(default_factory=list)
    event_rows: list[tuple[Any, ...]] = field(default_factory=list)
    tx_rows: list[tuple[Any, ...]] = field(default_factory=list)


def validate_block(
    con: sqlite3.Connection,
    number: int,
    txs: list[dict[str, Any]],
    *,
    membership: MembershipService,
    policy: EndorsementPolicy,
    channel: str,
    chaincode: str,
    timestamp: float | None = None,
    endorsed: list[bool] | None = None,
) -> BlockOutcome:
    """Validate block ``number`` against the state behind ``con`` (used at commit and by audit.ledger_file).
    ``timestamp``: the block's timestamp, at which every certificate must be valid. ``endorsed``: per
    transaction, whether :func:`check_endorsed` passed for it when it was queued (commit only)."""
    at = None if timestamp is None else dt.datetime.fromtimestamp(timestamp, dt.UTC)
    out = BlockOutcome(codes=[], view=StateView.of(con))
    in_block: set[str] = set()
    # what the block's transactions will ask the store, read ahead in a few queries
    ids: list[str] = []
    reads: list[str] = []
    written: set[str] = set()
    for tx in txs:
        try:
            ids.append(str(tx["proposal"]["tx_id"]))
            reads.extend(str(k) for k, _ in tx["response"]["rwset"]["reads"])
            written |= written_keys(tx["response"]["rwset"])
        except (KeyError, TypeError, ValueError):
            continue  # malformed: found invalid by validate_transaction
    in_chain = Store.known_tx_ids(con, ids)
    out.view.prefetch(con, reads)
    out.view.prefetch_policies(con, written)

    def seen(tx_id: str) -> bool:
        return tx_id in in_block or tx_id in in_chain

    for txnum, tx in enumerate(txs):
        code = validate_transaction(
            tx,
            membership=membership,
            policy=policy,
            view=out.view,
            seen_tx_ids=seen,
            channel=channel,
            chaincode=chaincode,
            at=at,
            endorsed=bool(endorsed and endorsed[txnum]),
        )
        out.codes.append(code)
        tx_id = tx["proposal"]["tx_id"]
        if code == B.VALID:
            ts = float(tx["proposal"]["timestamp"])
            for key, value in writes_of(tx):
                out.view.updates[key] = (value, (number, txnum))
                out.history_rows.append(
                    (key.encode("utf-8"), number, txnum, tx_id, ts, value, int(value is None))
                )
                if value is None and out.view.policy(key) is not None:
                    out.view.policy_updates[key] = None  # a deleted key loses its policy
            for key, key_policy in tx["response"]["rwset"].get("metadata_writes", ()):
                if out.view.version(key) is not None:  # a policy belongs to a key that exists
                    out.view.policy_updates[key] = None if key_policy is None else B.unb64(key_policy)
            apply_private(out.view, tx["response"]["rwset"].get("private"), (number, txnum))
            ev = tx["response"]["event"]
            if ev is not None:
                out.event_rows.append((number, txnum, tx_id, chaincode, ev[0], B.unb64(ev[1])))
        out.tx_rows.append((tx_id, number, txnum, code))
        in_block.add(tx_id)
    return out


def apply_private(view: StateView, private: dict[str, Any] | None, version: Version) -> None:
    """The hashed state after a valid transaction's hashed write set: values' hashes (None: deleted,
    or purged), and key-level policies (dropped with a deleted key, kept only for a key that exists)."""
    if not private:
        return
    for collection, hashed, value, purge in private["writes"]:
        hk = (str(collection), str(hashed))
        view.private_updates[hk] = (None if value is None else str(value), version)
        if purge:
            view.private_purges.add(hk)
        if value is None and view.private_policy(hk) is not None:
            view.private_policy_updates[hk] = None
    for collection, hashed, key_policy in private["metadata_writes"]:
        hk = (str(collection), str(hashed))
        if view.private_version(hk) is not None:
            view.private_policy_updates[hk] = None if key_policy is None else B.unb64(key_policy)


def write_block_outcome(con: sqlite3.Connection, out: BlockOutcome) -> None:
    """Apply a validated block to the state, history, event and tx-index tables behind ``con``."""
    for key, (value, (blk, txnum)) in out.view.updates.items():
        k = key.encode("utf-8")
        if value is None:
            con.execute("DELETE FROM state WHERE key = ?", (k,))
        else:
            con.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)", (k, value, blk, txnum))
    for key, policy in out.view.policy_updates.items():
        if policy is None:
            con.execute("DELETE FROM key_policies WHERE key = ?", (key.encode("utf-8"),))
        else:
            con.execute("INSERT OR REPLACE INTO key_policies VALUES (?, ?)", (key.encode("utf-8"), policy))
    for (collection, hashed), (digest, (blk, txnum)) in out.view.private_updates.items():
        if digest is None:
            con.execute(
                "DELETE FROM private_hashes WHERE collection = ? AND key_hash = ?", (collection, hashed)
            )
        else:
            con.execute(
                "INSERT OR REPLACE INTO private_hashes VALUES (?, ?, ?, ?, ?)",
                (collection, hashed, digest, blk, txnum),
            )
    for (collection, hashed), policy in out.view.private_policy_updates.items():
        if policy is None:
            con.execute(
                "DELETE FROM private_key_policies WHERE collection = ? AND key_hash = ?", (collection, hashed)
            )
        else:
            con.execute(
                "INSERT OR REPLACE INTO private_key_policies VALUES (?, ?, ?)", (collection, hashed, policy)
            )
    con.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?)", out.history_rows)
    con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", out.event_rows)
    con.executemany("INSERT OR IGNORE INTO txs VALUES (?, ?, ?, ?)", out.tx_rows)
