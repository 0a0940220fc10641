"""One member's nodes on its own host (docs/fabric.md "A consortium without a centre"): its
certificate authority, its orderer, its peer and its chaincode service, each started and stopped on
its own (``consortia network node start|stop|status ca|orderer|peer|chaincode``); its orderer and its
peer joined to the channel by its own admin (``consortia network channel join``); the chaincode
definition approved by its own admin and committed once a majority approved (``consortia network
chaincode approve|commit|status``).

Everything here reads only the organisation's own home (:class:`~network.organisation.OrganisationLayout`)
and the public packages and blocks it was given: no command needs another organisation's key. The
nodes need no other organisation's file either: the orderers and peers learn the others' TLS roots and
endpoints from the channel configuration."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from network.config import DEFAULT_HOME, REPO_ROOT, NetworkError
from network.files import reproducible_tgz
from network.organisation import Organisation, OrganisationLayout
from network.package import OrganisationPackage, read_packages
from network.processes import ProcessSupervisor, ensure_fabric

NODES = ("ca", "orderer", "peer", "chaincode")


@dataclass(frozen=True)
class ChaincodeDefinition:
    """The chaincode definition every member approves (the same for all) and the contracts its own
    service runs."""

    channel: str = "consortia"
    name: str = "consortia"
    version: str = "1.0"
    sequence: int = 1
    endorsement_policy: str = ""  # "" = the channel's Endorsement policy (peers of any two organisations)
    dispatch: str = "chaincode.dispatch:invoke"

    @property
    def label(self) -> str:
        return f"{self.name}_{self.version}"

    def args(self) -> list[str]:
        return [
            *("--channelID", self.channel, "--name", self.name, "--version", self.version),
            *("--sequence", str(self.sequence)),
            *(("--signature-policy", self.endorsement_policy) if self.endorsement_policy else ()),
        ]


class MemberNodes(ProcessSupervisor):
    """The nodes of the organisation whose home is ``home`` (made by ``consortia org init``)."""

    def __init__(self, home: str | Path, fabric_home: Path | None = None):
        self.layout = OrganisationLayout(home)
        self.org: Organisation = self.layout.organisation()
        self.net = self.layout.fabric
        self.fabric_home = Path(fabric_home or DEFAULT_HOME)
        self.bin = self.fabric_home / "bin"
        self._children = {}

    # ------------------------------------------------------------------ environments
    @property
    def config_dir(self) -> Path:
        return self.net / "config"

    def _node_config(self) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        for f in ("core.yaml", "orderer.yaml"):
            shutil.copy(self.fabric_home / "config" / f, self.config_dir / f)

    def orderer_env(self) -> dict[str, str]:
        o, od, data = self.org, self.layout.orderer_dir(self.org), self.net / "data" / "orderer"
        tls = od / "tls"
        roots = f"[{tls / 'ca.crt'}]"  # the others' TLS roots come from the channel configuration
        return {
            "FABRIC_CFG_PATH": str(self.config_dir),
            "FABRIC_LOGGING_SPEC": "warning:orderer.common.broadcast=error",
            "ORDERER_GENERAL_LISTENADDRESS": o.host,
            "ORDERER_GENERAL_LISTENPORT": str(o.port("orderer")),
            "ORDERER_GENERAL_LOCALMSPID": o.msp_id,
            "ORDERER_GENERAL_LOCALMSPDIR": str(od / "msp"),
            "ORDERER_GENERAL_TLS_ENABLED": "true",
            "ORDERER_GENERAL_TLS_PRIVATEKEY": str(tls / "server.key"),
            "ORDERER_GENERAL_TLS_CERTIFICATE": str(tls / "server.crt"),
            "ORDERER_GENERAL_TLS_ROOTCAS": roots,
            "ORDERER_GENERAL_CLUSTER_CLIENTCERTIFICATE": str(tls / "server.crt"),
            "ORDERER_GENERAL_CLUSTER_CLIENTPRIVATEKEY": str(tls / "server.key"),
            "ORDERER_GENERAL_CLUSTER_ROOTCAS": roots,
            "ORDERER_GENERAL_BOOTSTRAPMETHOD": "none",
            "ORDERER_CHANNELPARTICIPATION_ENABLED": "true",
            "ORDERER_FILELEDGER_LOCATION": str(data),
            "ORDERER_CONSENSUS_WALDIR": str(data / "wal"),
            "ORDERER_CONSENSUS_SNAPDIR": str(data / "snap"),
            "ORDERER_OPERATIONS_LISTENADDRESS": o.address("orderer_operations"),
            "ORDERER_ADMIN_LISTENADDRESS": o.address("orderer_admin"),
            "ORDERER_ADMIN_TLS_ENABLED": "true",
            "ORDERER_ADMIN_TLS_CERTIFICATE": str(tls / "server.crt"),
            "ORDERER_ADMIN_TLS_PRIVATEKEY": str(tls / "server.key"),
            "ORDERER_ADMIN_TLS_ROOTCAS": roots,
            # only TLS client certificates of this organisation's own TLS CA reach the admin API
            "ORDERER_ADMIN_TLS_CLIENTAUTHREQUIRED": "true",
            "ORDERER_ADMIN_TLS_CLIENTROOTCAS": roots,
            "ORDERER_METRICS_PROVIDER": "disabled",
        }

    def peer_env(self) -> dict[str, str]:
        o, peer, data = self.org, self.layout.peer_dir(self.org), self.net / "data" / "peer"
        builder = REPO_ROOT / "fabric-network" / "builders" / "ccaas"
        return {
            "FABRIC_CFG_PATH": str(self.config_dir),
            "FABRIC_LOGGING_SPEC": "warning:gossip=error",
            "CORE_PEER_ID": o.peer_name,
            "CORE_PEER_LOCALMSPID": o.msp_id,
            "CORE_PEER_MSPCONFIGPATH": str(peer / "msp"),
            "CORE_PEER_TLS_ENABLED": "true",
            "CORE_PEER_TLS_CERT_FILE": str(peer / "tls" / "server.crt"),
            "CORE_PEER_TLS_KEY_FILE": str(peer / "tls" / "server.key"),
            "CORE_PEER_TLS_ROOTCERT_FILE": str(peer / "tls" / "ca.crt"),
            "CORE_PEER_LISTENADDRESS": o.address("peer"),
            "CORE_PEER_ADDRESS": o.address("peer"),
            "CORE_PEER_CHAINCODELISTENADDRESS": o.address("peer_chaincode"),
            "CORE_PEER_CHAINCODEADDRESS": o.address("peer_chaincode"),
            "CORE_PEER_GOSSIP_BOOTSTRAP": o.address("peer"),
            "CORE_PEER_GOSSIP_EXTERNALENDPOINT": o.address("peer"),
            # a block with a private write to this organisation's implicit collection that it did not
            # endorse (an invalid one: the collection's policy wants its peer) has no copy to pull:
            # the only eligible peers are its own. Wait 5 s for it, not Fabric's 60 s of a stalled
            # commit; data still missing is reconciled later (docs/confidentiality.md)
            "CORE_PEER_GOSSIP_PVTDATA_PULLRETRYTHRESHOLD": "5s",
            "CORE_OPERATIONS_LISTENADDRESS": o.address("peer_operations"),
            "CORE_METRICS_PROVIDER": "disabled",
            "CORE_PEER_FILESYSTEMPATH": str(data),
            "CORE_LEDGER_SNAPSHOTS_ROOTDIR": str(data / "snapshots"),
            "CORE_VM_ENDPOINT": "",
            "CORE_CHAINCODE_EXTERNALBUILDERS": json.dumps(
                [{"name": "ccaas", "path": str(builder), "propagateEnvironment": []}]
            ),
            "CORE_PEER_LIMITS_CONCURRENCY_GATEWAYSERVICE": "2000",
            "CORE_CHAINCODE_EXECUTETIMEOUT": "30s",
            "CORE_CHAINCODE_KEEPALIVE": "30",
        }

    def admin_env(self) -> dict[str, str]:
        """The ``peer`` command line as this organisation's own admin, against its own peer."""
        o = self.org
        return {
            "FABRIC_CFG_PATH": str(self.config_dir),
            "FABRIC_LOGGING_SPEC": "warning",
            "CORE_PEER_LOCALMSPID": o.msp_id,
            "CORE_PEER_ADDRESS": o.address("peer"),
            "CORE_PEER_TLS_ENABLED": "true",
            "CORE_PEER_TLS_ROOTCERT_FILE": str(self.layout.tlsca_cert(o)),
            "CORE_PEER_MSPCONFIGPATH": str(self.layout.user_dir(o, "Admin") / "msp"),
        }

    # ------------------------------------------------------------------ nodes
    def running(self) -> dict[str, bool]:
        pids = self._state()["pids"]
        return {n: bool(pids.get(n)) and self._alive(pids[n], n) for n in NODES}

    def start(self, node: str, installed: bool = False) -> dict[str, Any]:
        """Start one node (idempotent: a running node is left as it is); its status. The binaries are
        checked (installed if missing) first, unless the caller did (``installed``)."""
        if node not in NODES:
            raise NetworkError(f"unknown node {node!r}; nodes: {', '.join(NODES)}")
        if not self.running()[node]:
            if not installed:
                ensure_fabric(self.fabric_home, ("ca",) if node == "ca" else ("core",))
            {
                "ca": self._start_ca,
                "orderer": self._start_orderer,
                "peer": self._start_peer,
                "chaincode": self._start_chaincode,
            }[node]()
        where: dict[str, Any] = self.status()["nodes"][node]
        return where

    def stop(self, node: str) -> None:
        if node not in NODES:
            raise NetworkError(f"unknown node {node!r}; nodes: {', '.join(NODES)}")
        self.stop_node(node)

    def _start_ca(self) -> None:
        o = self.org
        server = self.layout.ca_server
        if not (server / "fabric-ca-server-config.yaml").is_file():
            raise NetworkError(f"no certificate authority in {self.layout.ca_home}: run 'consortia org init'")
        self._spawn("ca", [str(self.bin / "fabric-ca-server"), "start", "-H", str(server)], {})
        self._wait_health("ca", o.host, o.port("ca_operations"))
        self._wait_listening("ca", o.host, o.port("ca"))

    def _start_orderer(self) -> None:
        self._node_config()
        self._spawn("orderer", [str(self.bin / "orderer")], self.orderer_env())
        self._wait_health("orderer", self.org.host, self.org.port("orderer_operations"))
        self._wait_listening("orderer", self.org.host, self.org.port("orderer_admin"))

    def _start_peer(self) -> None:
        self._node_config()
        self._spawn("peer", [str(self.bin / "peer"), "node", "start"], self.peer_env())
        self._wait_health("peer", self.org.host, self.org.port("peer_operations"))
        self._wait_listening("peer", self.org.host, self.org.port("peer"))

    def _start_chaincode(self) -> None:
        st = self._state()
        package_id = st.get("package_id")
        if not package_id:
            raise NetworkError(
                "no chaincode package installed on this organisation's peer yet: "
                "run 'consortia network chaincode approve' (it installs the package) first"
            )
        t = self.layout.chaincode_tls(self.org)
        argv = [
            sys.executable,
            "-m",
            "ledger.fabric.chaincode_server",
            *("--address", self.org.address("chaincode"), "--chaincode-id", package_id),
            *("--dispatch", st.get("dispatch") or ChaincodeDefinition().dispatch),
            *("--msp-id", self.org.msp_id),
            *("--tls-cert", str(t / "server.crt"), "--tls-key", str(t / "server.key")),
            *("--client-ca", str(t / "ca.crt")),
        ]
        self._spawn("chaincode", argv, {"PYTHONPATH": str(REPO_ROOT), "CHAINCODE_LOG_LEVEL": "INFO"})
        self._wait_listening("chaincode", self.org.host, self.org.port("chaincode"), timeout=30)

    def status(self) -> dict[str, Any]:
        """Which nodes run (with their addresses), what was joined, installed and approved."""
        st, o, run = self._state(), self.org, self.running()
        where = {
            "ca": o.endpoints()["ca"],
            "orderer": o.address("orderer"),
            "peer": o.address("peer"),
            "chaincode": o.address("chaincode"),
        }
        return {
            "organisation": o.msp_id,
            "home": str(self.layout.root),
            "nodes": {
                n: {"running": run[n], "pid": st["pids"].get(n) if run[n] else None, "address": where[n]}
                for n in NODES
            },
            "channels": st.get("channels", {}),
            "package_id": st.get("package_id"),
            "approved": st.get("approved", {}),
        }

    def down(self) -> None:
        """Stop every node of this organisation."""
        for node in reversed(NODES):
            self.stop_node(node)

    # ------------------------------------------------------------------ command-line tools
    def _peer_cli(self, *args: str, step: str, timeout: float = 120) -> str:
        self._node_config()
        return self._run([str(self.bin / "peer"), *args], self.admin_env(), step, timeout)

    def _osnadmin(self, *args: str) -> str:
        admin_tls = self.layout.user_dir(self.org, "Admin") / "tls"
        return self._run(
            [
                str(self.bin / "osnadmin"),
                "channel",
                *args,
                *("-o", self.org.address("orderer_admin")),
                *("--ca-file", str(self.layout.tlsca_cert(self.org))),
                *("--client-cert", str(admin_tls / "client.crt")),
                *("--client-key", str(admin_tls / "client.key")),
            ],
            {},
            f"osnadmin channel {args[0]}",
        )

    def _need(self, node: str) -> None:
        if not self.running()[node]:
            raise NetworkError(
                f"{self.org.msp_id}'s {node} does not run: 'consortia network node start {node}' first"
            )

    # ------------------------------------------------------------------ the channel
    def store_packages(self, packages: list[OrganisationPackage]) -> None:
        """Keep the members' public packages (``fabric/members/<MSP>.json``)."""
        self.layout.members.mkdir(parents=True, exist_ok=True)
        for p in packages:
            p.write(self.layout.members / f"{p.msp_id}.json")

    def members(self) -> list[OrganisationPackage]:
        """The public packages this organisation was given (its own export included)."""
        return read_packages(sorted(self.layout.members.glob("*.json")))

    def join_channel(
        self,
        block: Path,
        channel: str,
        nodes: tuple[str, ...] = ("orderer", "peer"),
        config_block: Path | None = None,
    ) -> None:
        """Join this organisation's own orderer (osnadmin, with its admin's TLS pair) and its own peer
        (``peer channel join`` as its admin) to ``channel`` from its genesis block. A member added by a
        configuration update joins its orderer from ``config_block``, the configuration block that made
        it a member (the orderer then fetches the blocks before it from the others); its peer still
        joins from the genesis block and pulls the rest."""
        block = Path(block).resolve()
        kept = self.layout.block(channel)
        kept.parent.mkdir(parents=True, exist_ok=True)
        if block != kept:
            shutil.copyfile(block, kept)
        joined = dict(self._state().get("channels", {})).get(channel, [])
        if "orderer" in nodes:
            self._need("orderer")
            if f'"{channel}"' not in self._osnadmin("list"):
                join_block = Path(config_block).resolve() if config_block else kept
                self._osnadmin("join", "--channelID", channel, "--config-block", str(join_block))
            joined = sorted({*joined, "orderer"})
            self._record_join(channel, joined)
        if "peer" in nodes:
            self._need("peer")
            listed = self._peer_cli("channel", "list", step="peer channel list").split()
            if channel not in listed:
                self._peer_cli("channel", "join", "-b", str(kept), step="peer channel join", timeout=180)
            joined = sorted({*joined, "peer"})
            self._record_join(channel, joined)

    def _record_join(self, channel: str, joined: list[str]) -> None:
        channels = dict(self._state().get("channels", {}))
        channels[channel] = joined
        self._update_state(channels=channels)

    def fetch_block(self, channel: str, out: Path, which: str = "newest") -> Path:
        """Block ``which`` (``newest``, ``oldest``, ``config`` or a number) of ``channel``, delivered by
        its own orderer to its own admin, written to ``out``."""
        self._need("peer")
        out = Path(out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        self._peer_cli(
            "channel",
            "fetch",
            which,
            str(out),
            "-c",
            channel,
            *self._orderer_args(),
            step=f"fetch block {which}",
        )
        return out

    # ------------------------------------------------------------------ the chaincode
    def package(self, d: ChaincodeDefinition) -> Path:
        """This organisation's CCaaS package: it names only its own chaincode service (its address,
        the TLS pairs from its own TLS CA)."""
        folder = self.net / "chaincode"
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)  # the connection carries the peer's client key for its service
        t = self.layout.chaincode_tls(self.org)
        conn = {
            "address": self.org.address("chaincode"),
            "dial_timeout": "10s",
            "tls_required": True,
            "client_auth_required": True,
            "client_cert": (t / "client.crt").read_text(),
            "client_key": (t / "client.key").read_text(),
            "root_cert": (t / "ca.crt").read_text(),
        }
        fd = os.open(folder / "connection.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(conn))
        (folder / "metadata.json").write_text(json.dumps({"type": "ccaas", "label": d.label}))
        reproducible_tgz(folder / "code.tar.gz", folder, ["connection.json"])
        pkg = folder / f"{d.label}.tgz"
        reproducible_tgz(pkg, folder, ["metadata.json", "code.tar.gz"])
        return pkg

    def install(self, d: ChaincodeDefinition) -> str:
        """Package and install (if not yet) on its own peer; the package id."""
        self._need("peer")
        pkg = self.package(d)
        pkg_id = self._peer_cli(
            "lifecycle", "chaincode", "calculatepackageid", str(pkg), step="calculatepackageid"
        ).strip()
        if pkg_id not in self._peer_cli("lifecycle", "chaincode", "queryinstalled", step="queryinstalled"):
            self._peer_cli(
                "lifecycle", "chaincode", "install", str(pkg), step="chaincode install", timeout=300
            )
        self._update_state(package_id=pkg_id, dispatch=d.dispatch)
        return pkg_id

    def _orderer_args(self) -> list[str]:
        """Its own orderer, trusted through its own TLS CA."""
        cafile = str(self.layout.tlsca_cert(self.org))
        return ["-o", self.org.address("orderer"), "--tls", "--cafile", cafile]

    def approve(self, d: ChaincodeDefinition) -> str:
        """Install if needed and approve ``d`` for this organisation, signed by its own admin."""
        pkg_id = self.install(d)
        readiness = self.readiness(d)
        if not readiness.get(self.org.msp_id):
            self._peer_cli(
                "lifecycle",
                "chaincode",
                "approveformyorg",
                *self._orderer_args(),
                *d.args(),
                *("--package-id", pkg_id),
                step=f"approveformyorg {self.org.msp_id}",
                timeout=180,
            )
        approved = dict(self._state().get("approved", {}))
        approved[d.channel] = {"name": d.name, "version": d.version, "sequence": d.sequence}
        self._update_state(approved=approved)
        return pkg_id

    def readiness(self, d: ChaincodeDefinition) -> dict[str, bool]:
        """Which members approved ``d`` (``checkcommitreadiness``); for a committed definition, the
        approvals it was committed with."""
        committed = self.committed(d)
        if committed is not None and int(committed.get("sequence", 0)) >= d.sequence:
            return {str(k): bool(v) for k, v in (committed.get("approvals") or {}).items()}
        out = self._peer_cli(
            "lifecycle",
            "chaincode",
            "checkcommitreadiness",
            *d.args(),
            "--output",
            "json",
            step="checkcommitreadiness",
        )
        return {str(k): bool(v) for k, v in json.loads(out).get("approvals", {}).items()}

    def committed(self, d: ChaincodeDefinition) -> dict[str, Any] | None:
        """The committed definition of ``d.name`` on ``d.channel`` (None: not committed)."""
        self._need("peer")
        try:
            out = self._peer_cli(
                "lifecycle",
                "chaincode",
                "querycommitted",
                *("--channelID", d.channel, "--name", d.name, "--output", "json"),
                step="querycommitted",
            )
        except NetworkError as exc:
            if "not found" in str(exc) or "not defined" in str(exc):
                return None
            raise
        got: dict[str, Any] = json.loads(out)
        return got

    def commit(self, d: ChaincodeDefinition) -> dict[str, Any]:
        """Commit ``d`` once a majority of the channel's members approved it, endorsed by the approving
        members' peers (their addresses and TLS roots from their public packages); the committed
        definition. Refused (:class:`NetworkError`) while fewer than a majority approved."""
        already = self.committed(d)
        if already is not None and int(already.get("sequence", 0)) >= d.sequence:
            return already
        approvals = self.readiness(d)
        need = len(approvals) // 2 + 1
        yes = sorted(m for m, ok in approvals.items() if ok)
        if len(yes) < need:
            raise NetworkError(
                f"the definition {d.name} {d.version} (sequence {d.sequence}) is approved by "
                f"{len(yes)} of {len(approvals)} members ({', '.join(yes) or 'none'}); "
                f"the channel's LifecycleEndorsement policy needs a majority, {need}"
            )
        members = {p.msp_id: p for p in self.members()}
        missing = [m for m in yes if m not in members]
        if missing:
            raise NetworkError(
                f"no public package of {missing} in {self.layout.members}: give them with "
                f"'consortia network channel join --package ...'"
            )
        roots = self.net / "tls-roots"
        roots.mkdir(parents=True, exist_ok=True)
        peers: list[str] = []
        for m in yes:
            root = roots / f"{m}.pem"
            root.write_text(members[m].tlsca_cert)
            peers += ["--peerAddresses", members[m].endpoints["peer"], "--tlsRootCertFiles", str(root)]
        self._peer_cli(
            "lifecycle",
            "chaincode",
            "commit",
            *self._orderer_args(),
            *d.args(),
            *peers,
            step="commit chaincode definition",
            timeout=180,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # its own peer has the commit's block
            got = self.committed(d)
            if got is not None:
                return got
            time.sleep(0.5)
        raise NetworkError(f"the commit of {d.name} is not on {self.org.msp_id}'s peer after 60 s")
