"""The Fabric host for test suites: one network per test session, brought up on first use (or
reused if already running), serving the Consortia contracts plus the ``KV:*`` probe contract.

Use from a fixture::

    from ledger.fabric.testing import shared_fabric
    fab = shared_fabric()            # FabricSession (skips the test if Fabric is not installed)
    host = fab.ledger()              # a FabricLedger (Ledger interface); close() it after use
    fab.consortium                   # the network's identities (Consortium): use these, not new ones

A network this process started is stopped at interpreter exit (``CONSORTIA_FABRIC_KEEP=1`` keeps
it for the next run); a network found running is left running.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ledger.fabric.gateway import FabricLedger
from ledger.fabric.network import FabricNetwork, NetworkConfig, NetworkError
from ledger.identity import Consortium

TEST_DISPATCH = "ledger.fabric.probe_contract:invoke"
_lock = threading.Lock()
_session: "FabricSession | None" = None
_failure: str | None = None


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
        net = FabricNetwork(config or NetworkConfig(dispatch=TEST_DISPATCH))
        was_running = any(net.running().values())     # someone's network: never stop it
        try:
            net.up()
        except NetworkError as exc:
            _failure = str(exc)
            if "binaries missing" in _failure:
                raise FabricUnavailable(_failure) from None
            raise
        _session = FabricSession(net, net.consortium(), started_here=not was_running)
        if _session.started_here and os.environ.get("CONSORTIA_FABRIC_KEEP") != "1":
            atexit.register(net.down)
        return _session


def shared_fabric() -> FabricSession:
    """``start_shared_network`` for pytest: skips the calling test if Fabric is unavailable."""
    import pytest
    try:
        return start_shared_network()
    except FabricUnavailable as exc:
        pytest.skip(f"Hyperledger Fabric not available: {exc}")
        raise  # unreachable


def network_dir() -> Path:
    return NetworkConfig().net_dir
