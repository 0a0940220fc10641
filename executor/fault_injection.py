"""Fault injection for tests of the node agent's recovery (docs/executor.md "Node agent").

If ``CONSORTIA_AGENT_KILL_AT`` equals ``<checkpoint>:<round>`` the agent SIGKILLs itself at that
checkpoint of that round: ``before_register``, ``after_register``, ``during_run`` (shortly after the
task started), ``before_complete``, ``after_complete``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from wire.env import environment

log = logging.getLogger("executor.node_agent")

CHECKPOINTS = ("before_register", "after_register", "during_run", "before_complete", "after_complete")


def checkpoint(name: str, rnd: int) -> None:
    """Kill this process here if the environment asks for it."""
    want = environment().agent_kill_at
    if want and want == f"{name}:{rnd}":
        log.warning("fault injection: killing the agent at %s of round %d", name, rnd)
        os.kill(os.getpid(), signal.SIGKILL)


def arm_during_run(rnd: int, delay: float = 0.05) -> None:
    """Schedule the ``during_run`` checkpoint ``delay`` seconds from now (the task is running then)."""
    if environment().agent_kill_at == f"during_run:{rnd}":
        threading.Timer(delay, checkpoint, ("during_run", rnd)).start()
