"""Node agents ride out outages of the real Fabric network (issue 27 item 6; docs/executor.md "Ledger
outages"): while a small DPSDA process runs among three organisations, one organisation's peer is
killed (SIGKILL) for 30 s and started again, then every orderer is stopped (SIGSTOP) for 30 s and
resumed. The process completes with no agent restarted, bit-identical to the simulator, with exactly
one record per organisation and round, each created once and completed once. Skipped where the Fabric
binaries are not installed (failed under CI=true)."""

from __future__ import annotations

import logging
import secrets
import threading
import time

import pytest

from executor.node.supervisor import progress, run_process
from executor.process import ProcessSpec, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from home.platform import Platform
from tests.e2e.conftest import dpsda_case
from tests.e2e.test_process import assert_bit_identical, simulated

pytestmark = pytest.mark.fabric

OUTAGE_S = 30.0
ROUNDS = 8


@pytest.fixture(scope="module")
def fabric_session():
    from tests.support.fabric import shared_fabric

    return shared_fabric()


def test_agents_ride_out_a_dead_peer_and_stopped_orderers(fabric_session, tmp_path, caplog):
    from tests.support.fabric import kill_node, orderer_names, pause_nodes

    fab, net = fabric_session, fabric_session.network
    ledger = fab.ledger()
    p = Platform(ledger, fab.consortium, tmp_path)
    orgs = tuple(p.consortium.msp_ids)[:3]
    victim, victim_peer = orgs[1], net.peer_name(1)  # Org2's own peer: its agent's Gateway
    case = dpsda_case(orgs=orgs, rounds=ROUNDS)
    pid = f"p-outage-{secrets.token_hex(4)}"  # the network persists across sessions
    client = p.client(orgs[0])
    image = prepare_image(client, case.image, "sandbox")
    for o in orgs:
        map_dataset(p.data_root, o, "train", case.datasets[o])
    spec = ProcessSpec(pid, image.record.id, orgs, case.topology, case.params, case.rounds, "train")
    launch(client, spec, consent=p.admins(orgs))

    faults: list[tuple[str, int, str]] = []  # (what, round when it started, process status then)
    failure: list[BaseException] = []
    orderers = orderer_names(net)
    paused: list[str] = []

    def round_now() -> tuple[int, str]:
        pr = progress(client, pid)
        return pr.current_round, pr.status

    def wait_round(at_least: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while round_now()[0] < at_least:
            assert time.monotonic() < deadline, f"round {at_least} not reached within {timeout} s"
            time.sleep(0.5)

    def inject() -> None:
        try:
            wait_round(2)
            faults.append(("peer killed", *round_now()))
            kill_node(net, victim_peer)
            time.sleep(OUTAGE_S)
            net.start_peer(1)
            r = round_now()[0]
            wait_round(r + 1)  # every member back at work (the round needs the victim)
            faults.append(("orderers stopped", *round_now()))
            pause_nodes(net, orderers)
            paused.extend(orderers)
            time.sleep(OUTAGE_S)
            pause_nodes(net, orderers, pause=False)
            paused.clear()
        except BaseException as exc:  # reported by the test
            failure.append(exc)

    injector = threading.Thread(target=inject, name="outages", daemon=True)
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="ledger.outage"):
            injector.start()
            out = run_process(p, pid, SandboxRuntime, timeout=900)
            injector.join(timeout=600)
    finally:  # leave the shared network whole for the tests after this one
        if paused:
            pause_nodes(net, paused, pause=False)
        if not net.running()[victim_peer]:
            net.start_peer(1)
        ledger.close()
    wall = time.monotonic() - t0
    logging.getLogger(__name__).warning("outage test wall time %.0f s", wall)

    assert not failure, failure
    # both outages happened while the process ran (else the test would prove nothing)
    assert [f[0] for f in faults] == ["peer killed", "orderers stopped"], faults
    assert all(status == "running" and rnd < ROUNDS for _, rnd, status in faults), faults
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert out.agent_errors == {} and out.restarts == {}
    # exactly one record per organisation and round, created once and completed once
    records = client.query_executions(pid)
    assert sorted((r.organisation, r.round) for r in records) == sorted(
        (o, r) for o in orgs for r in range(1, ROUNDS + 1)
    )
    for r in records:
        history = client.execution_history(pid, r.round, r.organisation)
        assert [h.value["status"] for h in history] == ["running", "completed"], (r.organisation, r.round)
    assert_bit_identical(p, client, pid, simulated(case, orgs), orgs)
    # the agents said so: the victim lost its peer, and the orderers were unreachable (logged once each)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"{victim}: ledger (") and "unreachable since" in m for m in said), said
    assert any("reachable again after" in m for m in said), said
    # every member endorses a completion (its private copy, docs/confidentiality.md). Whether another
    # member's completion meets the victim's outage depends on timing: in one CI run Org1 and Org3 met
    # it only after the restart, while their gateways rediscovered Org2's peer ("failed to find any
    # endorsing peers for org(s): Org2MSP"). Deterministic: every member whose ledger calls waited
    # also logged the end of that wait (ridden out, not fatal; the classification's unit test is in
    # tests/fabric/test_errors.py).
    outage_of = {m.split(":")[0] for m in said if "unreachable since" in m}
    ended = {m.split(":")[0] for m in said if "reachable again after" in m}
    assert victim in outage_of and outage_of <= ended, (outage_of, ended, said)
    logging.getLogger(__name__).warning(
        "members whose ledger calls waited: %s; naming the victim as a missing endorser: %s",
        sorted(outage_of),
        sorted({m.split(":")[0] for m in said if "endorsing peers for org(s): " in m and victim in m}),
    )
