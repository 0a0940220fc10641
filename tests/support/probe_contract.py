"""A small key-value probe contract to bring up and test the Fabric path before (and beside) the
Consortia contracts. Same entry point as ``chaincode.dispatch.invoke``:
``invoke(stub, "Contract:function", args) -> bytes`` raising ``ContractError``."""

from __future__ import annotations

import json
from collections.abc import Callable

from chaincode.endorsement import member_majority
from chaincode.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound
from chaincode.stub import ChaincodeStub, PrivateDataUnavailable, implicit_collection
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


# ---- private data (docs/confidentiality.md): the value written comes from the transient map, never
# from the arguments (which the block carries)
def _private_put(stub: ChaincodeStub, key: str, *collections: str) -> bytes:
    value = stub.get_transient().get("value")
    if value is None:
        raise InvalidArgument("the value travels in the transient map as 'value'")
    for collection in collections:
        stub.put_private_data(collection, key, value)
    return b""


def _private_get(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    try:
        value = stub.get_private_data(collection, key)
    except PrivateDataUnavailable as exc:
        raise Forbidden(f"unavailable: {exc}") from None
    if value is None:
        raise NotFound(f"no private value for key {key!r} in {collection}", key=key)
    return value


def _private_hash(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    return (stub.get_private_data_hash(collection, key) or b"").hex().encode()


def _private_delete(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    stub.del_private_data(collection, key)
    return b""


def _private_purge(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    stub.purge_private_data(collection, key)
    return b""


def _private_guard(stub: ChaincodeStub, collection: str, key: str, *organisations: str) -> bytes:
    """Key-level policy of a private key: a majority of ``organisations``' peers."""
    stub.set_private_data_validation_parameter(collection, key, member_majority(organisations).to_bytes())
    return b""


def _private_policy(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    return stub.get_private_data_validation_parameter(collection, key) or b""


def _private_append(stub: ChaincodeStub, collection: str, key: str) -> bytes:
    """Read a private value and write it back extended (a hashed read, validated by MVCC)."""
    old = _private_get(stub, collection, key)
    stub.put_private_data(collection, key, old + stub.get_transient().get("value", b""))
    return b""


def _private_own(stub: ChaincodeStub, key: str) -> bytes:
    """The executing organisation's own copy of ``key`` (its implicit collection)."""
    return _private_get(stub, implicit_collection(stub.get_msp_id()), key)


def _msp(stub: ChaincodeStub) -> bytes:
    return stub.get_msp_id().encode()


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
    "KV:private_put": _private_put,
    "KV:private_get": _private_get,
    "KV:private_hash": _private_hash,
    "KV:private_delete": _private_delete,
    "KV:private_purge": _private_purge,
    "KV:private_guard": _private_guard,
    "KV:private_policy": _private_policy,
    "KV:private_append": _private_append,
    "KV:private_own": _private_own,
    "KV:msp": _msp,
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
    except ValueError as exc:  # a key or collection the stub refuses
        raise InvalidArgument(f"{function}: {exc}") from None
