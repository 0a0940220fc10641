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


def make_gateway(world: World, msp: str, home):
    from api.gateway import Gateway
    from api.index import AuditIndex
    from api.tokens import TokenStore
    home.mkdir(parents=True, exist_ok=True)
    return Gateway(ledger=world.ledger, consortium=world.consortium, msp_id=msp,
                   index=AuditIndex(home / "index.db"), tokens=TokenStore(home / "tokens.json", msp),
                   artifacts=world.stores[msp], follow_interval=0.1)


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
