"""Network configuration and commands (network, fabric-network/network)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from network import REPO_ROOT, FabricNetwork, NetworkConfig
from tests.ci import require_module, skip_or_fail
from tests.support.fabric import network_dir


@pytest.fixture
def net(tmp_path):
    return FabricNetwork(NetworkConfig(net_dir=tmp_path / "net", organisations=("Org1", "Org2", "Org3")))


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"organisations": ()}, "at least one"),
        ({"organisations": ("A", "A")}, "unique"),
        ({"port_base": 80}, "port_base"),
    ],
)
def test_config_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        NetworkConfig(**kw)


def test_ports_follow_fabric_md_and_never_collide(net):
    c = net.cfg
    assert (c.orderer_port, c.orderer_admin_port, c.orderer_ops_port) == (7050, 7053, 8443)
    assert [c.peer_port(i) for i in range(3)] == [7051, 8051, 9051]
    assert [c.peer_ops_port(i) for i in range(3)] == [9444, 9445, 9446]
    assert [c.chaincode_port(i) for i in range(3)] == [9999, 10999, 11999]
    ports = [port for _, port in c.listen_addresses()]
    assert len(ports) == len(set(ports)) == 3 + 4 * 3
    assert {host for host, _ in c.listen_addresses()} == {"127.0.0.1"}  # the default placement


def test_peer_environment_turns_docker_off_and_uses_the_ccaas_builder(net):
    env = net.peer_env(1)
    assert env["CORE_VM_ENDPOINT"] == ""
    [builder] = json.loads(env["CORE_CHAINCODE_EXTERNALBUILDERS"])
    assert Path(builder["path"]).is_absolute() and (Path(builder["path"]) / "bin" / "detect").exists()
    assert builder["propagateEnvironment"] == ["CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG"]
    assert json.loads(env["CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG"]) == {"ccport": "10999"}  # its own service
    assert env["CORE_PEER_GOSSIP_EXTERNALENDPOINT"] == "127.0.0.1:8051"
    assert env["CORE_PEER_TLS_ENABLED"] == "true" and env["CORE_PEER_LOCALMSPID"] == "Org2MSP"
    assert all(v.startswith("127.0.0.1:") for k, v in env.items() if k.endswith("ADDRESS"))


def test_orderer_environment_tls_and_admin_mtls(net):
    env = net.orderer_env()
    assert env["ORDERER_GENERAL_TLS_ENABLED"] == env["ORDERER_ADMIN_TLS_CLIENTAUTHREQUIRED"] == "true"
    assert env["ORDERER_GENERAL_BOOTSTRAPMETHOD"] == "none"
    assert env["ORDERER_ADMIN_LISTENADDRESS"] == "127.0.0.1:7053"


def test_configtx_has_every_organisation_and_the_batch_settings(net):
    yaml = require_module("yaml")
    doc = yaml.safe_load(net.configtx_yaml())
    prof = doc["Profiles"]["ConsortiaChannel"]
    assert [o["ID"] for o in prof["Application"]["Organizations"]] == ["Org1MSP", "Org2MSP", "Org3MSP"]
    assert prof["Orderer"]["BatchTimeout"] == "50ms" and prof["Orderer"]["OrdererType"] == "etcdraft"
    assert doc["Capabilities"]["Channel"] == {"V3_0": True}
    policies = prof["Application"]["Policies"]
    assert policies["Endorsement"] == {
        "Type": "Signature",
        "Rule": "OutOf(2, 'Org1MSP.peer', 'Org2MSP.peer', 'Org3MSP.peer')",
    }
    assert policies["Writers"]["Type"] == "Signature" and "Org3MSP.client" in policies["Writers"]["Rule"]
    assert "peer" not in policies["Writers"]["Rule"]  # a peer may read and endorse, never submit
    channel = doc["Channel"]["Policies"]
    assert (
        "'OrdererMSP.member'" in channel["Writers"]["Rule"]
        and "'Org2MSP.admin'" in channel["Writers"]["Rule"]
    )
    org2 = prof["Application"]["Organizations"][1]
    assert org2["AnchorPeers"] == [{"Host": "127.0.0.1", "Port": 8051}]
    assert "Org2MSP.peer" in org2["Policies"]["Endorsement"]["Rule"]


def test_package_is_ccaas_and_reproducible(tmp_path):
    net = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net", chaincode_tls=False))
    a = net.package().read_bytes()
    time.sleep(1.1)  # a package made in another second is the same package
    b = net.package().read_bytes()
    assert hashlib.sha256(a).digest() == hashlib.sha256(b).digest()  # same package id every time
    with tarfile.open(net.package()) as tf:
        assert sorted(tf.getnames()) == ["code.tar.gz", "metadata.json"]
        meta = json.load(tf.extractfile("metadata.json"))
        assert meta == {"type": "ccaas", "label": "consortia_1.0"}


def test_tls_package_carries_client_credentials_and_root(net):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    from ledger.identity import Consortium

    cons = Consortium.generate(net.crypto, net.cfg.organisations)
    for i in (0, 2):  # each organisation its own material, from its own TLS CA, in its own package
        net._chaincode_tls_material(i)
        with tarfile.open(net.package(i)) as tf:
            with tarfile.open(fileobj=tf.extractfile("code.tar.gz")) as code:
                conn = json.load(code.extractfile("connection.json"))
        assert conn["tls_required"] is True and conn["client_auth_required"] is True
        assert conn["address"] == f"127.0.0.1:{net.cfg.chaincode_port(i)}"
        ca = x509.load_pem_x509_certificate(conn["root_cert"].encode())
        org_tlsca = next((cons.organisations[i].path / "tlsca").glob("*-cert.pem")).read_bytes()
        assert ca == x509.load_pem_x509_certificate(org_tlsca)
        for name in ("client", "server"):
            cert = x509.load_pem_x509_certificate((net.chaincode_tls(i) / f"{name}.crt").read_bytes())
            assert cert.issuer == ca.subject
            ca.public_key().verify(
                cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
            )
        assert conn["client_cert"] == (net.chaincode_tls(i) / "client.crt").read_text()


def test_two_organisation_network_generates_a_genesis_block(tmp_path):
    n = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net2", organisations=("Alpha", "Beta")))
    if not (n.bin / "configtxgen").is_file():
        skip_or_fail("Fabric binaries not installed")
    n.generate()
    block = tmp_path / "net2" / "consortia.block"
    assert block.stat().st_size > 1000
    assert [o.msp_id for o in n.consortium().organisations] == ["AlphaMSP", "BetaMSP"]


def test_status_without_orgs_reports_every_organisation_the_network_was_made_with(tmp_path):
    """``network status`` without ``--orgs`` (the default three) on a four-organisation network."""
    orgs = ("Org1", "Org2", "Org3", "Org4")
    hosts = {**{o: f"127.0.{i}.1" for i, o in enumerate(orgs, start=1)}, "orderer": "127.0.5.1"}
    n = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net4", organisations=orgs, hosts=hosts))
    if not (n.bin / "configtxgen").is_file():
        skip_or_fail("Fabric binaries not installed")
    n.generate()  # made, no node started
    env = {k: v for k, v in os.environ.items() if k != "CONSORTIA_FABRIC_ORGS"}
    r = subprocess.run(
        [
            str(REPO_ROOT / "fabric-network" / "network"),
            "status",
            "--net-dir",
            str(tmp_path / "net4"),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["organisations"] == list(orgs)
    assert st["placement"] == hosts
    nodes = ["orderer", *(f"peer0.org{i}" for i in range(1, 5)), *(f"chaincode.org{i}" for i in range(1, 5))]
    assert st["running"] == {name: False for name in nodes}
    three = FabricNetwork(NetworkConfig(net_dir=tmp_path / "net4")).status()  # the object, given three
    assert three["organisations"] == list(orgs) and three["placement"] == hosts


@pytest.mark.fabric
def test_status_and_logs_commands_on_the_running_network(fabric):
    script = REPO_ROOT / "fabric-network" / "network"
    r = subprocess.run(
        [str(script), "status", "--net-dir", str(network_dir()), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert (
        all(st["running"].values())
        and st["committed"]
        and all(p.startswith("consortia_1.0:") for p in st["package_ids"].values())
    )
    assert len(set(st["package_ids"].values())) == 3  # one package per organisation
    r = subprocess.run(
        [str(script), "logs", "chaincode.org2", "-n", "5", "--net-dir", str(network_dir())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the last lines of the service's own log (a fresh service may have written fewer than 5 yet;
    # the log only grows, so what was printed is a run of lines of the file as it is now)
    shown = r.stdout.splitlines()
    logged = (network_dir() / "logs" / "chaincode.org2.log").read_text().splitlines()
    assert r.returncode == 0 and 0 < len(shown) <= 5
    assert any(logged[i : i + len(shown)] == shown for i in range(len(logged) - len(shown) + 1))
    assert len(shown) == 5 or logged[: len(shown)] == shown  # fewer than 5 only when that is all there is
    r = subprocess.run(
        [str(script), "logs", "nosuchnode", "--net-dir", str(network_dir())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "no log" in r.stderr


def test_missing_binaries_reported_when_install_cannot_fetch(tmp_path, monkeypatch):
    """install.sh runs, fails fast without an archive or a module proxy, and the network names what
    is missing and why."""
    from network import NetworkError

    monkeypatch.setenv("GOPROXY", "off")
    monkeypatch.setenv("CONSORTIA_FABRIC_ARCHIVE", str(tmp_path / "no-such-archive.tar.xz"))
    n = FabricNetwork(NetworkConfig(net_dir=tmp_path / "n", fabric_home=tmp_path / "nofabric"))
    with pytest.raises(NetworkError, match="binaries missing.*peer.*install.sh exit 4.*does not exist"):
        n.ensure_binaries()


def test_connect_without_start_refuses_a_stopped_network(tmp_path):
    from network import NetworkError, connect

    with pytest.raises(NetworkError, match="no running Fabric network"):
        connect(NetworkConfig(net_dir=tmp_path / "none"), start=False)


@pytest.mark.fabric
def test_connect_reuses_the_running_network(fabric):
    from network import connect

    led, cons, net = connect(fabric.network.cfg, start=False)
    with led:
        assert net.net == fabric.network.net
        assert led.evaluate(cons.identity("Org3"), "KV:whoami")


def test_a_recorded_pid_that_is_not_ours_is_never_signalled(net):
    """After a reboot a recorded pid may belong to another process: it counts as not running
    and ``down`` leaves it alone."""
    import os

    net.net.mkdir(parents=True)
    net._save_state({"pids": {"orderer": os.getpid(), "peer0.org1": 999999999}})
    assert net.running()["orderer"] is False and net.running()["peer0.org1"] is False
    net.down()  # must not signal this test process
    assert net._state()["pids"] == {}


def test_channel_policies_are_signature_policies_over_every_organisation():
    """Explicit rules admit what ANY Readers / ANY Writers admit, for N organisations; the chaincode's
    Endorsement rule is peers of any two (a process's records add its members' key-level policy)."""
    from network.files import channel_policies

    readers, writers, endorsement = channel_policies(("A", "B", "C", "D", "E"))
    assert endorsement == "OutOf(2, 'AMSP.peer', 'BMSP.peer', 'CMSP.peer', 'DMSP.peer', 'EMSP.peer')"
    for org in "ABCDE":
        assert all(f"'{org}MSP.{r}'" in readers for r in ("admin", "peer", "client"))
        assert f"'{org}MSP.admin'" in writers and f"'{org}MSP.client'" in writers
    assert ".peer'" not in writers
    assert channel_policies(("A", "B"))[2] == "OutOf(2, 'AMSP.peer', 'BMSP.peer')"
    assert channel_policies(("A",))[2] == "OutOf(1, 'AMSP.peer')"
