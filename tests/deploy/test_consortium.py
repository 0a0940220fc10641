"""A consortium of organisations on hosts of their own, on real Fabric (issue 12, item 5).

Four organisations, each a "host" on this machine: its peer and chaincode service (started by
``fabric-network/network up --hosts … --isolate``) and its node agent and artifact service (started
here) run in a bubblewrap view where, of everything the organisations keep, only its own folder exists,
and listen only on its own loopback address (127.0.N.1). Each home is made by ``consortia join`` on
that host from what the founder handed it: its own cryptogen folder, the others' public certificates
and a connection profile naming its own peer. Org1 builds the algorithm image and pushes it to the
consortium's registry; every other organisation's agent pulls it by the digest pinned on the ledger.

Then: an audited collaborative-RF process and a DPSDA process of Org1..Org3 complete, every state,
message and model digest on the ledger equal to the simulator's and each organisation's model (fetched
on its own host) equal to the simulator's bytes; in the DPSDA process Org2's node is killed mid-way and
restarted, and there is still exactly one record per organisation and round; Org4, outside both
processes, pulls the image but gets 403 for every artifact and is refused every model. What the
processes keep confidential (docs/confidentiality.md) is in none of Org4's files, in no block Org4's
admin receives through Deliver, and in no answer of Org4's gateway or CLI, while each member reads
it; an auditor given a disclosure replays it against the hashes on the chain."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

import pytest

from benchmarks.deployment import Deployment, DeploymentError, Host, free_port, listening, wait_for
from tests.ci import skip_or_fail

ORGS = ("Org1", "Org2", "Org3", "Org4")
MEMBERS = ("Org1MSP", "Org2MSP", "Org3MSP")
pytestmark = [pytest.mark.fabric, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    try:
        with Deployment(tmp_path_factory.mktemp("deploy"), ORGS) as d:
            yield {"deployment": d, "net": d.net, "hosts": d.hosts, "registry": d.registry}
    except DeploymentError as exc:
        if "binaries missing" in str(exc):
            skip_or_fail(f"Hyperledger Fabric not available: {exc}")
        raise


def _assert_like_the_simulator(hosts, client, pid: str, case) -> None:
    from tests.e2e.test_process import simulated

    sim = simulated(case, MEMBERS)
    recs = client.query_executions(pid)
    done = [r for r in recs if r.status == "completed"]
    per_task = {(r.organisation, r.round) for r in done}
    assert len(done) == len(per_task) == case.rounds * len(MEMBERS), [(r.organisation, r.round) for r in done]
    for r in done:
        out = r.result.outputs
        assert out.state == sim.state_digests[r.round][r.organisation]
        sent = {(r.organisation, m.recipient): m.digest for m in out.messages}
        assert sent == {k: v for k, v in sim.message_digests[r.round - 1].items() if k[0] == r.organisation}
    for org in ("Org1", "Org2", "Org3"):  # each organisation fetches its own model on its own host
        host = hosts[org]
        out = host.home / f"{pid}.model"
        host.consortia("model", "get", f"{pid}:{host.msp}", "--out", str(out))
        verified = host.consortia("model", "verify", f"{pid}:{host.msp}")  # its lineage, from the ledger
        assert verified["ok"] is True, verified
        assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(sim.models[host.msp]).digest()


def _api(host: Host, path: str, token: str, status: int = 200) -> dict:
    """A request to ``host``'s gateway with a bearer token; its JSON answer (asserting ``status``)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(host.gateway_url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            code, body = r.status, r.read()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read()
    assert code == status, (path, code, body[:500])
    return json.loads(body)


def test_every_host_sees_only_its_own_home_and_listens_on_its_own_address(consortium):
    hosts, net = consortium["hosts"], consortium["net"]
    for org, host in hosts.items():
        host.start_artifact_service()
        host.start_gateway(free_port(host.address))
        host.token = host.consortia("token", "issue")["token"]
    for org, host in hosts.items():
        others = [str(h.root) for o, h in hosts.items() if o != org] + [str(net.net)]
        probe = host.python(
            f"import os, json; print(json.dumps({{p: os.path.exists(p) for p in {others!r}}}))"
        )
        assert probe.returncode == 0, probe.stderr
        assert json.loads(probe.stdout) == {p: False for p in others}
    pids = net._state()["pids"]
    for i, org in enumerate(ORGS):
        mine = {hosts[org].address}
        peer = listening([pids[net.peer_name(i)], pids[net.chaincode_name(i)]])
        svc = wait_for(lambda h=hosts[org]: listening([h.procs["artifacts"].pid]), 30, f"{org} artifacts")
        gw = wait_for(lambda h=hosts[org]: listening([h.procs["gateway"].pid]), 60, f"{org} gateway")
        assert peer and {a for a, _ in peer} == mine, peer
        assert {a for a, _ in svc} == mine, svc
        assert {a for a, _ in gw} == mine, gw
        assert _api(hosts[org], "/api/v1/whoami", hosts[org].token)["organisation"] == f"{org}MSP"
        other = hosts["Org4" if org != "Org4" else "Org1"]
        refused = _api(hosts[org], "/api/v1/whoami", other.token, status=403)  # acts only at its own
        assert refused["code"] == "WRONG_ORGANISATION", refused


def test_collaborative_rf_across_hosts_is_bit_identical_to_the_simulator(consortium):
    from tests.e2e.conftest import collab_rf_case

    hosts = consortium["hosts"]
    case = collab_rf_case(MEMBERS)
    for org in ("Org1", "Org2", "Org3"):
        hosts[org].save_dataset(case.datasets[f"{org}MSP"], "train")
        hosts[org].start_agent()
    image_id = f"collab-rf:d{uuid.uuid4().hex[:6]}"
    built = hosts["Org1"].consortia(
        "image", "build", "collab-rf", "--id", image_id, "--registry", consortium["registry"]
    )
    assert built["digest"].startswith("sha256:")
    pid = f"rf-{uuid.uuid4().hex[:6]}"
    created = hosts["Org1"].create_process(
        pid, image_id, MEMBERS, case.topology, case.rounds, "train", case.params, list(hosts.values())
    )
    assert created["status"] == "running"
    watched = hosts["Org1"].consortia("process", "watch", pid, "--timeout", "900", timeout=1000)
    logs = {o: hosts[o].log("agent")[-1500:] for o in ("Org1", "Org2", "Org3")}
    assert watched["status"] == "completed", (watched, logs)
    client = hosts["Org1"].ledger_client()
    try:
        _assert_like_the_simulator(hosts, client, pid, case)
    finally:
        client.ledger.close()
    consortium["rf"] = (pid, image_id)


def test_dpsda_survives_a_node_killed_mid_process(consortium):
    """Org2's node (its agent with its sandbox, and its artifact service) is killed once it has completed
    three rounds, and started again: the process completes with exactly one record per organisation and round, as simulated."""
    from tests.e2e.conftest import dpsda_case

    hosts = consortium["hosts"]
    # with a privacy budget: its ε figures are confidential values that the exposure test below searches
    # for on Fabric. Laplace scale 5 makes ε0 = 0.2 per member and round: 16 rounds of the three
    # members spend network ε 9.6 of 10 (basic accounting)
    case = dpsda_case(MEMBERS, budget=10.0, rounds=16)
    case.params["laplace_scale"] = 5.0
    for org in ("Org1", "Org2", "Org3"):
        hosts[org].save_dataset(case.datasets[f"{org}MSP"], "olr")
        if "agent" not in hosts[org].procs:
            hosts[org].start_agent()
    image_id = f"dpsda:d{uuid.uuid4().hex[:6]}"
    hosts["Org1"].consortia("image", "build", "dpsda", "--id", image_id, "--registry", consortium["registry"])
    pid = f"olr-{uuid.uuid4().hex[:6]}"
    client = hosts["Org1"].ledger_client()
    try:
        assert (
            hosts["Org1"].create_process(
                pid,
                image_id,
                MEMBERS,
                case.topology,
                case.rounds,
                "olr",
                case.params,
                list(hosts.values()),
                privacy_budget=case.privacy_budget,
            )["status"]
            == "running"
        )

        def org2_done() -> int:
            return sum(
                1
                for r in client.query_executions(pid)
                if r.organisation == "Org2MSP" and r.status == "completed"
            )

        wait_for(lambda: org2_done() >= 3, 600, "Org2's third round")
        hosts["Org2"].kill("agent")  # the whole node: its agent (with its sandbox) and its artifact service
        hosts["Org2"].kill("artifacts")
        killed_at = org2_done()
        assert killed_at < case.rounds and client.get_process(pid).status == "running"
        time.sleep(3)  # the others meanwhile find no Org2 to fetch from
        hosts["Org2"].start_artifact_service()
        hosts["Org2"].start_agent()
        watched = hosts["Org1"].consortia("process", "watch", pid, "--timeout", "900", timeout=1000)
        assert watched["status"] == "completed", (watched, hosts["Org2"].log("agent")[-2000:])
        records = client.query_executions(pid)
        assert len(records) == case.rounds * len(MEMBERS)  # one record per organisation and round, no more
        _assert_like_the_simulator(hosts, client, pid, case)
    finally:
        client.ledger.close()
    consortium["olr"] = (pid, image_id)


def test_an_organisation_outside_the_processes_gets_nothing_but_the_image(consortium):
    """Org4 (a member of the channel, not of the processes) pulls the image by its ledger digest, gets
    403 from every member's artifact service for every artifact it stores, and is refused every model."""
    hosts = consortium["hosts"]
    assert "rf" in consortium, "runs after the collaborative-RF test of this module (its process and image)"
    pid, image_id = consortium["rf"]
    org4 = hosts["Org4"]
    pulled = org4.consortia("image", "pull", image_id)
    assert pulled, pulled
    assert list((org4.root / "cache" / "bundles").glob("registry-collab-rf-*"))
    for org in ("Org1", "Org2", "Org3"):
        host = hosts[org]
        store = host.home / "artifacts" / host.msp / "sha256"
        digests = sorted("sha256:" + f.name for f in store.rglob("*") if f.is_file() and len(f.name) == 64)
        assert digests, f"{org} stores nothing"
        code = f"""
import json
from exchange.client import ArtifactClient
from exchange.errors import ArtifactForbidden
from exchange.tls import ClientTLS
from home.settings import load
from ledger.identity import Consortium
cons = Consortium(load({str(org4.home)!r}).crypto)
src = ArtifactClient("https://{host.address}:{host.artifact_port}", {host.msp!r}, ClientTLS(cons, "Org4MSP"), retries=0)
refused = 0
for d in {digests!r}:
    try:
        src.get(d)
    except ArtifactForbidden:
        refused += 1
print(json.dumps({{"refused": refused}}))
"""
        got = org4.python(code)
        assert got.returncode == 0, got.stderr[-3000:]
        assert json.loads(got.stdout.strip().splitlines()[-1]) == {"refused": len(digests)}
        refused = org4.consortia("model", "get", f"{pid}:{host.msp}", "--out", str(org4.home / "m"), code=1)
        assert refused["code"] == "FORBIDDEN", refused
        assert not (org4.home / "m").exists()
        _api(org4, f"/api/v1/models/{pid}:{host.msp}", org4.token, status=403)  # its own gateway: the same
        assert _api(host, f"/api/v1/models/{pid}:{host.msp}", host.token)["owner"] == host.msp


#: the gateway's read routes about one process (and its models) -- each answers an outsider with a
#: refusal or with nothing confidential
_PROCESS_ROUTES = (
    "/api/v1/processes",
    "/api/v1/processes/{pid}",
    "/api/v1/processes/{pid}/acceptances",
    "/api/v1/processes/{pid}/changes",
    "/api/v1/processes/{pid}/disclosures",
    "/api/v1/processes/{pid}/history",
    "/api/v1/processes/{pid}/models",
    "/api/v1/processes/{pid}/signatures",
    "/api/v1/processes/{pid}/executions/1/Org1MSP/changes",
    "/api/v1/models",
    "/api/v1/models/{pid}:Org1MSP",
    "/api/v1/models/{pid}:Org1MSP/changes",
)
#: the CLI's reads of one process
_PROCESS_COMMANDS = (
    ("process", "list"),
    ("process", "get", "{pid}"),
    ("process", "terms", "{pid}"),
    ("model", "list"),
    ("model", "get", "{pid}:Org1MSP"),
    ("model", "verify", "{pid}:Org1MSP"),
)


def _raw_api(host: Host, path: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(host.gateway_url + path, headers={"Authorization": f"Bearer {host.token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _forms(body: bytes) -> bytes:
    """An answer as it came and, if it is JSON, as canonical JSON (the needles' form), so a value is
    found however the answer spaces it."""
    from wire.canonical import canonical_json

    try:
        return body + b"\n" + canonical_json(json.loads(body))
    except ValueError:
        return body


def _answers(host: Host, pid: str) -> dict[str, bytes]:
    """Every gateway and CLI answer of ``host`` about ``pid`` (a refusal included), by route."""
    import subprocess
    import sys

    out: dict[str, bytes] = {}
    for route in _PROCESS_ROUTES:
        path = route.format(pid=pid)
        code, body = _raw_api(host, path)
        assert code in (200, 403, 404), (host.name, path, code, body[:300])
        out[f"gateway {path} ({code})"] = _forms(body)
    for command in _PROCESS_COMMANDS:
        args = [a.format(pid=pid) for a in command]
        proc = subprocess.run(
            host.argv([sys.executable, "-m", "api.cli", *args, "--json"]), capture_output=True, timeout=300
        )
        out[f"cli {' '.join(args)} (exit {proc.returncode})"] = _forms(proc.stdout) + b"\n" + proc.stderr
    return out


def test_what_a_process_keeps_confidential_reaches_no_outsider(consortium):
    """Issue 32 item 6 on Fabric: for the collaborative-RF and the DPSDA process of Org1..Org3, every
    confidential value (:mod:`audit.exposure`: hyper-parameters, budget, metrics, ε, data commitments,
    message parties, models' private parts) is found in Org1's peer folder (the control) and in none of Org4's: not in its peer
    folder, not in the blocks Org4's admin receives through Deliver, not in any answer of Org4's gateway
    or CLI. Each member's own gateway answers the process with its terms."""
    from audit.exposure import process_needles, search
    from benchmarks.consortium import run_exposure

    hosts, net = consortium["hosts"], consortium["net"]
    assert "rf" in consortium and "olr" in consortium, "runs after this module's two process tests"

    def peer_folder(host: Host) -> Path:  # the peer's CORE_PEER_FILESYSTEMPATH (network/config.py)
        return net.net / "data" / net.peer_name(ORGS.index(host.name))

    assert all(peer_folder(hosts[o]).is_dir() for o in ("Org1", "Org4"))
    for pid, _ in (consortium["rf"], consortium["olr"]):
        figures = run_exposure(hosts, "Org1", "Org4", pid, peer_folder)
        by_kind = figures["cleartext_needles_by_kind"]
        # both processes have hyper-parameters; the DPSDA one has a privacy budget and spends ε each round
        expected = {"hyperparameters", "metrics", "data_commitments", "recipients", "model"}
        if pid == consortium["olr"][0]:
            expected |= {"privacy_budget", "epsilon"}
        assert all(by_kind.get(k) for k in expected), (pid, by_kind)
        assert figures["non_member_cleartext_hits"] == 0, (pid, figures)
        assert figures["non_member_delivered_blocks"] > 0
        assert figures["member_control_hits"] == figures["cleartext_needles"], (pid, figures)

        client = hosts["Org1"].ledger_client()
        try:
            models = [m for m in client.list_models() if m.process_id == pid]
            needles = process_needles(client.get_process(pid), client.query_executions(pid), models)
        finally:
            client.ledger.close()
        outsider = search(_answers(hosts["Org4"], pid).items(), needles)
        assert outsider.hits == 0, (pid, outsider.summary())
        terms = {
            k for k, v in needles.count_by_kind().items() if v and k in ("hyperparameters", "privacy_budget")
        }
        for org in ("Org1", "Org2", "Org3"):  # each member reads the terms through its own gateway
            code, body = _raw_api(hosts[org], f"/api/v1/processes/{pid}")
            assert code == 200, (org, body[:300])
            read = search([("process", _forms(body))], needles).hits_by_kind()
            assert all(read.get(k) == needles.count_by_kind()[k] for k in terms), (org, read)


def test_an_auditor_given_a_disclosure_replays_it_against_the_chain(consortium):
    """Org1 discloses its first DPSDA task to Org4, outside the process; Org4 replays it on its own host:
    the disclosed private parts match the hashes on the chain and the task's digests are reproduced."""
    hosts = consortium["hosts"]
    assert "olr" in consortium, "runs after the DPSDA test of this module"
    pid, image_id = consortium["olr"]
    org1, org4 = hosts["Org1"], hosts["Org4"]
    out = org4.home / "disclosure-org1.json"
    disclosed = org1.consortia(
        "audit", "disclose", pid, "--rounds", "1", "--to", "Org4", "--out", str(org1.home / "d.json")
    )
    assert disclosed["rounds"] == [1] and disclosed["recipient"] == "Org4MSP", disclosed
    out.write_bytes((org1.home / "d.json").read_bytes())  # handed over as a file
    assert org4.consortia("image", "pull", image_id)  # by the digest the process pins
    replayed = org4.consortia("audit", "replay", str(out), timeout=900, host_proc=True)  # its sandbox
    assert replayed["ok"] and replayed["replayed_tasks"] == replayed["matched"] == 1, replayed
