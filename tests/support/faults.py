"""Fault injection for the node agent's recovery tests (docs/executor.md "Node agent"): a
:class:`executor.node.checkpoints.FaultPlan` that SIGKILLs the agent's process at one checkpoint of
one round.

In a child process (the node command) the plan is chosen by environment: ``CONSORTIA_FAULT_PLAN``
names :func:`from_environment` (the node command loads it, :func:`executor.node.checkpoints.load_fault_plan`)
and ``CONSORTIA_AGENT_KILL_AT=<checkpoint>:<round>`` says where to kill; :func:`kill_at_environment`
makes both.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from executor.node.checkpoints import CHECKPOINTS, NO_FAULTS, Checkpoint, FaultPlan

log = logging.getLogger(__name__)

FAULT_PLAN = "CONSORTIA_FAULT_PLAN"  # read by the node command (wire.env)
KILL_AT = "CONSORTIA_AGENT_KILL_AT"  # read here only


class KillAt:
    """SIGKILL this process at ``checkpoint`` of round ``rnd``; ``during_run``: ``delay`` seconds after
    the task was handed to its worker (while it runs)."""

    def __init__(self, checkpoint: Checkpoint, rnd: int, delay: float = 0.05):
        if checkpoint not in CHECKPOINTS:
            raise ValueError(f"no checkpoint {checkpoint!r} (one of {CHECKPOINTS})")
        self.checkpoint, self.rnd, self.delay = checkpoint, rnd, delay

    def reached(self, checkpoint: Checkpoint, rnd: int) -> None:
        if (checkpoint, rnd) != (self.checkpoint, self.rnd):
            return
        if checkpoint == "during_run":
            threading.Timer(self.delay, self._kill).start()
        else:
            self._kill()

    def _kill(self) -> None:
        log.warning("fault injection: killing the agent at %s of round %d", self.checkpoint, self.rnd)
        os.kill(os.getpid(), signal.SIGKILL)


def from_environment() -> FaultPlan:
    """:class:`KillAt` of ``$CONSORTIA_AGENT_KILL_AT`` (``<checkpoint>:<round>``); no faults if unset."""
    want = os.environ.get(KILL_AT, "")
    if not want:
        return NO_FAULTS
    name, _, rnd = want.rpartition(":")
    checkpoint = next((c for c in CHECKPOINTS if c == name), None)
    if checkpoint is None or not rnd.isdigit():
        raise ValueError(
            f"{KILL_AT}={want!r}: expected <checkpoint>:<round>, checkpoint one of {CHECKPOINTS}"
        )
    return KillAt(checkpoint, int(rnd))


def kill_at_environment(checkpoint: Checkpoint, rnd: int) -> dict[str, str]:
    """The environment that makes a node command kill itself at ``checkpoint`` of round ``rnd``."""
    return {FAULT_PLAN: f"{__name__}:from_environment", KILL_AT: f"{checkpoint}:{rnd}"}
