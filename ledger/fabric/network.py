"""A native Hyperledger Fabric 3.1 network on 127.0.0.1: one etcdraft orderer, one peer per
organisation, TLS on, Docker off, the chaincode served by our Python CCaaS server
(docs/fabric.md "Topology"). Driven by ``fabric-network/network {up|down|deploy|status|logs}``.

Layout of the network directory (default ``~/.cache/consortia/fabric-net``, outside the repo)::

    crypto/                  identities from ledger.identity.Consortium.generate (cryptogen layout)
    config/                  core.yaml, orderer.yaml (Fabric's sampleconfig) + configtx.yaml
    <channel>.block          channel genesis block (configtxgen)
    data/<node>/             ledgers
    logs/<node>.log          node logs
    chaincode/               the CCaaS package
    state.json               process ids, ports, package id
    connection.json          profile for ledger.fabric.gateway.FabricLedger.from_profile

Binaries come from ``$FABRIC_HOME`` (default ``$CONSORTIA_CACHE/fabric``, i.e. ``~/.cache/consortia/fabric``), installed by
``fabric-network/install.sh``. Everything is overridable through :class:`NetworkConfig`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.identity import Consortium
from wire.env import environment

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    batch_timeout: str = "500ms"
    max_message_count: int = 500
    endorsement_policy: str = ""  # "" = channel default (MAJORITY Endorsement)
    chaincode_tls: bool = True  # peer <-> chaincode service: mutual TLS
    log_spec: str = "warning:gossip=error"

    def __post_init__(self) -> None:
        self.net_dir = Path(self.net_dir)
        self.fabric_home = Path(self.fabric_home)
        if not self.organisations:
            raise ValueError("at least one organisation is required")
        if len(set(self.organisations)) != len(self.organisations):
            raise ValueError("organisation names must be unique")
        if not (1024 <= self.port_base <= 60000):
            raise ValueError("port_base must be between 1024 and 60000")

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

    @property
    def chaincode_port(self) -> int:
        return self.port_base + 2949  # 9999: one server serves every peer


def _reproducible_tgz(out: Path, folder: Path, members: list[str]) -> None:
    """A .tgz whose bytes depend only on the members' names and contents: the gzip header carries
    no time or file name (``tarfile``'s "w:gz" writes the current time there, so a package made a
    second later had another package id) and every member has mtime 0, owner 0:0."""
    import gzip

    with (
        open(out, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tf,
    ):
        for member in members:
            info = tf.gettarinfo(str(folder / member), member)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(folder / member, "rb") as f:
                tf.addfile(info, f)


class FabricNetwork:
    def __init__(self, config: NetworkConfig | None = None):
        self.cfg = config or NetworkConfig()
        self.net = self.cfg.net_dir
        self.bin = self.cfg.fabric_home / "bin"
        self._children: dict[int, subprocess.Popen] = {}  # nodes this object started, by pid

    # ------------------------------------------------------------------ paths
    @property
    def state_file(self) -> Path:
        return self.net / "state.json"

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

    def consortium(self) -> Consortium:
        return Consortium(self.crypto)

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

    # ------------------------------------------------------------------ state
    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (FileNotFoundError, ValueError):
            return {"pids": {}}

    def _save_state(self, st: dict) -> None:
        self.state_file.write_text(json.dumps(st, indent=2, sort_keys=True))

    def _marker(self, name: str) -> bytes:
        """Environment entry every node we start carries: proves a recorded pid is still ours."""
        return f"CONSORTIA_FABRIC_NODE={self.net.resolve()}:{name}".encode()

    def _alive(self, pid: int, name: str) -> bool:
        """True iff ``pid`` runs, is not a zombie, and is the node ``name`` this network started
        (a recycled pid of another process is never taken for ours, so never signalled)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
            with open(f"/proc/{pid}/environ", "rb") as f:
                return self._marker(name) in f.read().split(b"\0")
        except (OSError, IndexError):
            return False

    # ------------------------------------------------------------------ processes
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CORE_", "ORDERER_"))}
        env.update(extra)
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> int:
        (self.net / "logs").mkdir(parents=True, exist_ok=True)
        log = open(self.net / "logs" / f"{name}.log", "ab")
        env = {
            **env,
            self._marker(name).decode().split("=", 1)[0]: self._marker(name).decode().split("=", 1)[1],
        }
        proc = subprocess.Popen(
            argv,
            env=self._env(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO_ROOT),
        )
        log.close()
        self._children[proc.pid] = proc
        st = self._state()
        st["pids"][name] = proc.pid
        self._save_state(st)
        return proc.pid

    def _run(self, argv: list[str], env: dict[str, str], step: str, timeout: float = 120) -> str:
        try:
            r = subprocess.run(
                argv, env=self._env(env), capture_output=True, text=True, timeout=timeout, cwd=str(self.net)
            )
        except subprocess.TimeoutExpired:
            raise NetworkError(f"{step} did not finish within {timeout} s") from None
        if r.returncode != 0:
            raise NetworkError(
                f"{step} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}"
            )
        return r.stdout

    def _wait_health(self, name: str, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        pid = self._state()["pids"].get(name)
        last = ""
        while time.monotonic() < deadline:
            child = self._children.get(pid) if pid else None
            # a node we just started: its own exit status is authoritative; otherwise the marker check
            exited = (
                child.poll() is not None if child is not None else bool(pid) and not self._alive(pid, name)
            )
            if exited:
                raise NetworkError(f"{name} exited during start; see {self.net / 'logs' / (name + '.log')}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.3)
        raise NetworkError(f"{name} not healthy after {timeout} s ({last}); see logs/{name}.log")

    def _wait_listening(self, name: str, port: int, timeout: float = 60) -> None:
        """Wait until ``name`` accepts TCP connections on ``port`` (it must not exit meanwhile)."""
        deadline = time.monotonic() + timeout
        pid = self._state()["pids"].get(name)
        while time.monotonic() < deadline:
            child = self._children.get(pid) if pid else None
            if child is not None and child.poll() is not None:
                raise NetworkError(f"{name} exited during start; see {self.net / 'logs' / (name + '.log')}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise NetworkError(
            f"{name} does not listen on 127.0.0.1:{port} after {timeout} s; see logs/{name}.log"
        )

    def stop_node(self, name: str, timeout: float = 20) -> None:
        """Stop one node (e.g. ``peer0.org2``) by its recorded process id."""
        st = self._state()
        pid = st["pids"].pop(name, None)
        self._save_state(st)
        if pid is None or not self._alive(pid, name):
            return
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._alive(pid, name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._alive(pid, name):
            os.killpg(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

    # ------------------------------------------------------------------ binaries
    def ensure_binaries(self) -> None:
        # install.sh re-checks what is installed (files, checksums, `peer version`) on every run,
        # in well under a second, and installs or repairs only when that check fails.
        script = REPO_ROOT / "fabric-network" / "install.sh"
        r = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, "FABRIC_HOME": str(self.cfg.fabric_home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        missing = [b for b in BINARIES if not (self.bin / b).is_file()]
        if r.returncode != 0 or missing:
            why = (r.stderr.strip().splitlines() or [""])[-1]
            raise NetworkError(
                f"Fabric binaries missing in {self.bin}: {missing} (install.sh exit {r.returncode}: {why})"
            )
        for f in ("core.yaml", "orderer.yaml"):
            if not (self.cfg.fabric_home / "config" / f).is_file():
                raise NetworkError(
                    f"{self.cfg.fabric_home / 'config' / f} missing: run fabric-network/install.sh"
                )

    # ------------------------------------------------------------------ configuration
    def generate(self) -> None:
        """Identities (kept across restarts), node config and the channel genesis block."""
        self.net.mkdir(parents=True, exist_ok=True)
        if not (self.crypto / Consortium.MANIFEST).is_file():
            Consortium.generate(self.crypto, self.cfg.organisations)
        cons = self.consortium()
        if tuple(o.name for o in cons.organisations) != tuple(self.cfg.organisations):
            raise NetworkError(
                f"{self.crypto} holds organisations {[o.name for o in cons.organisations]}, "
                f"not {list(self.cfg.organisations)}: run 'network down --purge' first"
            )
        conf = self.net / "config"
        conf.mkdir(exist_ok=True)
        for f in ("core.yaml", "orderer.yaml"):
            shutil.copy(self.cfg.fabric_home / "config" / f, conf / f)
        (conf / "configtx.yaml").write_text(self.configtx_yaml())
        if self.cfg.chaincode_tls and not (self.chaincode_tls_dir / "server.crt").is_file():
            self._chaincode_tls_material()
        block = self.net / f"{self.cfg.channel}.block"
        if not block.exists():
            self._run(
                [
                    str(self.bin / "configtxgen"),
                    "-profile",
                    "ConsortiaChannel",
                    "-outputBlock",
                    str(block),
                    "-channelID",
                    self.cfg.channel,
                ],
                {"FABRIC_CFG_PATH": str(conf)},
                "configtxgen",
            )

    def configtx_yaml(self) -> str:
        """configtx.yaml (docs/fabric.md "Topology"): Channel V3_0, etcdraft, MAJORITY endorsement."""
        c = self.cfg
        od = self.orderer_dir
        omsp = self.crypto / "ordererOrganizations" / "example.com" / "msp"
        orgs = []
        for i, name in enumerate(c.organisations):
            msp = self._org_paths(i)["base"] / "msp"
            m = f"{name}MSP"
            orgs.append(f"""  - &{name}
    Name: {m}
    ID: {m}
    MSPDir: {msp}
    Policies:
      Readers: {{Type: Signature, Rule: "OR('{m}.admin', '{m}.peer', '{m}.client')"}}
      Writers: {{Type: Signature, Rule: "OR('{m}.admin', '{m}.client')"}}
      Admins: {{Type: Signature, Rule: "OR('{m}.admin')"}}
      Endorsement: {{Type: Signature, Rule: "OR('{m}.peer')"}}
    AnchorPeers: [{{Host: 127.0.0.1, Port: {c.peer_port(i)}}}]
""")
        refs = ", ".join(f"*{n}" for n in c.organisations)
        return f"""# generated by ledger.fabric.network -- do not edit
Organizations:
  - &OrdererOrg
    Name: OrdererOrg
    ID: OrdererMSP
    MSPDir: {omsp}
    Policies:
      Readers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Writers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Admins: {{Type: Signature, Rule: "OR('OrdererMSP.admin')"}}
    OrdererEndpoints: ["127.0.0.1:{c.orderer_port}"]
{"".join(orgs)}
Capabilities:
  Channel: &ChannelCapabilities {{V3_0: true}}
  Orderer: &OrdererCapabilities {{V2_0: true}}
  Application: &ApplicationCapabilities {{V2_5: true}}
Application: &ApplicationDefaults
  Organizations:
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    LifecycleEndorsement: {{Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}}
    Endorsement: {{Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}}
  Capabilities: *ApplicationCapabilities
Orderer: &OrdererDefaults
  OrdererType: etcdraft
  BatchTimeout: {c.batch_timeout}
  BatchSize: {{MaxMessageCount: {c.max_message_count}, AbsoluteMaxBytes: 10 MB, PreferredMaxBytes: 2 MB}}
  EtcdRaft:
    Consenters:
      - Host: 127.0.0.1
        Port: {c.orderer_port}
        ClientTLSCert: {od / "tls" / "server.crt"}
        ServerTLSCert: {od / "tls" / "server.crt"}
  Organizations:
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    BlockValidation: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
Channel: &ChannelDefaults
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
  Capabilities: *ChannelCapabilities
Profiles:
  ConsortiaChannel:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      Organizations: [*OrdererOrg]
      Capabilities: *OrdererCapabilities
    Application:
      <<: *ApplicationDefaults
      Organizations: [{refs}]
      Capabilities: *ApplicationCapabilities
"""

    # ------------------------------------------------------------------ nodes
    def orderer_env(self) -> dict[str, str]:
        c, od, data = self.cfg, self.orderer_dir, self.net / "data" / "orderer"
        tls = od / "tls"
        return {
            "FABRIC_CFG_PATH": str(self.net / "config"),
            "FABRIC_LOGGING_SPEC": c.log_spec,
            "ORDERER_GENERAL_LISTENADDRESS": "127.0.0.1",
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
            "ORDERER_OPERATIONS_LISTENADDRESS": f"127.0.0.1:{c.orderer_ops_port}",
            "ORDERER_ADMIN_LISTENADDRESS": f"127.0.0.1:{c.orderer_admin_port}",
            "ORDERER_ADMIN_TLS_ENABLED": "true",
            "ORDERER_ADMIN_TLS_CERTIFICATE": str(tls / "server.crt"),
            "ORDERER_ADMIN_TLS_PRIVATEKEY": str(tls / "server.key"),
            "ORDERER_ADMIN_TLS_ROOTCAS": f"[{tls / 'ca.crt'}]",
            "ORDERER_ADMIN_TLS_CLIENTAUTHREQUIRED": "true",
            "ORDERER_ADMIN_TLS_CLIENTROOTCAS": f"[{tls / 'ca.crt'}]",
            "ORDERER_METRICS_PROVIDER": "disabled",
        }

    def peer_name(self, i: int) -> str:
        return f"peer0.{self.cfg.organisations[i].lower()}"

    def peer_env(self, i: int) -> dict[str, str]:
        c, p = self.cfg, self._org_paths(i)
        port, peer = c.peer_port(i), p["peer"]
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
            "CORE_PEER_LISTENADDRESS": f"127.0.0.1:{port}",
            "CORE_PEER_ADDRESS": f"127.0.0.1:{port}",
            "CORE_PEER_CHAINCODELISTENADDRESS": f"127.0.0.1:{port + 1}",
            "CORE_PEER_CHAINCODEADDRESS": f"127.0.0.1:{port + 1}",
            "CORE_PEER_GOSSIP_BOOTSTRAP": f"127.0.0.1:{port}",
            "CORE_PEER_GOSSIP_EXTERNALENDPOINT": f"127.0.0.1:{port}",
            "CORE_OPERATIONS_LISTENADDRESS": f"127.0.0.1:{c.peer_ops_port(i)}",
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
            "CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG": json.dumps({"ccport": str(c.chaincode_port)}),
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
            "CORE_PEER_ADDRESS": f"127.0.0.1:{c.peer_port(i)}",
            "CORE_PEER_TLS_ENABLED": "true",
            "CORE_PEER_TLS_ROOTCERT_FILE": str(p["tls_ca"]),
            "CORE_PEER_MSPCONFIGPATH": str(p["admin"]),
        }

    def start_orderer(self) -> None:
        self._spawn("orderer", [str(self.bin / "orderer")], self.orderer_env())
        self._wait_health("orderer", self.cfg.orderer_ops_port)
        # /healthz answers before the admin endpoint listens; on a loaded machine osnadmin then met
        # "connection refused" (seen in the bare-machine check at load 10 on 2 cores)
        self._wait_listening("orderer", self.cfg.orderer_admin_port)

    def start_peer(self, i: int) -> None:
        name = self.peer_name(i)
        self._spawn(name, [str(self.bin / "peer"), "node", "start"], self.peer_env(i))
        self._wait_health(name, self.cfg.peer_ops_port(i))
        self._wait_listening(name, self.cfg.peer_port(i))

    @property
    def chaincode_tls_dir(self) -> Path:
        return self.net / "chaincode-tls"

    def _chaincode_tls_material(self) -> None:
        """Server and client TLS certificates for the chaincode service, issued by Org1's TLS CA
        (SANs 127.0.0.1, localhost): the service presents ``server.crt``, the peers present
        ``client.crt`` (from ``connection.json``), each side checks the other against ``ca.crt``."""
        import datetime as dt
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        org = self._org_paths(0)
        tlsca_dir = org["base"] / "tlsca"
        ca_cert = x509.load_pem_x509_certificate(next(tlsca_dir.glob("*-cert.pem")).read_bytes())
        ca_key = serialization.load_pem_private_key((tlsca_dir / "priv_sk").read_bytes(), None)
        out = self.chaincode_tls_dir
        out.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        for name in ("server", "client"):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = (
                x509.CertificateBuilder()
                .subject_name(
                    x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"ccaas-{name}.{org['domain']}")])
                )
                .issuer_name(ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now)
                .not_valid_after(now + dt.timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(
                    x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                    critical=False,
                )
                .add_extension(
                    x509.SubjectAlternativeName(
                        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                    ),
                    critical=False,
                )
                .sign(ca_key, hashes.SHA256())
            )
            (out / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            (out / f"{name}.key").write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            (out / f"{name}.key").chmod(0o600)
        (out / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def start_chaincode_server(self) -> None:
        st = self._state()
        pkg = st.get("package_id")
        if not pkg:
            raise NetworkError("no chaincode package id yet: run 'network deploy'")
        argv = [
            sys.executable,
            "-m",
            "ledger.fabric.chaincode_server",
            "--address",
            f"127.0.0.1:{self.cfg.chaincode_port}",
            "--chaincode-id",
            pkg,
            "--dispatch",
            self.cfg.dispatch,
        ]
        if st.get("chaincode_tls"):  # as packaged: the peers' connection.json decides
            d = self.chaincode_tls_dir
            argv += [
                "--tls-cert",
                str(d / "server.crt"),
                "--tls-key",
                str(d / "server.key"),
                "--client-ca",
                str(d / "ca.crt"),
            ]
        self._spawn("chaincode", argv, {"PYTHONPATH": str(REPO_ROOT), "CHAINCODE_LOG_LEVEL": "INFO"})
        deadline = time.monotonic() + 30
        import socket

        while time.monotonic() < deadline:
            if not self._alive(self._state()["pids"]["chaincode"], "chaincode"):
                raise NetworkError(f"chaincode server exited; see {self.net / 'logs' / 'chaincode.log'}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.cfg.chaincode_port)) == 0:
                    return
            time.sleep(0.2)
        raise NetworkError("chaincode server did not listen within 30 s")

    def _osnadmin(self, *args: str) -> str:
        tls = self.orderer_dir / "tls"
        return self._run(
            [
                str(self.bin / "osnadmin"),
                "channel",
                *args,
                "-o",
                f"127.0.0.1:{self.cfg.orderer_admin_port}",
                "--ca-file",
                str(tls / "ca.crt"),
                "--client-cert",
                str(tls / "server.crt"),
                "--client-key",
                str(tls / "server.key"),
            ],
            {},
            f"osnadmin channel {args[0]}",
        )

    def _peer_cli(self, i: int, *args: str, step: str, timeout: float = 120) -> str:
        return self._run([str(self.bin / "peer"), *args], self.admin_env(i), step, timeout)

    # ------------------------------------------------------------------ commands
    def running(self) -> dict[str, bool]:
        pids = self._state()["pids"]
        names = ["orderer"] + [self.peer_name(i) for i in range(len(self.cfg.organisations))] + ["chaincode"]
        return {n: bool(pids.get(n)) and self._alive(pids[n], n) for n in names}

    def is_up(self) -> bool:
        return (
            all(self.running().values())
            and self.profile_file.is_file()
            and bool(self._state().get("committed"))
        )

    def up(self) -> None:
        """Start (or resume) every node, create and join the channel, deploy the chaincode."""
        self.ensure_binaries()
        self.generate()
        run = self.running()
        if not run["orderer"]:
            self.start_orderer()
        st = self._state()
        if not st.get("channel_created"):
            listing = self._osnadmin("list")
            if f'"{self.cfg.channel}"' not in listing:
                self._osnadmin(
                    "join",
                    "--channelID",
                    self.cfg.channel,
                    "--config-block",
                    str(self.net / f"{self.cfg.channel}.block"),
                )
            st = self._state()
            st["channel_created"] = True
            self._save_state(st)
        for i in range(len(self.cfg.organisations)):
            if not run[self.peer_name(i)]:
                self.start_peer(i)
        st = self._state()
        joined = set(st.get("joined", []))
        for i in range(len(self.cfg.organisations)):
            name = self.peer_name(i)
            if name in joined:
                continue
            chans = self._peer_cli(i, "channel", "list", step=f"{name} channel list")
            if self.cfg.channel not in chans.split():
                self._peer_cli(
                    i,
                    "channel",
                    "join",
                    "-b",
                    str(self.net / f"{self.cfg.channel}.block"),
                    step=f"{name} channel join",
                )
            joined.add(name)
            st = self._state()
            st["joined"] = sorted(joined)
            self._save_state(st)
        self.deploy()
        self._write_profile()
        self.wait_ready()

    def wait_ready(self, timeout: float = 90) -> float:
        """Wait until every organisation's Gateway can collect a policy-satisfying set of
        endorsements (gossip has spread membership, discovery sees the peers); return seconds.

        Probes Endorse with the chaincode service's health function (no reads, no writes): a
        result needs endorsements from a majority; "no combination of peers" means discovery is
        not ready yet."""
        from ledger.errors import LedgerError
        from ledger.fabric.chaincode_server import HEALTH_FUNCTION
        from ledger.fabric.gateway import FabricLedger

        t0 = time.monotonic()
        cons = self.consortium()
        pending = list(self.cfg.organisations)
        last = ""
        with FabricLedger.from_profile(self.profile_file) as led:
            while pending and time.monotonic() - t0 < timeout:
                org = pending[0]
                try:
                    led.endorse(cons.identity(org), HEALTH_FUNCTION)
                    pending.pop(0)
                except LedgerError as exc:
                    last = str(exc)
                    time.sleep(0.5)
            # the orderer: a restarted single-node raft needs an election before it orders
            ident = cons.identity(self.cfg.organisations[0])
            ordered = False
            while not pending and not ordered and time.monotonic() - t0 < timeout:
                try:
                    led.submit(ident, HEALTH_FUNCTION, timeout=30)
                    ordered = True
                except LedgerError as exc:
                    last = str(exc)
                    time.sleep(0.5)
        if pending or not ordered:
            raise NetworkError(f"network not ready after {timeout} s (gateways pending: {pending}): {last}")
        return time.monotonic() - t0

    def package(self) -> Path:
        """The CCaaS package: the address is templated per peer by the ccaas builder."""
        c = self.cfg
        d = self.net / "chaincode"
        d.mkdir(parents=True, exist_ok=True)
        label = f"{c.chaincode}_{c.chaincode_version}"
        conn_obj: dict[str, object] = {
            "address": "127.0.0.1:{{.ccport}}",
            "dial_timeout": "10s",
            "tls_required": False,
        }
        if c.chaincode_tls:
            t = self.chaincode_tls_dir
            conn_obj.update(
                tls_required=True,
                client_auth_required=True,
                client_cert=(t / "client.crt").read_text(),
                client_key=(t / "client.key").read_text(),
                root_cert=(t / "ca.crt").read_text(),
            )
        conn = json.dumps(conn_obj)
        meta = json.dumps({"type": "ccaas", "label": label})
        code = d / "code.tar.gz"
        pkg = d / f"{label}.tgz"
        (d / "connection.json").write_text(conn)
        (d / "metadata.json").write_text(meta)
        _reproducible_tgz(code, d, ["connection.json"])
        _reproducible_tgz(pkg, d, ["metadata.json", "code.tar.gz"])
        return pkg

    def deploy(self) -> None:
        """Package, install, approve (every organisation), commit; start the chaincode server."""
        c = self.cfg
        st = self._state()
        if not st.get("package_id"):
            pkg = self.package()
            pkg_id = self._peer_cli(
                0, "lifecycle", "chaincode", "calculatepackageid", str(pkg), step="calculatepackageid"
            ).strip()
            for i in range(len(c.organisations)):
                installed = self._peer_cli(
                    i, "lifecycle", "chaincode", "queryinstalled", step="queryinstalled"
                )
                if pkg_id not in installed:
                    self._peer_cli(
                        i,
                        "lifecycle",
                        "chaincode",
                        "install",
                        str(pkg),
                        step=f"install on {self.peer_name(i)}",
                        timeout=300,
                    )
            st = self._state()
            st["package_id"] = pkg_id
            st["chaincode_tls"] = c.chaincode_tls
            self._save_state(st)
        if self.running()["chaincode"] and st.get("dispatch") != self.cfg.dispatch:
            self.stop_node("chaincode")  # serve the requested contracts
        if not self.running()["chaincode"]:
            self.start_chaincode_server()
            st = self._state()
            st["dispatch"] = self.cfg.dispatch
            self._save_state(st)
        st = self._state()
        if st.get("committed"):
            return
        seq = "1"
        orderer = ["-o", f"127.0.0.1:{c.orderer_port}", "--tls", "--cafile", str(self.orderer_ca)]
        policy = ["--signature-policy", c.endorsement_policy] if c.endorsement_policy else []
        for i in range(len(c.organisations)):
            self._peer_cli(
                i,
                "lifecycle",
                "chaincode",
                "approveformyorg",
                *orderer,
                "--channelID",
                c.channel,
                "--name",
                c.chaincode,
                "--version",
                c.chaincode_version,
                "--package-id",
                st["package_id"],
                "--sequence",
                seq,
                *policy,
                step=f"approveformyorg {c.organisations[i]}",
            )
        peers: list[str] = []
        for i in range(len(c.organisations)):
            peers += [
                "--peerAddresses",
                f"127.0.0.1:{c.peer_port(i)}",
                "--tlsRootCertFiles",
                str(self._org_paths(i)["tls_ca"]),
            ]
        self._peer_cli(
            0,
            "lifecycle",
            "chaincode",
            "commit",
            *orderer,
            "--channelID",
            c.channel,
            "--name",
            c.chaincode,
            "--version",
            c.chaincode_version,
            "--sequence",
            seq,
            *policy,
            *peers,
            step="commit chaincode definition",
        )
        st = self._state()
        st["committed"] = True
        self._save_state(st)

    def _write_profile(self) -> None:
        c = self.cfg
        prof = {
            "channel": c.channel,
            "chaincode": c.chaincode,
            "crypto": str(self.crypto),
            "orderer": {"address": f"127.0.0.1:{c.orderer_port}", "tls_ca_file": str(self.orderer_ca)},
            "peers": [
                {
                    "msp_id": f"{o}MSP",
                    "address": f"127.0.0.1:{c.peer_port(i)}",
                    "tls_ca_file": str(self._org_paths(i)["tls_ca"]),
                }
                for i, o in enumerate(c.organisations)
            ],
        }
        self.profile_file.write_text(json.dumps(prof, indent=2))

    def wait_block_height(self, i: int, height: int, timeout: float = 60) -> int:
        """Wait until peer ``i`` has at least ``height`` blocks (its ledger caught up)."""
        from ledger.fabric.gateway import FabricLedger, PeerEndpoint

        org = self.cfg.organisations[i]
        peer = PeerEndpoint(
            f"{org}MSP", f"127.0.0.1:{self.cfg.peer_port(i)}", self._org_paths(i)["tls_ca"].read_bytes()
        )
        ident = self.consortium().identity(org)
        deadline = time.monotonic() + timeout
        with FabricLedger([peer], self.cfg.channel, self.cfg.chaincode) as led:
            h = 0
            while time.monotonic() < deadline:
                try:
                    h = led.block_height(ident)
                    if h >= height:
                        return h
                except Exception:
                    pass
                time.sleep(0.3)
        raise NetworkError(f"{self.peer_name(i)} at height {h} < {height} after {timeout} s")

    def restart_node(self, name: str) -> None:
        """Start a stopped node again (``orderer``, ``peer0.orgN`` or ``chaincode``) and wait
        until the network can endorse and order again."""
        if name == "orderer":
            self.start_orderer()
        elif name == "chaincode":
            self.start_chaincode_server()
        else:
            names = [self.peer_name(i) for i in range(len(self.cfg.organisations))]
            if name not in names:
                raise NetworkError(f"unknown node {name!r}; nodes: orderer, {', '.join(names)}, chaincode")
            self.start_peer(names.index(name))
        self.wait_ready()

    def down(self, purge: bool = False) -> None:
        """Stop every node; with ``purge`` also delete ledgers, identities and state."""
        for name in list(self._state()["pids"]):
            self.stop_node(name)
        if purge and self.net.exists():
            shutil.rmtree(self.net)

    def status(self) -> dict:
        st = self._state()
        return {
            "net_dir": str(self.net),
            "running": self.running(),
            "channel": self.cfg.channel,
            "chaincode": self.cfg.chaincode,
            "package_id": st.get("package_id"),
            "committed": bool(st.get("committed")),
            "chaincode_tls": bool(st.get("chaincode_tls")),
        }

    def logs(self, name: str, lines: int = 50) -> str:
        f = self.net / "logs" / f"{name}.log"
        if not f.is_file():
            raise NetworkError(f"no log for {name!r}; nodes: {', '.join(self.running())}")
        return "\n".join(f.read_text(errors="replace").splitlines()[-lines:])


def connect(config: NetworkConfig | None = None, *, start: bool = True):
    """The Fabric host for applications (e.g. ``consortia demo --backend fabric``): bring the
    network up if needed (``start``) and return ``(FabricLedger, Consortium, FabricNetwork)``.
    The ledger uses the network's identities; the caller closes the ledger (the network keeps
    running until ``network down``)."""
    from ledger.fabric.gateway import FabricLedger

    net = FabricNetwork(config)
    if not net.is_up():
        if not start:
            raise NetworkError(f"no running Fabric network in {net.net}: run 'fabric-network/network up'")
        net.up()
    return FabricLedger.from_profile(net.profile_file), net.consortium(), net


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="fabric-network/network", description="Native Fabric network for Consortia"
    )
    p.add_argument("command", choices=["up", "down", "deploy", "status", "logs"])
    p.add_argument("node", nargs="?", default="", help="for logs: orderer, peer0.org1, ..., chaincode")
    p.add_argument("--orgs", default=environment().fabric_orgs)
    p.add_argument("--dispatch", default=environment().chaincode_dispatch)
    p.add_argument("--net-dir", default=str(DEFAULT_NET))
    p.add_argument("--purge", action="store_true", help="down: also delete ledgers and identities")
    p.add_argument("-n", "--lines", type=int, default=50)
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (status and deploy always are)"
    )
    a = p.parse_args(argv)
    net = FabricNetwork(
        NetworkConfig(
            organisations=tuple(o.strip() for o in a.orgs.split(",") if o.strip()),
            dispatch=a.dispatch,
            net_dir=Path(a.net_dir),
        )
    )
    try:
        if a.command == "up":
            t0 = time.monotonic()
            net.up()
            print(
                json.dumps(
                    {
                        "status": "up",
                        "seconds": round(time.monotonic() - t0, 1),
                        "profile": str(net.profile_file),
                    }
                )
                if a.json
                else f"network up in {time.monotonic() - t0:.1f} s; profile {net.profile_file}"
            )
        elif a.command == "down":
            net.down(purge=a.purge)
            print(
                json.dumps({"status": "down", "purged": a.purge})
                if a.json
                else "network down" + (" (purged)" if a.purge else "")
            )
        elif a.command == "deploy":
            net.deploy()
            print(json.dumps(net.status(), indent=2))
        elif a.command == "status":
            print(json.dumps(net.status(), indent=2))
        elif a.command == "logs":
            logs = net.logs(a.node or "orderer", a.lines)
            print(json.dumps({"node": a.node or "orderer", "lines": logs.splitlines()}) if a.json else logs)
    except NetworkError as exc:
        if a.json:
            print(json.dumps({"ok": False, "code": "NetworkError", "message": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
