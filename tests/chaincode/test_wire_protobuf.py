"""The one bounds-checked protobuf varint reader/writer (wire/protobuf.py) and its users."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaincode.context import TransactionContext
from chaincode.errors import Forbidden
from ledger.identity import parse_serialized_identity, serialize_identity
from wire.protobuf import WireError, encode_varint, length_delimited, read_fields, read_varint


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_varints_round_trip(n):
    b = encode_varint(n)
    assert read_varint(b) == (n, len(b)) and read_varint(b"\x07" + b, 1) == (n, len(b) + 1)


def test_known_encodings():
    assert encode_varint(0) == b"\x00" and encode_varint(300) == b"\xac\x02"
    assert encode_varint(2**64 - 1) == b"\xff" * 9 + b"\x01"
    with pytest.raises(WireError):
        encode_varint(-1)
    with pytest.raises(WireError):
        encode_varint(2**64)


@pytest.mark.parametrize(
    "buf, message",
    [
        (b"", "truncated"),
        (b"\x80", "truncated"),
        (b"\xff\xff\xff", "truncated"),
        (b"\xff" * 10 + b"\x01", "longer than 10"),  # eleven bytes
        (b"\x80" * 20, "longer than 10"),
        (b"\xff" * 9 + b"\x02", "exceeds 64 bits"),  # ten bytes, 2**64
    ],
)
def test_malformed_overlong_and_truncated_varints_are_refused(buf, message):
    with pytest.raises(WireError, match=message):
        read_varint(buf)


@pytest.mark.parametrize(
    "buf",
    [
        b"\x0a\x05abc",  # length past the end
        b"\x0a",  # length missing
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 2**64 - 1 bytes announced
        b"\x09\x00\x00",  # fixed64 cut short
        b"\x0d\x00",  # fixed32 cut short
        b"\x0b",  # group start (wire type 3)
        b"\x02\x00",  # field number 0
    ],
)
def test_malformed_messages_are_refused(buf):
    with pytest.raises(WireError):
        read_fields(buf)


def test_fields_are_read_in_order():
    msg = b"\x08\x96\x01" + b"\x12\x02hi" + b"\x19" + bytes(8) + b"\x25" + bytes(4)
    assert read_fields(msg) == [(1, 0, 150), (2, 2, b"hi"), (3, 1, bytes(8)), (4, 5, bytes(4))]
    assert length_delimited(b"\x0a\x01a\x12\x01b") == {1: b"a", 2: b"b"}
    with pytest.raises(WireError):
        length_delimited(b"\x08\x01")


class _Stub:
    def __init__(self, creator: bytes):
        self.creator = creator

    def get_creator(self) -> bytes:
        return self.creator


@pytest.mark.parametrize(
    "creator",
    [b"\x0a\x07Org1MSP\x12\xff\xff\xff\xff\x0f", b"\x0a\x80", b"\x0a" + b"\xff" * 11, b"\x0a\x01A"],
)
def test_the_contracts_refuse_a_malformed_creator(creator):
    with pytest.raises(Forbidden, match="identity"):
        TransactionContext(_Stub(creator))


def test_serialized_identity_still_round_trips():
    cert = b"-----BEGIN CERTIFICATE-----\n" + b"x" * 300 + b"\n-----END CERTIFICATE-----\n"
    assert parse_serialized_identity(serialize_identity("Org1MSP", cert)) == ("Org1MSP", cert)


@pytest.mark.parametrize("data", [b"\x0a\x05ab", b"\x0a\x01A", b"\x08\x01", b"\x0a" + b"\xff" * 11])
def test_the_ledger_refuses_a_malformed_serialized_identity(data):
    with pytest.raises(ValueError):
        parse_serialized_identity(data)
