"""Configuration of the native network: what the operator chooses (:class:`NetworkConfig`), where
everything lives (:class:`NetworkLayout`: the network directory, the cryptogen layout of the
identities) and the environment each Fabric node starts with (docs/fabric.md "Topology")."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ledger.identity import Consortium
from network.placement import (
    DEFAULT_HOST,
    ORDERER,
    check_hosts,
    recorded_hosts,
    recorded_isolation,
)
from wire.env import environment

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE = environment().cache_root
DEFAULT_HOME = environment().fabric_binaries
DEFAULT_NET = environment().fabric_net or Path.home() / ".cache" / "consortia" / "fabric-net"
BINARIES = ("peer", "orderer", "configtxgen", "osnadmin")


class NetworkError(RuntimeError):
    """A network step failed; the message names the step and the log to read."""


@dataclass
class NetworkConfig:
    organisations: tuple[str, ...] = ("Org1", "Org2", "Org3")
    channel: str = "consortia"
    chaincode: str = "consortia"
    chaincode_version: str = "1.0"
    dispatch: str = environment().chaincode_dispatch
    net_dir: Path = DEFAULT_NET
    fabric_home: Path = DEFAULT_HOME
    port_base: int = environment().fabric_port_base or 7050
    batch_timeout: str = "50ms"  # docs/fabric.md "Batch settings": a lone transaction waits this long
    max_message_count: int = 500
    endorsement_policy: str = ""  # "" = the channel's Endorsement policy (peers of any two organisations)
    chaincode_tls: bool = True  # peer <-> chaincode service: mutual TLS
    log_spec: str = "warning:gossip=error"
    # the placement (docs/fabric.md "Placement"): an address per organisation name and one for
    # "orderer", loopback 127.0.0.0/8 only; whatever is not named listens on 127.0.0.1. None: as
    # the network in net_dir was placed (state.json), else everything on 127.0.0.1
    hosts: dict[str, str] | None = None
    # each node in a bubblewrap view of its own files only (host_view, docs/fabric.md "Isolated
    # hosts"): the others' keys and ledgers are not in its mount namespace. None: as the network in
    # net_dir was started (state.json), else False
    isolate: bool | None = None

    def __post_init__(self) -> None:
        self.net_dir = Path(self.net_dir)
        self.fabric_home = Path(self.fabric_home)
        if not self.organisations:
            raise ValueError("at least one organisation is required")
        if len(set(self.organisations)) != len(self.organisations):
            raise ValueError("organisation names must be unique")
        if not (1024 <= self.port_base <= 60000):
            raise ValueError("port_base must be between 1024 and 60000")
        if self.hosts is None:
            known = {*self.organisations, ORDERER}  # another network's placement: generate() refuses it
            self.hosts = {k: v for k, v in recorded_hosts(self.net_dir).items() if k in known}
        self.hosts = check_hosts(self.hosts, self.organisations)
        if self.isolate is None:
            self.isolate = recorded_isolation(self.net_dir)

    # ---- placement
    def org_host(self, i: int) -> str:
        """The address organisation ``i``'s peer and chaincode service listen on."""
        return (self.hosts or {}).get(self.organisations[i], DEFAULT_HOST)

    @property
    def orderer_host(self) -> str:
        return (self.hosts or {}).get(ORDERER, DEFAULT_HOST)

    @property
    def placement(self) -> dict[str, str]:
        """Every organisation's address and the orderer's (recorded in ``state.json``)."""
        return {
            **{o: self.org_host(i) for i, o in enumerate(self.organisations)},
            ORDERER: self.orderer_host,
        }

    def listen_addresses(self) -> list[tuple[str, int]]:
        """Every (address, port) a node of this network listens on."""
        o = self.orderer_host
        out = [(o, self.orderer_port), (o, self.orderer_admin_port), (o, self.orderer_ops_port)]
        for i in range(len(self.organisations)):
            h, p = self.org_host(i), self.peer_port(i)
            out += [(h, p), (h, p + 1), (h, self.peer_ops_port(i)), (h, self.chaincode_port(i))]
        return out

    # ---- ports (docs/fabric.md "Topology", with port_base = 7050)
    @property
    def orderer_port(self) -> int:
        return self.port_base

    @property
    def orderer_admin_port(self) -> int:
        return self.port_base + 3

    @property
    def orderer_ops_port(self) -> int:
        return self.port_base + 1393  # 8443

    def peer_port(self, i: int) -> int:
        return self.port_base + 1 + 1000 * i  # 7051, 8051, 9051, ...

    def peer_ops_port(self, i: int) -> int:
        return self.port_base + 2394 + i  # 9444, 9445, ...

    def chaincode_port(self, i: int) -> int:
        return self.port_base + 2949 + 1000 * i  # 9999, 10999, ...: each organisation's own service


class NetworkLayout:
    """Paths of one network directory and the environment of its nodes; the base of
    :class:`network.FabricNetwork` (supervision, generated files and lifecycle
    build on it)."""

    def __init__(self, config: NetworkConfig | None = None):
        self.cfg = config or NetworkConfig()
        self.net = self.cfg.net_dir
        self.bin = self.cfg.fabric_home / "bin"
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # nodes this object started, by pid

    # ------------------------------------------------------------------ paths
    @property
    def profile_file(self) -> Path:
        return self.net / "connection.json"

    @property
    def crypto(self) -> Path:
        return self.net / "crypto"

    @property
    def orderer_dir(self) -> Path:
        return self.crypto / "ordererOrganizations" / "example.com" / "orderers" / "orderer.example.com"

    @property
    def orderer_ca(self) -> Path:
        return self.crypto / "ordererOrganizations" / "example.com" / "tlsca" / "tlsca.example.com-cert.pem"

    @property
    def chaincode_tls_dir(self) -> Path:
        return self.net / "chaincode-tls"

    def chaincode_tls(self, i: int) -> Path:
        """Organisation ``i``'s chaincode service TLS material (issued by its own TLS CA)."""
        return self.chaincode_tls_dir / self.cfg.organisations[i].lower()

    def org_profile_file(self, org: str) -> Path:
        """The connection profile naming only organisation ``org``'s own peer."""
        return self.net / "profiles" / f"{org}.json"

    def consortium(self) -> Consortium:
        return Consortium(self.crypto)

    def peer_name(self, i: int) -> str:
        return f"peer0.{self.cfg.organisations[i].lower()}"

    def chaincode_name(self, i: int) -> str:
        """Node name of organisation ``i``'s chaincode service (its log: ``logs/<name>.log``)."""
        return f"chaincode.{self.cfg.organisations[i].lower()}"

    def _org_paths(self, i: int) -> dict[str, Path]:
        name = self.cfg.organisations[i]
        domain = f"{name.lower()}.example.com"
        base = self.crypto / "peerOrganizations" / domain
        peer = base / "peers" / f"peer0.{domain}"
        return {
            "base": base,
            "peer": peer,
            "admin": base / "users" / f"Admin@{domain}" / "msp",
            "tls_ca": peer / "tls" / "ca.crt",
            "domain": Path(domain),
        }

    # ------------------------------------------------------------------ node environments
    def orderer_env(self) -> dict[str, str]:
        c, od, data = self.cfg, self.orderer_dir, self.net / "data" / "orderer"
        tls, host = od / "tls", c.orderer_host
        return {
            "FABRIC_CFG_PATH": str(self.net / "config"),
            # a Gateway closes its Broadcast stream after each transaction, which the broadcast
            # handler logs as a WARN "context canceled": a tenth of the orderer's CPU under load
            "FABRIC_LOGGING_SPEC": f"{c.log_spec}:orderer.common.broadcast=error",
            "ORDERER_GENERAL_LISTENADDRESS": host,
            "ORDERER_GENERAL_LISTENPORT": str(c.orderer_port),
            "ORDERER_GENERAL_LOCALMSPID": "OrdererMSP",
            "ORDERER_GENERAL_LOCALMSPDIR": str(od / "msp"),
            "ORDERER_GENERAL_TLS_ENABLED": "true",
            "ORDERER_GENERAL_TLS_PRIVATEKEY": str(tls / "server.key"),
            "ORDERER_GENERAL_TLS_CERTIFICATE": str(tls / "server.crt"),
            "ORDERER_GENERAL_TLS_ROOTCAS": f"[{tls / 'ca.crt'}]",
            "ORDERER_GENERAL_BOOTSTRAPMETHOD": "none",
            "ORDERER_CHANNELPARTICIPATION_ENABLED": "true",
            "ORDERER_FILELEDGER_LOCATION": str(data),
            "ORDERER_CONSENSUS_WALDIR": str(data / "etcdraft" / "wal"),
            "ORDERER_CONSENSUS_SNAPDIR": str(data / "etcdraft" / "snap"),
            "ORDERER_OPERATIONS_LISTENADDRESS": f"{host}:{c.orderer_ops_port}",
            "ORDERER_ADMIN_LISTENADDRESS": f"{host}:{c.orderer_admin_port}",
            "ORDERER_ADMIN_TLS_ENABLED": "true",
            "ORDERER_ADMIN_TLS_CERTIFICATE": str(tls / "server.crt"),
            "ORDERER_ADMIN_TLS_PRIVATEKEY": str(tls / "server.key"),
            "ORDERER_ADMIN_TLS_ROOTCAS": f"[{tls / 'ca.crt'}]",
            "ORDERER_ADMIN_TLS_CLIENTAUTHREQUIRED": "true",
            "ORDERER_ADMIN_TLS_CLIENTROOTCAS": f"[{tls / 'ca.crt'}]",
            "ORDERER_METRICS_PROVIDER": "disabled",
        }

    def peer_env(self, i: int) -> dict[str, str]:
        c, p = self.cfg, self._org_paths(i)
        port, peer, host = c.peer_port(i), p["peer"], c.org_host(i)
        data = self.net / "data" / self.peer_name(i)
        builder = REPO_ROOT / "fabric-network" / "builders" / "ccaas"
        return {
            "FABRIC_CFG_PATH": str(self.net / "config"),
            "FABRIC_LOGGING_SPEC": c.log_spec,
            "CORE_PEER_ID": f"peer0.{p['domain']}",
            "CORE_PEER_LOCALMSPID": f"{c.organisations[i]}MSP",
            "CORE_PEER_MSPCONFIGPATH": str(peer / "msp"),
            "CORE_PEER_TLS_ENABLED": "true",
            "CORE_PEER_TLS_CERT_FILE": str(peer / "tls" / "server.crt"),
            "CORE_PEER_TLS_KEY_FILE": str(peer / "tls" / "server.key"),
            "CORE_PEER_TLS_ROOTCERT_FILE": str(peer / "tls" / "ca.crt"),
            "CORE_PEER_LISTENADDRESS": f"{host}:{port}",
            "CORE_PEER_ADDRESS": f"{host}:{port}",
            "CORE_PEER_CHAINCODELISTENADDRESS": f"{host}:{port + 1}",
            "CORE_PEER_CHAINCODEADDRESS": f"{host}:{port + 1}",
            "CORE_PEER_GOSSIP_BOOTSTRAP": f"{host}:{port}",
            "CORE_PEER_GOSSIP_EXTERNALENDPOINT": f"{host}:{port}",
            # a block with a private write to this organisation's implicit collection that it did not
            # endorse (an invalid one: the collection's policy wants its peer) has no copy to pull:
            # the only eligible peers are its own. Wait 5 s for it, not Fabric's 60 s of a stalled
            # commit; data still missing is reconciled later (docs/confidentiality.md)
            "CORE_PEER_GOSSIP_PVTDATA_PULLRETRYTHRESHOLD": "5s",
            "CORE_OPERATIONS_LISTENADDRESS": f"{host}:{c.peer_ops_port(i)}",
            "CORE_METRICS_PROVIDER": "disabled",
            "CORE_PEER_FILESYSTEMPATH": str(data),
            "CORE_LEDGER_SNAPSHOTS_ROOTDIR": str(data / "snapshots"),
            "CORE_VM_ENDPOINT": "",
            "CORE_CHAINCODE_EXTERNALBUILDERS": json.dumps(
                [
                    {
                        "name": "ccaas",
                        "path": str(builder),
                        "propagateEnvironment": ["CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG"],
                    }
                ]
            ),
            "CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG": json.dumps({"ccport": str(c.chaincode_port(i))}),
            "CORE_PEER_LIMITS_CONCURRENCY_GATEWAYSERVICE": "2000",
            "CORE_CHAINCODE_EXECUTETIMEOUT": "30s",
            "CORE_CHAINCODE_KEEPALIVE": "30",  # seconds; the service echoes KEEPALIVE
        }

    def admin_env(self, i: int) -> dict[str, str]:
        c, p = self.cfg, self._org_paths(i)
        return {
            "FABRIC_CFG_PATH": str(self.net / "config"),
            "FABRIC_LOGGING_SPEC": "warning",
            "CORE_PEER_LOCALMSPID": f"{c.organisations[i]}MSP",
            "CORE_PEER_ADDRESS": f"{c.org_host(i)}:{c.peer_port(i)}",
            "CORE_PEER_TLS_ENABLED": "true",
            "CORE_PEER_TLS_ROOTCERT_FILE": str(p["tls_ca"]),
            "CORE_PEER_MSPCONFIGPATH": str(p["admin"]),
        }
