"""The checkpoints of a node agent's task, and the one interface fault injection goes through
(docs/executor.md "Node agent").

Between reading the ledger and completing its record, a task passes five checkpoints, in order:
``before_register`` and ``after_register`` (the task key's ``create_task``), ``during_run`` (the task
was handed to its worker; the call returns at once and the task runs after it), ``before_complete``
and ``after_complete`` (``complete_task``). The agent tells its :class:`FaultPlan` each checkpoint it
reaches; the default, :data:`NO_FAULTS`, does nothing. A test gives a plan that kills the agent at a
checkpoint, to show that a restart resumes without duplicates or losses; the node command takes a
plan only from the module ``$CONSORTIA_FAULT_PLAN`` names (``module:callable``,
:func:`load_fault_plan`).
"""

from __future__ import annotations

import importlib
from typing import Literal, Protocol, get_args

Checkpoint = Literal["before_register", "after_register", "during_run", "before_complete", "after_complete"]
CHECKPOINTS: tuple[Checkpoint, ...] = get_args(Checkpoint)


class FaultPlan(Protocol):
    """What happens when the agent reaches a checkpoint of the task of round ``rnd``."""

    def reached(self, checkpoint: Checkpoint, rnd: int) -> None: ...


class NoFaults:
    """The plan of every production agent: nothing happens at any checkpoint."""

    def reached(self, checkpoint: Checkpoint, rnd: int) -> None:
        return None


NO_FAULTS: FaultPlan = NoFaults()


def load_fault_plan(spec: str) -> FaultPlan:
    """The plan made by the callable ``spec`` names (``package.module:callable``, called with no
    arguments); ValueError naming ``spec`` if it names nothing callable or does not make a plan."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"fault plan {spec!r}: expected module:callable")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"fault plan {spec!r}: {exc}") from None
    plan: FaultPlan | None = factory() if callable(factory) else None
    if plan is None or not callable(getattr(plan, "reached", None)):
        raise ValueError(f"fault plan {spec!r} did not make a plan (an object with reached(checkpoint, rnd))")
    return plan
