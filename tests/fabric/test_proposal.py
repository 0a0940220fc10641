"""Proposal, envelope and block-header encoding (ledger.fabric.proposal)."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from fabric_protos.common import common_pb2
from fabric_protos.peer import chaincode_pb2, proposal_pb2, proposal_response_pb2, transaction_pb2

from ledger.fabric.proposal import (
    block_header_hash,
    build_proposal,
    channel_header_of,
    compute_tx_id,
    envelope_result,
    seek_envelope,
    sign_envelope,
)
from ledger.identity import P256_ORDER, Consortium, verify


@pytest.fixture(scope="module")
def ident(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("ids"), ["Org1"]).identity("Org1")


def test_tx_id_is_sha256_of_nonce_and_creator(ident):
    p = build_proposal(ident, "ch", "cc", "KV:put", ["a", b"\x00bin"], nonce=b"n" * 24)
    assert (
        p.tx_id
        == compute_tx_id(b"n" * 24, ident.serialized())
        == hashlib.sha256(b"n" * 24 + ident.serialized()).hexdigest()
    )


def test_proposal_fields_as_the_peer_checks_them(ident):
    p = build_proposal(ident, "ch", "cc", "KV:put", ["a", b"\x00bin"], {"t": b"x"}, timestamp=1700000000.25)
    prop = proposal_pb2.Proposal.FromString(p.signed.proposal_bytes)
    header = common_pb2.Header.FromString(prop.header)
    chdr = common_pb2.ChannelHeader.FromString(header.channel_header)
    shdr = common_pb2.SignatureHeader.FromString(header.signature_header)
    assert chdr.type == common_pb2.ENDORSER_TRANSACTION and chdr.epoch == 0
    assert (chdr.channel_id, chdr.tx_id) == ("ch", p.tx_id)
    assert (chdr.timestamp.seconds, chdr.timestamp.nanos) == (1700000000, 250000000)
    ext = proposal_pb2.ChaincodeHeaderExtension.FromString(chdr.extension)
    assert ext.chaincode_id.name == "cc"
    assert shdr.creator == ident.serialized() and len(shdr.nonce) == 24
    ccpp = proposal_pb2.ChaincodeProposalPayload.FromString(prop.payload)
    cis = chaincode_pb2.ChaincodeInvocationSpec.FromString(ccpp.input)
    assert list(cis.chaincode_spec.input.args) == [b"KV:put", b"a", b"\x00bin"]
    assert dict(ccpp.TransientMap) == {"t": b"x"}


def test_signature_is_low_s_and_verifies(ident):
    for _ in range(20):
        p = build_proposal(ident, "ch", "cc", "f", [])
        _, s = decode_dss_signature(p.signed.signature)
        assert s <= P256_ORDER // 2
        assert verify(ident.certificate.public_key(), p.signed.proposal_bytes, p.signed.signature)


def test_nonces_differ(ident):
    assert (
        build_proposal(ident, "ch", "cc", "f", []).tx_id != build_proposal(ident, "ch", "cc", "f", []).tx_id
    )


@pytest.mark.parametrize("bad", [("", "cc", "f"), ("ch", "", "f"), ("ch", "cc", "")])
def test_rejects_empty_names(ident, bad):
    with pytest.raises(ValueError):
        build_proposal(ident, *bad, [])


def _envelope(result: bytes, tx_id: str = "t1") -> common_pb2.Envelope:
    action = proposal_pb2.ChaincodeAction(response=proposal_response_pb2.Response(status=200, payload=result))
    prp = proposal_response_pb2.ProposalResponsePayload(extension=action.SerializeToString())
    cap = transaction_pb2.ChaincodeActionPayload(
        action=transaction_pb2.ChaincodeEndorsedAction(proposal_response_payload=prp.SerializeToString())
    )
    tx = transaction_pb2.Transaction(
        actions=[transaction_pb2.TransactionAction(payload=cap.SerializeToString())]
    )
    chdr = common_pb2.ChannelHeader(tx_id=tx_id, channel_id="ch")
    payload = common_pb2.Payload(
        header=common_pb2.Header(channel_header=chdr.SerializeToString()), data=tx.SerializeToString()
    )
    return common_pb2.Envelope(payload=payload.SerializeToString())


def test_result_extracted_from_endorsed_envelope_and_envelope_signed(ident):
    env = _envelope(b'{"ok":1}')
    assert envelope_result(env) == b'{"ok":1}'
    signed = sign_envelope(ident, env)
    assert signed.payload == env.payload
    assert verify(ident.certificate.public_key(), env.payload, signed.signature)
    assert channel_header_of(signed.SerializeToString()).tx_id == "t1"


def test_a_seek_asks_for_blocks_from_start_to_stop(ident):
    from fabric_protos.orderer import ab_pb2

    def seek(*args):
        payload = common_pb2.Payload.FromString(seek_envelope(ident, "ch", *args).payload)
        return ab_pb2.SeekInfo.FromString(payload.data)

    ranged = seek(3, 9)
    assert (ranged.start.specified.number, ranged.stop.specified.number) == (3, 9)
    assert seek(0).stop.specified.number == 2**64 - 1  # without end: every block to come
    assert seek(None).start.HasField("newest")
    for bad in ((-1, None), (5, 4), (None, -1)):
        with pytest.raises(ValueError):
            seek_envelope(ident, "ch", *bad)


def test_envelope_without_actions_is_an_error():
    payload = common_pb2.Payload(data=transaction_pb2.Transaction().SerializeToString())
    with pytest.raises(ValueError, match="no actions"):
        envelope_result(common_pb2.Envelope(payload=payload.SerializeToString()))


def test_block_header_hash_is_der_sequence_hash():
    # DER by hand: SEQUENCE { INTEGER 1, OCTET STRING 32*aa, OCTET STRING 32*bb }
    prev, data = b"\xaa" * 32, b"\xbb" * 32
    der = b"\x30\x47" + b"\x02\x01\x01" + b"\x04\x20" + prev + b"\x04\x20" + data
    assert block_header_hash(1, prev, data) == hashlib.sha256(der).digest()
    # integers with the high bit set get a leading zero byte; zero is one byte
    der128 = b"\x30\x08\x02\x02\x00\x80\x04\x00\x04\x00"
    assert block_header_hash(128, b"", b"") == hashlib.sha256(der128).digest()
    assert block_header_hash(0, b"", b"") == hashlib.sha256(b"\x30\x07\x02\x01\x00\x04\x00\x04\x00").digest()
