"""The node command (executor.node.cli): its fault plan comes only from $CONSORTIA_FAULT_PLAN; an
agent's paths come from its home (tests/api/test_cli_join.py) or the command line."""

from __future__ import annotations

import pytest

from executor.node.checkpoints import NO_FAULTS
from executor.node.cli import fault_plan, main
from tests.support import faults


def test_no_fault_plan_unless_one_is_named(monkeypatch):
    monkeypatch.delenv(faults.FAULT_PLAN, raising=False)
    monkeypatch.setenv(faults.KILL_AT, "during_run:1")  # read by the test plan only, never by the command
    assert fault_plan() is NO_FAULTS
    monkeypatch.setenv(faults.FAULT_PLAN, "tests.support.faults:from_environment")
    plan = fault_plan()
    assert isinstance(plan, faults.KillAt) and (plan.checkpoint, plan.rnd) == ("during_run", 1)


def test_a_fault_plan_that_cannot_be_loaded_stops_the_command(monkeypatch):
    monkeypatch.setenv(faults.FAULT_PLAN, "tests.support.faults:nothing")
    with pytest.raises(SystemExit, match="fault plan 'tests.support.faults:nothing'"):
        fault_plan()


def test_paths_are_required_without_a_home(monkeypatch, capsys):
    monkeypatch.delenv("CONSORTIA_HOME", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--org", "Org1MSP", "--home", ""])
    assert exit_.value.code == 2
    assert "--consortium, --ledger, --data, --store, --state are required" in capsys.readouterr().err
