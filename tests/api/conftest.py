"""Fixtures of the API tests: one completed process among Org1..Org3 (Org4 is an outsider of the
process but a member of the channel), built once per session."""

from __future__ import annotations

import pytest

from tests.api.world import World, build_world


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    w = build_world(tmp_path_factory.mktemp("world"))
    yield w
    w.ledger.close()


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """A 3-round average-consensus process among Org1..Org3 really run by the executor's node agents
    (sandbox runtime), shared by the executor-journey and browser tests."""
    import threading

    from algorithms.task_runtime import save_dataset
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    ORGS = ["Org1MSP", "Org2MSP", "Org3MSP"]
    from executor.consent import give_consent
    from executor.images.bundle import build_bundle
    from executor.images.recipe import ImageRecipe
    from executor.node.agent import NodeAgent
    from executor.runtimes.sandbox import SandboxRuntime
    from tests.api.world import hosted_stores
    from tests.executor.conftest import make_dataset

    root = tmp_path_factory.mktemp("executed")
    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2", "Org3"])
    led = EmbeddedLedger(root / "ledger.db", consortium, batch_timeout=0.002)
    for i, o in enumerate(ORGS):
        (root / "data" / o / "default").mkdir(parents=True)
        save_dataset(root / "data" / o / "default" / "dataset.npz", make_dataset(10 + i, shift=float(i)))
    recipe = ImageRecipe.named("average-consensus")
    image = build_bundle(recipe)
    c1 = ConsortiaClient(led, consortium.identity("Org1MSP"))
    c1.register_image("avg", "1", recipe.algorithm, image.digest, image.reference)
    c1.create_process(
        "p-exec", "avg:1", ORGS, {"kind": "ring", "seed": 11}, 3, hyperparameters={"eps": 0.3, "noise": 0.1}
    )
    give_consent({o: ConsortiaClient(led, consortium.identity(o, "Admin")) for o in ORGS}, "p-exec")
    c1.start_process("p-exec")
    errors = []
    clients = {o: ConsortiaClient(led, consortium.identity(o)) for o in ORGS}
    # the three nodes run in this process: they reach each other's stores here, through their services
    stores = hosted_stores(consortium, clients, root / "store")

    def run(org):
        try:
            NodeAgent(
                clients[org],
                consortium,
                SandboxRuntime(),
                stores[org],
                root / "data" / org,
                root / "state" / org,
            ).run_until_idle("p-exec", timeout=300)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(o,)) for o in ORGS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    w = World(consortium, led, clients, stores, root)
    yield w
    led.close()


def make_gateway(world: World, msp: str, home):
    from api.gateway import Gateway
    from api.index import AuditIndex
    from api.tokens import TokenStore

    home.mkdir(parents=True, exist_ok=True)
    return Gateway(
        ledger=world.ledger,
        consortium=world.consortium,
        msp_id=msp,
        index=AuditIndex(home / "index.db"),
        tokens=TokenStore(home / "tokens.json", msp),
        artifacts=world.stores[msp],
        follow_interval=0.1,
    )


@pytest.fixture(scope="session")
def gateways(world, tmp_path_factory):
    """A running gateway (TestClient) and a token per organisation."""
    from fastapi.testclient import TestClient

    from api.gateway import create_app

    out = {}
    for msp in ("Org1MSP", "Org2MSP", "Org4MSP"):
        gw = make_gateway(world, msp, tmp_path_factory.mktemp(f"gw-{msp}"))
        client = TestClient(create_app(gw), raise_server_exceptions=False)
        client.__enter__()
        token = gw.tokens.issue("User1")
        client.headers["Authorization"] = f"Bearer {token}"
        out[msp] = (gw, client, token)
    yield out
    for gw, client, _ in out.values():
        client.__exit__(None, None, None)
        gw.index.close()
