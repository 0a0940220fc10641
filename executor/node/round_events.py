"""Learning that a round opened from the ledger's chaincode events, not by polling.

Round ``r + 1`` of a process opens in the block that holds the last ``TaskCompleted`` event of
round ``r`` (a round is complete when every consortium member has completed it; see
``chaincode.learning_process.current_round``). A waiting agent reads which members completed
round ``r`` once (``LearningProcess:progress``, a few bytes, not the records), then follows the
events from the block height it saw before that read, so no completion is missed, and wakes when the set is whole, or when the process changes status
(``ProcessStatus``: started, failed, aborted, completed) or a task of it failed (``TaskFailed``).
On the embedded ledger the event stream is woken by the commit itself; on Fabric it is the
peer's event service.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from ledger.client import ConsortiaClient
from ledger.interface import ChaincodeEvent

# how long a waiting agent trusts the event stream before looking at the ledger again anyway
EVENT_WAIT_LIMIT = 5.0
ENDED = ("completed", "failed", "aborted", "declined")


def _payload(ev: ChaincodeEvent) -> dict[str, Any]:
    try:
        out = json.loads(ev.payload)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def opens(ev: ChaincodeEvent, process_id: str, rnd: int, done: set[str], members: frozenset[str]) -> bool:
    """Whether ``ev`` wakes an agent waiting for round ``rnd`` of ``process_id`` to be completed by
    ``members`` (``done``: who completed it so far, updated here)."""
    if ev.name not in ("TaskCompleted", "TaskFailed", "ProcessStatus"):
        return False
    p = _payload(ev)
    if ev.name == "ProcessStatus":
        return p.get("id") == process_id
    if p.get("process_id") != process_id:
        return False
    if ev.name == "TaskFailed":
        return True
    if p.get("round") == rnd:
        done.add(str(p.get("organisation")))
    return done >= members


def wait_round_open(
    client: ConsortiaClient, process_id: str, rnd: int, members: Iterable[str] | None, timeout: float
) -> bool:
    """Block until every member (by default: of the process's consortium) has completed round
    ``rnd`` of ``process_id``, or the process changed status, or one of its tasks failed: True;
    False after ``timeout`` seconds without that (the caller looks at the ledger again either way).

    One small read first (``LearningProcess:progress``: the current round and who completed it, not
    the records), then only the events."""
    ledger, identity = client.ledger, client.identity
    start = ledger.block_height(identity)
    now = client.process_progress(process_id)
    if now.current_round > rnd or now.status in ENDED:
        return True
    want = frozenset(client.get_process(process_id).consortium if members is None else members)
    done = set(now.completed) if now.current_round == rnd else set()
    deadline = time.monotonic() + timeout
    for ev in ledger.events(identity, start_block=start, timeout=timeout):
        if opens(ev, process_id, rnd, done, want):
            return True
        if time.monotonic() >= deadline:
            return False
    return False
