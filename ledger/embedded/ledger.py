"""The embedded ledger: the chaincode run in-process with Fabric's semantics, in one SQLite file.

Flow of :meth:`EmbeddedLedger.submit` (the same steps as Fabric's Gateway):

1. the client builds and signs a proposal (creator = SerializedIdentity, tx id = sha256(nonce||creator));
2. endorsement: the proposal is checked (identity valid for the channel, signature, tx id), the
   chaincode is simulated against a snapshot of the world state, and the peers of enough
   organisations to satisfy the endorsement policy sign the response (result, read/write set,
   event). All peers of the embedded host share one state database, so one simulation stands for
   each endorser's identical simulation; each endorsement is still a real signature by that
   organisation's peer key;
3. the client checks the response and signs the transaction envelope;
4. ordering: an orderer thread cuts a block as soon as the queue is idle, of every transaction
   queued by then (at most ``batch_size``, collected for at most ``batch_timeout``): a lone
   transaction is committed at once, concurrent ones share blocks;
5. commit: under SQLite's write lock, each transaction is validated (signatures, endorsement
   policy, MVCC and phantom reads against the state including earlier transactions of the block),
   the block is hash-chained to the previous one, signed by the orderer and stored with the state,
   history, event and tx-index updates of its valid transactions, atomically. Private data
   (docs/confidentiality.md): the block carries only the hashes of a transaction's private writes;
   their clear text, kept beside the queued transaction (never in it), is written to the private
   store of each collection's organisation (:meth:`EmbeddedLedger._disseminate`) just before the
   block, and only for a valid transaction whose hashes it matches.

Several processes may share the file: blocks are appended under SQLite's write lock, and MVCC is
checked against the state as committed by all of them. A file that cannot be used for now (still
locked after the busy timeout, an I/O error, full, cannot be opened) is reported as
:class:`ledger.errors.LedgerUnavailable`, nothing written.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from chaincode.canonical import canonical_json
from chaincode.stub import collection_organisation, implicit_collection
from ledger.embedded import blocks as B
from ledger.embedded.endorsement import Endorser, PendingTransaction
from ledger.embedded.genesis import config_mismatch
from ledger.embedded.policy import EndorsementPolicy, collection_policy, plan_endorsers
from ledger.embedded.simulation import TxSimulator, key_hash
from ledger.embedded.store import PRIVATE_SCHEMA, Store, private_store_path
from ledger.embedded.validation import check_endorsed, validate_block, write_block_outcome
from ledger.errors import (
    CommitTimeout,
    EndorsementFailure,
    EndorsementPolicyFailure,
    LedgerError,
    LedgerUnavailable,
    MVCCConflict,
    TransactionInvalid,
)
from ledger.identity import Consortium, Identity, MembershipService
from ledger.interface import BlockInfo, ChaincodeEvent, SubmitResult

if TYPE_CHECKING:
    from ledger.checkpoint import Checkpoint

log = logging.getLogger(__name__)

_CONFLICT_CODES = (B.MVCC_READ_CONFLICT, B.PHANTOM_READ_CONFLICT)


def _error_for(tx_id: str, code: str) -> TransactionInvalid:
    if code in _CONFLICT_CODES:
        return MVCCConflict(
            tx_id,
            code,
            f"transaction {tx_id} invalidated: {code} (a key it read was "
            f"changed by an earlier transaction; retry it)",
        )
    if code == B.ENDORSEMENT_POLICY_FAILURE:
        return EndorsementPolicyFailure(tx_id, code, f"transaction {tx_id} invalidated: {code}")
    return TransactionInvalid(tx_id, code)


# SQLite result codes (their base name) of a file that cannot be used for now, not of a wrong one
_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_FULL")


def _unavailable(exc: sqlite3.Error, path: Path) -> LedgerUnavailable | None:
    """``exc`` as :class:`LedgerUnavailable` if it says the ledger file cannot be used for now."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if not name.startswith(_UNAVAILABLE):
        return None
    return LedgerUnavailable(f"ledger file {path}: {exc} ({name})", endpoint=str(path))


class EmbeddedLedger(Endorser):
    """A Fabric-semantics ledger in one SQLite file. Implements :class:`ledger.interface.Ledger`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        consortium: Consortium,
        *,
        channel: str = "consortia",
        chaincode: str = "consortia",
        policy: str = "TWO",
        batch_size: int = 500,
        batch_timeout: float = 0.01,
        synchronous: str = "FULL",
        checkpoint_file: str | os.PathLike[str] | None = None,
        checkpoint_every: int = 100,
    ):
        if batch_size < 1 or batch_timeout < 0:
            raise ValueError("batch_size must be >= 1 and batch_timeout >= 0")
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        # signed chain-head checkpoints kept outside the ledger file (ledger.checkpoint): one every
        # ``checkpoint_every`` blocks this instance commits, and one at close
        self.checkpoint_file = None if checkpoint_file is None else Path(checkpoint_file)
        self.checkpoint_every = checkpoint_every
        self._uncheckpointed = False
        self.path = Path(path)
        self.consortium = consortium
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self._store = Store(self.path, synchronous=synchronous)
        self._peers = {o.msp_id: consortium.peer_identity(o.msp_id) for o in consortium.organisations}
        self._matched: set[str] = set()
        self._orderer = consortium.orderer_identity()
        config = self._load_or_create_genesis(channel, chaincode, policy)
        self.channel: str = config["channel"]
        self.chaincode: str = config["chaincode"]
        cas = {m: x509.load_pem_x509_certificate(pem.encode()) for m, pem in config["organisations"].items()}
        cas[config["orderer"]["msp_id"]] = x509.load_pem_x509_certificate(config["orderer"]["ca"].encode())
        self.membership = MembershipService(cas)
        self.organisations: tuple[str, ...] = tuple(sorted(config["organisations"]))
        self.policy = EndorsementPolicy.parse(config["policy"], self.organisations)
        # each organisation's private data store, beside the ledger file (its peers' private data)
        self._private_stores = {
            m: Store(private_store_path(self.path, m), synchronous=synchronous, schema=PRIVATE_SCHEMA)
            for m in self.organisations
        }
        self._collections = frozenset(implicit_collection(m) for m in self.organisations)
        self._queue: queue.Queue[tuple[dict[str, Any], PendingTransaction] | None] = queue.Queue()
        self._orderer_thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._committed = threading.Condition()
        self._closed = False

    # ------------------------------------------------------------------ genesis / configuration
    def _load_or_create_genesis(self, channel: str, chaincode: str, policy: str) -> dict[str, Any]:
        con = self._store.connection()
        row = con.execute("SELECT body FROM blocks WHERE number = 0").fetchone()
        config: dict[str, Any]
        if row is not None:
            config = json.loads(row[0])["config"]
        else:
            orgs = {
                o.msp_id: self.consortium.ca_certificate(o.msp_id).public_bytes(Encoding.PEM).decode()
                for o in self.consortium.organisations
            }
            orderer_ca = self.consortium.membership().ca_certificates["OrdererMSP"]
            config = {
                "channel": channel,
                "chaincode": chaincode,
                "policy": policy,
                "organisations": orgs,
                "orderer": {"msp_id": "OrdererMSP", "ca": orderer_ca.public_bytes(Encoding.PEM).decode()},
            }
            EndorsementPolicy.parse(policy, tuple(sorted(orgs)))  # validate before writing
            body = B.make_body(0, "", time.time(), [], [], config)
            self._append_block(con, body, genesis=True)
        why = config_mismatch(config, self.consortium)
        if why is not None:
            raise LedgerError(f"ledger {self.path} belongs to a channel that is not this consortium's: {why}")
        return config

    def _append_block(
        self, con: sqlite3.Connection, body: dict[str, Any], genesis: bool = False, data_json: bytes = b""
    ) -> str:
        header = B.header_bytes(body)
        body["orderer"] = B.b64(self._orderer.serialized())
        body["signature"] = B.b64(self._orderer.sign(header))
        header_hash = B.sha256_hex(header)
        if genesis:
            con.execute("BEGIN IMMEDIATE")
            if con.execute("SELECT 1 FROM blocks WHERE number = 0").fetchone():
                con.execute("ROLLBACK")
                return ""
            con.execute("INSERT INTO blocks VALUES (?, ?, ?, ?)", (0, header_hash, "", canonical_json(body)))
            con.execute("COMMIT")
        else:
            con.execute(
                "INSERT INTO blocks VALUES (?, ?, ?, ?)",
                (body["number"], header_hash, body["previous_hash"], B.body_json(body, data_json)),
            )
        return header_hash

    # ------------------------------------------------------------------ Ledger interface
    def evaluate(self, identity: Identity, function: str, *args: str) -> bytes:
        proposal, proposal_bytes, signature = self._proposal(identity, function, args)
        self._check_proposal(proposal, proposal_bytes, signature)
        try:
            _, payload = self._simulate(proposal, None, identity.msp_id)
        except sqlite3.Error as exc:
            raise _unavailable(exc, self.path) or exc from exc
        return payload

    def submit(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
        timeout: float = 60.0,
    ) -> SubmitResult:
        future = self.submit_async(
            identity, function, *args, transient=transient, endorsing_organisations=endorsing_organisations
        )
        tx_id = future.tx_id
        try:
            block_number, code, payload = future.result(timeout=timeout)
        except TimeoutError:
            raise CommitTimeout(tx_id, timeout) from None
        if code != B.VALID:
            raise _error_for(tx_id, code)
        return SubmitResult(tx_id=tx_id, block_number=block_number, result=payload, validation_code=code)

    def submit_async(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
    ) -> PendingTransaction:
        """Endorse now, order and commit in the background; the future yields (block, code, result)."""
        if self._closed:
            raise LedgerError("ledger is closed")
        proposal, proposal_bytes, signature = self._proposal(identity, function, args)
        self._check_proposal(proposal, proposal_bytes, signature)
        try:
            sim, payload = self._simulate(proposal, transient, identity.msp_id)
        except sqlite3.Error as exc:
            raise _unavailable(exc, self.path) or exc from exc
        response = self._response(proposal_bytes, sim, payload)
        orgs = list(endorsing_organisations) if endorsing_organisations else self._plan(sim, identity.msp_id)
        if sim.read_private_values:
            self._same_on_every_endorser(proposal, proposal_bytes, transient, orgs, identity.msp_id, response)
        endorsements = self._endorse(response, orgs)
        tx = {"proposal": proposal, "response": response, "endorsements": endorsements}
        tx["signature"] = B.b64(identity.sign(B.signed_part(tx)))
        # the committer's checks that do not depend on the state, here on the submitting thread (in
        # parallel with other submitters and with the commit of the block before): the committer then
        # re-checks only the certificates' validity at its time. The signatures were made here just
        # now by keys that were checked (the proposal's, the peers'): not verified a second time.
        endorsed = (
            check_endorsed(
                tx,
                membership=self.membership,
                channel=self.channel,
                chaincode=self.chaincode,
                signatures=False,
            )
            is None
        )
        future = PendingTransaction(proposal["tx_id"], payload, endorsed, sim.private_values())
        self._ensure_orderer()
        self._queue.put((tx, future))
        return future

    def _same_on_every_endorser(
        self,
        proposal: dict[str, Any],
        proposal_bytes: bytes,
        transient: Mapping[str, bytes] | None,
        orgs: Sequence[str],
        simulated_by: str,
        response: dict[str, Any],
    ) -> None:
        """A transaction that read private values is simulated again on each other endorsing
        organisation's peer, which reads its own private store (as every Fabric endorser runs the
        chaincode itself): a contract refusal there is raised, and a different response is an
        :class:`EndorsementFailure` (Fabric's Gateway: the endorsers' responses do not match)."""
        for org in orgs:
            if org == simulated_by:
                continue
            try:
                other, payload = self._simulate(proposal, transient, org)
            except sqlite3.Error as exc:
                raise _unavailable(exc, self.path) or exc from exc
            if self._response(proposal_bytes, other, payload) != response:
                raise EndorsementFailure(
                    f"the endorsement of {org} differs from that of {simulated_by}: the transaction read "
                    "private data, which each organisation's peer reads from its own collection"
                )

    def _plan(self, sim: TxSimulator, preferred: str) -> list[str]:
        """Whose peers endorse: enough for the key-level policies of the keys the simulation wrote
        (as committed) and, if one of them has none, for the chaincode's policy -- as Fabric's
        Gateway plans from a proposal's chaincode interest. The caller's organisation first."""
        keys = sim.written_keys()
        private = sim.written_private_keys()
        policies = [p for p in map(sim.committed_policy, keys) if p is not None]
        private_policies = [
            p
            for p in (sim.committed_private_policy(k) or collection_policy(k[0]) for k in private)
            if p is not None
        ]
        needs_chaincode_policy = not (keys or private) or len(policies) + len(private_policies) < len(
            keys
        ) + len(private)
        policies += private_policies
        try:
            return plan_endorsers(self.policy if needs_chaincode_policy else None, policies, preferred)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None

    # ------------------------------------------------------------------ ordering and commit
    def _ensure_orderer(self) -> None:
        if self._orderer_thread is None:
            with self._start_lock:
                if self._orderer_thread is None:
                    t = threading.Thread(target=self._order_loop, name="embedded-orderer", daemon=True)
                    t.start()
                    self._orderer_thread = t

    def _order_loop(self) -> None:
        """Cut a block as soon as the queue is idle: a lone transaction never waits for a timer,
        and transactions that queued up while the previous block committed share the next one."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch, stop = self._drain([item])
            try:
                results = self._commit_block(
                    [tx for tx, _ in batch],
                    [fut.endorsed for _, fut in batch],
                    [fut.private for _, fut in batch],
                )
                for (_tx, fut), (block_number, code) in zip(batch, results):
                    fut.set_result((block_number, code, fut.payload))
            except Exception as exc:  # commit failed as a whole: nothing was written
                log.exception("block commit failed")
                for _, fut in batch:  # one exception object per waiting caller
                    unusable = _unavailable(exc, self.path) if isinstance(exc, sqlite3.Error) else None
                    fut.set_exception(unusable or LedgerError(f"block commit failed: {exc}"))
            with self._committed:
                self._committed.notify_all()
            if stop:
                return

    def _drain(self, batch: list[Any]) -> tuple[list[Any], bool]:
        """Add the transactions already queued to ``batch``, never waiting for more: stop when
        the queue is empty, at ``batch_size``, or after ``batch_timeout`` of collecting a steady
        stream. True with it when the close sentinel was met."""
        deadline = time.monotonic() + self.batch_timeout
        while len(batch) < self.batch_size and time.monotonic() <= deadline:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                return batch, True
            batch.append(nxt)
        return batch, False

    def _commit_block(
        self,
        txs: list[dict[str, Any]],
        endorsed: list[bool] | None = None,
        private: Sequence[Mapping[str, Mapping[str, bytes | None]]] | None = None,
    ) -> list[tuple[int, str]]:
        con = self._store.connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            number, previous_hash = con.execute(
                "SELECT number + 1, header_hash FROM blocks ORDER BY number DESC LIMIT 1"
            ).fetchone()

            timestamp = (
                time.time()
            )  # certificates are judged at the block's own timestamp (as audit.ledger_file does)
            outcome = validate_block(
                con,
                number,
                txs,
                membership=self.membership,
                policy=self.policy,
                channel=self.channel,
                chaincode=self.chaincode,
                timestamp=timestamp,
                endorsed=endorsed,
            )
            codes = outcome.codes
            data_json = canonical_json(txs)  # encoded once: for the data hash and in the stored body
            body = B.make_body(number, previous_hash, timestamp, txs, codes, data_json=data_json)
            self._append_block(con, body, data_json=data_json)
            write_block_outcome(con, outcome)
            if private:
                self._disseminate(number, txs, codes, private)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        self._uncheckpointed = True
        if self.checkpoint_file is not None and number % self.checkpoint_every == 0:
            self._keep_checkpoint()
        return [(number, c) for c in codes]

    def _disseminate(
        self,
        number: int,
        txs: list[dict[str, Any]],
        codes: list[str],
        private: Sequence[Mapping[str, Mapping[str, bytes | None]]],
    ) -> None:
        """Write the clear-text private writes of block ``number``'s valid transactions to the store
        of each collection's organisation (and to no other), as Fabric's gossip disseminates them to
        the collection's member peers: each version (``private_writes``; a delete is a version without
        value); a purge deletes every version of the key. A private write set whose
        hashes do not match the transaction's hashed write set is not stored (Fabric: missing
        private data). Each store commits before the block (whose transaction is still open), so a
        block that fails leaves at most versions no hash attests, which reads never take."""
        by_org: dict[str, list[tuple[int, str, str, bytes | None, bool]]] = {}
        for txnum, (tx, values) in enumerate(zip(txs, private)):
            if codes[txnum] != B.VALID or not values:
                continue
            hashed = tx["response"]["rwset"].get("private") or {"writes": []}
            expected = {(c, h): (v, bool(p)) for c, h, v, p in hashed["writes"]}
            got = {
                (c, key_hash(k)): (None if v is None else B.sha256_hex(v), False)
                for c, kv in values.items()
                for k, v in kv.items()
            }
            if {k: v for k, (v, _) in expected.items()} != {k: v for k, (v, _) in got.items()}:
                log.warning(
                    "transaction %s: private data does not match its hashes; not stored",
                    tx["proposal"]["tx_id"],
                )
                continue
            for collection, kv in values.items():
                org = collection_organisation(collection)
                if org not in self._private_stores:
                    continue
                for key, value in kv.items():
                    purge = expected[(collection, key_hash(key))][1]
                    by_org.setdefault(org, []).append((txnum, collection, key, value, purge))
        for org, rows in by_org.items():
            pcon = self._private_stores[org].connection()
            pcon.execute("BEGIN IMMEDIATE")
            try:
                for txnum, collection, key, value, purge in rows:
                    k = key.encode("utf-8")
                    if purge:
                        pcon.execute(
                            "DELETE FROM private_writes WHERE collection = ? AND key = ?", (collection, k)
                        )
                    else:
                        pcon.execute(
                            "INSERT OR REPLACE INTO private_writes VALUES (?, ?, ?, ?, ?)",
                            (collection, k, number, txnum, value),
                        )
                pcon.execute("COMMIT")
            except BaseException:
                pcon.execute("ROLLBACK")
                raise

    def _keep_checkpoint(self) -> None:
        """Append a checkpoint of the head, signed by the orderer, to ``checkpoint_file``. The
        blocks are committed already: failing to write the anchor is logged, not raised."""
        from ledger.checkpoint import append_checkpoint

        if self.checkpoint_file is None:
            return
        try:
            append_checkpoint(self.checkpoint_file, self.checkpoint())
            self._uncheckpointed = False
        except (OSError, LedgerError) as exc:
            log.warning("could not append a checkpoint to %s: %s", self.checkpoint_file, exc)

    # ------------------------------------------------------------------ events and blocks
    def events(
        self, identity: Identity, start_block: int = 0, timeout: float | None = None
    ) -> Iterator[ChaincodeEvent]:
        self.membership.deserialize(identity.serialized())
        con = self._store.connection()
        next_block, last_seen = start_block, time.monotonic()
        while not self._closed:
            height = Store.height(con)
            if height > next_block:
                rows = con.execute(
                    "SELECT block, txnum, tx_id, chaincode, name, payload FROM events "
                    "WHERE block >= ? AND block < ? ORDER BY block, txnum",
                    (next_block, height),
                ).fetchall()
                for blk, _, tx_id, cc, name, payload in rows:
                    yield ChaincodeEvent(blk, tx_id, cc, name, payload)
                next_block = height
                last_seen = time.monotonic()
                continue
            if timeout is not None and time.monotonic() - last_seen >= timeout:
                return
            with self._committed:
                self._committed.wait(0.05)  # woken by our own commits; polls for other processes'

    def block_height(self, identity: Identity) -> int:
        self.membership.deserialize(identity.serialized())
        return Store.height(self._store.connection())

    def block(self, identity: Identity, number: int) -> BlockInfo:
        self.membership.deserialize(identity.serialized())
        row = (
            self._store.connection()
            .execute("SELECT header_hash, body FROM blocks WHERE number = ?", (number,))
            .fetchone()
        )
        if row is None:
            raise LedgerError(f"no block {number}")
        body = json.loads(row[1])
        return BlockInfo(
            number=number,
            header_hash=row[0],
            previous_hash=body["previous_hash"],
            data_hash=body["data_hash"],
            tx_ids=tuple(t["proposal"]["tx_id"] for t in body["transactions"]),
            validation_codes=tuple(body["validation_codes"]),
            timestamp=body["timestamp"],
        )

    #: how :meth:`raw_blocks` encodes a block (``audit.write_sets`` reads it)
    block_format = B.BLOCK_FORMAT

    def raw_blocks(self, identity: Identity, start: int, stop: int | None = None) -> Iterator[bytes]:
        """Blocks ``start`` to ``stop`` (None: the last committed) as stored: each body's canonical JSON
        (:mod:`ledger.embedded.blocks`), from which its header and header hash are recomputed."""
        self.membership.deserialize(identity.serialized())
        con = self._store.connection()
        if stop is None:
            stop = Store.height(con) - 1
        for (body,) in con.execute(
            "SELECT body FROM blocks WHERE number >= ? AND number <= ? ORDER BY number", (start, stop)
        ):
            yield body if isinstance(body, bytes) else body.encode("utf-8")

    def transaction_block(self, tx_id: str) -> tuple[int, str] | None:
        """(block number, validation code) of a committed transaction id, or None."""
        row = (
            self._store.connection()
            .execute("SELECT block, code FROM txs WHERE tx_id = ?", (tx_id,))
            .fetchone()
        )
        return None if row is None else (row[0], row[1])

    def checkpoint(self, identity: Identity | None = None) -> Checkpoint:
        """A signed checkpoint of the current chain head (by the orderer unless ``identity`` is
        given); keep it outside the ledger file to detect truncation later (``audit.checkpoints``)."""
        from ledger.checkpoint import checkpoint_of

        return checkpoint_of(self, identity or self._orderer)

    def close(self) -> None:
        if self._closed:
            return
        if self._orderer_thread is not None:
            self._queue.put(None)
            self._orderer_thread.join(timeout=30)
        if self.checkpoint_file is not None and self._uncheckpointed:
            self._keep_checkpoint()
        self._closed = True
        with self._committed:
            self._committed.notify_all()
        for store in (self._store, *self._private_stores.values()):
            try:
                store.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            store.close()

    def __enter__(self) -> EmbeddedLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
