"""wire.timing: exclusive per-thread sections, free when nothing records."""

from __future__ import annotations

import threading
import time

from wire import timing


def test_sections_are_exclusive_and_per_thread():
    def agent() -> None:
        with timing.section("task"):
            time.sleep(0.05)
            with timing.section("ledger_submit"):
                time.sleep(0.05)
            time.sleep(0.05)

    with timing.recording() as prof:
        t = threading.Thread(target=agent, name="agent-Org1MSP")
        t.start()
        t.join()
    per = prof.per_thread("agent-")
    assert set(per) == {"Org1MSP"}
    assert 0.09 <= per["Org1MSP"]["task"] < 0.2
    assert 0.045 <= per["Org1MSP"]["ledger_submit"] < 0.15


def test_cpu_is_the_threads_own_and_exclusive():
    """A section's CPU is the calling thread's CPU: sleeping costs none, a busy loop costs about its
    wall time, and the inner section's CPU is not counted again in the outer one."""

    def busy(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def agent() -> None:
        with timing.section("artifact_io"):
            time.sleep(0.1)
            with timing.section("sealing"):
                busy(0.1)

    with timing.recording() as prof:
        t = threading.Thread(target=agent, name="agent-Org1MSP")
        t.start()
        t.join()
    cpu = prof.per_thread("agent-", cpu=True)["Org1MSP"]
    assert 0.09 <= cpu["sealing"] < 0.2
    assert cpu["artifact_io"] < 0.03  # slept, and the busy part belongs to the inner section


def test_nothing_is_recorded_outside_recording():
    with timing.section("task"):
        pass
    with timing.recording() as prof:
        pass
    assert prof.per_thread() == {}
