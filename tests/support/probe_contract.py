"""A small key-value probe contract to bring up and test the Fabric path before (and beside) the
Consortia contracts. Same entry point as ``chaincode.dispatch.invoke``:
``invoke(stub, "Contract:function", args) -> bytes`` raising ``ContractError``."""

from __future__ import annotations

import json
from collections.abc import Callable

from chaincode.errors import AlreadyExists, InvalidArgument, NotFound
from chaincode.stub import ChaincodeStub
from ledger.identity import parse_serialized_identity


def _put(stub: ChaincodeStub, key: str, value: str) -> bytes:
    stub.put_state(key, value.encode())
    stub.set_event("KV.put", json.dumps({"key": key}).encode())
    return value.encode()


def _create(stub: ChaincodeStub, key: str, value: str) -> bytes:
    if stub.get_state(key) is not None:
        raise AlreadyExists(f"key {key!r} already exists", key=key)
    return _put(stub, key, value)


def _get(stub: ChaincodeStub, key: str) -> bytes:
    v = stub.get_state(key)
    if v is None:
        raise NotFound(f"no value for key {key!r}", key=key)
    return v


def _incr(stub: ChaincodeStub, key: str) -> bytes:
    n = int((stub.get_state(key) or b"0").decode()) + 1
    stub.put_state(key, str(n).encode())
    return str(n).encode()


def _delete(stub: ChaincodeStub, key: str) -> bytes:
    stub.del_state(key)
    return b""


def _range(stub: ChaincodeStub, start: str, end: str) -> bytes:
    return json.dumps([[kv.key, kv.value.decode()] for kv in stub.get_state_by_range(start, end)]).encode()


def _history(stub: ChaincodeStub, key: str) -> bytes:
    return json.dumps(
        [[m.tx_id, m.value.decode(), m.is_delete] for m in stub.get_history_for_key(key)]
    ).encode()


def _whoami(stub: ChaincodeStub) -> bytes:
    msp, _ = parse_serialized_identity(stub.get_creator())
    return json.dumps(
        {
            "msp_id": msp,
            "tx_id": stub.get_tx_id(),
            "channel": stub.get_channel_id(),
            "timestamp": stub.get_tx_timestamp(),
        }
    ).encode()


def _transient(stub: ChaincodeStub, name: str) -> bytes:
    return stub.get_transient().get(name, b"")


FUNCTIONS: dict[str, Callable[..., bytes]] = {
    "KV:put": _put,
    "KV:create": _create,
    "KV:get": _get,
    "KV:incr": _incr,
    "KV:delete": _delete,
    "KV:range": _range,
    "KV:history": _history,
    "KV:whoami": _whoami,
    "KV:transient": _transient,
}


def invoke(stub: ChaincodeStub, function: str, args: list[str]) -> bytes:
    """``KV:*`` functions here; every other function goes to the Consortia contracts
    (``chaincode.dispatch.invoke``), so one network serves both the probe and the contracts."""
    fn = FUNCTIONS.get(function)
    if fn is None:
        if function.startswith("KV:"):
            raise InvalidArgument(f"unknown function {function!r}", function=function)
        from chaincode.dispatch import invoke as contracts_invoke

        return contracts_invoke(stub, function, args)
    try:
        return fn(stub, *args)
    except TypeError as exc:
        raise InvalidArgument(f"{function}: wrong number of arguments ({exc})") from None
