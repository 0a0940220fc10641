"""wire.bounded_json: JSON read from outside is refused past its depth limit, with the depth and the
limit in the message, whether the decoder gave up or not; malformed JSON stays the decoder's error."""

from __future__ import annotations

import pytest

from wire.bounded_json import JSONTooDeep, json_depth, loads


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_bounded_loads_refuses_deep_documents_with_the_depth_and_the_limit():
    assert loads(deep(3), "x") == [[[]]]
    assert loads(deep(4), "x", 4) == [[[[]]]]
    with pytest.raises(JSONTooDeep, match="x is nested 5 levels deep, over the limit of 4 levels"):
        loads(deep(5), "x", 4)
    with pytest.raises(JSONTooDeep, match="deeper than the decoder goes") as err:
        loads(deep(100_000), "x")
    assert isinstance(err.value, ValueError) and err.value.limit == 128
    with pytest.raises(ValueError) as bad:
        loads("[", "x")
    assert not isinstance(bad.value, JSONTooDeep)


def test_json_depth_without_recursion():
    assert json_depth(1) == 0 and json_depth({}) == 1 and json_depth({"a": [1, {"b": []}]}) == 4
    value: list = []
    for _ in range(50_000):
        value = [value]
    assert json_depth(value) == 50_001
