"""Persistence of the embedded ledger: one SQLite file (WAL mode).

Tables: ``blocks`` (the hash-chained blocks, each with its full canonical JSON body), ``state``
(world state: key -> value and version = (block, tx number)), ``history`` (every committed
version of every key), ``events`` (chaincode events of valid transactions) and ``txs`` (tx id
-> block, position, validation code). ``blocks`` is the ledger; the other tables are indexes
derived from it, which ``audit.ledger_file`` rebuilds and compares.

Private data (docs/confidentiality.md): ``private_hashes`` is the hashed state every organisation
keeps (collection, SHA-256 of the key -> SHA-256 of the value, version) and ``private_key_policies``
the key-level policies of private keys, both derived from the blocks' hashed write sets. The clear-text
values live in one file per organisation, :func:`private_store_path` (``PRIVATE_SCHEMA``): every
version of its own collection's keys committed (``private_writes``, Fabric's private data store; a
delete is a version without value), which a purge deletes. A read takes the version the hashed state
attests, so a reader whose snapshot of the ledger predates a commit still finds its version.

Keys are stored as UTF-8 BLOBs so that SQLite orders them bytewise, as Fabric does.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS blocks (
    number        INTEGER PRIMARY KEY,
    header_hash   TEXT NOT NULL,
    previous_hash TEXT NOT NULL,
    body          BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS state (
    key    BLOB PRIMARY KEY,
    value  BLOB NOT NULL,
    block  INTEGER NOT NULL,
    txnum  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    key       BLOB NOT NULL,
    block     INTEGER NOT NULL,
    txnum     INTEGER NOT NULL,
    tx_id     TEXT NOT NULL,
    timestamp REAL NOT NULL,
    value     BLOB,
    is_delete INTEGER NOT NULL,
    PRIMARY KEY (key, block, txnum)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    block     INTEGER NOT NULL,
    txnum     INTEGER NOT NULL,
    tx_id     TEXT NOT NULL,
    chaincode TEXT NOT NULL,
    name      TEXT NOT NULL,
    payload   BLOB NOT NULL,
    PRIMARY KEY (block, txnum)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS key_policies (
    key    BLOB PRIMARY KEY,
    policy BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS private_hashes (
    collection TEXT NOT NULL,
    key_hash   TEXT NOT NULL,
    value_hash TEXT NOT NULL,
    block      INTEGER NOT NULL,
    txnum      INTEGER NOT NULL,
    PRIMARY KEY (collection, key_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS private_key_policies (
    collection TEXT NOT NULL,
    key_hash   TEXT NOT NULL,
    policy     BLOB NOT NULL,
    PRIMARY KEY (collection, key_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txs (
    tx_id TEXT PRIMARY KEY,
    block INTEGER NOT NULL,
    txnum INTEGER NOT NULL,
    code  TEXT NOT NULL
) WITHOUT ROWID;
"""

PRIVATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS private_writes (
    collection TEXT NOT NULL,
    key        BLOB NOT NULL,
    block      INTEGER NOT NULL,
    txnum      INTEGER NOT NULL,
    value      BLOB,
    PRIMARY KEY (collection, key, block, txnum)
) WITHOUT ROWID;
"""


def private_store_path(ledger: str | os.PathLike[str], msp_id: str) -> Path:
    """Organisation ``msp_id``'s private data store beside the ledger file ``ledger``."""
    p = Path(ledger)
    return p.with_name(f"{p.name}.{msp_id}.private")


MAX_KEY_BYTES = "\U0010ffff".encode("utf-8")


_CHUNK = 500  # keys per IN (...) query, well under SQLite's bound on parameters


def create_private(path: Path) -> None:
    """Create ``path`` empty and 0600 unless it exists (SQLite then makes its WAL and shared-memory
    files with the same mode): a ledger holds records the contracts refuse to non-members, so no other
    user of the machine may read it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    os.close(fd)


class Store:
    """Thread-local SQLite connections to one ledger file (created 0600)."""

    def __init__(self, path: str | Path, synchronous: str = "FULL", schema: str = SCHEMA):
        self.path = Path(path)
        # a private store overwrites what it deletes (a purge must leave no copy in free pages)
        self.secure_delete = schema == PRIVATE_SCHEMA
        self.synchronous = synchronous
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        create_private(self.path)
        con = self.connection()
        con.executescript(schema)

    def connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(f"PRAGMA synchronous={self.synchronous}")
            con.execute("PRAGMA busy_timeout=60000")
            if self.secure_delete:
                con.execute("PRAGMA secure_delete=ON")
            self._local.con = con
            with self._lock:
                self._all.append(con)
        return con

    def close(self) -> None:
        with self._lock:
            for con in self._all:
                try:
                    con.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()

    # ---- reads (caller holds a read transaction for a consistent snapshot)
    @staticmethod
    def get_state(con: sqlite3.Connection, key: bytes) -> tuple[bytes, tuple[int, int]] | None:
        row = con.execute("SELECT value, block, txnum FROM state WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], (row[1], row[2]))

    @staticmethod
    def versions(con: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, tuple[int, int]]:
        """The committed versions of those of ``keys`` that exist, in a few queries (not one per key:
        each query releases and retakes the GIL, which a busy process makes slow to get back)."""
        out: dict[bytes, tuple[int, int]] = {}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i : i + _CHUNK]
            marks = ",".join("?" * len(part))
            for k, b, t in con.execute(f"SELECT key, block, txnum FROM state WHERE key IN ({marks})", part):
                out[k] = (b, t)
        return out

    @staticmethod
    def policies(con: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, bytes]:
        """The key-level endorsement policies (Fabric's ``VALIDATION_PARAMETER`` metadata) of those
        of ``keys`` that have one, in a few queries."""
        out: dict[bytes, bytes] = {}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i : i + _CHUNK]
            marks = ",".join("?" * len(part))
            for k, p in con.execute(f"SELECT key, policy FROM key_policies WHERE key IN ({marks})", part):
                out[k] = p
        return out

    @staticmethod
    def private_hash(
        con: sqlite3.Connection, collection: str, key_hash: str
    ) -> tuple[str, tuple[int, int]] | None:
        """(value hash, version) of a private key in the hashed state, or None."""
        row = con.execute(
            "SELECT value_hash, block, txnum FROM private_hashes WHERE collection = ? AND key_hash = ?",
            (collection, key_hash),
        ).fetchone()
        return None if row is None else (row[0], (row[1], row[2]))

    @staticmethod
    def private_policy(con: sqlite3.Connection, collection: str, key_hash: str) -> bytes | None:
        row = con.execute(
            "SELECT policy FROM private_key_policies WHERE collection = ? AND key_hash = ?",
            (collection, key_hash),
        ).fetchone()
        return None if row is None else bytes(row[0])

    @staticmethod
    def known_tx_ids(con: sqlite3.Connection, tx_ids: list[str]) -> set[str]:
        """Those of ``tx_ids`` already in the chain's transaction index, in a few queries."""
        out: set[str] = set()
        for i in range(0, len(tx_ids), _CHUNK):
            part = tx_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(part))
            out.update(r[0] for r in con.execute(f"SELECT tx_id FROM txs WHERE tx_id IN ({marks})", part))
        return out

    @staticmethod
    def range(
        con: sqlite3.Connection, start: bytes, end: bytes
    ) -> list[tuple[bytes, bytes, tuple[int, int]]]:
        if end:
            rows = con.execute(
                "SELECT key, value, block, txnum FROM state WHERE key >= ? AND key < ? ORDER BY key",
                (start, end),
            ).fetchall()
        else:
            rows = con.execute(
                "SELECT key, value, block, txnum FROM state WHERE key >= ? ORDER BY key", (start,)
            ).fetchall()
        return [(r[0], r[1], (r[2], r[3])) for r in rows]

    @staticmethod
    def height(con: sqlite3.Connection) -> int:
        row = con.execute("SELECT MAX(number) FROM blocks").fetchone()
        return 0 if row[0] is None else row[0] + 1
