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
from ledger.identity import Consortium, Identity

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
    # the hashed private state: each (collection, key hash) rewritten in a dropped block goes back to its
    # last version in the kept blocks (replayed from their valid transactions' hashed write sets)
    touched = set(
        con.execute("SELECT collection, key_hash FROM private_hashes WHERE block > ?", (keep_through,))
    )
    if touched:
        valid = {
            t
            for (t,) in con.execute(
                "SELECT tx_id FROM txs WHERE code = 'VALID' AND block <= ?", (keep_through,)
            )
        }
        last: dict[tuple[str, str], tuple[str | None, int, int]] = {}
        for number, body in con.execute(
            "SELECT number, body FROM blocks WHERE number <= ? ORDER BY number", (keep_through,)
        ):
            for txnum, tx in enumerate(json.loads(body)["transactions"]):
                if tx["proposal"]["tx_id"] not in valid:
                    continue
                private = tx["response"]["rwset"].get("private") or {}
                for collection, hashed, value, _ in private.get("writes", ()):
                    if (collection, hashed) in touched:
                        last[(collection, hashed)] = (value, number, txnum)
        for collection, hashed in touched:
            con.execute(
                "DELETE FROM private_hashes WHERE collection = ? AND key_hash = ?", (collection, hashed)
            )
            value, number, txnum = last.get((collection, hashed), (None, 0, 0))
            if value is not None:
                con.execute(
                    "INSERT INTO private_hashes VALUES (?, ?, ?, ?, ?)",
                    (collection, hashed, value, number, txnum),
                )
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


def resign_bundle(bundle: Path, identity: Identity) -> None:
    """Rebuild an audit bundle's manifest over its current files and sign it as ``identity`` (what a
    dishonest exporter could do)."""
    import base64
    import hashlib

    from audit.attestations import sign_envelope
    from audit.bundles import ENVELOPE, MANIFEST_TYPE
    from chaincode.canonical import canonical_json

    env = json.loads((bundle / ENVELOPE).read_bytes())
    manifest = json.loads(base64.b64decode(env["payload"]))
    manifest["files"] = {
        p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in bundle.rglob("*")
        if p.is_file() and p.name != ENVELOPE
    }
    (bundle / ENVELOPE).write_bytes(canonical_json(sign_envelope(manifest, identity, MANIFEST_TYPE)))
