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
processes, pulls the image but gets 403 for every artifact and is refused every model."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from ledger.fabric import testing
from ledger.fabric.network import REPO_ROOT, FabricNetwork, NetworkConfig
from ledger.fabric.network.placement import placement_spec
from tests.deploy.hosts import ORDERER_PUBLIC, PUBLIC_FILES, Host, copy_public, listening, wait_for

ORGS = ("Org1", "Org2", "Org3", "Org4")
MEMBERS = ("Org1MSP", "Org2MSP", "Org3MSP")
HOSTS = {"Org1": "127.0.1.1", "Org2": "127.0.2.1", "Org3": "127.0.3.1", "Org4": "127.0.4.1"}
ORDERER_HOST, REGISTRY_HOST = "127.0.5.1", "127.0.6.1"
SCRIPT = REPO_ROOT / "fabric-network" / "network"
pytestmark = [pytest.mark.fabric, pytest.mark.timeout(3600)]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _network(*args: str, port_base: int, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONSORTIA_FABRIC_PORT_BASE": str(port_base)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


def _handoff(net: FabricNetwork, hosts: dict[str, Host]) -> None:
    """What the founder hands each organisation: its own cryptogen folder (in a real deployment made
    on its own machine), everyone else's public certificates, and its connection profile with the TLS
    roots it names."""
    peers = net.crypto / "peerOrganizations"
    orderer = net.crypto / "ordererOrganizations" / "example.com"
    for org, host in hosts.items():
        domain = f"{org.lower()}.example.com"
        shutil.copytree(peers / domain, host.handoff / "own" / domain)
        for other in ORGS:
            if other != org:
                d = f"{other.lower()}.example.com"
                copy_public(peers / d, host.handoff / "public" / d, PUBLIC_FILES)
        copy_public(orderer, host.handoff / "orderer" / "example.com", ORDERER_PUBLIC)
        prof = json.loads(net.org_profile_file(org).read_text())
        for i, entry in enumerate([*prof["peers"], prof["orderer"]]):
            shutil.copyfile(entry["tls_ca_file"], host.handoff / f"tls-root-{i}.pem")
            entry["tls_ca_file"] = str(host.handoff / f"tls-root-{i}.pem")
        prof.pop("crypto", None)
        (host.handoff / "profile.json").write_text(json.dumps(prof))


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy")
    placement = {**HOSTS, "orderer": ORDERER_HOST}
    cfg = next(
        (
            c
            for c in (
                NetworkConfig(organisations=ORGS, net_dir=root / "net", port_base=b, hosts=placement)
                for b in testing.PORT_BASES
            )
            if testing.ports_free(c)
        ),
        None,
    )
    if cfg is None:
        pytest.fail("no free port range on the hosts' addresses")
    net = FabricNetwork(cfg)
    where = ("--net-dir", str(cfg.net_dir), "--orgs", ",".join(ORGS))
    r = _network("up", *where, "--hosts", placement_spec(placement), "--isolate", port_base=cfg.port_base)
    if r.returncode != 0:
        net.down()
        if "binaries missing" in r.stderr:
            testing.skip_or_fail(f"Hyperledger Fabric not available: {r.stderr.strip()}")
        pytest.fail(f"network up --isolate failed: {r.stderr[-3000:]}")
    registry_home = root / "registry"  # the image owner's registry, on an address of its own
    listen = f"{REGISTRY_HOST}:{_free_port(REGISTRY_HOST)}"
    reg_env = {**os.environ, "CONSORTIA_REGISTRY_HOME": str(registry_home)}
    reg = subprocess.run(
        [str(REPO_ROOT / "scripts" / "install-registry"), "--listen", listen],
        capture_output=True,
        text=True,
        timeout=900,
        env=reg_env,
    )
    hosts = {org: Host(org, i, root / "hosts" / org) for i, org in enumerate(ORGS, start=1)}
    try:
        assert reg.returncode == 0, reg.stderr[-2000:]
        _handoff(net, hosts)
        for org, host in hosts.items():  # 1. each organisation makes its home on its own host
            members = [f"--member={o}={host.handoff / 'public' / f'{o.lower()}.example.com'}" for o in ORGS]
            port = _free_port(host.address)
            host.consortia(
                "join",
                "--org",
                org,
                "--msp-dir",
                str(host.handoff / "own" / f"{org.lower()}.example.com"),
                *[m for m in members if not m.startswith(f"--member={org}=")],
                "--orderer",
                str(host.handoff / "orderer" / "example.com"),
                "--artifact-endpoint",
                f"https://{host.address}:{port}",
                "--listen",
                f"{host.address}:{port}",
                "--fabric-profile",
                str(host.handoff / "profile.json"),
                "--home",
                str(host.home),
            )
            host.artifact_port = port
        yield {"net": net, "hosts": hosts, "registry": listen, "root": root}
    finally:
        for host in hosts.values():
            host.stop_all()
        subprocess.run(
            [str(REPO_ROOT / "scripts" / "install-registry"), "--listen", listen, "--stop"],
            capture_output=True,
            env=reg_env,
            timeout=60,
        )
        shutil.rmtree(Path("/etc/containers/certs.d") / listen, ignore_errors=True)
        _network("down", "--purge", "--net-dir", str(cfg.net_dir), port_base=cfg.port_base, timeout=120)
        net.down(purge=True)


def _save(host: Host, dataset, name: str = "train") -> None:
    from algorithms.task_runtime import save_dataset

    folder = host.home / "data" / host.msp / name
    folder.mkdir(parents=True, exist_ok=True)
    save_dataset(folder / "dataset.npz", dataset)


def _ledger_client(host: Host):
    """An auditor's client over the host's own connection profile (read-only use)."""
    from ledger.client import ConsortiaClient
    from ledger.config import load, open_ledger
    from ledger.identity import Consortium

    settings = load(host.home)
    cons = Consortium(settings.crypto)
    return ConsortiaClient(open_ledger(settings, cons), cons.identity(host.msp))


def _assert_like_the_simulator(hosts, client, pid: str, case) -> None:
    from tests.e2e.test_process import simulated

    sim = simulated(case, MEMBERS)
    recs = client.query_executions(pid)
    done = [r for r in recs if r.status == "completed"]
    per_task = {(r.organisation, r.round) for r in done}
    assert len(done) == len(per_task) == case.rounds * len(MEMBERS), [(r.organisation, r.round) for r in done]
    for r in done:
        out = r.result["outputs"]
        assert out["state"] == sim.state_digests[r.round][r.organisation]
        sent = {(r.organisation, m["recipient"]): m["digest"] for m in out["messages"]}
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
        host.start_artifact_service(host.artifact_port)
        host.start_gateway(_free_port(host.address))
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
        mine = {HOSTS[org]}
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
        _save(hosts[org], case.datasets[f"{org}MSP"])
        hosts[org].start_agent()
    image_id = f"collab-rf:d{uuid.uuid4().hex[:6]}"
    built = hosts["Org1"].consortia(
        "image", "build", "collab-rf", "--id", image_id, "--registry", consortium["registry"]
    )
    assert built["digest"].startswith("sha256:")
    pid = f"rf-{uuid.uuid4().hex[:6]}"
    created = hosts["Org1"].consortia(
        "process",
        "create",
        pid,
        "--image",
        image_id,
        "--consortium",
        ",".join(MEMBERS),
        "--topology",
        case.topology["kind"],
        "--seed",
        str(case.topology["seed"]),
        "--rounds",
        str(case.rounds),
        "--dataset",
        "train",
        "--hyperparameters",
        json.dumps(case.params),
        "--start",
    )
    assert created["status"] == "running"
    watched = hosts["Org1"].consortia("process", "watch", pid, "--timeout", "900", timeout=1000)
    logs = {o: hosts[o].log("agent")[-1500:] for o in ("Org1", "Org2", "Org3")}
    assert watched["status"] == "completed", (watched, logs)
    client = _ledger_client(hosts["Org1"])
    try:
        _assert_like_the_simulator(hosts, client, pid, case)
    finally:
        client.ledger.close()
    consortium["rf"] = (pid, image_id)


def _create(host: Host, pid: str, image_id: str, case, dataset: str) -> dict:
    return host.consortia(
        "process",
        "create",
        pid,
        "--image",
        image_id,
        "--consortium",
        ",".join(MEMBERS),
        "--topology",
        case.topology["kind"],
        "--seed",
        str(case.topology["seed"]),
        "--rounds",
        str(case.rounds),
        "--dataset",
        dataset,
        "--hyperparameters",
        json.dumps(case.params),
        "--start",
    )


def test_dpsda_survives_a_node_killed_mid_process(consortium):
    """Org2's node (agent and its sandbox) is killed once it has completed three rounds, and started
    again: the process completes with exactly one record per organisation and round, as simulated."""
    from tests.e2e.conftest import dpsda_case

    hosts = consortium["hosts"]
    case = dpsda_case(MEMBERS, rounds=16)
    for org in ("Org1", "Org2", "Org3"):
        _save(hosts[org], case.datasets[f"{org}MSP"], "olr")
        if "agent" not in hosts[org].procs:
            hosts[org].start_agent()
    image_id = f"dpsda:d{uuid.uuid4().hex[:6]}"
    hosts["Org1"].consortia("image", "build", "dpsda", "--id", image_id, "--registry", consortium["registry"])
    pid = f"olr-{uuid.uuid4().hex[:6]}"
    client = _ledger_client(hosts["Org1"])
    try:
        assert _create(hosts["Org1"], pid, image_id, case, "olr")["status"] == "running"

        def org2_done() -> int:
            return sum(
                1
                for r in client.query_executions(pid)
                if r.organisation == "Org2MSP" and r.status == "completed"
            )

        wait_for(lambda: org2_done() >= 3, 600, "Org2's third round")
        hosts["Org2"].kill("agent")
        killed_at = org2_done()
        assert killed_at < case.rounds and client.get_process(pid).status == "running"
        hosts["Org2"].start_agent()
        watched = hosts["Org1"].consortia("process", "watch", pid, "--timeout", "900", timeout=1000)
        assert watched["status"] == "completed", (watched, hosts["Org2"].log("agent")[-2000:])
        records = client.query_executions(pid)
        assert len(records) == case.rounds * len(MEMBERS)  # one record per organisation and round, no more
        _assert_like_the_simulator(hosts, client, pid, case)
    finally:
        client.ledger.close()


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
from executor.artifact_client import ArtifactForbidden, HttpsArtifactSource
from executor.artifact_tls import ClientTLS
from ledger.config import load
from ledger.identity import Consortium
cons = Consortium(load({str(org4.home)!r}).crypto)
src = HttpsArtifactSource("https://{host.address}:{host.artifact_port}", {host.msp!r}, ClientTLS(cons, "Org4MSP"), retries=0)
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
