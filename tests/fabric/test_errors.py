"""Gateway error translation (ledger.fabric.errors)."""

from __future__ import annotations

import grpc
import pytest
from fabric_protos.gateway import gateway_pb2
from google.rpc import status_pb2

from chaincode.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound
from ledger.errors import (
    AccessDenied,
    EndorsementFailure,
    EndorsementPolicyFailure,
    LedgerError,
    LedgerUnavailable,
    MVCCConflict,
    TransactionInvalid,
    outcome_unknown,
    transient,
)
from ledger.fabric.errors import error_details, held_by_orderers, translate, validation_error


def _ld(b: bytes) -> bytes:
    n, out = len(b), bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def status_bin(code: int, message: str, details: list[gateway_pb2.ErrorDetail]) -> bytes:
    """google.rpc.Status{code=1, message=2, details=3 (Any{type_url=1, value=2})} by hand."""
    out = b"\x08" + bytes([code]) + b"\x12" + _ld(message.encode()) + message.encode()
    for d in details:
        url = b"type.googleapis.com/gateway.ErrorDetail"
        val = d.SerializeToString()
        any_ = b"\x0a" + _ld(url) + url + b"\x12" + _ld(val) + val
        out += b"\x1a" + _ld(any_) + any_
    return out


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailing=()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


def endorse_error(peer_message: str) -> FakeRpcError:
    d = gateway_pb2.ErrorDetail(address="127.0.0.1:7051", msp_id="Org1MSP", message=peer_message)
    return FakeRpcError(
        grpc.StatusCode.ABORTED,
        "failed to endorse transaction, see attached details",
        (("grpc-status-details-bin", status_bin(10, "failed", [d])),),
    )


def test_error_details_decoded_from_status_trailer():
    err = endorse_error("chaincode response 404, boom")
    [d] = error_details(err)
    assert (d.address, d.msp_id, d.message) == ("127.0.0.1:7051", "Org1MSP", "chaincode response 404, boom")
    assert error_details(FakeRpcError(grpc.StatusCode.UNKNOWN, "x")) == []


def _any(type_url: bytes, value: bytes) -> bytes:
    any_ = b"\x0a" + _ld(type_url) + type_url + b"\x12" + _ld(value) + value
    return b"\x1a" + _ld(any_) + any_


def test_status_decoding_matches_googleapis():
    d = gateway_pb2.ErrorDetail(address="a:1", msp_id="Org2MSP", message="m")
    official = status_pb2.Status(code=10, message="failed")
    official.details.add().Pack(d)
    assert status_bin(10, "failed", [d]) == official.SerializeToString()


@pytest.mark.parametrize(
    "trailer",
    [
        pytest.param(b"\x1a\x05ab", id="detail-cut-short"),
        pytest.param(b"\x1a" + b"\xff" * 11, id="varint-longer-than-10-bytes"),
        pytest.param(b"\x12\xff\xff\xff\xff\x0f", id="message-length-past-the-end"),
        pytest.param(b"\x0b", id="group-start"),
        pytest.param(b"\x02\x00", id="field-number-0"),
    ],
)
def test_a_malformed_status_trailer_yields_no_details_and_still_translates(trailer):
    err = FakeRpcError(grpc.StatusCode.ABORTED, "failed to endorse", (("grpc-status-details-bin", trailer),))
    assert error_details(err) == []
    translated = translate(err, "endorse")
    assert type(translated) is EndorsementFailure and "ABORTED: failed to endorse" in str(translated)


def test_details_of_another_type_or_malformed_are_skipped_and_the_rest_kept():
    good = gateway_pb2.ErrorDetail(address="p:1", msp_id="Org1MSP", message="kept").SerializeToString()
    trailer = (
        b"\x08\x0a"
        + _any(b"type.googleapis.com/google.rpc.DebugInfo", b"\x12\x01x")
        + _any(b"type.googleapis.com/gateway.ErrorDetail", b"\x0a\x09p")  # address cut short
        + _any(b"type.googleapis.com/gateway.ErrorDetail", good)
    )
    err = FakeRpcError(
        grpc.StatusCode.ABORTED, "x", (("other-key", b"\xff"), ("grpc-status-details-bin", trailer))
    )
    assert [(d.address, d.msp_id, d.message) for d in error_details(err)] == [("p:1", "Org1MSP", "kept")]


def test_contract_error_in_detail_rebuilt_typed():
    wire = NotFound("image x does not exist", key="x").to_wire()
    err = translate(endorse_error(f"chaincode response 404, {wire}"), "endorse")
    assert (
        isinstance(err, NotFound) and err.details == {"key": "x"} and err.message == "image x does not exist"
    )


def test_contract_error_in_evaluate_message_rebuilt_typed():
    wire = AlreadyExists("dup {braces} inside", id="a").to_wire()
    err = translate(
        FakeRpcError(
            grpc.StatusCode.UNKNOWN,
            f"evaluate call to endorser returned error: chaincode response 409, {wire}",
        ),
        "evaluate",
    )
    assert isinstance(err, AlreadyExists) and err.message == "dup {braces} inside"
    assert isinstance(translate(endorse_error(f"x {Forbidden('no').to_wire()}"), "endorse"), Forbidden)


@pytest.mark.parametrize("ident", ["a{", "}b", "x}{y", '{"code":"NOT_FOUND"', "}}}", "{{{", 'q"}{"'])
def test_contract_error_with_unbalanced_braces_in_strings_stays_typed(ident):
    """Issue 14 item 10: braces inside the JSON strings (an id, a message) must not end the
    object early -- a brace counter turned these into EndorsementFailure."""
    wire = NotFound(f"process {ident} does not exist", key=ident).to_wire()
    err = translate(endorse_error(f"chaincode response 404, {wire}"), "endorse")
    assert isinstance(err, NotFound) and err.details == {"key": ident}
    assert err.message == f"process {ident} does not exist"
    wire = InvalidArgument(f"bad {ident}", field=ident).to_wire()
    err = translate(
        FakeRpcError(
            grpc.StatusCode.UNKNOWN,
            f"evaluate call to endorser returned error: chaincode response 400, {wire} (peer0)",
        ),
        "evaluate",
    )
    assert isinstance(err, InvalidArgument) and err.details == {"field": ident}


def test_contract_error_after_unrelated_braces_and_no_contract_error():
    wire = NotFound("gone", key="k").to_wire()
    err = translate(endorse_error('prefix {not json} {"x": 1} then ' + wire), "endorse")
    assert isinstance(err, NotFound) and err.details == {"key": "k"}
    err = translate(endorse_error('chaincode response 500, {"code": unterminated'), "endorse")
    assert isinstance(err, EndorsementFailure)


@pytest.mark.parametrize(
    "msg",
    [
        "access denied: channel [consortia] creator org unknown, creator is malformed",
        "Failed evaluating policy on signed data during check policy on channel [c] with policy [/Channel/Application/Writers]",
        "error validating proposal: access denied: channel [c] creator org [Org9MSP]",
    ],
)
def test_refused_identities_become_access_denied(msg):
    assert isinstance(translate(endorse_error(msg), "endorse"), AccessDenied)
    assert isinstance(
        translate(FakeRpcError(grpc.StatusCode.PERMISSION_DENIED, "no"), "evaluate"), AccessDenied
    )


def test_other_failures_by_stage():
    failed = FakeRpcError(grpc.StatusCode.ABORTED, "failed to endorse transaction")
    assert type(translate(failed, "endorse")) is EndorsementFailure
    assert type(translate(FakeRpcError(grpc.StatusCode.INTERNAL, "boom"), "submit")) is LedgerError
    assert "INTERNAL" in str(translate(FakeRpcError(grpc.StatusCode.INTERNAL, "boom"), "submit"))


def test_an_unreachable_peer_or_orderer_is_a_transient_ledger_unavailable():
    """Issue 27 item 6: what made agents exit -- their own peer down (the client's UNAVAILABLE), a peer
    that does not answer (DEADLINE_EXCEEDED), another organisation's peer unreachable during the
    endorsement, the orderers down -- is LedgerUnavailable, the one kind ridden out."""
    own_peer = FakeRpcError(
        grpc.StatusCode.UNAVAILABLE,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7051: Connection refused",
    )
    err = translate(own_peer, "endorse", "127.0.0.1:7051")
    assert type(err) is LedgerUnavailable and transient(err) and not err.outcome_unknown
    assert err.endpoint == "127.0.0.1:7051" and "UNAVAILABLE: failed to connect" in str(err)
    hung = translate(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), "evaluate", "p:1")
    assert isinstance(hung, LedgerUnavailable) and hung.endpoint == "p:1"
    d = gateway_pb2.ErrorDetail(
        address="127.0.0.1:9051",
        msp_id="Org2MSP",
        message='rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
        'dialing: dial tcp 127.0.0.1:9051: connect: connection refused"',
    )
    other_peer = FakeRpcError(
        grpc.StatusCode.ABORTED,
        "failed to collect enough transaction endorsements, see attached details for more info",
        (("grpc-status-details-bin", status_bin(10, "failed", [d])),),
    )
    err = translate(other_peer, "endorse", "127.0.0.1:7051")
    assert isinstance(err, LedgerUnavailable) and err.endpoint == "127.0.0.1:9051"
    orderers = FakeRpcError(grpc.StatusCode.UNAVAILABLE, "no orderers could successfully process transaction")
    err = translate(orderers, "submit", "127.0.0.1:7051")
    assert isinstance(err, LedgerUnavailable) and err.outcome_unknown and outcome_unknown(err)
    assert err.endpoint == "orderers (through peer 127.0.0.1:7051)"
    # a restarted peer whose discovery does not know the others yet (seen on the real network)
    lonely = FakeRpcError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "no combination of peers can be derived which satisfy the endorsement policy: "
        "no peer combination can satisfy the endorsement policy",
    )
    assert isinstance(translate(lonely, "endorse", "p:1"), LedgerUnavailable)
    # a member asked to endorse (a private copy: every member endorses) with no reachable peer; the
    # words alone decide, whatever the status code
    member_down = FakeRpcError(
        grpc.StatusCode.FAILED_PRECONDITION, "failed to find any endorsing peers for org(s): Org2MSP"
    )
    assert isinstance(translate(member_down, "endorse", "p:1"), LedgerUnavailable)
    lost = translate(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed"), "commit", "p:1")
    assert isinstance(lost, LedgerUnavailable) and lost.outcome_unknown


def _bft_refusal(*messages: str) -> FakeRpcError:
    """The Gateway's BFT submit refusal: fewer than a quorum of orderers accepted, one detail per refusal."""
    details = [
        gateway_pb2.ErrorDetail(address=f"127.0.{i}.1:24050", msp_id=f"Org{i}MSP", message=m)
        for i, m in enumerate(messages, start=3)
    ]
    return FakeRpcError(
        grpc.StatusCode.UNAVAILABLE,
        "insufficient number of orderers could successfully process transaction to satisfy quorum requirement",
        (("grpc-status-details-bin", status_bin(14, "insufficient", details)),),
    )


def test_a_bft_submit_refused_only_by_orderers_already_holding_it_is_handed_over():
    """Seen on four SmartBFT orderers under load: two of them got the transaction from the leader before
    the Gateway's copy and answered "request already processed"; the Gateway reported UNAVAILABLE
    although the transaction was ordered. Those refusals say that the orderers hold it; any other
    refusal among them keeps the submit a failure, as does another status."""
    held = "received unsuccessful response from orderer: status=SERVICE_UNAVAILABLE, info=failed to submit request: request already processed"
    assert held_by_orderers(_bft_refusal(held, held))
    down = "rpc error: code = Unavailable desc = connection error: connect: connection refused"
    assert not held_by_orderers(_bft_refusal(held, down))
    assert isinstance(translate(_bft_refusal(held, down), "submit", "p:1"), LedgerUnavailable)
    assert not held_by_orderers(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "no orderers could process it"))
    aborted = _bft_refusal(held)
    aborted._code = grpc.StatusCode.ABORTED
    assert not held_by_orderers(aborted)


def test_refusals_stay_answers_even_with_unreachable_words_around():
    """A contract's refusal, a refused identity or disagreeing endorsements are never transient."""
    wire = InvalidArgument("bad signature", field="signature").to_wire()
    assert isinstance(translate(endorse_error(f"chaincode response 400, {wire}"), "endorse"), InvalidArgument)
    denied = translate(FakeRpcError(grpc.StatusCode.PERMISSION_DENIED, "unavailable to you"), "evaluate")
    assert isinstance(denied, AccessDenied) and not transient(denied)
    mismatch = translate(endorse_error("ProposalResponsePayloads do not match"), "endorse")
    assert type(mismatch) is EndorsementFailure and not transient(mismatch)


def test_validation_codes_to_typed_errors():
    assert isinstance(validation_error("t", 11), MVCCConflict)
    assert validation_error("t", 12).validation_code == "PHANTOM_READ_CONFLICT"
    e = validation_error("t", 10)
    assert isinstance(e, EndorsementPolicyFailure) and e.tx_id == "t"
    dup = validation_error("t", 9)
    assert type(dup) is TransactionInvalid and dup.validation_code == "DUPLICATE_TXID"
    assert validation_error("t", 4242).validation_code == "4242"
