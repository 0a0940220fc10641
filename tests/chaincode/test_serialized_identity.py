"""Fabric's ``msp.SerializedIdentity`` read and written with the official protobuf message
(``hyperledger-fabric-protos``): hostile bytes are refused with a typed error by the contracts
(``Forbidden``) and by the ledger (``ValueError``), never an ``IndexError`` or a silent short read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaincode.context import TransactionContext, creator_of
from chaincode.errors import Forbidden
from ledger.identity import Consortium, parse_serialized_identity, serialize_identity

# Bytes that are not a well-formed SerializedIdentity{mspid=1 string, id_bytes=2 bytes}.
MALFORMED = [
    pytest.param(b"\x0a\x07Org1MSP\x12\xff\xff\xff\xff\x0f", id="length-past-the-end"),
    pytest.param(b"\x0a\x80", id="truncated-length-varint"),
    pytest.param(b"\x0a" + b"\xff" * 11, id="varint-longer-than-10-bytes"),
    pytest.param(b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", id="2**64-1-bytes-announced"),
    pytest.param(b"\x0a\x05ab", id="string-cut-short"),
    pytest.param(b"\x0a", id="length-missing"),
    pytest.param(b"\x09\x00\x00", id="fixed64-cut-short"),
    pytest.param(b"\x0d\x00", id="fixed32-cut-short"),
    pytest.param(b"\x0b", id="group-start"),
    pytest.param(b"\x02\x00", id="field-number-0"),
    pytest.param(b"\x0a\x02\xff\xfe\x12\x01x", id="mspid-not-utf8"),
]
# Well-formed protobuf that is not a usable identity.
INCOMPLETE = [
    pytest.param(b"", id="empty"),
    pytest.param(b"\x0a\x01A", id="no-id-bytes"),
    pytest.param(b"\x12\x01x", id="no-mspid"),
    pytest.param(b"\x08\x01", id="mspid-as-varint"),
]


class _Stub:
    def __init__(self, creator: bytes):
        self.creator = creator

    def get_creator(self) -> bytes:
        return self.creator


@pytest.fixture(scope="module")
def cons(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("cons"), ["Org1"])


def test_known_encoding_is_fabrics():
    # field 1 (0x0a) length 7 "Org1MSP", field 2 (0x12) length 10, the certificate bytes
    assert serialize_identity("Org1MSP", b"ABCDEFGHIJ") == b"\x0a\x07Org1MSP\x12\x0aABCDEFGHIJ"
    long = b"x" * 300
    assert serialize_identity("Org1MSP", long) == b"\x0a\x07Org1MSP\x12\xac\x02" + long


@given(st.text(min_size=1, max_size=40), st.binary(min_size=1, max_size=2000))
def test_serialized_identity_round_trips(msp_id, certificate):
    assert parse_serialized_identity(serialize_identity(msp_id, certificate)) == (msp_id, certificate)


@pytest.mark.parametrize("data", MALFORMED)
def test_the_ledger_refuses_malformed_bytes(data):
    with pytest.raises(ValueError, match="malformed SerializedIdentity"):
        parse_serialized_identity(data)


@pytest.mark.parametrize("data", INCOMPLETE)
def test_the_ledger_refuses_an_identity_without_mspid_or_certificate(data):
    with pytest.raises(ValueError, match="lacks mspid or id_bytes"):
        parse_serialized_identity(data)


@pytest.mark.parametrize("creator", MALFORMED + INCOMPLETE)
def test_the_contracts_refuse_a_malformed_creator(creator):
    with pytest.raises(Forbidden, match="cannot read the submitter's identity"):
        TransactionContext(_Stub(creator))


def test_the_contracts_read_a_real_creator(cons):
    ident = cons.identity("Org1")
    msp_id, certificate, role, subject = creator_of(ident.serialized())
    assert (msp_id, role, subject) == ("Org1MSP", "client", "User1@org1.example.com")
    assert certificate == ident.certificate
    ctx = TransactionContext(_Stub(ident.serialized()))
    assert (ctx.msp_id, ctx.role) == ("Org1MSP", "client")


def test_a_truncated_real_identity_is_refused_everywhere(cons):
    cut = cons.identity("Org1").serialized()[:-5]
    with pytest.raises(ValueError, match="malformed SerializedIdentity"):
        parse_serialized_identity(cut)
    with pytest.raises(Forbidden, match="malformed SerializedIdentity"):
        TransactionContext(_Stub(cut))
