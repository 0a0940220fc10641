"""A consortium deployed as separate hosts on one machine, as tests/deploy and benchmarks.consortium
run it (README "Deploying a consortium"): each organisation's processes run in a bubblewrap view of
its own folder only (network.host_view) and listen on its own loopback address.

:class:`Deployment` plays the founder (``fabric-network/network up --hosts … --isolate``, the image
registry, the folders handed to each organisation) and then each organisation on its own host
(``consortia join``); :class:`Host` runs an organisation's commands and services in its view."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from home.join import ORDERER_PUBLIC, PUBLIC_FILES, copy_public
from network import REPO_ROOT, FabricNetwork, NetworkConfig
from network.host_view import view_command
from network.placement import placement_spec
from tests.support import fabric as support

ROOT = REPO_ROOT
SCRIPT = REPO_ROOT / "fabric-network" / "network"
REGISTRY_SCRIPT = REPO_ROOT / "scripts" / "install-registry"


class Host:
    """One organisation's host: ``root`` holds everything it has (home, hand-off, logs); ``enclosure``
    (default: ``root``'s folder) holds every host's root and what the founder keeps, hidden in the view
    even where it lies inside a path the view shows (e.g. a folder of the checkout)."""

    def __init__(self, name: str, n: int, root: Path, enclosure: Path | None = None):
        self.name, self.msp, self.address = name, f"{name}MSP", f"127.0.{n}.1"
        self.root = root
        self.enclosure = enclosure or root.parent
        self.home = root / "home"
        self.handoff = root / "handoff"
        self.logs = root / "logs"
        self.procs: dict[str, subprocess.Popen] = {}
        self.artifact_port, self.gateway_url, self.token = 0, "", ""  # set by join, start_gateway, the caller
        for d in (self.home, self.handoff, self.logs):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def env(self) -> dict[str, str]:
        return {
            "PYTHONPATH": str(ROOT),
            "CONSORTIA_HOME": str(self.home),
            "CONSORTIA_CACHE": str(self.root / "cache"),  # bundles pulled or built: its own
        }

    def argv(self, argv: list[str], host_proc: bool = False) -> list[str]:
        (self.root / "cache").mkdir(exist_ok=True)
        return view_command(
            argv, [self.root], read_only=self.shared, hide=[self.enclosure], host_proc=host_proc, env=self.env
        )

    @property
    def shared(self) -> list[Path]:
        """What the machine shares with the view read-only beyond the system and the project's code."""
        return []

    def consortia(
        self, *args: str, code: int = 0, timeout: float = 600, host_proc: bool = False
    ) -> dict | list:
        """``consortia ARGS --json`` run on this host; its parsed JSON answer. ``host_proc``: a command
        that runs sandboxes of its own (``audit replay``), as the node agent does."""
        proc = subprocess.run(
            self.argv([sys.executable, "-m", "api.cli", *args, "--json"], host_proc=host_proc),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == code, (self.name, args, proc.stdout[-2000:], proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}

    def create_process(
        self,
        pid: str,
        image_id: str,
        members: tuple[str, ...],
        topology: dict,
        rounds: int,
        dataset: str,
        params: dict,
        member_hosts: Sequence[Host] = (),
        validation_fraction: float = 0.0,
        privacy_budget: dict | None = None,
    ) -> dict:
        """``consortia process create …`` on this host (``validation_fraction`` 0 by default: no member
        holds out a validation slice, so the process compares with a simulation of every row); then each member's host (``member_hosts``, each
        with its own home and admin) approves the image's digest and accepts the process in one command
        (``process accept --approve-image``; docs/consent.md),
        the hosts at the same time as separate hosts do, and this host starts it: the started process's
        JSON answer. ``privacy_budget``: ``{mechanism, epsilon[, delta]}`` (``--epsilon`` …)."""
        budget: list[str] = []
        if privacy_budget is not None:
            budget = ["--epsilon", str(privacy_budget["epsilon"]), "--mechanism", privacy_budget["mechanism"]]
            if privacy_budget.get("delta") is not None:
                budget += ["--delta", str(privacy_budget["delta"])]
        self.consortia(
            "process",
            "create",
            pid,
            "--image",
            image_id,
            "--consortium",
            ",".join(members),
            "--topology",
            topology["kind"],
            "--seed",
            str(topology["seed"]),
            "--rounds",
            str(rounds),
            "--dataset",
            dataset,
            "--hyperparameters",
            json.dumps(params),
            "--validation-fraction",
            str(validation_fraction),
            *budget,
        )
        terms = self.consortia("process", "terms", pid)
        assert isinstance(terms, dict)

        def consent(host: Host) -> None:  # the image's approval and the acceptance: one command each
            answer = host.consortia(
                "process", "accept", pid, "--terms", terms["terms_digest"], "--approve-image"
            )
            assert isinstance(answer, dict) and answer["decision"] == "accepted", (host.name, answer)

        consenting = {h.name: h for h in (self, *member_hosts) if h.msp in members}.values()
        with ThreadPoolExecutor(len(consenting)) as pool:
            list(pool.map(consent, consenting))  # an assertion of any host is raised here
        answer = self.consortia("process", "start", pid)
        assert isinstance(answer, dict)
        return answer

    def python(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A Python snippet run on this host (its view), e.g. a client call of its own."""
        return subprocess.run(
            self.argv([sys.executable, "-c", code]), capture_output=True, text=True, timeout=timeout
        )

    def start(self, name: str, argv: list[str], host_proc: bool = False) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            self.argv(argv, host_proc=host_proc),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        return self.procs[name]

    def start_artifact_service(self) -> None:
        """Its artifact service, on the address and port of its home's ``[node]`` table (``join --listen``)."""
        argv = [sys.executable, "-m", "api.cli", "artifacts", "serve", "--home", str(self.home)]
        self.start("artifacts", argv)

    def start_gateway(self, port: int) -> None:
        """The organisation's gateway (REST API and explorer) on its own address."""
        argv = [sys.executable, "-m", "api.cli", "serve", "--home", str(self.home), "--org", self.name]
        self.start("gateway", [*argv, "--host", self.address, "--port", str(port)])
        self.gateway_url = f"http://{self.address}:{port}"

    def start_agent(self, *extra: str) -> None:
        """The node agent following the ledger (its tasks in sandboxes of its own: host /proc);
        ``extra``: more ``node run`` options (e.g. ``--prewarm DIGEST=DATASET``)."""
        argv = [sys.executable, "-m", "api.cli", "node", "run", "--home", str(self.home)]
        self.start("agent", [*argv, "--runtime", "sandbox", "--warm", *extra], host_proc=True)

    def save_dataset(self, dataset, name: str) -> None:
        """The organisation puts ``dataset`` into its own data root as ``name`` (as ``data import`` does)."""
        from algorithms.task_runtime import save_dataset

        folder = self.home / "data" / self.msp / name
        folder.mkdir(parents=True, exist_ok=True)
        save_dataset(folder / "dataset.npz", dataset)

    def ledger_client(self):
        """A client over this organisation's own connection profile and identity (close its ledger)."""
        from home.ledger import open_ledger
        from home.settings import load
        from ledger.client import ConsortiaClient
        from ledger.identity import Consortium

        settings = load(self.home)
        cons = Consortium(settings.crypto)
        return ConsortiaClient(open_ledger(settings, cons), cons.identity(self.msp))

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop_all(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def log(self, name: str) -> str:
        f = self.logs / f"{name}.log"
        return f.read_text(errors="replace")[-4000:] if f.is_file() else ""


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """The (address, port) pairs the processes ``pids`` and their descendants listen on, from
    /proc/net/tcp and tcp6 (an IPv4-mapped address, as gRPC's Python server binds, as IPv4)."""
    inodes: set[str] = set()
    todo, seen = list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A = LISTEN
                continue
            addr, port = f[1].split(":")
            raw = bytes.fromhex(addr)
            if len(raw) == 4:
                host = socket.inet_ntoa(raw[::-1])
            else:  # four little-endian 32-bit words
                ip6 = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
                host = str(ip6.ipv4_mapped or ip6)
            out.add((host, int(port, 16)))
    return out


def wait_for(predicate, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _network(*args: str, port_base: int, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONSORTIA_FABRIC_PORT_BASE": str(port_base)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


class DeploymentError(RuntimeError):
    """The network or the registry could not be started (the message says which and why)."""


class Registry:
    """The consortium's image registry (``scripts/install-registry``) on ``host``, a free port of it,
    its files under ``home``; Podman on this machine trusts its CA (``/etc/containers/certs.d``).
    ``address`` is ``host:port`` once :meth:`up` returned, ``""`` before."""

    def __init__(self, host: str, home: Path):
        self.host, self.home, self.address = host, home, ""

    @property
    def _env(self) -> dict[str, str]:
        return {**os.environ, "CONSORTIA_REGISTRY_HOME": str(self.home)}

    def up(self) -> str:
        self.address = f"{self.host}:{free_port(self.host)}"
        r = subprocess.run(
            [str(REGISTRY_SCRIPT), "--listen", self.address],
            capture_output=True,
            text=True,
            timeout=900,
            env=self._env,
        )
        if r.returncode != 0:
            raise DeploymentError(f"install-registry failed: {r.stderr[-2000:]}")
        return self.address

    def down(self) -> None:
        if not self.address:
            return
        subprocess.run(
            [str(REGISTRY_SCRIPT), "--listen", self.address, "--stop"],
            capture_output=True,
            env=self._env,
            timeout=60,
        )
        shutil.rmtree(Path("/etc/containers/certs.d") / self.address, ignore_errors=True)
        self.address = ""


class Deployment:
    """Organisations ``orgs`` on hosts 127.0.1.1, 127.0.2.1, …; the orderer and the registry on
    addresses of their own after them. ``with Deployment(root, orgs) as d:`` brings everything up (and
    every organisation's home made by ``consortia join`` on its host) and takes it all down at the end."""

    def __init__(self, root: Path, orgs: tuple[str, ...]):
        self.root, self.orgs = Path(root), tuple(orgs)
        n = len(self.orgs)
        self.placement = {o: f"127.0.{i}.1" for i, o in enumerate(self.orgs, start=1)}
        self.placement["orderer"] = f"127.0.{n + 1}.1"
        self.hosts = {
            o: Host(o, i, self.root / "hosts" / o, self.root) for i, o in enumerate(self.orgs, start=1)
        }
        self.cfg: NetworkConfig | None = None
        self._registry = Registry(f"127.0.{n + 2}.1", self.root / "registry")

    @property
    def registry(self) -> str:
        """The registry's ``host:port`` (``""`` before it is up)."""
        return self._registry.address

    # ---- the founder
    def _network_up(self) -> None:
        configs = (
            NetworkConfig(
                organisations=self.orgs, net_dir=self.root / "net", port_base=b, hosts=self.placement
            )
            for b in support.PORT_BASES
        )
        self.cfg = next((c for c in configs if support.ports_free(c)), None)
        if self.cfg is None:
            raise DeploymentError("no free port range on the hosts' addresses")
        self.net = FabricNetwork(self.cfg)
        r = _network(
            "up",
            *self._where(),
            "--hosts",
            placement_spec(self.placement),
            "--isolate",
            port_base=self.cfg.port_base,
        )
        if r.returncode != 0:
            self.net.down()
            raise DeploymentError(f"network up --isolate failed: {r.stderr[-3000:]}")

    def _where(self) -> tuple[str, ...]:
        assert self.cfg is not None
        return ("--net-dir", str(self.cfg.net_dir), "--orgs", ",".join(self.orgs))

    def hand_off(self) -> None:
        """What the founder hands each organisation: its own cryptogen folder (made on its own machine
        in a deployment where each organisation runs cryptogen itself), every other organisation's
        public certificates, and its connection profile with the TLS roots it names."""
        peers = self.net.crypto / "peerOrganizations"
        orderer = self.net.crypto / "ordererOrganizations" / "example.com"
        for org, host in self.hosts.items():
            domain = f"{org.lower()}.example.com"
            shutil.copytree(peers / domain, host.handoff / "own" / domain)
            for other in self.orgs:
                if other != org:
                    d = f"{other.lower()}.example.com"
                    copy_public(peers / d, host.handoff / "public" / d, PUBLIC_FILES)
            copy_public(orderer, host.handoff / "orderer" / "example.com", ORDERER_PUBLIC)
            prof = json.loads(self.net.org_profile_file(org).read_text())
            for i, entry in enumerate([*prof["peers"], prof["orderer"]]):
                shutil.copyfile(entry["tls_ca_file"], host.handoff / f"tls-root-{i}.pem")
                entry["tls_ca_file"] = str(host.handoff / f"tls-root-{i}.pem")
            prof.pop("crypto", None)
            (host.handoff / "profile.json").write_text(json.dumps(prof))

    # ---- each organisation, on its own host
    def join(self, host: Host) -> None:
        """``consortia join`` on ``host`` from what it was handed."""
        host.artifact_port = free_port(host.address)
        members = [
            f"--member={o}={host.handoff / 'public' / f'{o.lower()}.example.com'}"
            for o in self.orgs
            if o != host.name
        ]
        host.consortia(
            "join",
            "--org",
            host.name,
            "--msp-dir",
            str(host.handoff / "own" / f"{host.name.lower()}.example.com"),
            *members,
            "--orderer",
            str(host.handoff / "orderer" / "example.com"),
            "--artifact-endpoint",
            f"https://{host.address}:{host.artifact_port}",
            "--listen",
            f"{host.address}:{host.artifact_port}",
            "--fabric-profile",
            str(host.handoff / "profile.json"),
            "--home",
            str(host.home),
        )

    def __enter__(self) -> Deployment:
        try:
            self._network_up()
            self._registry.up()
            self.hand_off()
            for host in self.hosts.values():
                self.join(host)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for host in self.hosts.values():
            host.stop_all()
        self._registry.down()
        if self.cfg is not None:
            _network("down", "--purge", "--net-dir", str(self.cfg.net_dir), port_base=self.cfg.port_base)
            self.net.down(purge=True)


__all__ = ["Deployment", "DeploymentError", "Host", "Registry", "free_port", "listening", "wait_for"]
