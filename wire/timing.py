"""Cheap per-thread timers: where a node agent's time goes, by category (the artifact store's sealing,
a runtime's worker start-up, the node's own steps and waits all report into one profile, so it lives
in the leaf package every layer may import).

    with timing.section("sealing"):
        ...

adds the section's wall time (and the calling thread's own CPU time in it, :func:`time.thread_time`)
to the calling thread's totals for ``"sealing"`` while a :class:`Profile` is recording
(:func:`recording`), and costs one call otherwise (a shared no-op context).
Time is counted exclusively: a section entered inside another pauses the outer one, so the
categories of one thread never add up to more than its wall time. Threads are told apart by
name (the agents of :func:`executor.node.supervisor.run_process` run in threads ``agent-<org>``).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

# the categories of a node agent's time, in the order a report shows them
CATEGORIES = (
    "wait_round",  # waiting for a round to open (the other organisations' tasks)
    "ledger_submit",
    "ledger_evaluate",
    "sealing",  # sealing and unsealing messages, states, models and task keys (exchange.sealing)
    "worker_start",  # a warm worker starting up (imports, first round) or picking its task up
    "task",  # the task itself, in its sandbox or container
    "artifact_io",  # writing and reading artifacts, indexes and the journal
)


class Profile:
    """Seconds per (thread name, category), added up by :func:`section` while recording."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.cpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # thread CPU s
        self._stacks = threading.local()

    def _stack(self) -> list[list[object]]:
        stack = getattr(self._stacks, "stack", None)
        if stack is None:
            stack = self._stacks.stack = []
        return stack

    def add(self, category: str, seconds: float, cpu: float = 0.0) -> None:
        name = threading.current_thread().name
        with self._lock:
            self.seconds[name][category] += seconds
            self.cpu[name][category] += cpu

    def per_thread(self, prefix: str = "", cpu: bool = False) -> dict[str, dict[str, float]]:
        """Wall seconds (``cpu``: the thread's own CPU seconds) per thread name and category."""
        table = self.cpu if cpu else self.seconds
        with self._lock:
            return {n[len(prefix) :]: dict(c) for n, c in sorted(table.items()) if n.startswith(prefix)}


_active: Profile | None = None


@contextmanager
def recording(profile: Profile | None = None) -> Iterator[Profile]:
    """Record every :func:`section` of every thread into ``profile`` (a new one by default)."""
    global _active
    prof = profile or Profile()
    previous, _active = _active, prof
    try:
        yield prof
    finally:
        _active = previous


_IDLE = nullcontext()  # reusable and reentrant: what :func:`section` is while nothing records


def section(category: str) -> AbstractContextManager[None]:
    """Time the ``with`` block into ``category`` while a profile is recording; else a shared no-op
    context (no generator made, nothing entered)."""
    prof = _active
    return _IDLE if prof is None else _timed(prof, category)


@contextmanager
def _timed(prof: Profile, category: str) -> Iterator[None]:
    stack = prof._stack()
    now, cpu = time.perf_counter(), time.thread_time()
    if stack:  # pause the enclosing section
        outer = stack[-1]
        prof.add(str(outer[0]), now - float(outer[1]), cpu - float(outer[2]))  # type: ignore[arg-type]
    frame: list[object] = [category, now, cpu]
    stack.append(frame)
    try:
        yield
    finally:
        end, end_cpu = time.perf_counter(), time.thread_time()
        stack.pop()
        prof.add(category, end - float(frame[1]), end_cpu - float(frame[2]))  # type: ignore[arg-type]
        if stack:
            stack[-1][1], stack[-1][2] = end, end_cpu  # the enclosing section resumes
