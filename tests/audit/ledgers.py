"""Ledgers for the audit tests: write a ledger file, copy one, cut one short the way an attacker with
write access would, and a host that cannot find a transaction's block (as the Fabric Gateway)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from api.cli import app
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium

DIGEST = "sha256:" + "ab" * 32
runner = CliRunner()


def populate(consortium: Consortium, path: Path, images: int = 3, prefix: str = "img") -> None:
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        for i in range(images):
            c.register_image(f"{prefix}{i}", "1", "a", DIGEST)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli_verify(path: Path, crypto: Path, *extra: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["ledger", "verify", str(path), "--crypto", str(crypto), "--json", *extra])
    return res.exit_code, json.loads(res.stdout.strip().splitlines()[-1])


def snapshot(source: Path, dest: Path) -> Path:
    """A consistent copy of a (possibly open) ledger file."""
    src = sqlite3.connect(source)
    dst = sqlite3.connect(dest)
    src.backup(dst)
    dst.close()
    src.close()
    return dest


def truncate_consistently(path: Path, keep_through: int) -> None:
    """What an attacker with write access does: delete the last blocks and every row derived from
    them, restoring each key's state to its last version in the kept blocks."""
    con = sqlite3.connect(path)
    con.execute("BEGIN")
    changed = [k for (k,) in con.execute("SELECT key FROM state WHERE block > ?", (keep_through,))]
    changed += [
        k for (k,) in con.execute("SELECT DISTINCT key FROM history WHERE block > ?", (keep_through,))
    ]
    for key in set(changed):
        prev = con.execute(
            "SELECT value, block, txnum, is_delete FROM history WHERE key = ? AND block <= ? "
            "ORDER BY block DESC, txnum DESC LIMIT 1",
            (key, keep_through),
        ).fetchone()
        con.execute("DELETE FROM state WHERE key = ?", (key,))
        if prev is not None and not prev[3]:
            con.execute("INSERT INTO state VALUES (?, ?, ?, ?)", (key, prev[0], prev[1], prev[2]))
    for table, col in (("history", "block"), ("events", "block"), ("txs", "block"), ("blocks", "number")):
        con.execute(f"DELETE FROM {table} WHERE {col} > ?", (keep_through,))
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


class WithoutTransactionLookup:
    """A ledger host that cannot say which block holds a transaction (as the Fabric Gateway)."""

    def __init__(self, ledger: Any):
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        if name == "transaction_block":
            raise AttributeError(name)
        return getattr(self._ledger, name)
