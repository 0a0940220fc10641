"""Cheap per-thread timers: where a node agent's time goes, by category.

    with timing.section("sealing"):
        ...

adds the section's wall time to the calling thread's total for ``"sealing"`` while a
:class:`Profile` is recording (:func:`recording`), and costs one attribute look-up otherwise.
Time is counted exclusively: a section entered inside another pauses the outer one, so the
categories of one thread never add up to more than its wall time. Threads are told apart by
name (the agents of :func:`executor.process.run_process` run in threads ``agent-<org>``).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

# the categories of a node agent's time, in the order a report shows them
CATEGORIES = (
    "wait_round",  # waiting for a round to open (the other organisations' tasks)
    "ledger_submit",
    "ledger_evaluate",
    "sealing",  # sealing and unsealing messages, states and models
    "worker_start",  # a warm worker starting up (imports, first round) or picking its task up
    "task",  # the task itself, in its sandbox or container
    "artifact_io",  # writing and reading artifacts, indexes and the journal
)


class Profile:
    """Seconds per (thread name, category), added up by :func:`section` while recording."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._stacks = threading.local()

    def _stack(self) -> list[list[object]]:
        stack = getattr(self._stacks, "stack", None)
        if stack is None:
            stack = self._stacks.stack = []
        return stack

    def add(self, category: str, seconds: float) -> None:
        name = threading.current_thread().name
        with self._lock:
            self.seconds[name][category] += seconds

    def per_thread(self, prefix: str = "") -> dict[str, dict[str, float]]:
        with self._lock:
            return {
                n[len(prefix) :]: dict(c) for n, c in sorted(self.seconds.items()) if n.startswith(prefix)
            }


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


@contextmanager
def section(category: str) -> Iterator[None]:
    prof = _active
    if prof is None:
        yield
        return
    stack = prof._stack()
    now = time.perf_counter()
    if stack:  # pause the enclosing section
        outer = stack[-1]
        prof.add(str(outer[0]), now - float(outer[1]))  # type: ignore[arg-type]
    frame: list[object] = [category, now]
    stack.append(frame)
    try:
        yield
    finally:
        end = time.perf_counter()
        stack.pop()
        prof.add(category, end - float(frame[1]))  # type: ignore[arg-type]
        if stack:
            stack[-1][1] = end  # the enclosing section resumes
