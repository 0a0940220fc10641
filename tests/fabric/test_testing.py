"""The shared test network (ledger.fabric.testing)."""

from __future__ import annotations

import pytest

from ledger.fabric.testing import shared_fabric

pytestmark = pytest.mark.fabric


def test_one_network_per_session_with_its_own_identities(fabric):
    again = shared_fabric()
    assert again is fabric
    assert fabric.network.is_up()
    assert [o.msp_id for o in fabric.consortium.organisations] == ["Org1MSP", "Org2MSP", "Org3MSP"]
    with fabric.ledger() as led:
        assert led.evaluate(fabric.consortium.identity("Org1"), "KV:whoami")
