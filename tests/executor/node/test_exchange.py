"""How node agents exchange their round files (docs/artifacts.md): never through another organisation's
files. Agents hosted in one process reach each other's stores in memory through each owner's service;
agents on separate hosts through each other's HTTPS services, found on the ledger."""

from __future__ import annotations

import json

import pytest

from algorithms.task_runtime import save_dataset
from exchange.client import ArtifactClient
from exchange.errors import ArtifactForbidden
from exchange.locations import tls_ca_digest
from exchange.readers import LedgerReaders
from exchange.service import ArtifactServer, HostedServices, node_store
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS
from executor.node.agent import NodeAgent
from executor.runtimes.sandbox import SandboxRuntime
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium
from tests.executor.node.test_agent import Platform, assert_matches_simulation, run_all

ORGS = ["Org1MSP", "Org2MSP", "Org3MSP"]


@pytest.fixture(scope="module")
def crypto(tmp_path_factory):
    """Four organisations: Org4 never takes part in a process."""
    return Consortium.generate(tmp_path_factory.mktemp("crypto4"), ["Org1", "Org2", "Org3", "Org4"])


@pytest.fixture
def platform(tmp_path, crypto, bundle, recipe):
    p = Platform(tmp_path, crypto, EmbeddedLedger(tmp_path / "ledger.sqlite", crypto), ORGS)
    for o, ds in p.datasets().items():
        (tmp_path / "data" / o / "default").mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "default" / "dataset.npz", ds)
    p.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    yield p
    p.ledger.close()


def _agent(p, o, n, endpoint=None, hosted=None):
    """``o``'s agent on host ``n``: its store and state under ``host<n>`` (started)."""
    client = ConsortiaClient(p.ledger, p.consortium.identity(o))
    return NodeAgent(
        client,
        p.consortium,
        SandboxRuntime(),
        node_store(client, p.consortium, p.root / f"host{n}" / "store", endpoint=endpoint, hosted=hosted),
        p.root / "data" / o,
        p.root / f"host{n}" / "state" / o,
    ).start()


def test_agents_hosted_in_one_process_exchange_in_memory(platform, average_consensus):
    """Each agent with a store root of its own (it could not open another's files if it tried): the
    messages cross through the owners' hosted services, and the run equals the simulator."""
    platform.launch("p-hosted", "avg:1", rounds=3)
    hosted = HostedServices()
    agents = [_agent(platform, o, n, hosted=hosted) for n, o in enumerate(ORGS, start=1)]
    run_all(platform, "p-hosted", agents)
    assert_matches_simulation(platform, "p-hosted", 3, average_consensus)
    members = ConsortiaClient(platform.ledger, platform.consortium.identity("Org4")).list_members()
    assert members == []  # nothing was published: nothing served over the network
    for n, o in enumerate(ORGS, start=1):  # each store holds only what its organisation wrote
        assert [p.name for p in (platform.root / f"host{n}" / "store").iterdir()] == [o]


def test_agents_on_separate_hosts_exchange_through_the_services(platform, crypto, average_consensus):
    """Org1..Org3 each with its own store root and its own service on 127.0.N.1, each agent publishing
    its endpoint in its membership record and finding the others' there: the audited process still equals
    the simulator, published models name the owner's service, and Org4 gets 403 for every message and
    model."""
    p = platform
    p.launch("p-hosts", "avg:1", rounds=3)
    servers, stores = {}, {}
    for n, o in enumerate(ORGS, start=1):
        stores[o] = ArtifactStore(p.root / f"host{n}" / "store", o)
        readers = LedgerReaders(ConsortiaClient(p.ledger, crypto.identity(o)), stores[o])
        servers[o] = ArtifactServer((f"127.0.{n}.1", 0), stores[o], crypto, readers).start()
    try:
        # the agent publishes its endpoint in its membership record when it starts
        agents = [_agent(p, o, n, endpoint=servers[o].url) for n, o in enumerate(ORGS, start=1)]
        members = {m.msp_id: m for m in ConsortiaClient(p.ledger, crypto.identity("Org4")).list_members()}
        assert {o: members[o].artifact_endpoint for o in ORGS} == {o: servers[o].url for o in ORGS}
        assert all(members[o].tls_ca_digest == tls_ca_digest(crypto, o) for o in ORGS)
        for agent in agents:  # every peer's endpoint comes from the ledger, none from a mapping passed in
            locations = agent.store.locations
            assert locations.endpoints == {} and locations.hosted is None
            assert {o: locations.endpoint(o) for o in ORGS} == {o: servers[o].url for o in ORGS}
        run_all(p, "p-hosts", agents)
        assert_matches_simulation(p, "p-hosts", 3, average_consensus)
        for o in ORGS:
            model = ConsortiaClient(p.ledger, crypto.identity(o)).get_model(f"p-hosts:{o}")
            assert model.location == servers[o].url
            outsider = ArtifactClient(servers[o].url, o, ClientTLS(crypto, "Org4MSP"), retries=0)
            sealed = [
                json.loads(f.read_text())["stored"]["digest"]
                for f in (stores[o].home / "messages" / "p-hosts").glob("*/*.json")
            ]
            assert sealed
            for digest in [model.ciphertext_digest, *sealed]:
                with pytest.raises(ArtifactForbidden):
                    outsider.get(digest)
        for a in agents:
            a.close()
    finally:
        for s in servers.values():
            s.stop()
