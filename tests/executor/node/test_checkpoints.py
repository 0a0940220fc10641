"""The checkpoints of a task and the one interface fault injection goes through
(executor.node.checkpoints): no faults by default, a plan loaded only from the module named."""

from __future__ import annotations

import pytest

from executor.node.checkpoints import CHECKPOINTS, NO_FAULTS, load_fault_plan
from tests.support import faults


def test_the_checkpoints_in_the_order_a_task_passes_them():
    assert CHECKPOINTS == (
        "before_register",
        "after_register",
        "during_run",
        "before_complete",
        "after_complete",
    )
    for c in CHECKPOINTS:
        assert NO_FAULTS.reached(c, 1) is None


def test_a_plan_is_loaded_from_the_callable_named(monkeypatch):
    monkeypatch.setenv(faults.KILL_AT, "before_complete:3")
    plan = load_fault_plan("tests.support.faults:from_environment")
    assert isinstance(plan, faults.KillAt) and (plan.checkpoint, plan.rnd) == ("before_complete", 3)
    plan.reached("before_complete", 2)  # another round: nothing happens (the test process lives on)
    plan.reached("after_complete", 3)
    monkeypatch.delenv(faults.KILL_AT)
    assert load_fault_plan("tests.support.faults:from_environment") is NO_FAULTS


@pytest.mark.parametrize(
    "spec,message",
    [
        ("tests.support.faults", "expected module:callable"),
        ("no.such.module:plan", "No module named"),
        ("tests.support.faults:missing", "has no attribute 'missing'"),
        ("tests.support.faults:KILL_AT", "did not make a plan"),
    ],
)
def test_a_spec_that_names_no_plan_is_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        load_fault_plan(spec)


def test_a_kill_point_that_is_no_checkpoint_is_refused(monkeypatch):
    monkeypatch.setenv(faults.KILL_AT, "while_idle:1")
    with pytest.raises(ValueError, match="expected <checkpoint>:<round>"):
        faults.from_environment()
    with pytest.raises(ValueError, match="no checkpoint"):
        faults.KillAt("while_idle", 1)  # type: ignore[arg-type]
