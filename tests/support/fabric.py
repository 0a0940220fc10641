"""The Fabric host for test suites: one network per test session, brought up on first use (or
reused if already running), serving the Consortia contracts plus the ``KV:*`` probe contract.

Use from a fixture::

    from tests.support.fabric import shared_fabric
    fab = shared_fabric()            # FabricSession (skips the test if Fabric is not installed; fails under CI=true)
    host = fab.ledger()              # a FabricLedger (Ledger interface); close() it after use
    fab.consortium                   # the network's identities (Consortium): use these, not new ones

Outages of its native nodes for the tests that ride them out: :func:`kill_node` (SIGKILL, then start
it again), :func:`pause_nodes` (SIGSTOP/SIGCONT), :func:`orderer_names`.

A network this process started is stopped at interpreter exit (``CONSORTIA_FABRIC_KEEP=1`` keeps
it for the next run); a network found running is left running.

Several checkouts on one machine (several engineers, CI) must not share a network: each checkout
gets its own directory ``~/.cache/consortia/fabric-test/<hash of the checkout path>`` and a port
base found free at first start (kept in ``port_base`` beside it), unless
``CONSORTIA_FABRIC_NET`` / ``CONSORTIA_FABRIC_PORT_BASE`` say otherwise.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ledger.errors import NotFound
from ledger.fabric.gateway import FabricLedger
from ledger.identity import Consortium
from network import REPO_ROOT, FabricNetwork, NetworkConfig, NetworkError
from wire.env import environment

TEST_DISPATCH = "tests.support.probe_contract:invoke"
_lock = threading.Lock()
_session: FabricSession | None = None
_failure: str | None = None


PORT_BASES = range(20050, 60000, 3100)  # each network spans base .. base + 1000 * orgs + 2950


def network_dir() -> Path:
    """This checkout's test network directory."""
    env = environment().fabric_net
    if env:
        return env
    tag = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:10]
    return Path.home() / ".cache" / "consortia" / "fabric-test" / tag


def ports_free(cfg: NetworkConfig) -> bool:
    """True iff every address and port a node of ``cfg`` listens on is free now."""
    for host, port in cfg.listen_addresses():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def test_config() -> NetworkConfig:
    """This checkout's test network: own directory, own ports (kept once chosen)."""
    net_dir = network_dir()
    if environment().fabric_port_base is not None:
        return NetworkConfig(dispatch=TEST_DISPATCH, net_dir=net_dir)
    saved = net_dir / "port_base"
    if saved.is_file():
        cfg = NetworkConfig(dispatch=TEST_DISPATCH, net_dir=net_dir, port_base=int(saved.read_text()))
        # keep the ports while our network holds them; if it is down and another program took
        # them meanwhile, choose a free range again instead of failing to start
        if FabricNetwork(cfg).is_up() or ports_free(cfg):
            return cfg
        # its ports are taken and it is down: its chaincode packages name the old addresses, so a
        # network on new ports must start afresh (a test network's contents are disposable)
        FabricNetwork(cfg).down(purge=True)
    for base in PORT_BASES:
        cfg = NetworkConfig(dispatch=TEST_DISPATCH, net_dir=net_dir, port_base=base)
        if ports_free(cfg):
            net_dir.mkdir(parents=True, exist_ok=True)
            saved.write_text(str(base))
            return cfg
    raise NetworkError("no free port range for a test network on 127.0.0.1")


class FabricUnavailable(RuntimeError):
    """Fabric binaries are not installed and could not be installed here."""


@dataclass
class FabricSession:
    network: FabricNetwork
    consortium: Consortium
    started_here: bool

    def ledger(self) -> FabricLedger:
        return FabricLedger.from_profile(self.network.profile_file)


def start_shared_network(config: NetworkConfig | None = None) -> FabricSession:
    """Bring the test network up once per process (thread-safe) and return it."""
    global _session, _failure
    with _lock:
        if _session is not None:
            return _session
        if _failure is not None:
            raise FabricUnavailable(_failure)
        net = FabricNetwork(config or test_config())
        if net.stale():  # a test network of an older layout: disposable, start afresh
            net.down(purge=True)
        was_running = any(net.running().values())  # someone's network: never stop it
        try:
            net.up()
        except NetworkError as exc:
            if not was_running:
                net.down()  # leave no half-started network behind
            _failure = str(exc)
            if "binaries missing" in _failure:
                raise FabricUnavailable(_failure) from None
            raise
        _session = FabricSession(net, net.consortium(), started_here=not was_running)
        if _session.started_here and not environment().fabric_keep:
            atexit.register(net.down)
        return _session


def shared_fabric() -> FabricSession:
    """``start_shared_network`` for pytest: skips the calling test if Fabric is unavailable, except
    under ``CI=true``, where an unavailable Fabric fails the test (CI runs the real network every
    time; a skip would hide a missing install). The decision is the test suite's one helper,
    ``tests.ci.skip_or_fail`` (this module is test support too)."""
    from tests.ci import skip_or_fail

    try:
        return start_shared_network()
    except FabricUnavailable as exc:
        skip_or_fail(f"Hyperledger Fabric not available: {exc}")


def kill_node(network: FabricNetwork, name: str, timeout: float = 20.0) -> None:
    """SIGKILL one native node of ``network`` (e.g. ``peer0.org2``) and wait until it is gone: a crash,
    no clean shutdown. :meth:`FabricNetwork.start_peer` (or ``start_orderer``) starts it again."""
    pid = network.pids()[name]
    os.killpg(pid, signal.SIGKILL)  # started in its own session: the group is the node
    deadline = time.monotonic() + timeout
    while network.running()[name]:
        if time.monotonic() > deadline:
            raise NetworkError(f"{name} (pid {pid}) still runs {timeout} s after SIGKILL")
        time.sleep(0.1)


def pause_nodes(network: FabricNetwork, names: list[str], pause: bool = True) -> None:
    """SIGSTOP (``pause``) or SIGCONT the nodes ``names`` of ``network``: stopped, a node keeps its
    connections open but answers nothing, as behind a network cut."""
    pids = network.pids()
    for name in names:
        os.killpg(pids[name], signal.SIGSTOP if pause else signal.SIGCONT)


def orderer_names(network: FabricNetwork) -> list[str]:
    """The names of every orderer node of ``network``."""
    return sorted(n for n in network.running() if n.startswith("orderer"))


T = TypeVar("T")


def eventually(fn: Callable[[], T], timeout: float = 30.0) -> T:
    """``fn()`` once it stops raising :class:`~ledger.errors.NotFound`: a peer that commits the block a
    moment after the submitting client saw it committed (on Fabric, each peer commits on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
