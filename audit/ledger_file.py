"""Full verification of an embedded ledger file (the file ``ledger.embedded`` writes).

:func:`verify_ledger_file` is what ``consortia ledger verify`` and the demo run. It

* opens the file **read-only** (SQLite ``mode=ro``): verification never writes into what it
  audits; a missing, 0-byte or emptied file (no block 0) is refused, never given a genesis block;
* trusts **only the consortium's certificates** (its crypto directory), never the CAs a file's
  own genesis block names: the genesis block must name exactly the consortium's organisation CAs
  and orderer CA, byte for byte, and every block must be signed by the consortium's orderer
  certificate;
* walks the chain from the genesis block and checks, for every block: its stored header hash and
  link to the previous block, its data hash, the orderer's signature; for every transaction: the
  client's and endorsers' signatures, the endorsement policy and MVCC validity, by replaying
  validation into a fresh state -- every certificate judged valid **at the block's timestamp**,
  so a certificate that expired since does not make old blocks "corrupt";
* checks that the stored world state, key history, events, key-level policies and transaction index equal the replay;
* given signed checkpoints of the chain head (made by :mod:`ledger.checkpoint`), checks each
  (:mod:`audit.checkpoints`): signed by a consortium identity, and the chain still reaches the
  checkpointed block with the same header hash (truncation is detected).

The first discrepancy raises :class:`LedgerCorrupted` naming the block it was found in.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from audit.checkpoints import check_chain, check_signature
from ledger.checkpoint import Checkpoint
from ledger.embedded import blocks as B
from ledger.embedded.genesis import config_mismatch
from ledger.embedded.policy import EndorsementPolicy
from ledger.embedded.store import SCHEMA
from ledger.embedded.validation import validate_block, write_block_outcome
from ledger.errors import AccessDenied, LedgerCorrupted, LedgerError
from ledger.identity import Consortium, MembershipService, parse_serialized_identity
from wire import bounded_json
from wire.bounded_json import MAX_DOCUMENT_DEPTH, JSONTooDeep
from wire.canonical import canonical_json


def open_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection to an existing ledger file that has a genesis block."""
    p = Path(path)
    if not p.is_file():
        raise LedgerError(f"no ledger file at {p}")
    uri = f"file:{urllib.parse.quote(str(p.resolve()))}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise LedgerCorrupted(f"{p} cannot be opened as a ledger: {exc}", 0) from None
    try:
        has_blocks = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blocks'"
        ).fetchone()
        genesis = has_blocks and con.execute("SELECT 1 FROM blocks WHERE number = 0").fetchone()
    except sqlite3.DatabaseError as exc:
        con.close()
        raise LedgerCorrupted(f"{p} is not a readable ledger file: {exc}", 0) from None
    if not genesis:
        con.close()
        raise LedgerCorrupted(f"{p} has no genesis block (block 0): it is empty, emptied or not a ledger", 0)
    return con


def verify_ledger_file(
    path: str | os.PathLike[str], consortium: Consortium, checkpoints: Sequence[Checkpoint] = ()
) -> dict[str, Any]:
    """Verify the ledger file at ``path`` against ``consortium`` (and the given checkpoints)."""
    con = open_read_only(path)
    try:
        try:
            raw = con.execute("SELECT body FROM blocks WHERE number = 0").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise LedgerCorrupted(f"the ledger file is damaged: {exc}", 0) from None
        config: Any = _block_body(0, raw).get("config")  # untrusted JSON, checked next
        why = config_mismatch(config, consortium)
        if why is not None:
            raise LedgerCorrupted(f"block 0: {why}", 0)
        membership = consortium.membership()  # the consortium's CAs, never the file's
        try:
            policy = EndorsementPolicy.parse(config["policy"], tuple(sorted(config["organisations"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise LedgerCorrupted(f"block 0: the endorsement policy is not valid: {exc}", 0) from None
        orderer_der = consortium.orderer_certificate().public_bytes(Encoding.DER)
        stats: dict[str, Any] = verify_ledger(
            con,
            membership,
            policy,
            config["channel"],
            config["chaincode"],
            orderer_certificate_der=orderer_der,
        )
        for cp in checkpoints:
            check_signature(cp, membership)
            check_chain(cp, config["channel"], stats["blocks"], lambda n: _header_hash(con, n))
        if checkpoints:
            stats["checkpoints"] = len(checkpoints)
        return stats
    finally:
        con.close()


def _header_hash(con: sqlite3.Connection, number: int) -> str:
    row = con.execute("SELECT header_hash FROM blocks WHERE number = ?", (number,)).fetchone()
    return "" if row is None else row[0]


def _block_time(number: int, body: dict[str, Any]) -> tuple[float, dt.datetime]:
    ts = body.get("timestamp")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise LedgerCorrupted(f"block {number} has no valid timestamp", number)
    try:
        return float(ts), dt.datetime.fromtimestamp(ts, dt.UTC)
    except (OverflowError, OSError, ValueError):
        raise LedgerCorrupted(f"block {number} has no valid timestamp", number) from None


def _cert_der(serialized: bytes) -> bytes | None:
    try:
        return x509.load_pem_x509_certificate(parse_serialized_identity(serialized)[1]).public_bytes(
            Encoding.DER
        )
    except ValueError:
        return None


MAX_BLOCK_DEPTH = MAX_DOCUMENT_DEPTH  #: a block's JSON (its transactions' values are JSON text in it)


def _last_write(con: sqlite3.Connection, key: bytes) -> int:
    """The block that last wrote ``key`` (where a key-level policy that differs was set)."""
    row = con.execute("SELECT MAX(block) FROM history WHERE key = ?", (key,)).fetchone()
    return int(row[0] or 0)


def _block_body(number: int, raw: bytes) -> dict[str, Any]:
    try:
        body = bounded_json.loads(raw, f"block {number}", MAX_BLOCK_DEPTH)
    except JSONTooDeep as exc:
        raise LedgerCorrupted(str(exc), number) from None
    except (ValueError, UnicodeDecodeError):
        raise LedgerCorrupted(f"block {number} is not readable JSON", number) from None
    if not isinstance(body, dict) or body.get("number") != number:
        raise LedgerCorrupted(f"block {number} does not carry its own number", number)
    return body


def verify_ledger(
    con: sqlite3.Connection,
    membership: MembershipService,
    policy: EndorsementPolicy,
    channel: str,
    chaincode: str,
    *,
    orderer_certificate_der: bytes | None = None,
) -> dict[str, int]:
    """Replay the chain behind ``con`` (see the module docstring); ``membership`` holds the trusted
    CAs and ``orderer_certificate_der`` (when given) the only certificate allowed to sign blocks."""
    replay = sqlite3.connect(":memory:")
    replay.executescript(SCHEMA)
    previous_hash = ""
    blocks = txs_total = valid_total = 0
    try:
        rows = con.execute("SELECT number, header_hash, previous_hash, body FROM blocks ORDER BY number")
        expected_number = 0
        for number, header_hash, stored_prev, raw in rows:
            if number != expected_number:
                raise LedgerCorrupted(f"block {expected_number} is missing (found {number})", expected_number)
            expected_number += 1
            body = _block_body(number, raw)
            if body.get("previous_hash") != previous_hash or stored_prev != previous_hash:
                raise LedgerCorrupted(
                    f"block {number} does not link to the hash of block {number - 1}", number
                )
            if B.sha256_hex(canonical_json(B.data_of(body))) != body.get("data_hash"):
                raise LedgerCorrupted(f"block {number}: data hash does not match its transactions", number)
            header = B.header_bytes(body)
            if B.sha256_hex(header) != header_hash:
                raise LedgerCorrupted(f"block {number}: header hash does not match the stored hash", number)
            timestamp, at = _block_time(number, body)
            try:
                orderer = B.unb64(body["orderer"])
                _, role = membership.verify_signature(orderer, header, B.unb64(body["signature"]), at=at)
            except (AccessDenied, KeyError, ValueError, TypeError):
                raise LedgerCorrupted(f"block {number}: orderer signature does not verify", number) from None
            if role != "orderer":
                raise LedgerCorrupted(f"block {number} is signed by a non-orderer identity", number)
            if orderer_certificate_der is not None and _cert_der(orderer) != orderer_certificate_der:
                raise LedgerCorrupted(
                    f"block {number} is signed by an orderer certificate that is not the "
                    f"consortium's orderer",
                    number,
                )
            previous_hash = header_hash
            blocks += 1
            if number == 0:
                continue
            codes = body["validation_codes"]
            if len(codes) != len(body["transactions"]):
                raise LedgerCorrupted(
                    f"block {number}: validation codes do not match its transactions", number
                )

            outcome = validate_block(
                replay,
                number,
                body["transactions"],
                membership=membership,
                policy=policy,
                channel=channel,
                chaincode=chaincode,
                timestamp=timestamp,
            )
            for txnum, (recorded, replayed) in enumerate(zip(codes, outcome.codes)):
                if recorded != replayed:
                    tx_id = body["transactions"][txnum]["proposal"]["tx_id"]
                    raise LedgerCorrupted(
                        f"block {number}, transaction {txnum} ({tx_id}): recorded as {recorded}, "
                        f"replay says {replayed}",
                        number,
                    )
            txs_total += len(codes)
            valid_total += outcome.codes.count(B.VALID)
            write_block_outcome(replay, outcome)
    except sqlite3.DatabaseError as exc:
        raise LedgerCorrupted(
            f"the ledger file is damaged: {exc} (after block {blocks - 1})", max(blocks - 1, 0)
        ) from None

    # the derived tables must equal the replay
    def compare(
        table: str, columns: str, key_cols: int, locate: Callable[[tuple[Any, ...], Any, Any], int]
    ) -> None:
        try:
            present = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
            stored = (
                con.execute(f"SELECT {columns} FROM {table} ORDER BY {columns.split(',')[0]}").fetchall()
                if present.fetchone()
                else []  # a file written before the table existed: it has nothing for it
            )
        except sqlite3.DatabaseError as exc:
            raise LedgerCorrupted(f"table {table} is damaged: {exc}", None) from None
        replayed = replay.execute(
            f"SELECT {columns} FROM {table} ORDER BY {columns.split(',')[0]}"
        ).fetchall()
        s_map = {tuple(r[:key_cols]): r for r in stored}
        r_map = {tuple(r[:key_cols]): r for r in replayed}
        for k in sorted(set(s_map) | set(r_map), key=repr):
            if s_map.get(k) != r_map.get(k):
                blk = locate(k, s_map.get(k), r_map.get(k))
                raise LedgerCorrupted(
                    f"{table} entry {k[0]!r} differs from the replay of the chain (written in block {blk})",
                    blk,
                )

    compare("state", "key, value, block, txnum", 1, lambda k, s, r: (r or s)[2])
    compare("history", "key, block, txnum, tx_id, timestamp, value, is_delete", 3, lambda k, s, r: k[1])
    compare("events", "block, txnum, tx_id, chaincode, name, payload", 2, lambda k, s, r: k[0])
    compare("key_policies", "key, policy", 1, lambda k, s, r: _last_write(replay, k[0]))
    compare("txs", "tx_id, block, txnum, code", 1, lambda k, s, r: (r or s)[1])
    # the hashed state of private data (the clear text is in each organisation's private store)
    compare(
        "private_hashes", "collection, key_hash, value_hash, block, txnum", 2, lambda k, s, r: (r or s)[3]
    )
    compare("private_key_policies", "collection, key_hash, policy", 2, lambda k, s, r: blocks - 1)
    return {"blocks": blocks, "transactions": txs_total, "valid_transactions": valid_total}
