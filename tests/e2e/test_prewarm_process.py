"""run_process(..., warm=True, prewarm=True): every agent's spare worker starts before the clock, the
process stays bit-identical to the simulator, and a spare of an image that fails verification is
never started (the task refuses the image on the ledger, as without a spare)."""

from __future__ import annotations

import pytest

from executor.node.scratch import task_scratch
from executor.node.supervisor import run_process
from executor.runtimes.sandbox import SandboxRuntime
from tests.e2e.conftest import ORGS3, dpsda_case
from tests.e2e.test_process import assert_bit_identical, change_org3_bundle, simulated, start


@pytest.fixture(autouse=True)
def _task_directories_kept(monkeypatch):
    """Task directories with the agent's state (``CONSORTIA_TASK_SCRATCH=state``), where they stay after
    the agent ends (an agent removes its memory-filesystem directory when it ends), so the workers it
    started can be counted afterwards; agents run as OS processes inherit the setting."""
    monkeypatch.setenv("CONSORTIA_TASK_SCRATCH", "state")


def _workers(platform, org):
    """Where ``org``'s agent kept its workers' directories (executor.node.scratch)."""
    return task_scratch(platform.state_root / org)


@pytest.mark.parametrize("agents", ["threads", "processes"])
def test_prewarmed_process_is_bit_identical(platform, agents):
    case = dpsda_case()
    pid = f"p-pre-{agents}"
    client, _ = start(platform, case, pid)
    out = run_process(platform, pid, SandboxRuntime, agents=agents, warm=True, prewarm=True)
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert out.prewarm_seconds > 0 and out.wall_seconds > 0
    assert_bit_identical(platform, client, pid, simulated(case))
    spares = sorted(
        p.parent.parent.name.split("-spare-")[0]
        for o in ORGS3
        for p in _workers(platform, o).rglob("out/STARTED")
    )
    assert spares == sorted(ORGS3)  # one spare per organisation, bound to the process, none started again
    if agents == "processes":
        barrier = platform.root / "logs" / f"start-{pid}"
        assert {p.name for p in barrier.iterdir()} == {f"{o}.ready" for o in ORGS3} | {"go"}


def test_a_spare_of_a_changed_image_is_refused(tmp_path, platform):
    case = dpsda_case()
    client, image = start(platform, case, "p-pre-img")
    change_org3_bundle(tmp_path, platform, image)
    out = run_process(platform, "p-pre-img", SandboxRuntime, warm=True, prewarm=True)
    assert out.status == "failed" and "image refused" in out.reason and "Org3MSP" in out.reason
    assert list(
        _workers(platform, "Org1MSP").rglob("STARTED")
    )  # the others' workers ran (and are found here)
    assert not list(_workers(platform, "Org3MSP").rglob("STARTED"))  # no worker of it ever started
