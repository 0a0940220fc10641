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

Modules: :mod:`~ledger.fabric.network.config` (options, paths, node environments),
:mod:`~ledger.fabric.network.supervision` (node processes), :mod:`~ledger.fabric.network.files`
(generated configuration, identities, chaincode package), :mod:`~ledger.fabric.network.lifecycle`
(up, deploy, readiness, restart, down), :mod:`~ledger.fabric.network.cli` (the command line).
"""

from ledger.fabric.network.cli import main
from ledger.fabric.network.config import (
    BINARIES,
    CACHE,
    DEFAULT_HOME,
    DEFAULT_NET,
    REPO_ROOT,
    NetworkConfig,
    NetworkError,
)
from ledger.fabric.network.lifecycle import FabricNetwork, connect

__all__ = [
    "BINARIES",
    "CACHE",
    "DEFAULT_HOME",
    "DEFAULT_NET",
    "REPO_ROOT",
    "FabricNetwork",
    "NetworkConfig",
    "NetworkError",
    "connect",
    "main",
]
