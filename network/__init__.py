"""The native Hyperledger Fabric 3.1 network launcher, beside ``fabric-network/`` (the install script,
the CCaaS builder and the ``network`` wrapper script): one etcdraft orderer, one peer per
organisation, TLS on, Docker off, each organisation's chaincode served by its own Python CCaaS server
(docs/fabric.md "Topology"). Placed per host (:mod:`~network.placement`, docs/fabric.md "Placement"):
each organisation's peer and chaincode service on its own loopback address, the orderer on its own
(default: everything on 127.0.0.1). Driven by ``consortia network up|down|deploy|status|logs``
(:mod:`api.cli.network`; ``fabric-network/network`` runs the same command).

Layout of the network directory (default ``~/.cache/consortia/fabric-net``, outside the repo)::

    crypto/                  identities from ledger.identity.Consortium.generate (cryptogen layout)
    config/                  core.yaml, orderer.yaml (Fabric's sampleconfig) + configtx.yaml
    <channel>.block          channel genesis block (configtxgen)
    data/<node>/             ledgers
    logs/<node>.log          node logs
    chaincode/<org>/         each organisation's CCaaS package (its own service's address and TLS)
    chaincode-tls/<org>/     each organisation's chaincode service TLS material (its own TLS CA)
    state.json               process ids, placement, package ids
    connection.json          profile for ledger.fabric.gateway.FabricLedger.from_profile (every peer)
    profiles/<Org>.json      one organisation's profile: only its own peer, on its own address

Binaries come from ``$FABRIC_HOME`` (default ``$CONSORTIA_CACHE/fabric``, i.e. ``~/.cache/consortia/fabric``), installed by
``fabric-network/install.sh``. Everything is overridable through :class:`NetworkConfig`.

Modules: :mod:`~network.config` (options, paths, node environments),
:mod:`~network.supervision` (node processes), :mod:`~network.files`
(generated configuration, identities, chaincode package), :mod:`~network.lifecycle`
(up, deploy, readiness, restart, down), :mod:`~network.placement` (addresses per
host). The command line is ``consortia network`` (:mod:`api.cli.network`).

A consortium without a centre (docs/fabric.md "A consortium without a centre"): each member on its own
host, :mod:`~network.organisation` (who it is, its home), :mod:`~network.ca` (its own Fabric CA and the
identities it issues), :mod:`~network.package` (its public package), :mod:`~network.channel` (the
genesis block from packages, BFT or raft), :mod:`~network.member` (its nodes, joins and chaincode
approval); :mod:`~network.processes` is the process supervision both kinds of network share.
"""

from network.config import (
    BINARIES,
    CACHE,
    DEFAULT_HOME,
    DEFAULT_NET,
    REPO_ROOT,
    NetworkConfig,
    NetworkError,
)
from network.lifecycle import FabricNetwork, connect

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
]
