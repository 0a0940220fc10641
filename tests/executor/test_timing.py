"""executor.timing: exclusive per-thread sections, free when nothing records."""

from __future__ import annotations

import threading
import time

from executor import timing


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


def test_nothing_is_recorded_outside_recording():
    with timing.section("task"):
        pass
    with timing.recording() as prof:
        pass
    assert prof.per_thread() == {}
