"""Depth-safe canonical JSON and the argument checks of chaincode.limits (issue 14, item 8)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaincode.errors import InvalidArgument
from chaincode.limits import MAX_ARGUMENT_BYTES, check_arguments, json_depth, parse_json
from wire.canonical import _canonical_json_iterative, canonical_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_iterative_encoder_writes_the_bytes_of_the_c_encoder(value):
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert _canonical_json_iterative(value) == expected
    assert canonical_json(value) == expected.encode()


def test_canonical_json_beyond_the_recursion_limit():
    deep: list = []
    for _ in range(20_000):
        deep = [deep]
    assert canonical_json(deep) == b"[" * 20_001 + b"]" * 20_001
    with pytest.raises(ValueError):
        canonical_json([float("nan")] + [deep])


def test_json_depth():
    assert json_depth(1) == 0 and json_depth([]) == 1 and json_depth({"a": [1, {"b": []}]}) == 4
    deep: dict = {}
    for _ in range(50_000):
        deep = {"k": deep}
    assert json_depth(deep) == 50_001


def test_parse_json_refusals():
    assert parse_json('{"a": [1, 2.5]}', "x") == {"a": [1, 2.5]}
    for text, match in [
        ("NaN", "not finite"),
        ('{"a": -Infinity}', "not finite"),
        ("[1e400]", "not finite"),
        ("{", "not valid JSON"),
        ("[" * 33 + "]" * 33, "nested 33 levels"),
        ("[" * 100_000 + "]" * 100_000, "deeper than the limit"),
    ]:
        with pytest.raises(InvalidArgument, match=match):
            parse_json(text, "x")
    assert parse_json("[" * 32 + "]" * 32, "x") is not None


def test_check_arguments():
    check_arguments("F", ["a", "é" * (MAX_ARGUMENT_BYTES // 2)])
    with pytest.raises(InvalidArgument, match="argument 2 is 1048578 bytes"):
        check_arguments("F", ["a", "é" * (MAX_ARGUMENT_BYTES // 2 + 1)])
    with pytest.raises(InvalidArgument, match="argument 1 is not a string"):
        check_arguments("F", [b"bytes"])
    with pytest.raises(InvalidArgument, match="not valid UTF-8"):
        check_arguments("F", ["\ud800" * (MAX_ARGUMENT_BYTES // 4 + 1)])
