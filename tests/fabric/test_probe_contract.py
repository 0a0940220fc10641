"""The KV probe contract (tests.support.probe_contract) on an in-memory stub."""

from __future__ import annotations

import json

import pytest

from chaincode.errors import AlreadyExists, InvalidArgument, NotFound
from chaincode.stub import KeyModification, KeyValue
from ledger.identity import serialize_identity
from tests.support.probe_contract import invoke


class DictStub:
    def __init__(self):
        self.state: dict[str, bytes] = {}
        self.events: list[tuple[str, bytes]] = []

    def get_tx_id(self):
        return "tx1"

    def get_channel_id(self):
        return "ch"

    def get_tx_timestamp(self):
        return 12.5

    def get_creator(self):
        return serialize_identity("Org1MSP", b"-----BEGIN CERTIFICATE-----")

    def get_state(self, k):
        return self.state.get(k)

    def put_state(self, k, v):
        self.state[k] = v

    def del_state(self, k):
        self.state.pop(k, None)

    def get_state_by_range(self, s, e):
        return iter(KeyValue(k, v) for k, v in sorted(self.state.items()) if s <= k < e)

    def get_state_by_partial_composite_key(self, t, a):
        return iter(())

    def get_history_for_key(self, k):
        return iter([KeyModification("t0", b"old", 1.0, False)])

    def set_event(self, n, p):
        self.events.append((n, p))

    def get_transient(self):
        return {"s": b"x"}


def test_put_get_create_incr_range():
    st = DictStub()
    assert invoke(st, "KV:put", ["a", "1"]) == b"1" and st.events == [("KV.put", b'{"key": "a"}')]
    assert invoke(st, "KV:get", ["a"]) == b"1"
    with pytest.raises(AlreadyExists):
        invoke(st, "KV:create", ["a", "2"])
    assert invoke(st, "KV:incr", ["n"]) == b"1" and invoke(st, "KV:incr", ["n"]) == b"2"
    assert json.loads(invoke(st, "KV:range", ["a", "z"])) == [["a", "1"], ["n", "2"]]
    invoke(st, "KV:delete", ["a"])
    with pytest.raises(NotFound):
        invoke(st, "KV:get", ["a"])


def test_context_functions():
    st = DictStub()
    who = json.loads(invoke(st, "KV:whoami", []))
    assert who == {"msp_id": "Org1MSP", "tx_id": "tx1", "channel": "ch", "timestamp": 12.5}
    assert invoke(st, "KV:transient", ["s"]) == b"x"
    assert json.loads(invoke(st, "KV:history", ["k"])) == [["t0", "old", False]]


def test_bad_calls_and_fallback_to_the_contracts():
    st = DictStub()
    with pytest.raises(InvalidArgument, match="unknown function"):
        invoke(st, "KV:nope", [])
    with pytest.raises(InvalidArgument, match="arguments"):
        invoke(st, "KV:get", [])
    with pytest.raises(NotFound, match="no chaincode function"):  # routed to chaincode.dispatch
        invoke(st, "Image:steal", [])
