"""Fixtures of the Fabric tests: the real network (started once per session, or reused)."""

from __future__ import annotations

import pytest

from tests.support.fabric import shared_fabric


@pytest.fixture(scope="session")
def fabric():
    return shared_fabric()


@pytest.fixture(scope="session")
def fabric_ledger(fabric):
    host = fabric.ledger()
    yield host
    host.close()


@pytest.fixture(scope="session")
def fabric_ids(fabric):
    c = fabric.consortium
    return {o.name: c.identity(o.name) for o in c.organisations}


@pytest.fixture(scope="session")
def outsider(tmp_path_factory):
    """An identity of an organisation whose CA is not in the channel."""
    from ledger.identity import Consortium

    return Consortium.generate(tmp_path_factory.mktemp("outsider"), ["Org9"]).identity("Org9")
