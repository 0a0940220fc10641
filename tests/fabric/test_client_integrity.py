"""Issue 14 item 10 on the real Fabric network: typed contract errors survive ids with braces, and
``events(timeout=...)`` returns while the peer is unreachable (the ``Ledger`` interface)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from chaincode.errors import NotFound
from ledger.fabric.gateway import FabricLedger

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(300)]


@pytest.mark.parametrize("shape", ["{open", "close}", "}{", 'quote"}'])
def test_ids_with_braces_give_not_found_on_fabric(fabric_ledger, fabric_ids, shape):
    key = f"k-{uuid.uuid4().hex[:8]}-{shape}"
    with pytest.raises(NotFound) as e:
        fabric_ledger.evaluate(fabric_ids["Org1"], "KV:get", key)
    assert e.value.details == {"key": key}
    with pytest.raises(NotFound):  # a Consortia contract too, through endorsement
        fabric_ledger.submit(fabric_ids["Org2"], "LearningProcess:start", f"p-{shape}")


def test_events_timeout_returns_while_the_peer_is_stopped(fabric, fabric_ledger, fabric_ids):
    net = fabric.network
    org2 = fabric_ids["Org2"]
    height = fabric_ledger.block_height(org2)
    listener = FabricLedger(fabric_ledger.peers, fabric_ledger.channel, fabric_ledger.chaincode)
    net.stop_node("peer0.org2")
    try:
        got: list = []
        finished = threading.Event()

        def listen() -> None:
            got.extend(listener.events(org2, start_block=height, timeout=3.0))
            finished.set()

        t0 = time.monotonic()
        threading.Thread(target=listen, daemon=True).start()
        assert finished.wait(30), "events(timeout=3) did not return while the peer was unreachable"
        took = time.monotonic() - t0
        assert got == [] and 2.5 <= took < 10, took
    finally:
        listener.close()
        net.restart_node("peer0.org2")
        net.wait_block_height(1, height, timeout=60)
    fabric_ledger.submit(org2, "KV:put", f"after-{uuid.uuid4().hex[:8]}", "x")  # Org2 is back


def test_events_timeout_zero_delivers_what_is_committed(fabric_ledger, fabric_ids):
    """As on the embedded host (and as the audit index's ``sync`` relies on): ``timeout=0`` yields
    the events already committed, then returns."""
    org1 = fabric_ids["Org1"]
    first = fabric_ledger.submit(org1, "KV:put", f"t0-{uuid.uuid4().hex[:8]}", "a")
    second = fabric_ledger.submit(org1, "KV:put", f"t0-{uuid.uuid4().hex[:8]}", "b")
    t0 = time.monotonic()
    got = [e.tx_id for e in fabric_ledger.events(org1, start_block=first.block_number, timeout=0)]
    assert got[:2] == [first.tx_id, second.tx_id] and time.monotonic() - t0 < 30
