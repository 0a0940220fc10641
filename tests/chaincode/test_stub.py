"""Composite keys, canonical JSON and wire errors (chaincode/stub.py, canonical.py, errors.py)."""

from __future__ import annotations

import pytest

from chaincode.canonical import canonical_json, is_digest, sha256_digest
from chaincode.errors import BudgetExceeded, ContractError, InternalError, NotFound
from chaincode.stub import create_composite_key, split_composite_key


def test_composite_keys_match_fabric_format():
    k = create_composite_key("Execution", ["p1", "000001", "Org1MSP"])
    assert k == "\x00Execution\x00p1\x00000001\x00Org1MSP\x00"
    assert split_composite_key(k) == ("Execution", ["p1", "000001", "Org1MSP"])
    with pytest.raises(ValueError):
        create_composite_key("T", ["bad\x00attr"])
    with pytest.raises(ValueError):
        split_composite_key("plain")


def test_canonical_json_is_sorted_compact_utf8():
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'.encode()
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    d = sha256_digest(b"abc")
    assert is_digest(d) and not is_digest(d.upper()) and not is_digest("sha256:12")


def test_errors_roundtrip_their_wire_form():
    e = BudgetExceeded("over", spent=1.5, budget=1.0)
    back = ContractError.from_wire(e.to_wire())
    assert (
        type(back) is BudgetExceeded
        and back.message == "over"
        and back.details == {"spent": 1.5, "budget": 1.0}
    )
    assert type(ContractError.from_wire(NotFound("x").to_wire())) is NotFound
    assert type(ContractError.from_wire(InternalError("bug").to_wire())) is InternalError
    assert type(ContractError.from_wire("plain text from a peer")) is ContractError
