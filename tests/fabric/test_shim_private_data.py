"""The CCaaS shim's private-data calls (docs/confidentiality.md): each is the chaincode message
fabric-chaincode-go's ``shim/stub.go`` sends, with the ``collection`` field set, and the organisation
the service runs for reaches the stub (``get_msp_id``). Driven without a peer: the stub's calls are
recorded and answered here, as the peer's handler would."""

from __future__ import annotations

import pytest
from fabric_protos.peer import chaincode_pb2, chaincode_shim_pb2, proposal_response_pb2

from chaincode.endorsement import VALIDATION_PARAMETER
from chaincode.stub import PrivateDataUnavailable, implicit_collection
from ledger.fabric.shim_stub import FabricStub, PeerError

Msg = chaincode_shim_pb2.ChaincodeMessage
MINE = implicit_collection("Org1MSP")
THEIRS = implicit_collection("Org2MSP")


class _Peer:
    """Records each call (kind, payload) and answers from ``replies`` (bytes or a PeerError)."""

    def __init__(self, replies: dict[int, bytes | PeerError] | None = None):
        self.calls: list[tuple[int, bytes]] = []
        self.replies = replies or {}

    def call_peer(self, channel_id: str, tx_id: str, kind: int, payload: bytes) -> bytes:
        self.calls.append((kind, payload))
        reply = self.replies.get(kind, b"")
        if isinstance(reply, PeerError):
            raise reply
        return reply


def _stub(peer: _Peer, msp_id: str = "Org1MSP") -> FabricStub:
    msg = Msg(
        type=Msg.TRANSACTION,
        txid="t1",
        channel_id="ch",
        payload=chaincode_pb2.ChaincodeInput(args=[b"f"]).SerializeToString(),
    )
    return FabricStub(peer, msg, msp_id=msp_id)


def test_private_writes_are_state_messages_with_the_collection():
    peer = _Peer()
    stub = _stub(peer)
    stub.put_private_data(THEIRS, "k", b"secret")
    stub.del_private_data(MINE, "k")
    stub.purge_private_data(MINE, "old")
    stub.set_private_data_validation_parameter(THEIRS, "k", b"policy-bytes")
    kinds = [k for k, _ in peer.calls]
    assert kinds == [Msg.PUT_STATE, Msg.DEL_STATE, Msg.PURGE_PRIVATE_DATA, Msg.PUT_STATE_METADATA]
    put = chaincode_shim_pb2.PutState.FromString(peer.calls[0][1])
    assert (put.collection, put.key, put.value) == (THEIRS, "k", b"secret")
    delete = chaincode_shim_pb2.DelState.FromString(peer.calls[1][1])
    assert (delete.collection, delete.key) == (MINE, "k")
    purge = chaincode_shim_pb2.DelState.FromString(peer.calls[2][1])
    assert (purge.collection, purge.key) == (MINE, "old")
    meta = chaincode_shim_pb2.PutStateMetadata.FromString(peer.calls[3][1])
    assert (meta.collection, meta.key, meta.metadata.metakey, meta.metadata.value) == (
        THEIRS,
        "k",
        VALIDATION_PARAMETER,
        b"policy-bytes",
    )


def test_private_reads_hash_and_metadata():
    entries = chaincode_shim_pb2.StateMetadataResult(
        entries=[chaincode_shim_pb2.StateMetadata(metakey=VALIDATION_PARAMETER, value=b"ep")]
    )
    peer = _Peer(
        {
            Msg.GET_STATE: b"value",
            Msg.GET_PRIVATE_DATA_HASH: b"\x01" * 32,
            Msg.GET_STATE_METADATA: entries.SerializeToString(),
        }
    )
    stub = _stub(peer)
    assert stub.get_msp_id() == "Org1MSP"
    assert stub.get_private_data(MINE, "k") == b"value"
    assert stub.get_private_data_hash(THEIRS, "k") == b"\x01" * 32
    assert stub.get_private_data_validation_parameter(THEIRS, "k") == b"ep"
    get = chaincode_shim_pb2.GetState.FromString(peer.calls[0][1])
    digest = chaincode_shim_pb2.GetState.FromString(peer.calls[1][1])
    meta = chaincode_shim_pb2.GetStateMetadata.FromString(peer.calls[2][1])
    assert [(m.collection, m.key) for m in (get, digest, meta)] == [(MINE, "k"), (THEIRS, "k"), (THEIRS, "k")]
    assert [k for k, _ in peer.calls] == [Msg.GET_STATE, Msg.GET_PRIVATE_DATA_HASH, Msg.GET_STATE_METADATA]
    # nothing, read as absent (Fabric answers an empty payload)
    assert _stub(_Peer()).get_private_data(MINE, "none") is None
    assert _stub(_Peer()).get_private_data_hash(MINE, "none") is None


def test_another_organisations_collection_is_not_read_and_a_missing_copy_is_unavailable():
    peer = _Peer()
    with pytest.raises(PrivateDataUnavailable, match="not held by the executing organisation Org1MSP"):
        _stub(peer).get_private_data(THEIRS, "k")
    assert peer.calls == []  # refused before asking the peer, as on the embedded host
    with pytest.raises(PrivateDataUnavailable):
        _stub(_Peer(), msp_id="").get_private_data(MINE, "k")  # a service not told its organisation
    missing = PeerError(
        "private data matching public hash version is not available. Public hash version = ..."
    )
    with pytest.raises(PrivateDataUnavailable):
        _stub(_Peer({Msg.GET_STATE: missing})).get_private_data(MINE, "k")
    with pytest.raises(PeerError, match="access denied"):  # any other refusal stays the peer's
        _stub(_Peer({Msg.GET_STATE: PeerError("access denied")})).get_private_data(MINE, "k")
    with pytest.raises(ValueError):
        _stub(_Peer()).put_private_data("", "k", b"v")


def test_the_service_tells_each_transaction_its_organisation():
    """``serve(msp_id=...)`` -> each stream -> each transaction's stub (``--msp-id``, default
    ``CORE_PEER_LOCALMSPID``)."""
    from ledger.fabric.chaincode_server import _Stream

    sent: list[Msg] = []

    class _Loop:
        def call_later(self, *_):
            raise AssertionError("no stub call expected")

    def contract(stub, function, args):
        return stub.get_msp_id().encode()

    stream = _Stream(contract, sent.append, _Loop(), msp_id="Org3MSP")  # type: ignore[arg-type]
    stream.receive(
        Msg(
            type=Msg.TRANSACTION,
            txid="t",
            channel_id="ch",
            payload=chaincode_pb2.ChaincodeInput(args=[b"who"]).SerializeToString(),
        )
    )
    (done,) = sent
    assert done.type == Msg.COMPLETED
    assert proposal_response_pb2.Response.FromString(done.payload).payload == b"Org3MSP"
