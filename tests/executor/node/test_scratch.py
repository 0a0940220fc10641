"""Task directories on a memory filesystem (``executor.node.scratch``): where, whose, and the fallbacks."""

from __future__ import annotations

import os
import stat

import pytest

from executor.node import scratch
from executor.node.scratch import memory_base, task_scratch


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_runtime_dir_first_one_private_directory_per_state_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    env = {"XDG_RUNTIME_DIR": str(run)}
    a = task_scratch(tmp_path / "home-a" / "state" / "Org1MSP", env)
    b = task_scratch(tmp_path / "home-b" / "state" / "Org1MSP", env)
    assert a.parent == b.parent == run / f"consortia-{os.getuid()}"
    assert a != b and a.is_dir() and b.is_dir()
    assert _mode(a.parent) == _mode(a) == 0o700
    assert task_scratch(tmp_path / "home-a" / "state" / "Org1MSP", env) == a  # a restart finds its own


def test_state_directory_when_asked_or_when_no_memory_filesystem_has_room(tmp_path, monkeypatch):
    state = tmp_path / "state" / "Org1MSP"
    assert task_scratch(state, {"CONSORTIA_TASK_SCRATCH": "state"}) == state / "warm"
    monkeypatch.setattr(scratch, "MIN_FREE_BYTES", 1 << 62)
    assert memory_base({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    assert task_scratch(state, {"XDG_RUNTIME_DIR": str(tmp_path)}) == state / "warm"


def test_an_explicit_base_and_a_loose_mode_made_private(tmp_path):
    base = tmp_path / "fast"
    (base / f"consortia-{os.getuid()}").mkdir(parents=True)
    os.chmod(base / f"consortia-{os.getuid()}", 0o777)
    d = task_scratch(tmp_path / "state" / "Org2MSP", {"CONSORTIA_TASK_SCRATCH": str(base)})
    assert d.parent == base / f"consortia-{os.getuid()}" and _mode(d.parent) == 0o700


def test_a_planted_symlink_is_refused(tmp_path):
    """Someone else's directory (here: a symlink planted where ours would be) never receives a task."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (run / f"consortia-{os.getuid()}").symlink_to(elsewhere)
    state = tmp_path / "state" / "Org1MSP"
    assert task_scratch(state, {"XDG_RUNTIME_DIR": str(run)}) == state / "warm"  # default: falls back
    with pytest.raises(PermissionError, match="not a directory of this user"):
        task_scratch(state, {"CONSORTIA_TASK_SCRATCH": str(run)})  # explicit: refuses
    assert not list(elsewhere.iterdir())


def test_an_agent_removes_its_task_directories_when_it_ends(tmp_path, monkeypatch):
    """Issue 33 item 3: an agent that ended left an empty per-agent folder under /dev/shm. Now
    close() removes its own folder (with what a killed task left there), and only its own."""
    from exchange.store import ArtifactStore
    from executor.node.agent import NodeAgent
    from executor.runtimes.sandbox import SandboxRuntime
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    base = tmp_path / "shm"
    base.mkdir()
    monkeypatch.setenv("CONSORTIA_TASK_SCRATCH", str(base))
    consortium = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2"])
    with EmbeddedLedger(tmp_path / "ledger.db", consortium, batch_timeout=0.002) as ledger:
        agents = []
        for org in ("Org1MSP", "Org2MSP"):
            client = ConsortiaClient(ledger, consortium.identity(org))
            store = ArtifactStore(tmp_path / "store", org)
            agent = NodeAgent(
                client, consortium, SandboxRuntime(), store, tmp_path / "data" / org, tmp_path / "state" / org
            )
            agents.append(agent.start())
        one, other = (task_scratch(tmp_path / "state" / org) for org in ("Org1MSP", "Org2MSP"))
        assert (
            one.is_dir()
            and other.is_dir()
            and one.parent == other.parent == base / f"consortia-{os.getuid()}"
        )
        (one / "Org1MSP-left-by-a-killed-task").mkdir()
        (one / "Org1MSP-left-by-a-killed-task" / "state.bin").write_bytes(b"x")
        agents[0].close()
        assert not one.exists()  # its own folder is gone ...
        assert other.is_dir()  # ... another agent's stays while it runs
        agents[0].close()  # closing twice is fine
        agents[1].close()
        assert not other.exists() and not list(one.parent.iterdir())
        assert agents[0].start().started and one.is_dir()  # a later start starts afresh
        agents[0].close()
        assert not one.exists()
