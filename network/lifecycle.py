"""The network's lifecycle: bring it up (orderer, channel, peers joined, chaincode deployed by
the Fabric lifecycle: package, install, approve per organisation, commit), wait until it endorses
and orders, restart or stop nodes, report status and logs; :func:`connect` for applications."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ledger.identity import Consortium
from network.config import NetworkConfig, NetworkError
from network.files import GeneratedFiles
from network.placement import recorded_organisations

if TYPE_CHECKING:
    from ledger.fabric.gateway import FabricLedger


class FabricNetwork(GeneratedFiles):
    """One native network (module docstring of :mod:`network`); the layers it
    builds on: :class:`~network.config.NetworkLayout` (paths, node environments),
    :class:`~network.supervision.NodeSupervisor` (processes),
    :class:`~network.files.GeneratedFiles` (configuration, package, profile)."""

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
            self._update_state(channel_created=True)
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
            self._update_state(joined=sorted(joined))
        self.deploy()
        self._write_profile()
        self.wait_ready()

    def wait_ready(self, timeout: float = 90) -> float:
        """Wait until every organisation's Gateway can collect endorsements from every organisation's
        peer (gossip has spread membership, discovery sees all the peers); return seconds.

        Probes Endorse with the chaincode service's health function (no reads, no writes), asking
        every organisation explicitly: a process's records need its own members' peers (key-level
        policies, docs/ledger.md "Who endorses what"), so a Gateway that sees only some peers -- enough
        for the chaincode's policy -- is not ready. "No combination of peers" or "no endorsing peers"
        means discovery is not ready yet."""
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
                    led.endorse(cons.identity(org), HEALTH_FUNCTION, endorsing_organisations=cons.msp_ids)
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

    def deploy(self) -> None:
        """Package, install (each organisation its own package, naming its own chaincode service),
        approve (every organisation), commit; start each organisation's chaincode service."""
        c = self.cfg
        n = range(len(c.organisations))
        st = self._state()
        if not st.get("package_ids"):
            ids: dict[str, str] = {}
            for i in n:
                pkg = self.package(i)
                pkg_id = self._peer_cli(
                    i, "lifecycle", "chaincode", "calculatepackageid", str(pkg), step="calculatepackageid"
                ).strip()
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
                ids[c.organisations[i]] = pkg_id
            st = self._update_state(package_ids=ids, chaincode_tls=c.chaincode_tls)
        for i in n:
            name = self.chaincode_name(i)
            if self.running()[name] and st.get("dispatch") != self.cfg.dispatch:
                self.stop_node(name)  # serve the requested contracts
            if not self.running()[name]:
                self.start_chaincode_server(i)
        self._update_state(dispatch=self.cfg.dispatch)
        st = self._state()
        if st.get("committed"):
            return
        # the chaincode definition every organisation approves and the first one commits (sequence 1)
        definition = [
            *("-o", f"{c.orderer_host}:{c.orderer_port}", "--tls", "--cafile", str(self.orderer_ca)),
            *("--channelID", c.channel, "--name", c.chaincode, "--version", c.chaincode_version),
            *("--sequence", "1"),
            *(("--signature-policy", c.endorsement_policy) if c.endorsement_policy else ()),
        ]
        for i in range(len(c.organisations)):
            self._peer_cli(
                i,
                "lifecycle",
                "chaincode",
                "approveformyorg",
                *definition,
                *("--package-id", st["package_ids"][c.organisations[i]]),
                step=f"approveformyorg {c.organisations[i]}",
            )
        peers: list[str] = []
        for i in range(len(c.organisations)):
            peers += [
                "--peerAddresses",
                f"{c.org_host(i)}:{c.peer_port(i)}",
                "--tlsRootCertFiles",
                str(self._org_paths(i)["tls_ca"]),
            ]
        self._peer_cli(
            0, "lifecycle", "chaincode", "commit", *definition, *peers, step="commit chaincode definition"
        )
        self._update_state(committed=True)

    def wait_block_height(self, i: int, height: int, timeout: float = 60) -> int:
        """Wait until peer ``i`` has at least ``height`` blocks (its ledger caught up)."""
        from ledger.fabric.gateway import FabricLedger, PeerEndpoint

        org = self.cfg.organisations[i]
        entry = self._peer_entry(i)
        peer = PeerEndpoint(entry["msp_id"], entry["address"], self._org_paths(i)["tls_ca"].read_bytes())
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
        """Start a stopped node again (``orderer``, ``peer0.orgN``, ``chaincode.orgN``, or
        ``chaincode``: every chaincode service) and wait until the network endorses and orders."""
        n = range(len(self.cfg.organisations))
        peers, services = [self.peer_name(i) for i in n], [self.chaincode_name(i) for i in n]
        if name == "orderer":
            self.start_orderer()
        elif name in peers:
            self.start_peer(peers.index(name))
        elif name in services or name == "chaincode":
            for i in n:
                if name in ("chaincode", services[i]):
                    self.start_chaincode_server(i)
        else:
            raise NetworkError(f"unknown node {name!r}; nodes: {', '.join(self.running())}, chaincode")
        self.wait_ready()

    def down(self, purge: bool = False) -> None:
        """Stop every node; with ``purge`` also delete ledgers, identities and state."""
        for name in list(self._state()["pids"]):
            self.stop_node(name)
        if purge and self.net.exists():
            shutil.rmtree(self.net)

    def status(self) -> dict[str, Any]:
        """The network as its directory records it: every organisation it was made with, whichever
        organisations this object was given (``network status`` without ``--orgs`` is given the
        default three, and reported a four-organisation network's nodes and placement as three)."""
        made = recorded_organisations(self.net)
        if made and made != self.cfg.organisations:  # hosts None: the recorded placement of them all
            return FabricNetwork(replace(self.cfg, organisations=made, hosts=None)).status()
        st = self._state()
        return {
            "net_dir": str(self.net),
            "organisations": list(self.cfg.organisations),
            "running": self.running(),
            "channel": self.cfg.channel,
            "chaincode": self.cfg.chaincode,
            "placement": self.cfg.placement,
            "isolate": bool(self.cfg.isolate),
            "package_ids": st.get("package_ids") or {},
            "committed": bool(st.get("committed")),
            "chaincode_tls": bool(st.get("chaincode_tls")),
        }

    def logs(self, name: str, lines: int = 50) -> str:
        f = self.net / "logs" / f"{name}.log"
        if not f.is_file():
            raise NetworkError(f"no log for {name!r}; nodes: {', '.join(self.running())}")
        return "\n".join(f.read_text(errors="replace").splitlines()[-lines:])


def connect(
    config: NetworkConfig | None = None, *, start: bool = True
) -> tuple[FabricLedger, Consortium, FabricNetwork]:
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
