"""home.agent: the one way to build a node agent. Its places come from the home (each overridable) or
one by one; its ledger is the home's (open_ledger: the home's settings, never created); a node with no
artifact service serves its own store on loopback; its fault plan comes only from
$CONSORTIA_FAULT_PLAN; the node command (`consortia node run`) and Platform build through it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE
from executor.node.checkpoints import NO_FAULTS
from executor.runtimes.sandbox import SandboxRuntime
from home.agent import NodePlaces, build_agent, fault_plan
from home.create import init_home
from home.errors import ConsortiumNotFound, HomeError, LedgerNotFound
from home.platform import Platform
from home.settings import load
from tests.support import faults

runner = CliRunner()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv(faults.FAULT_PLAN, raising=False)
    monkeypatch.delenv("CONSORTIA_HOME", raising=False)
    root = tmp_path / "h"
    init_home(root, ["A", "B"])
    return root


def test_no_fault_plan_unless_one_is_named(monkeypatch):
    monkeypatch.delenv(faults.FAULT_PLAN, raising=False)
    monkeypatch.setenv(faults.KILL_AT, "during_run:1")  # read by the test plan only, never by the builder
    assert fault_plan() is NO_FAULTS
    monkeypatch.setenv(faults.FAULT_PLAN, "tests.support.faults:from_environment")
    plan = fault_plan()
    assert isinstance(plan, faults.KillAt) and (plan.checkpoint, plan.rnd) == ("during_run", 1)


def test_a_fault_plan_that_cannot_be_loaded_stops_the_node_command(home, monkeypatch):
    monkeypatch.setenv(faults.FAULT_PLAN, "tests.support.faults:nothing")
    with pytest.raises(ValueError, match="fault plan 'tests.support.faults:nothing'"):
        fault_plan()
    r = runner.invoke(app, ["node", "run", "--home", str(home), "--org", "A", "--runtime", "sandbox"])
    assert r.exit_code == EXIT_USAGE and r.stdout == ""
    assert r.stderr.startswith("bad fault plan: fault plan 'tests.support.faults:nothing'")


def test_places_of_a_home_and_their_overrides(home, tmp_path):
    places = NodePlaces.of_home(home, "A")
    assert (places.org, places.data, places.store_root, places.state) == (
        "AMSP",
        home / "data" / "AMSP",
        home / "artifacts",
        home / "state" / "AMSP",
    )
    assert places.ledger_file is None and places.artifact_endpoint is None
    moved = NodePlaces.of_home(home, "BMSP", store=tmp_path / "s", state=tmp_path / "t")
    assert (moved.org, moved.store_root, moved.state) == ("BMSP", tmp_path / "s", tmp_path / "t" / "BMSP")
    with pytest.raises(HomeError, match="no organisation named"):
        NodePlaces.of_home(home)  # a home made by `init` has no [node] organisation
    with pytest.raises(HomeError, match="Nobody"):
        NodePlaces.of_home(home, "Nobody")
    with pytest.raises(ConsortiumNotFound):
        NodePlaces.of_home(tmp_path / "elsewhere", "A")


def test_places_given_one_by_one_name_every_missing_one(home):
    with pytest.raises(HomeError, match="--ledger, --data, --store, --state are required"):
        NodePlaces.given("A", consortium=home / "crypto", ledger=None, data=None, store=None, state=None)


def test_the_agent_opens_the_home_ledger_and_serves_its_own_store(home):
    """The home's ledger settings reach the agent (here its batch timeout); without an artifact
    endpoint the node serves its own store on loopback and publishes that when it starts."""
    cfg = home / "consortia.toml"
    cfg.write_text(cfg.read_text().replace("batch_timeout = 0.01", "batch_timeout = 0.2"))
    assert load(home).batch_timeout == 0.2
    node = build_agent(NodePlaces.of_home(home, "A"), runtime=SandboxRuntime())
    try:
        agent = node.agent
        assert node.owns_ledger and node.ledger is agent.ledger.inner  # the agent rides out outages on it
        assert node.ledger.batch_timeout == 0.2 and agent.org == "AMSP"
        assert node.server is not None and agent.store.endpoint == node.server.url
        assert node.server.url.startswith("https://127.0.0.1:")
        assert agent.state_dir == home / "state" / "AMSP" and not agent.started
    finally:
        node.close()
    assert node.ledger._closed  # closed with the node: it opened it


def test_a_missing_ledger_is_not_created(home, tmp_path):
    (home / "ledger.db").unlink()
    with pytest.raises(LedgerNotFound):
        build_agent(NodePlaces.of_home(home, "A"), runtime=SandboxRuntime())
    assert not (home / "ledger.db").exists()
    given = NodePlaces.given(
        "A",
        consortium=home / "crypto",
        ledger=tmp_path / "none.sqlite",
        data=tmp_path,
        store=tmp_path,
        state=tmp_path,
    )
    with pytest.raises(LedgerNotFound):
        build_agent(given, runtime=SandboxRuntime())
    assert not (tmp_path / "none.sqlite").exists()
    r = runner.invoke(
        app, ["node", "run", "--home", str(home), "--org", "A", "--runtime", "sandbox", "-o", "json"]
    )
    assert r.exit_code == EXIT_NOT_FOUND and '"code": "no ledger"' in r.stdout and "no ledger at" in r.stderr


def test_platform_agents_share_its_ledger_and_are_served_in_memory(home):
    platform = Platform.from_home(home)
    try:
        agent = platform.agent("A", SandboxRuntime())
        assert agent.ledger.inner is platform.ledger and agent.store.endpoint is None
        assert platform.hosted.peer("AMSP", "BMSP") is not None  # its store is served in this process
        agent.close()
        assert not platform.ledger._closed  # the platform's ledger outlives its agents
        cmd = platform.agent_command("B", "p", "sandbox")
        assert cmd[1:5] == ["-m", "api.cli", "node", "run"] and cmd[cmd.index("--org") + 1] == "B"
    finally:
        platform.ledger.close()
