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
