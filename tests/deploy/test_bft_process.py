"""Learning processes on a consortium without a centre, and its orderers failing (issue 27, item 5).

One 4-member SmartBFT consortium for the module (benchmarks.members ``Members.form``): each member on a
host of its own (a bubblewrap view of its own folder, its own 127.0.N.1) with its own Fabric CA,
orderer, peer, chaincode service, and then its artifact service and node agent (started here); its
Consortia home made by ``consortia join --package`` from the others' public packages; Org1 builds the
collaborative-RF image and pushes it to the registry on its own host, every agent pulls it by the digest
on the ledger; every member's admin approves the digest and accepts the process (docs/consent.md).

* a collaborative-RF process of the four completes, bit-identical to the simulator;
* Org4's orderer is SIGKILLed mid-process (f = 1 of 4 down): the process completes, one record per
  organisation and round;
* with Org4's still down, Org3's is SIGKILLed mid-process (two of four: no quorum of 2f + 1 = 3): no block
  is cut, no record is added or lost, the agents keep waiting; both orderers started again, the process
  completes, one record per organisation and round, every record made before the outage among them;
* last, every private key in each member's view is that member's (benchmarks.key_custody)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from benchmarks.consortium import mismatches
from benchmarks.deployment import wait_for
from tests.ci import require_program, skip_or_fail

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(3600)]
ORGS = ("Org1", "Org2", "Org3", "Org4")
MEMBERS = tuple(f"{o}MSP" for o in ORGS)
WATCH_S = 1200


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    from benchmarks.members import Members
    from network.config import DEFAULT_HOME, NetworkError
    from network.processes import ensure_fabric
    from tests.e2e.conftest import collab_rf_case

    require_program("bwrap", "hosts of their own")
    try:
        ensure_fabric(DEFAULT_HOME, ("core", "tools", "ca"))
    except NetworkError as exc:
        skip_or_fail(f"Hyperledger Fabric and Fabric CA not available: {exc}")
    members = Members(Path(tmp_path_factory.mktemp("bft-process")), ORGS, first=1)
    started = time.monotonic()
    try:
        members.form("bft")
        case = collab_rf_case(MEMBERS)
        for h in members.hosts.values():
            h.save_dataset(case.datasets[h.msp], "train")
            h.start_artifact_service()
            h.start_agent()
        image_id = f"collab-rf:b{uuid.uuid4().hex[:6]}"
        org1 = members.hosts["Org1"]
        built = org1.consortia(
            "image", "build", "collab-rf", "--id", image_id, "--registry", members.registry.address
        )
        assert built["digest"].startswith("sha256:"), built
        client = org1.ledger_client()
        try:
            yield {"members": members, "case": case, "image": image_id, "client": client}
        finally:
            client.ledger.close()
    finally:
        print("bft-process setup timings", members.timings, f"module wall {time.monotonic() - started:.0f} s")
        members.close()


def _start(consortium, prefix: str) -> str:
    """A collaborative-RF process of the four, created on Org1's host, consented to by every member's
    admin on its own host, started."""
    case, hosts = consortium["case"], consortium["members"].hosts
    pid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    created = hosts["Org1"].create_process(
        pid,
        consortium["image"],
        MEMBERS,
        case.topology,
        case.rounds,
        "train",
        case.params,
        list(hosts.values()),
    )
    assert created["status"] == "running", created
    return pid


def _completed(client, pid: str) -> list[tuple[str, int]]:
    return sorted((r.organisation, r.round) for r in client.query_executions(pid) if r.status == "completed")


def _watch(consortium, pid: str) -> None:
    hosts = consortium["members"].hosts
    watched = hosts["Org1"].consortia(
        "process", "watch", pid, "--timeout", str(WATCH_S), timeout=WATCH_S + 100
    )
    logs = {o: h.log("agent")[-1500:] for o, h in hosts.items()}
    assert watched["status"] == "completed", (watched, logs)


def _same_as_simulated(consortium, pid: str) -> None:
    from tests.e2e.test_process import simulated

    case = consortium["case"]
    sim = simulated(case, MEMBERS)
    hosts = consortium["members"].hosts
    wrong = mismatches(consortium["client"], hosts, pid, sim, case.rounds)
    assert wrong == [], wrong


def _kill_orderer(host) -> int:
    """SIGKILL ``host``'s orderer (no chance to close anything); its pid."""
    pid = host.nodes().pids()["orderer"]
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not host.nodes().running()["orderer"], 30, f"{host.name}'s orderer gone")
    return pid


def test_collaborative_rf_on_a_bft_consortium_is_bit_identical_to_the_simulator(consortium):
    pid = _start(consortium, "rf")
    _watch(consortium, pid)
    _same_as_simulated(consortium, pid)


def test_one_orderer_killed_mid_process_the_process_completes(consortium):
    client, hosts = consortium["client"], consortium["members"].hosts
    pid = _start(consortium, "rf1")
    wait_for(lambda: len(_completed(client, pid)) >= len(MEMBERS), 900, "the first round's records")
    _kill_orderer(hosts["Org4"])
    assert client.get_process(pid).status == "running"
    _watch(consortium, pid)
    assert not hosts["Org4"].nodes().running()["orderer"]  # it stayed down: three orderers did it
    _same_as_simulated(consortium, pid)  # one record per organisation and round, bit-identical


def test_two_orderers_down_cut_no_block_and_lose_nothing_until_restarted(consortium):
    client, hosts = consortium["client"], consortium["members"].hosts
    assert not hosts["Org4"].nodes().running()["orderer"], "runs after the one-orderer test (Org4's down)"
    pid = _start(consortium, "rf2")
    wait_for(lambda: len(_completed(client, pid)) >= len(MEMBERS), 900, "the first round's records")
    _kill_orderer(hosts["Org3"])  # two of four down: no 2f + 1 = 3 consenters
    time.sleep(15)  # what was ordered before reaches the peers
    height, before = client.ledger.block_height(client.identity), _completed(client, pid)
    records = len(client.query_executions(pid))
    time.sleep(45)  # the agents keep trying meanwhile
    assert client.ledger.block_height(client.identity) == height  # no block cut
    assert _completed(client, pid) == before and len(client.query_executions(pid)) == records
    assert len(before) < consortium["case"].rounds * len(MEMBERS), "it finished before the outage began"
    assert client.get_process(pid).status == "running"
    for o, h in hosts.items():  # the agents wait; none exited
        assert h.procs["agent"].poll() is None, (o, h.log("agent")[-2000:])
    for org in ("Org3", "Org4"):
        hosts[org].network("node", "start", "orderer")
    _watch(consortium, pid)
    assert set(before) <= set(_completed(client, pid))  # nothing recorded before the outage was lost
    assert client.ledger.block_height(client.identity) > height
    _same_as_simulated(consortium, pid)  # one record per organisation and round, bit-identical


def test_every_private_key_in_each_view_is_its_organisations(consortium):
    from benchmarks.key_custody import keys_outside_owner
    from network.package import OrganisationPackage

    hosts = consortium["members"].hosts
    checked, wrong = keys_outside_owner(
        {h.msp: h.root for h in hosts.values()},
        {h.msp: OrganisationPackage.read(h.package).public_keys() for h in hosts.values()},
    )
    assert wrong == []
    assert checked >= 12 * len(hosts)  # peer, orderer, admin, user, key agreement, TLS, CAs: each member's
