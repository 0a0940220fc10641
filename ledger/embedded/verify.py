"""Full verification of an embedded ledger file.

Walks the chain from the genesis block and checks, for every block: its stored header hash and
link to the previous block, its data hash, the orderer's signature; for every transaction: the
client's and endorsers' signatures, the endorsement policy and MVCC validity, by replaying
validation into a fresh state; and finally that the stored world state, key history, events and
transaction index equal the replay. The first discrepancy raises :class:`LedgerCorrupted` naming
the block it was found in.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from chaincode.canonical import canonical_json
from ledger.embedded import blocks as B
from ledger.embedded.policy import EndorsementPolicy
from ledger.embedded.store import SCHEMA
from ledger.embedded.validation import validate_block, write_block_outcome
from ledger.errors import AccessDenied, LedgerCorrupted
from ledger.identity import MembershipService


def _block_body(number: int, raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise LedgerCorrupted(f"block {number} is not readable JSON", number) from None
    if not isinstance(body, dict) or body.get("number") != number:
        raise LedgerCorrupted(f"block {number} does not carry its own number", number)
    return body


def verify_ledger(con: sqlite3.Connection, membership: MembershipService, policy: EndorsementPolicy,
                  channel: str, chaincode: str) -> dict[str, int]:
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
                raise LedgerCorrupted(f"block {number} does not link to the hash of block {number - 1}", number)
            if B.sha256_hex(canonical_json(B.data_of(body))) != body.get("data_hash"):
                raise LedgerCorrupted(f"block {number}: data hash does not match its transactions", number)
            header = B.header_bytes(body)
            if B.sha256_hex(header) != header_hash:
                raise LedgerCorrupted(f"block {number}: header hash does not match the stored hash", number)
            try:
                _, role = membership.verify_signature(B.unb64(body["orderer"]), header, B.unb64(body["signature"]))
            except (AccessDenied, KeyError, ValueError):
                raise LedgerCorrupted(f"block {number}: orderer signature does not verify", number) from None
            if role != "orderer":
                raise LedgerCorrupted(f"block {number} is signed by a non-orderer identity", number)
            previous_hash = header_hash
            blocks += 1
            if number == 0:
                continue
            codes = body["validation_codes"]
            if len(codes) != len(body["transactions"]):
                raise LedgerCorrupted(f"block {number}: validation codes do not match its transactions", number)

            outcome = validate_block(replay, number, body["transactions"], membership=membership, policy=policy,
                                     channel=channel, chaincode=chaincode)
            for txnum, (recorded, replayed) in enumerate(zip(codes, outcome.codes)):
                if recorded != replayed:
                    tx_id = body["transactions"][txnum]["proposal"]["tx_id"]
                    raise LedgerCorrupted(f"block {number}, transaction {txnum} ({tx_id}): recorded as {recorded}, "
                                          f"replay says {replayed}", number)
            txs_total += len(codes)
            valid_total += outcome.codes.count(B.VALID)
            write_block_outcome(replay, outcome)
    except sqlite3.DatabaseError as exc:
        raise LedgerCorrupted(f"the ledger file is damaged: {exc} (after block {blocks - 1})", max(blocks - 1, 0)) from None

    # the derived tables must equal the replay
    def compare(table: str, columns: str, key_cols: int, locate) -> None:
        try:
            stored = con.execute(f"SELECT {columns} FROM {table} ORDER BY {columns.split(',')[0]}").fetchall()
        except sqlite3.DatabaseError as exc:
            raise LedgerCorrupted(f"table {table} is damaged: {exc}", None) from None
        replayed = replay.execute(f"SELECT {columns} FROM {table} ORDER BY {columns.split(',')[0]}").fetchall()
        s_map = {tuple(r[:key_cols]): r for r in stored}
        r_map = {tuple(r[:key_cols]): r for r in replayed}
        for k in sorted(set(s_map) | set(r_map), key=repr):
            if s_map.get(k) != r_map.get(k):
                blk = locate(k, s_map.get(k), r_map.get(k))
                raise LedgerCorrupted(f"{table} entry {k[0]!r} differs from the replay of the chain "
                                      f"(written in block {blk})", blk)

    compare("state", "key, value, block, txnum", 1, lambda k, s, r: (r or s)[2])
    compare("history", "key, block, txnum, tx_id, timestamp, value, is_delete", 3, lambda k, s, r: k[1])
    compare("events", "block, txnum, tx_id, chaincode, name, payload", 2, lambda k, s, r: k[0])
    compare("txs", "tx_id, block, txnum, code", 1, lambda k, s, r: (r or s)[1])
    return {"blocks": blocks, "transactions": txs_total, "valid_transactions": valid_total}
