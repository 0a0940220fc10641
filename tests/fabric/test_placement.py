"""The network placed per host (issue 12, item 4; docs/fabric.md "Placement"): each organisation's
peer and its own chaincode service listen on that organisation's loopback address, the orderer on
its own; TLS certificates carry the addresses; a connection profile per organisation.

Fast tests check the placement's parsing and the generated configuration; the ``fabric`` tests
bring a placed network up (its own directory, its own addresses, stopped at the end)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from benchmarks.deployment import listening
from network import REPO_ROOT, FabricNetwork, NetworkConfig, NetworkError
from network.placement import (
    PlacementError,
    check_address,
    parse_hosts,
    placement_spec,
    recorded_hosts,
)
from tests.ci import require_module, skip_or_fail
from tests.support import fabric as support

HOSTS = {"Org1": "127.0.1.1", "Org2": "127.0.2.1", "Org3": "127.0.3.1", "orderer": "127.0.4.1"}
SCRIPT = REPO_ROOT / "fabric-network" / "network"


# ---------------------------------------------------------------- parsing (no Fabric)
def test_parse_hosts_reads_the_command_line_form():
    spec = "Org1=127.0.1.1, Org2=127.0.2.1,Org3=127.0.3.1,orderer=127.0.4.1"
    assert parse_hosts(spec) == HOSTS
    assert parse_hosts(placement_spec(HOSTS)) == HOSTS
    assert parse_hosts("") == {}


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("Org1=10.0.0.5", "not a loopback address"),
        ("Org1=0.0.0.0", "not a loopback address"),
        ("Org1=192.168.1.20", "not a loopback address"),
        ("Org1=::1", "not a loopback address"),
        ("Org1=localhost", "not an IP address"),
        ("Org1=127.0.1.1,Org1=127.0.2.1", "placed twice"),
        ("Org1", "NAME=ADDRESS"),
        ("=127.0.0.1", "NAME=ADDRESS"),
    ],
)
def test_parse_hosts_refuses_anything_but_loopback(spec, msg):
    with pytest.raises(PlacementError, match=msg):
        parse_hosts(spec)


def test_check_address_accepts_all_of_127_slash_8():
    assert check_address("127.255.0.9") == "127.255.0.9"
    with pytest.raises(ValueError, match="loopback"):
        check_address("128.0.0.1")


def test_config_refuses_unknown_names_and_non_loopback_addresses():
    with pytest.raises(ValueError, match="not organisations of this network"):
        NetworkConfig(hosts={"Org9": "127.0.9.1"})
    with pytest.raises(ValueError, match="not a loopback address"):
        NetworkConfig(hosts={"Org1": "8.8.8.8"})


def test_default_placement_is_everything_on_127_0_0_1(tmp_path):
    c = NetworkConfig(net_dir=tmp_path)
    assert set(c.placement.values()) == {"127.0.0.1"} and c.orderer_host == "127.0.0.1"


def test_every_address_of_the_configuration_follows_the_placement(tmp_path):
    yaml = require_module("yaml")
    net = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net", hosts=HOSTS))
    c = net.cfg
    assert c.org_host(1) == "127.0.2.1" and c.orderer_host == "127.0.4.1"
    for i, org in enumerate(c.organisations):
        env = net.peer_env(i)
        addresses = [v for k, v in env.items() if k.endswith(("ADDRESS", "ENDPOINT", "BOOTSTRAP")) and v]
        assert len(addresses) == 7 and all(a.startswith(HOSTS[org] + ":") for a in addresses)
        assert net.admin_env(i)["CORE_PEER_ADDRESS"] == f"{HOSTS[org]}:{c.peer_port(i)}"
    oenv = net.orderer_env()
    assert oenv["ORDERER_GENERAL_LISTENADDRESS"] == "127.0.4.1"
    assert oenv["ORDERER_ADMIN_LISTENADDRESS"].startswith("127.0.4.1:")
    assert oenv["ORDERER_OPERATIONS_LISTENADDRESS"].startswith("127.0.4.1:")
    doc = yaml.safe_load(net.configtx_yaml())
    prof = doc["Profiles"]["ConsortiaChannel"]
    anchors = [o["AnchorPeers"][0]["Host"] for o in prof["Application"]["Organizations"]]
    assert anchors == ["127.0.1.1", "127.0.2.1", "127.0.3.1"]
    assert prof["Orderer"]["EtcdRaft"]["Consenters"][0]["Host"] == "127.0.4.1"
    assert doc["Organizations"][0]["OrdererEndpoints"] == [f"127.0.4.1:{c.orderer_port}"]
    assert {h for h, _ in c.listen_addresses()} == set(HOSTS.values())


def test_generated_tls_certificates_carry_the_placed_addresses(tmp_path):
    from cryptography import x509

    from ledger.identity import Consortium

    cons = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2"], hosts={"Org2": "127.0.2.1"})

    def sans(path: Path) -> set[str]:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        return {
            str(v.value) for v in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        }

    org1, org2 = (o.path / "peers" / f"peer0.{o.domain}" / "tls" / "server.crt" for o in cons.organisations)
    assert {"127.0.2.1", "peer0.org2.example.com", "127.0.0.1"} <= sans(org2)
    assert "127.0.2.1" not in sans(org1)


def test_without_a_placement_a_network_is_resumed_as_it_was_placed(tmp_path):
    net = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net", hosts=HOSTS))
    net.net.mkdir(parents=True)
    net._update_state(layout=2, placement=net.cfg.placement)
    assert NetworkConfig(net_dir=tmp_path / "net").placement == HOSTS  # e.g. connect(), the demo
    assert NetworkConfig(net_dir=tmp_path / "net", hosts={}).placement["Org2"] == "127.0.0.1"


def test_a_network_placed_elsewhere_is_not_resumed(tmp_path):
    net = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net", hosts=HOSTS))
    net.net.mkdir(parents=True)
    net._update_state(layout=2, placement={**net.cfg.placement, "Org2": "127.0.9.1"})
    with pytest.raises(NetworkError, match="was placed at .*Org2=127.0.9.1.*down --purge"):
        net.generate()
    assert recorded_hosts(net.net)["Org2"] == "127.0.9.1"


def test_a_network_of_the_older_layout_must_be_purged(tmp_path):
    net = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net"))
    net.net.mkdir(parents=True)
    net._save_state({"pids": {}, "package_id": "consortia_1.0:ab", "committed": True})
    assert net.stale()
    with pytest.raises(NetworkError, match="older layout"):
        net.generate()


def test_the_command_refuses_a_non_loopback_placement_before_starting_anything(tmp_path):
    r = subprocess.run(
        [str(SCRIPT), "up", "--net-dir", str(tmp_path / "net"), "--hosts", "Org1=127.0.1.1,Org2=10.1.2.3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Org2: 10.1.2.3 is not a loopback address" in r.stderr
    assert not (tmp_path / "net").exists()


# ---------------------------------------------------------------- a placed network (Fabric)
def _network(*args: str, port_base: int | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"CONSORTIA_FABRIC_PORT_BASE": str(port_base)} if port_base else {})}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    """Three organisations and the orderer placed by ``fabric-network/network up --hosts``."""
    net_dir = tmp_path_factory.mktemp("placed") / "net"
    cfg = None
    for base in support.PORT_BASES:
        candidate = NetworkConfig(
            net_dir=net_dir, dispatch=support.TEST_DISPATCH, port_base=base, hosts=HOSTS
        )
        if support.ports_free(candidate):
            cfg = candidate
            break
    if cfg is None:
        pytest.fail("no free port range on the placed addresses")
    net = FabricNetwork(cfg)
    where = ("--net-dir", str(net_dir))
    r = _network(
        "up", *where, "--hosts", placement_spec(HOSTS), "--dispatch", cfg.dispatch, port_base=cfg.port_base
    )
    if r.returncode != 0:
        net.down()
        if "binaries missing" in r.stderr:
            skip_or_fail(f"Hyperledger Fabric not available: {r.stderr.strip()}")
        pytest.fail(f"network up --hosts failed: {r.stderr[-3000:]}")
    yield net
    r = _network("down", "--purge", *where, timeout=120)
    net.down(purge=True)  # whatever the command left (nothing, if it worked)
    assert r.returncode == 0, r.stderr


@pytest.mark.fabric
@pytest.mark.timeout(900)
def test_each_node_listens_only_on_its_own_address(placed):
    c = placed.cfg
    pids = placed._state()["pids"]
    assert all(placed.running().values())
    for i, org in enumerate(c.organisations):
        host = HOSTS[org]
        peer = listening([pids[placed.peer_name(i)]])
        assert peer == {(host, c.peer_port(i)), (host, c.peer_port(i) + 1), (host, c.peer_ops_port(i))}
        assert listening([pids[placed.chaincode_name(i)]]) == {(host, c.chaincode_port(i))}
    orderer = listening([pids["orderer"]])
    assert {h for h, _ in orderer} == {"127.0.4.1"} and (HOSTS["orderer"], c.orderer_port) in orderer


@pytest.mark.fabric
@pytest.mark.timeout(900)
def test_tls_certificates_carry_each_hosts_address(placed):
    from cryptography import x509

    def ip_sans(path: Path) -> list[str]:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]

    for i, org in enumerate(placed.cfg.organisations):
        peer_tls = placed._org_paths(i)["peer"] / "tls" / "server.crt"
        assert HOSTS[org] in ip_sans(peer_tls)
        assert HOSTS[org] in ip_sans(placed.chaincode_tls(i) / "server.crt")
        others = {a for o, a in HOSTS.items() if o != org}
        assert not others & set(ip_sans(peer_tls))  # never another host's address
    assert "127.0.4.1" in ip_sans(placed.orderer_dir / "tls" / "server.crt")


@pytest.mark.fabric
@pytest.mark.timeout(900)
def test_each_peer_is_configured_for_its_own_chaincode_service_only(placed):
    c = placed.cfg
    for i, org in enumerate(c.organisations):
        built = list((placed.net / "data" / placed.peer_name(i)).rglob("chaincode/server/connection.json"))
        assert built, f"{org}'s peer built no chaincode connection"
        for f in built:
            assert json.loads(f.read_text())["address"] == f"{HOSTS[org]}:{c.chaincode_port(i)}"


@pytest.mark.fabric
@pytest.mark.timeout(900)
def test_submit_and_evaluate_through_each_organisations_own_profile(placed):
    from ledger.fabric.gateway import FabricLedger

    cons = placed.consortium()
    for i, org in enumerate(placed.cfg.organisations):
        profile = json.loads(placed.org_profile_file(org).read_text())
        [peer] = profile["peers"]
        assert peer["address"] == f"{HOSTS[org]}:{placed.cfg.peer_port(i)}" and peer["msp_id"] == f"{org}MSP"
        assert profile["orderer"]["address"].startswith("127.0.4.1:")
        key = f"placed-{org}-{uuid.uuid4().hex[:8]}"
        with FabricLedger.from_profile(placed.org_profile_file(org)) as led:
            ident = cons.identity(org)
            led.submit(ident, "KV:put", key, org)
            assert led.evaluate(ident, "KV:get", key) == org.encode()
    shared = json.loads(placed.profile_file.read_text())  # the shared profile: every peer, placed
    assert [p["address"].split(":")[0] for p in shared["peers"]] == ["127.0.1.1", "127.0.2.1", "127.0.3.1"]
    r = _network(
        "status", "--net-dir", str(placed.net), "-o", "json", port_base=placed.cfg.port_base, timeout=60
    )
    st = json.loads(r.stdout)  # no --hosts: the placement the network was made with
    assert st["placement"] == HOSTS and all(st["running"].values())
    assert len(set(st["package_ids"].values())) == 3
