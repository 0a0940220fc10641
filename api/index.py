"""The off-chain audit index: ledger records, artifacts and events in SQLite (docs/api.md "Audit index").

Audit queries (histories, "which artifacts did each run publish", "which artifacts did
organisation X publish for process P", the lineage of a model) are answered from here, so they
stay fast however long the ledger grows. The index is *derived* data: it is built only from
chaincode events and the records the gateway's identity may read, each row remembers the block
and transaction it came from, and any answer can be re-checked against the ledger
(:mod:`audit.verification`).

Resumable: the number of the last fully indexed block is stored in the same SQLite transaction as
that block's rows, so a gateway killed at any point resumes from ``last_block + 1`` with no
duplicate or missing rows (every write is an upsert keyed by the record's ledger key).

Tables: ``images``, ``processes``, ``executions`` (one row per organisation per round),
``artifacts`` (every input and output digest of every execution, with direction and peer),
``models``, ``events`` (the timeline) and ``meta`` (``last_block``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.lineage import LINEAGE_NODE_COLUMNS, artifact_rows, execution_node_id, model_lineage
from home.layout import check_private, create_private_file, sqlite_files
from wire.canonical import canonical_json

log = logging.getLogger("consortia.index")

SCHEMA_VERSION = "3"
TABLES = ("meta", "images", "processes", "executions", "artifacts", "models", "events")
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS images (
    id TEXT PRIMARY KEY, digest TEXT NOT NULL, owner TEXT NOT NULL, status TEXT NOT NULL,
    block INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS processes (
    id TEXT PRIMARY KEY, image_id TEXT NOT NULL, image_digest TEXT NOT NULL, creator TEXT NOT NULL,
    status TEXT NOT NULL, block INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS executions (
    process_id TEXT NOT NULL, round INTEGER NOT NULL, organisation TEXT NOT NULL, status TEXT NOT NULL,
    image_digest TEXT NOT NULL, tx_id TEXT NOT NULL, completed_tx_id TEXT NOT NULL, block INTEGER NOT NULL,
    record TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS executions_by_key ON executions (process_id, round, organisation);
-- covering index: a lineage walk reads only this index, never the (large) records
CREATE INDEX IF NOT EXISTS executions_lineage ON executions
    (process_id, round, organisation, status, image_digest, tx_id, completed_tx_id, block);
CREATE TABLE IF NOT EXISTS artifacts (
    process_id TEXT NOT NULL, round INTEGER NOT NULL, organisation TEXT NOT NULL,
    direction TEXT NOT NULL, kind TEXT NOT NULL, peer TEXT NOT NULL, digest TEXT NOT NULL, size INTEGER,
    PRIMARY KEY (process_id, round, organisation, direction, kind, peer, digest)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS artifacts_by_digest ON artifacts (digest);
CREATE TABLE IF NOT EXISTS models (
    id TEXT PRIMARY KEY, process_id TEXT NOT NULL, owner TEXT NOT NULL, digest TEXT NOT NULL,
    block INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS models_by_process ON models (process_id);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, tx_id TEXT NOT NULL, name TEXT NOT NULL,
    process_id TEXT, subject TEXT NOT NULL, payload TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_process ON events (process_id, block);
CREATE INDEX IF NOT EXISTS events_by_subject ON events (subject, block);
"""


class IndexCorrupted(Exception):
    """The index file is not a Consortia audit index (or is damaged); rebuild it from the ledger."""


@dataclass(frozen=True)
class Page:
    """One page of a listing: ``items[offset : offset + limit]`` of ``total``."""

    items: list[dict[str, Any]]
    total: int
    limit: int
    offset: int


class AuditIndex:
    """SQLite audit index of one gateway (thread-safe; one writer, many readers). Its file is made
    0600 in a 0700 folder; an existing one open to other users is refused (``home.errors.NotPrivate``)."""

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL"):
        if synchronous not in ("OFF", "NORMAL", "FULL"):
            raise ValueError(f"synchronous must be OFF, NORMAL or FULL, not {synchronous!r}")
        self.path = Path(path)
        check_private(sqlite_files(self.path), "audit index")  # records members only may read
        create_private_file(self.path)  # SQLite makes its -wal and -shm with the same mode
        self._lock = threading.RLock()
        self._con = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute(f"PRAGMA synchronous={synchronous}")
            self._con.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache
            self._con.execute("PRAGMA wal_autocheckpoint=16384")  # fewer, larger checkpoints while ingesting
            self._con.execute("PRAGMA mmap_size=1073741824")  # reads straight from the OS page cache
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise IndexCorrupted(f"{self.path} is not a usable audit index: {exc}") from None

    def _migrate(self) -> None:
        """Create the schema; an index of another schema version is derived data: it is dropped
        and rebuilt from block 0 by the next sync."""
        has_meta = self._con.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if has_meta:
            row = self._con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None or row[0] != SCHEMA_VERSION:
                log.warning(
                    "audit index %s has schema %s, not %s: rebuilding it from the ledger",
                    self.path,
                    row[0] if row else "?",
                    SCHEMA_VERSION,
                )
                for table in TABLES:
                    self._con.execute(f"DROP TABLE IF EXISTS {table}")
        self._con.executescript(SCHEMA)
        self._con.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))

    # ------------------------------------------------------------------ bookkeeping
    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> AuditIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_block(self) -> int:
        """Number of the last block whose events are fully indexed (-1: none yet)."""
        row = self._q("SELECT value FROM meta WHERE key = 'last_block'").fetchone()
        return -1 if row is None else int(row[0])

    def transaction(self) -> _Transaction:
        """``with index.transaction() as tx:`` -- every write inside commits atomically."""
        return _Transaction(self)

    # ------------------------------------------------------------------ writes (inside a transaction)
    def _put_image(self, record: dict[str, Any], block: int) -> None:
        self._con.execute(
            "INSERT OR REPLACE INTO images VALUES (?,?,?,?,?,?)",
            (
                record["id"],
                record["digest"],
                record["owner"],
                record["status"],
                block,
                canonical_json(record).decode(),
            ),
        )

    def _put_process(self, record: dict[str, Any], block: int) -> None:
        record = {k: v for k, v in record.items() if k != "current_round"}
        self._con.execute(
            "INSERT OR REPLACE INTO processes VALUES (?,?,?,?,?,?,?)",
            (
                record["id"],
                record["image_id"],
                record["image_digest"],
                record["creator"],
                record["status"],
                block,
                canonical_json(record).decode(),
            ),
        )

    def _put_executions(self, records: Iterable[tuple[dict[str, Any], int]]) -> int:
        rows, arts, n = [], [], 0
        for record, block in records:
            rows.append(
                (
                    record["process_id"],
                    record["round"],
                    record["organisation"],
                    record["status"],
                    record["image_digest"],
                    record["tx_id"],
                    record.get("completed_tx_id", ""),
                    block,
                    canonical_json(record).decode(),
                )
            )
            arts.extend(artifact_rows(record))
            n += 1
        self._con.executemany("INSERT OR REPLACE INTO executions VALUES (?,?,?,?,?,?,?,?,?)", rows)
        # an execution's artifacts are replaced as a whole when its record is indexed again
        self._con.executemany(
            "DELETE FROM artifacts WHERE process_id = ? AND round = ? AND organisation = ?",
            [r[:3] for r in rows],
        )
        self._con.executemany("INSERT OR REPLACE INTO artifacts VALUES (?,?,?,?,?,?,?,?)", arts)
        return n

    def _put_model(self, record: dict[str, Any], block: int) -> None:
        record = {k: v for k, v in record.items() if k != "wrapped_key"}  # the caller's sealed key stays out
        self._con.execute(
            "INSERT OR REPLACE INTO models VALUES (?,?,?,?,?,?)",
            (
                record["id"],
                record["process_id"],
                record["owner"],
                record["digest"],
                block,
                canonical_json(record).decode(),
            ),
        )

    def _delete(self, table: str, key: str) -> None:
        assert table in ("images", "processes", "models")
        self._con.execute(f"DELETE FROM {table} WHERE id = ?", (key,))

    def _add_event(
        self, block: int, tx_id: str, name: str, process_id: str | None, subject: str, payload: dict[str, Any]
    ) -> None:
        self._con.execute(
            "INSERT INTO events (block, tx_id, name, process_id, subject, payload) VALUES (?,?,?,?,?,?)",
            (block, tx_id, name, process_id, subject, canonical_json(payload).decode()),
        )

    def _set_last_block(self, number: int) -> None:
        self._con.execute("INSERT OR REPLACE INTO meta VALUES ('last_block', ?)", (str(number),))

    # ------------------------------------------------------------------ reads
    def _q(self, sql: str, args: Any = ()) -> _Rows:
        with self._lock:
            return _Rows(self._con.execute(sql, args).fetchall())

    def _one(self, sql: str, args: tuple) -> dict[str, Any] | None:
        row = self._q(sql, args).fetchone()
        return None if row is None else json.loads(row[0])

    def _page(self, table: str, where: str, args: tuple, order: str, limit: int, offset: int) -> Page:
        _check_page(limit, offset)
        total = self._q(f"SELECT COUNT(*) FROM {table} {where}", args).fetchone()[0]
        rows = self._q(
            f"SELECT record FROM {table} {where} ORDER BY {order} LIMIT ? OFFSET ?", (*args, limit, offset)
        ).fetchall()
        return Page([json.loads(r[0]) for r in rows], total, limit, offset)

    def image(self, image_id: str) -> dict[str, Any] | None:
        return self._one("SELECT record FROM images WHERE id = ?", (image_id,))

    def images(self, limit: int = 50, offset: int = 0, status: str | None = None) -> Page:
        if status:
            return self._page("images", "WHERE status = ?", (status,), "id", limit, offset)
        return self._page("images", "", (), "id", limit, offset)

    def process(self, process_id: str) -> dict[str, Any] | None:
        return self._one("SELECT record FROM processes WHERE id = ?", (process_id,))

    def processes(self, limit: int = 50, offset: int = 0, status: str | None = None) -> Page:
        if status:
            return self._page("processes", "WHERE status = ?", (status,), "id", limit, offset)
        return self._page("processes", "", (), "id", limit, offset)

    def execution(self, process_id: str, rnd: int, organisation: str) -> dict[str, Any] | None:
        return self._one(
            "SELECT record FROM executions WHERE process_id = ? AND round = ? AND organisation = ?",
            (process_id, rnd, organisation),
        )

    def executions(
        self,
        process_id: str,
        rnd: int | None = None,
        organisation: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> Page:
        where, args = "WHERE process_id = ?", [process_id]
        if rnd is not None:
            where += " AND round = ?"
            args.append(rnd)
        if organisation is not None:
            where += " AND organisation = ?"
            args.append(organisation)
        return self._page("executions", where, tuple(args), "round, organisation", limit, offset)

    def latest_completed_executions(self, process_id: str) -> list[dict[str, Any]]:
        """Each organisation's completed execution record of the highest round (what a process's privacy
        so far is read from: :func:`chaincode.privacy.privacy_status`)."""
        rows = self._q(
            "SELECT e.record FROM executions e WHERE e.process_id = ? AND e.status = 'completed' AND "
            "e.round = (SELECT MAX(round) FROM executions WHERE process_id = e.process_id AND "
            "organisation = e.organisation AND status = 'completed') ORDER BY e.organisation",
            (process_id,),
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def execution_blocks(self, process_id: str) -> dict[str, int]:
        """Block number of the latest version of each execution record of a process, by node id."""
        return {
            execution_node_id(p, r, o): b
            for p, r, o, b in self._q(
                "SELECT process_id, round, organisation, block FROM executions WHERE process_id = ?",
                (process_id,),
            )
        }

    def model(self, model_id: str) -> dict[str, Any] | None:
        return self._one("SELECT record FROM models WHERE id = ?", (model_id,))

    def models(self, limit: int = 50, offset: int = 0, process_id: str | None = None) -> Page:
        if process_id:
            return self._page("models", "WHERE process_id = ?", (process_id,), "id", limit, offset)
        return self._page("models", "", (), "id", limit, offset)

    def published_artifacts(self, process_id: str, organisation: str | None = None) -> list[dict[str, Any]]:
        """Artifacts published (output) by each run of a process -- or by one organisation."""
        sql = (
            "SELECT round, organisation, kind, peer, digest, size FROM artifacts "
            "WHERE process_id = ? AND direction = 'out'"
        )
        args: list[Any] = [process_id]
        if organisation is not None:
            sql += " AND organisation = ?"
            args.append(organisation)
        sql += " ORDER BY round, organisation, kind, peer"
        return [
            {
                "round": r,
                "organisation": o,
                "kind": k,
                "recipient": p if k == "message" else None,
                "digest": d,
                "size": s,
            }
            for r, o, k, p, d, s in self._q(sql, args)
        ]

    def artifact(self, digest: str) -> dict[str, list[dict[str, Any]]]:
        """Which executions produced and which consumed the artifact with this digest."""
        out: dict[str, list[dict[str, Any]]] = {"produced_by": [], "consumed_by": []}
        for pid, r, o, direction, kind, peer, size in self._q(
            "SELECT process_id, round, organisation, direction, kind, peer, size FROM artifacts "
            "WHERE digest = ? ORDER BY process_id, round, organisation",
            (digest,),
        ):
            out["produced_by" if direction == "out" else "consumed_by"].append(
                {"process_id": pid, "round": r, "organisation": o, "kind": kind, "peer": peer, "size": size}
            )
        return out

    def events(
        self,
        *,
        process_id: str | None = None,
        subject: str | None = None,
        after_block: int = -1,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        where, args = ["block > ?"], [after_block]
        if process_id is not None:
            where.append("process_id = ?")
            args.append(process_id)
        if subject is not None:
            where.append("subject = ?")
            args.append(subject)
        rows = self._q(
            f"SELECT block, tx_id, name, process_id, subject, payload FROM events "
            f"WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [
            {"block": b, "tx_id": t, "name": n, "process_id": p, "subject": s, "payload": json.loads(pl)}
            for b, t, n, p, s, pl in rows
        ]

    def lineage(self, model_id: str) -> dict[str, Any] | None:
        """The lineage of a model: every execution it descends from, and the artifacts between them.

        Nodes are execution records (process, round, organisation); an edge ``producer -> consumer``
        carries an artifact digest that the producer's signed result lists as an output and the
        consumer's as an input (its previous state or an inbox message). The walk starts at the
        execution that produced the model and follows inputs backwards by the one lineage rule
        (:mod:`audit.lineage`): each input is linked to the execution of the round before whose
        signed output has that digest; what the rule cannot link is listed as ``broken_links``."""
        model = self.model(model_id)
        if model is None:
            return None
        pid = model["process_id"]
        execs = self._q(
            f"SELECT {', '.join(LINEAGE_NODE_COLUMNS)} FROM executions WHERE process_id = ?", (pid,)
        )
        arts = self._q(
            "SELECT round, organisation, direction, kind, peer, digest FROM artifacts WHERE process_id = ?",
            (pid,),
        )
        return model_lineage(model, self.process(pid), execs, arts)

    def transaction_block(self, tx_id: str) -> int | None:
        """The block of a transaction the index saw an event of (None if it saw none)."""
        row = self._q("SELECT block FROM events WHERE tx_id = ? LIMIT 1", (tx_id,)).fetchone()
        return None if row is None else int(row[0])

    def counts(self) -> dict[str, int]:
        return {
            t: self._q(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("images", "processes", "executions", "artifacts", "models", "events")
        }


class _Rows(list):
    """Rows already fetched (reads hold the index lock only while fetching)."""

    def fetchone(self):
        return self[0] if self else None

    def fetchall(self):
        return list(self)


class _Transaction:
    """Writes to the index inside one SQLite transaction (see :meth:`AuditIndex.transaction`)."""

    def __init__(self, index: AuditIndex):
        self.index = index

    def __enter__(self) -> AuditIndex:
        self.index._lock.acquire()
        self.index._con.execute("BEGIN IMMEDIATE")
        return self.index

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.index._con.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.index._lock.release()


def _check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValueError(f"limit must be an integer in [1, 10000], got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")


def ingest_executions(
    index: AuditIndex, records: Iterable[tuple[dict[str, Any], int]], batch: int = 5000
) -> int:
    """Bulk-load execution records (record, block) into the index, ``batch`` per transaction."""
    n, buf = 0, []
    for item in records:
        buf.append(item)
        if len(buf) >= batch:
            with index.transaction() as ix:
                n += ix._put_executions(buf)
            buf = []
    if buf:
        with index.transaction() as ix:
            n += ix._put_executions(buf)
    return n
