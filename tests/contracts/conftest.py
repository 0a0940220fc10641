"""Fixtures of the contract suite. The suite uses only the ``Ledger`` interface and the typed
client, so it runs unchanged against every host listed in ``LEDGER_HOSTS``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ledger.client import ConsortiaClient
from ledger.identity import Consortium

LEDGER_HOSTS = ["embedded", pytest.param("fabric", marks=pytest.mark.fabric)]


@pytest.fixture(scope="session")
def embedded_consortium(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])


@pytest.fixture(params=LEDGER_HOSTS)
def host_name(request) -> str:
    return request.param


@pytest.fixture
def consortium(host_name, embedded_consortium) -> Consortium:
    """The identities of the host's channel (a real network has its own)."""
    if host_name == "fabric":
        from tests.support.fabric import shared_fabric

        return shared_fabric().consortium
    return embedded_consortium


@pytest.fixture(scope="session")
def outsider(tmp_path_factory):
    """An identity issued by a CA that is not part of the channel."""
    other = Consortium.generate(tmp_path_factory.mktemp("crypto-outsider"), ["Org9"])
    return other.identity("Org9")


@pytest.fixture
def ledger(host_name, consortium, tmp_path: Path):
    if host_name == "fabric":
        from tests.support.fabric import shared_fabric

        host = shared_fabric().ledger()
    else:
        from ledger.embedded import EmbeddedLedger

        host = EmbeddedLedger(tmp_path / "ledger.db", consortium, batch_timeout=0.002)
    yield host
    host.close()


@pytest.fixture
def org1(ledger, consortium) -> ConsortiaClient:
    return ConsortiaClient(ledger, consortium.identity("Org1"))


@pytest.fixture
def org2(ledger, consortium) -> ConsortiaClient:
    return ConsortiaClient(ledger, consortium.identity("Org2"))


@pytest.fixture
def org3(ledger, consortium) -> ConsortiaClient:
    return ConsortiaClient(ledger, consortium.identity("Org3"))


@pytest.fixture
def admins(ledger, consortium) -> dict[str, ConsortiaClient]:
    """Each organisation's admin (who approves images and accepts processes), by MSP id."""
    return {
        f"{org}MSP": ConsortiaClient(ledger, consortium.identity(org, "Admin"))
        for org in ("Org1", "Org2", "Org3")
    }


@pytest.fixture
def uid() -> str:
    """A fresh id suffix: the suite never depends on a clean ledger."""
    return uuid.uuid4().hex[:12]
