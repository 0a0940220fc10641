"""Deterministic payload encoding (algorithms/codec.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms import codec

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=5).filter(lambda k: not k.startswith("$")), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_roundtrip_is_exact_and_stable(v):
    b = codec.encode(v)
    back = codec.decode(b)
    assert codec.encode(back) == b


def test_arrays_keep_dtype_shape_and_bits():
    rng = np.random.default_rng(0)
    arrs = {
        "f": rng.standard_normal((3, 4)),
        "i": np.arange(5, dtype=np.int32),
        "b": np.array([True, False]),
        "s": np.zeros(2, dtype=[("x", "<i8"), ("y", "<f4")]),
        "e": np.zeros((0, 3)),
        "big": np.arange(4, dtype=">i4"),
        "nan": np.array([np.nan, np.inf, -0.0]),
    }
    back = codec.decode(codec.encode(arrs))
    for k, a in arrs.items():
        assert back[k].shape == a.shape
        assert back[k].tobytes() == np.asarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    assert np.signbit(back["nan"][2])
    back["f"][0, 0] = 99.0  # decoded arrays are writeable copies


def test_same_value_same_bytes_regardless_of_dict_order():
    assert codec.encode({"a": 1, "b": [2.5]}) == codec.encode({"b": [2.5], "a": 1})
    assert codec.digest(codec.encode({"a": 1})).startswith("sha256:")


@pytest.mark.parametrize("bad", [{1: "int key"}, {"$nd": 1}, object(), np.array([object()])])
def test_unencodable_values_are_refused(bad):
    with pytest.raises(codec.CodecError):
        codec.encode(bad)


def test_corrupt_payloads_are_refused():
    b = codec.encode({"a": np.arange(3.0)})
    with pytest.raises(codec.CodecError):
        codec.decode(b"XXXX" + b[4:])
    with pytest.raises(codec.CodecError):
        codec.decode(b[:-1])
    with pytest.raises(codec.CodecError):
        codec.decode(b[:10])
