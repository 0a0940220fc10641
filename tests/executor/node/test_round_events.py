"""executor.node.round_events: a waiting agent wakes on the event that opens its round."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

from executor.node.round_events import opens, wait_round_open
from ledger.interface import ChaincodeEvent


def _ev(block: int, name: str, **payload) -> ChaincodeEvent:
    return ChaincodeEvent(block, f"tx{block}", "consortia", name, json.dumps(payload).encode())


def test_the_last_completion_of_the_round_opens_the_next():
    members, done = frozenset({"A", "B", "C"}), {"A"}
    assert not opens(
        _ev(5, "TaskCompleted", process_id="p", round=2, organisation="B"), "p", 2, done, members
    )
    assert not opens(
        _ev(6, "TaskCompleted", process_id="p", round=3, organisation="C"), "p", 2, done, members
    )
    assert not opens(
        _ev(6, "TaskCompleted", process_id="q", round=2, organisation="C"), "p", 2, done, members
    )
    assert not opens(_ev(6, "ImageRegistered", id="x"), "p", 2, done, members)
    assert opens(_ev(7, "TaskCompleted", process_id="p", round=2, organisation="C"), "p", 2, done, members)
    assert opens(_ev(8, "TaskFailed", process_id="p", round=2, organisation="C"), "p", 2, set(), members)
    assert opens(_ev(8, "ProcessStatus", id="p", status="aborted"), "p", 2, set(), members)


class _Ledger:
    """Events appear as blocks are appended; ``events`` follows them like a ledger host does."""

    def __init__(self) -> None:
        self.blocks: list[list[ChaincodeEvent]] = [[]]
        self.cond = threading.Condition()

    def append(self, *events: ChaincodeEvent) -> None:
        with self.cond:
            self.blocks.append(list(events))
            self.cond.notify_all()

    def block_height(self, identity) -> int:
        return len(self.blocks)

    def events(self, identity, start_block: int = 0, timeout: float | None = None):
        n = start_block
        while True:
            with self.cond:
                if n >= len(self.blocks) and not self.cond.wait(timeout):
                    return
                new, n = self.blocks[n:], len(self.blocks)
            for blk in new:
                yield from blk


def test_wait_round_open_wakes_on_the_opening_block_only():
    led = _Ledger()
    now = SimpleNamespace(current_round=1, status="running", completed=("A",))  # A completed round 1
    client = SimpleNamespace(ledger=led, identity=None, process_progress=lambda pid: now)
    woke: list[float] = []

    def waiter() -> None:
        assert wait_round_open(client, "p", 1, ["A", "B", "C"], timeout=10)
        woke.append(time.monotonic())

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    led.append(_ev(1, "TaskCompleted", process_id="p", round=1, organisation="B"))
    time.sleep(0.1)
    assert not woke
    opened = time.monotonic()
    led.append(_ev(2, "TaskCompleted", process_id="p", round=1, organisation="C"))
    t.join(5)
    assert woke and woke[0] - opened < 1.0
    assert not wait_round_open(client, "p", 2, ["A", "B", "C"], timeout=0.2)  # nothing happens: timeout
