"""Node agents ride out ledger outages (ledger/outage.py; docs/executor.md "Ledger
outages"): on the embedded ledger, wrapped by a real Ledger that fails with the typed transient errors
for a while (its own peer unreachable, a submit sent and then the connection dropped, a commit status
lost), the agents complete the process with one record per organisation and round, equal to the
simulator; a permanent error is raised at once, never retried."""

from __future__ import annotations

import json
import logging
import random
import threading

import pytest

from chaincode.errors import InvalidState
from executor.node.status import read_status
from executor.node.supervisor import members_progress
from ledger.errors import AccessDenied, CommitTimeout, LedgerUnavailable, transient
from ledger.outage import Backoff, LedgerOutage
from tests.executor.node.test_agent import (  # noqa: F401  (platform: the fixture)
    assert_matches_simulation,
    platform,
    run_all,
)

FAST = Backoff(first=0.01, cap=0.05)


class FlakyLedger:
    """``ledger`` (a real Ledger) as an organisation sees it through an unreliable network:

    * ``down``: the next ``down`` calls fail with :class:`LedgerUnavailable` before reaching it (its
      peer unreachable: nothing sent);
    * ``dropped``: the first submit of each of these functions reaches the ledger and commits, then the
      caller gets :class:`LedgerUnavailable` with ``outcome_unknown`` (the connection dropped after the
      send), and the ``down_after_drop`` calls after it fail as above;
    * ``lost_commit``: the first submit of each of these functions commits, then the caller gets
      :class:`CommitTimeout` (its commit status never arrived);
    * ``refuse``: every submit of these functions fails with :class:`AccessDenied` (permanent).
    """

    def __init__(self, ledger, *, down=0, dropped=(), down_after_drop=0, lost_commit=(), refuse=()):
        self._ledger = ledger
        self.channel, self.chaincode = ledger.channel, ledger.chaincode
        self.down, self.dropped, self.down_after_drop = down, set(dropped), down_after_drop
        self.lost_commit, self.refuse = set(lost_commit), set(refuse)
        self.failures = {"unavailable": 0, "dropped": 0, "lost_commit": 0, "refused": 0}
        self.submitted: list[str] = []
        self._lock = threading.Lock()

    def _gate(self, what):
        with self._lock:
            if self.down > 0:
                self.down -= 1
                self.failures["unavailable"] += 1
                raise LedgerUnavailable(
                    f"{what} failed: UNAVAILABLE: failed to connect", endpoint="127.0.0.1:7"
                )

    def submit(self, identity, function, *args, **kw):
        self._gate("endorse")
        self.submitted.append(function)
        if function in self.refuse:
            self.failures["refused"] += 1
            raise AccessDenied(f"endorse refused: {function}")
        result = self._ledger.submit(identity, function, *args, **kw)
        with self._lock:
            if function in self.dropped:
                self.dropped.discard(function)
                self.down += self.down_after_drop
                self.failures["dropped"] += 1
                raise LedgerUnavailable(
                    "submit failed: UNAVAILABLE: no orderers could successfully process transaction",
                    endpoint="orderers",
                    outcome_unknown=True,
                )
            if function in self.lost_commit:
                self.lost_commit.discard(function)
                self.failures["lost_commit"] += 1
                raise CommitTimeout(result.tx_id, 0.0)
        return result

    def evaluate(self, identity, function, *args):
        self._gate("evaluate")
        return self._ledger.evaluate(identity, function, *args)

    def block_height(self, identity):
        self._gate("evaluate")
        return self._ledger.block_height(identity)

    def block(self, identity, number):
        self._gate("evaluate")
        return self._ledger.block(identity, number)

    def events(self, identity, start_block=0, timeout=None):
        self._gate("events")
        return self._ledger.events(identity, start_block=start_block, timeout=timeout)

    def close(self):
        pass


def _fast(agent):
    agent.outage.backoff = FAST
    return agent


def test_agents_ride_out_outages_and_resolve_unknown_outcomes_without_duplicates(
    platform, bundle, recipe, average_consensus, caplog
):
    platform.register_image("avg:o", recipe, bundle.digest, bundle.reference)
    platform.launch("p-outage", "avg:o", rounds=3)
    flaky = {
        # its peer unreachable at once; then its registration and its result each sent, the connection
        # dropped, and the ledger unreachable for a while after
        "Org1MSP": FlakyLedger(
            platform.ledger,
            down=6,
            dropped={"ExecutionRecord:create_task", "ExecutionRecord:complete_task"},
            down_after_drop=5,
        ),
        # the commit status of its first result and of its model never arrives
        "Org2MSP": FlakyLedger(
            platform.ledger, lost_commit={"ExecutionRecord:complete_task", "Model:publish"}
        ),
        "Org3MSP": FlakyLedger(platform.ledger, down=3, dropped={"Model:publish"}, down_after_drop=2),
    }
    agents = [_fast(platform.agent(o, ledger=flaky[o])) for o in platform.orgs]
    with caplog.at_level(logging.WARNING, logger="ledger.outage"):
        run_all(platform, "p-outage", agents)

    assert platform.evaluate("Org1MSP", "LearningProcess:get", "p-outage")["status"] == "completed"
    # one record per organisation and round, each created once and completed once, equal to the simulator
    assert_matches_simulation(platform, "p-outage", 3, average_consensus)
    for r in platform.records("p-outage"):
        history = platform.evaluate(
            r["organisation"], "ExecutionRecord:history", "p-outage", str(r["round"]), r["organisation"]
        )
        assert [h["value"]["status"] for h in history] == ["running", "completed"], r
    # the faults happened (the test would prove nothing otherwise), and each was resolved by a resubmit
    # the contract refused as a duplicate
    assert flaky["Org1MSP"].failures == {"unavailable": 16, "dropped": 2, "lost_commit": 0, "refused": 0}
    assert flaky["Org2MSP"].failures["lost_commit"] == 2
    assert flaky["Org3MSP"].failures["dropped"] == 1
    # (a dropped submit was sent again and refused as a duplicate; MVCC conflicts may add retries)
    assert flaky["Org1MSP"].submitted.count("ExecutionRecord:create_task") >= 3 + 1
    assert flaky["Org1MSP"].submitted.count("ExecutionRecord:complete_task") >= 3 + 1
    for o in platform.orgs:  # a lost commit status or a dropped publication never made a second model
        assert len(platform.evaluate(o, "Model:history", f"p-outage:{o}")) == 1
    # each outage logged once when it started and once when it ended, and the status says it is over
    started = [r for r in caplog.records if "unreachable since" in r.getMessage()]
    ended = [r for r in caplog.records if "reachable again after" in r.getMessage()]
    org1 = agents[0].outage
    assert org1.outages == 3 and not org1.unreachable  # at start, after each dropped submit
    # logged when each started (and again if what was unreachable changed: orderers, then the peer)
    assert 3 <= sum("Org1MSP:" in r.getMessage() for r in started) <= 5
    assert sum("Org1MSP:" in r.getMessage() for r in ended) == 3
    assert any("outcome is unknown" in r.getMessage() for r in started)
    status = read_status(agents[0].state_dir)
    assert status is not None and status.organisation == "Org1MSP"
    assert status.ledger["reachable"] is True and status.ledger["outages"] == 3
    assert status.processes["p-outage"].status == "done" and status.waiting_for is None


def test_the_status_file_says_what_an_agent_waits_for_during_an_outage(platform, bundle, recipe):
    platform.register_image("avg:w", recipe, bundle.digest, bundle.reference)
    platform.launch("p-wait", "avg:w", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    flaky = FlakyLedger(platform.ledger)
    agent = platform.agent("Org1MSP", ledger=flaky).start()
    agent.outage.backoff = Backoff(first=0.2, cap=0.2)
    seen: list = []

    def look():  # what the status file says while the call is being retried
        status = read_status(agent.state_dir)
        seen.append(status)
        if len(seen) == 1:
            flaky.down = 0  # the peer is back

    agent.outage.on_change = lambda: (agent._write_status(), look())
    flaky.down = 1_000
    o = agent.run_process_round("p-wait")
    assert o.status == "completed"
    during, after = seen[0], seen[1]
    assert during.waiting_for.startswith("ledger (peer 127.0.0.1:7) unreachable since ")
    assert "UNAVAILABLE: failed to connect" in during.waiting_for
    assert during.ledger["reachable"] is False and during.ledger["unreachable"] == "peer 127.0.0.1:7"
    assert after.ledger["reachable"] is True and after.waiting_for is None
    assert json.loads((agent.state_dir / "status.json").read_text())["processes"]["p-wait"]["round"] == 1
    # what `consortia process watch` says from the ledger: Org1 done with round 1, Org2 not started
    client = agent.client
    org1, org2 = members_progress(client.get_process("p-wait"), client.query_executions("p-wait"))
    assert (org1.organisation, org1.last_completed, org1.task) == ("Org1MSP", 1, "completed")
    assert org1.waiting_for == "round 1 completed; waiting for Org2MSP"
    assert org1.last_record_seconds is not None and org1.last_record_seconds < 600
    assert (org2.last_completed, org2.task, org2.last_record_seconds) == (0, "not registered", None)
    assert "round 1: task not registered yet (its node is down or cannot reach the ledger)" in org2.describe()
    agent.close()
    # `consortia node status` reads it
    from typer.testing import CliRunner

    from api.cli import app

    def node_status(org, *output):
        return CliRunner().invoke(
            app,
            ["node", "status", "--org", org, "--state", str(platform.root / "state"), "--home", "", *output],
        )

    r = node_status("Org1MSP")
    assert r.exit_code == 0, r.stderr
    assert "Org1MSP (pid " in r.stdout and "ledger: reachable (1 outage(s) ridden out)" in r.stdout
    assert "p-wait: round 1 completed" in r.stdout
    assert json.loads(node_status("Org1MSP", "-o", "json").stdout)["processes"]["p-wait"]["round"] == 1
    r = node_status("Org2MSP")
    assert r.exit_code == 1 and "no status of Org2MSP's node agent" in r.stderr


def test_a_permanent_error_is_raised_at_once_never_retried(platform, bundle, recipe):
    platform.register_image("avg:p", recipe, bundle.digest, bundle.reference)
    platform.launch("p-perm", "avg:p", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    flaky = FlakyLedger(platform.ledger, refuse={"ExecutionRecord:complete_task"})
    agent = _fast(platform.agent("Org1MSP", ledger=flaky))
    with pytest.raises(AccessDenied):
        agent.run_process_round("p-perm")
    assert flaky.submitted.count("ExecutionRecord:complete_task") == 1
    assert agent.outage.outages == 0 and agent.outage.waiting_for() is None
    # a contract's refusal (a result for a task that is not running) is an answer too
    outage = LedgerOutage("Org1MSP", backoff=FAST)
    calls = []

    def refused():
        calls.append(1)
        raise InvalidState("task is not running")

    with pytest.raises(InvalidState):
        outage.call(refused)
    assert calls == [1] and outage.outages == 0
    agent.close()


def test_backoff_doubles_to_its_cap_with_jitter():
    b, rng = Backoff(), random.Random(1)
    assert (b.first, b.cap) == (0.5, 10.0)
    delays = [b.delay(n, rng) for n in range(12)]
    for n, d in enumerate(delays):
        ceiling = min(10.0, 0.5 * 2**n)
        assert ceiling / 2 <= d <= ceiling
    assert len({round(d, 6) for d in delays[6:]}) > 1  # capped, still jittered
    assert b.delay(10_000, rng) <= 10.0


def test_an_outage_is_logged_once_per_change_and_stop_ends_the_wait(caplog):
    outage, attempts = LedgerOutage("Org1MSP", backoff=FAST), []

    def flaky():
        attempts.append(1)
        if len(attempts) < 5:
            raise LedgerUnavailable("evaluate failed: UNAVAILABLE", endpoint="127.0.0.1:7051")
        return "answer"

    with caplog.at_level(logging.DEBUG, logger="ledger.outage"):
        assert outage.call(flaky) == "answer"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(attempts) == 5 and len(warnings) == 2, warnings
    assert "Org1MSP: ledger (peer 127.0.0.1:7051) unreachable since " in warnings[0]
    assert "retrying in " in warnings[0] and "reachable again after " in warnings[1]
    # stop set: the pending call gives up with its last error
    stop = threading.Event()
    stop.set()
    outage = LedgerOutage("Org1MSP", backoff=FAST, stop=stop)
    with pytest.raises(LedgerUnavailable):
        outage.call(lambda: (_ for _ in ()).throw(LedgerUnavailable("down")))
    assert outage.unreachable


def test_transient_is_the_one_classification():
    assert transient(LedgerUnavailable("x")) and transient(CommitTimeout("t", 1.0))
    for answer in (AccessDenied("x"), InvalidState("x"), ValueError("x"), OSError("x")):
        assert not transient(answer)
