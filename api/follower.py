"""Keeping the audit index in step with the ledger: chaincode events in, indexed records out.

For each event the follower reads the record it names through the gateway's own identity
(:class:`ledger.client.ConsortiaClient`), so the index holds exactly what this organisation may
see: a record the contracts refuse to show (another consortium's process, a model whose access
list no longer includes us) is left out or removed. Each block is written in one index
transaction together with ``last_block``, which makes the follower resumable (:mod:`api.index`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from api.index import AuditIndex
from audit.lineage import execution_node_id
from ledger.client import ConsortiaClient
from ledger.errors import Forbidden, NotFound, PrivateDataMismatch
from ledger.interface import ChaincodeEvent

log = logging.getLogger("consortia.index")

IMAGE_EVENTS = ("ImageRegistered", "ImageRevoked", "ImageApproved", "ImageApprovalRevoked")
PROCESS_EVENTS = ("ProcessCreated", "ProcessAnswered", "ProcessStatus")
TASK_EVENTS = ("TaskCreated", "TaskCompleted", "TaskFailed")
MODEL_EVENTS = ("ModelPublished", "ModelAccessGranted", "ModelAccessRevoked")


def _fetch(client: ConsortiaClient, ev: ChaincodeEvent) -> tuple[str, Any, str | None, str]:
    """(kind, record or None if not visible, process id, subject) for one event."""
    p = json.loads(ev.payload)
    try:
        if ev.name in IMAGE_EVENTS:
            return (
                "image",
                client.ledger.evaluate(client.identity, "Image:get", p["id"]),
                None,
                f"image:{p['id']}",
            )
        if ev.name in PROCESS_EVENTS:
            return (
                "process",
                client.ledger.evaluate(client.identity, "LearningProcess:get", p["id"]),
                p["id"],
                f"process:{p['id']}",
            )
        if ev.name in TASK_EVENTS:
            subject = "execution:" + execution_node_id(p["process_id"], p["round"], p["organisation"])
            raw = client.ledger.evaluate(
                client.identity, "ExecutionRecord:get", p["process_id"], str(p["round"]), p["organisation"]
            )
            return "execution", raw, p["process_id"], subject
        if ev.name in MODEL_EVENTS:
            return (
                "model",
                client.ledger.evaluate(client.identity, "Model:get", p["id"]),
                None,
                f"model:{p['id']}",
            )
    except PrivateDataMismatch as exc:
        # this member's private copy does not match the chain's hash: keep what the index holds and
        # say so, rather than index a record it cannot vouch for or stop following
        log.error("index: record not updated", extra={"event": ev.name, "error": str(exc)})
        return "mismatch", None, p.get("process_id") or p.get("id"), ev.name
    except (Forbidden, NotFound):
        key = p.get("id") or ""
        kind = (
            "image"
            if ev.name in IMAGE_EVENTS
            else "process"
            if ev.name in PROCESS_EVENTS
            else "model"
            if ev.name in MODEL_EVENTS
            else "execution"
        )
        return (
            kind,
            None,
            p.get("process_id") or (p.get("id") if kind == "process" else None),
            f"{kind}:{key}",
        )
    return "other", None, None, ev.name


def _apply(
    index: AuditIndex, block: int, items: list[tuple[ChaincodeEvent, tuple[str, Any, str | None, str]]]
) -> None:
    with index.transaction() as ix:
        for ev, (kind, rec, pid, subject) in items:
            if kind == "image":
                if rec is not None:
                    ix._put_image(json.loads(rec), block)
            elif kind == "process":
                if rec is None:
                    ix._delete("processes", subject.split(":", 1)[1])
                    continue  # not a member: neither the record nor its events are ours to see
                ix._put_process(json.loads(rec), block)
            elif kind == "execution":
                if rec is None:
                    continue
                ix._put_executions([(json.loads(rec), block)])
            elif kind == "model":
                if rec is None:
                    ix._delete("models", subject.split(":", 1)[1])
                    continue
                model = json.loads(rec)
                pid = model["process_id"]
                ix._put_model(model, block)
            ix._add_event(block, ev.tx_id, ev.name, pid, subject, json.loads(ev.payload))
        ix._set_last_block(block)


def sync(
    index: AuditIndex, client: ConsortiaClient, *, progress: Callable[[int, int], None] | None = None
) -> int:
    """Index every event from ``index.last_block + 1`` up to the current block height.
    Returns the number of events indexed. Safe to call repeatedly and to interrupt."""
    height = client.ledger.block_height(client.identity)
    start = index.last_block + 1
    if start >= height:
        return 0
    n = 0
    block, items = -1, []
    for ev in client.ledger.events(client.identity, start_block=start, timeout=0):
        if ev.block_number >= height:
            break
        if ev.block_number != block and items:
            _apply(index, block, items)
            items = []
            if progress:
                progress(block, height)
        block = ev.block_number
        items.append((ev, _fetch(client, ev)))
        n += 1
    if items:
        _apply(index, block, items)
    with index.transaction() as ix:
        ix._set_last_block(max(height - 1, index.last_block))
    if progress:
        progress(height - 1, height)
    return n


class IndexFollower:
    """A background thread that calls :func:`sync` every ``interval`` seconds until stopped."""

    def __init__(
        self,
        index: AuditIndex,
        client: ConsortiaClient,
        interval: float = 0.25,
        lock: threading.Lock | None = None,
    ):
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.index, self.client, self.interval = index, client, interval
        self._lock = lock or threading.Lock()  # shared with other callers of sync() on this index
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str = ""

    def start(self) -> IndexFollower:
        self._thread = threading.Thread(target=self._run, name="consortia-index", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    sync(self.index, self.client)
                self.last_error = ""
            except Exception as exc:  # keep following; the error is visible on /health
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("index sync failed", extra={"error": self.last_error})
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
