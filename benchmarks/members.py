"""A consortium without a centre on one machine, each member on a host of its own (README "Deploying
a consortium"; docs/fabric.md "A consortium without a centre"), as tests/deploy runs it.

Every member's commands run in a bubblewrap view of its own folder only (network.host_view), its
nodes listening on its own loopback address 127.0.N.1: ``consortia org init`` (its own Fabric CA
issues its identities), ``consortia org export`` (its public package), ``consortia network node
start``, ``channel join``, ``chaincode approve|commit``, ``consortia join --package``. What crosses
from one member to another is what a real deployment sends over the network, copied here by the
harness: the public packages and the genesis block (into the receiver's ``inbox/``), nothing else.

The members' command views bind the machine's ``/proc`` (``host_proc``): a node outlives the command
that started it only outside a process namespace of the command's own, and the pids a command records
and signals are the machine's (docs/fabric.md "Isolated hosts")."""

from __future__ import annotations

import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.deployment import Host, Registry
from network.config import DEFAULT_HOME
from network.member import MemberNodes
from network.organisation import PORTS

PORT_BASES = range(24050, 32000, 110)  # below the ephemeral port range (32768-60999)


class MemberHost(Host):
    """One member's host: ``root/home`` (its organisation's home), ``root/inbox`` (what it was sent),
    ``root/out`` (what it sends)."""

    def __init__(self, name: str, n: int, root: Path, port_base: int, fabric_home: Path, enclosure: Path):
        super().__init__(name, n, root, enclosure)
        self.port_base, self.fabric_home = port_base, fabric_home
        self.inbox, self.out = root / "inbox", root / "out"
        for d in (self.inbox, self.out):
            d.mkdir(parents=True, exist_ok=True)
        self.package = self.out / f"{name.lower()}.pkg"

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "FABRIC_HOME": str(self.fabric_home)}

    @property
    def shared(self) -> list[Path]:
        return [self.fabric_home]  # the machine's Fabric binaries, read-only

    def run(self, *args: str, code: int = 0, timeout: float = 600) -> Any:
        """``consortia ARGS --json`` in this member's view. The view binds the machine's ``/proc``: the
        nodes a command starts outlive it, and the pids it records and signals are the machine's."""
        import json
        import subprocess
        import sys

        proc = subprocess.run(
            self.argv([sys.executable, "-m", "api.cli", *args, "--json"], host_proc=True),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == code, (self.name, args, proc.stdout[-2000:], proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}

    def network(self, *args: str, code: int = 0) -> Any:
        return self.run("network", *args, "--home", str(self.home), code=code)

    def nodes(self) -> MemberNodes:
        """Its nodes as the harness sees them (pids, addresses; to stop them at the end)."""
        return MemberNodes(self.home, self.fabric_home)


def ports_free(host: str, base: int) -> bool:
    for k in PORTS.values():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, base + k))
            except OSError:
                return False
    return True


class Members:
    """Members ``orgs`` on hosts 127.0.``first``.1, 127.0.``first + 1``.1, ... (one port base for all,
    free on every address). ``timings`` records each step's wall time in seconds."""

    def __init__(self, root: Path, orgs: tuple[str, ...], first: int = 1, fabric_home: Path | None = None):
        self.root, self.orgs = Path(root), tuple(orgs)
        addresses = {o: f"127.0.{first + i}.1" for i, o in enumerate(self.orgs)}
        base = next((b for b in PORT_BASES if all(ports_free(a, b) for a in addresses.values())), None)
        if base is None:
            raise RuntimeError(f"no free port range on {sorted(addresses.values())}")
        home = Path(fabric_home or DEFAULT_HOME)
        self.hosts = {
            o: MemberHost(o, first + i, self.root / "hosts" / o, base, home, self.root)
            for i, o in enumerate(self.orgs)
        }
        self.timings: dict[str, float] = {}
        first_host = self.hosts[self.orgs[0]]  # the first member runs the consortium's image registry
        self.registry = Registry(first_host.address, first_host.root / "registry")
        self.channel: dict[str, Any] = {}  # what `channel create` answered (form)

    def _timed(self, step: str, fn: Any) -> Any:
        t0 = time.monotonic()
        out = fn()
        self.timings[step] = round(time.monotonic() - t0, 1)
        return out

    # ---- each member, on its own host
    def init(self) -> dict[str, Any]:
        """Every member's ``org init`` (in parallel: they are separate hosts) and ``org export``; each
        package handed to every other member."""

        def one(h: MemberHost) -> Any:
            h.run(
                "org",
                *("init", "--org", h.name, "--host", h.address, "--home", str(h.home)),
                *("--port-base", str(h.port_base)),
            )
            return h.run("org", "export", "--home", str(h.home), "--out", str(h.package))

        with ThreadPoolExecutor(len(self.hosts)) as ex:
            exported = self._timed("org_init_and_export", lambda: list(ex.map(one, self.hosts.values())))
        for h in self.hosts.values():
            for other in self.hosts.values():
                shutil.copyfile(other.package, h.inbox / other.package.name)  # "sent over the network"
        return {e["organisation"]: e for e in exported}

    def create_channel(self, creator: str, consensus: str | None = None) -> Any:
        """``creator`` makes the genesis block from the packages in its inbox, and sends it to all."""
        h = self.hosts[creator]
        args = ["channel", "create", *self._packages(h), "--out", str(h.out / "consortia.block")]
        made = self._timed(
            "channel_create", lambda: h.network(*args, *(("--consensus", consensus) if consensus else ()))
        )
        for other in self.hosts.values():
            shutil.copyfile(h.out / "consortia.block", other.inbox / "consortia.block")
        return made

    def _packages(self, h: MemberHost, others_only: bool = False) -> list[str]:
        """``--package`` arguments for the packages in ``h``'s inbox (``others_only``: not its own, which
        its commands read from its own home, as the README's steps do)."""
        own = h.package.name if others_only else None
        return [a for p in sorted(h.inbox.glob("*.pkg")) if p.name != own for a in ("--package", str(p))]

    def start_and_join(self) -> None:
        """Each member starts its orderer and joins it (osnadmin, its admin's TLS pair), then its peer
        (its admin), from the block and the other members' packages in its inbox."""

        def join(h: MemberHost, node: str) -> None:
            h.network("node", "start", node)
            block = str(h.inbox / "consortia.block")
            others = self._packages(h, others_only=True) if node == "orderer" else []
            h.network("channel", "join", "--block", block, *others, "--node", node)

        for node in ("orderer", "peer"):
            self._timed(
                f"{node}s_started_and_joined", lambda n=node: [join(h, n) for h in self.hosts.values()]
            )

    def approve(self, org: str) -> Any:
        h = self.hosts[org]
        out = self._timed(f"approve_{org}", lambda: h.network("chaincode", "approve"))
        h.network("node", "start", "chaincode")
        return out

    def join_homes(self) -> None:
        """Each member's Consortia home from the packages in its inbox (``consortia join --package``)."""
        for h in self.hosts.values():
            joined = h.run("join", "--home", str(h.home), *self._packages(h, others_only=True))
            h.artifact_port = int(joined["artifact_endpoint"].rpartition(":")[2])

    def form(self, consensus: str | None = None) -> None:
        """The whole consortium, as the README's steps make it: every member's ``org init``/``export``,
        the channel made by the first member, every orderer and peer joined, the chaincode approved by
        every member (committed by the first once a majority approved), every member's Consortia home
        joined, and the image registry up on the first member's host."""
        self.init()
        self.channel = self.create_channel(self.orgs[0], consensus)
        self.start_and_join()
        majority = len(self.orgs) // 2 + 1
        for org in self.orgs[:majority]:
            self.approve(org)
        self._timed("commit", lambda: self.hosts[self.orgs[0]].network("chaincode", "commit"))
        for org in self.orgs[majority:]:
            self.approve(org)
        self._timed("homes_joined", self.join_homes)
        self._timed("registry_up", self.registry.up)

    def close(self) -> None:
        self.registry.down()
        for h in self.hosts.values():
            h.stop_all()
            if (h.home / "organisation.json").is_file():
                h.nodes().down()


__all__ = ["MemberHost", "Members", "ports_free"]
