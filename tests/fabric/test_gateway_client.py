"""FabricLedger against an in-process fake Gateway that checks what a peer checks (signatures,
low-S, tx id) -- so the client logic is tested where the real network is not installed."""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures

import grpc
import pytest
from fabric_protos.common import common_pb2
from fabric_protos.gateway import gateway_pb2, gateway_pb2_grpc
from fabric_protos.orderer import ab_pb2
from fabric_protos.peer import (
    chaincode_event_pb2,
    chaincode_pb2,
    events_pb2,
    events_pb2_grpc,
    proposal_pb2,
    proposal_response_pb2,
    transaction_pb2,
)

from chaincode.errors import NotFound
from ledger.errors import AccessDenied, CommitTimeout, LedgerError, LedgerUnavailable, MVCCConflict
from ledger.fabric.gateway import FabricLedger, PeerEndpoint, submit_with_retry
from ledger.fabric.proposal import compute_tx_id
from ledger.identity import Consortium


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# This run's own port for the fake Gateway. A fixed port was shared by concurrent runs (other
# checkouts on the machine): grpc servers reuse ports by default, so one run's client reached the
# other's server, which refused its identities ("does not verify against the Org1MSP CA").
PORT = _free_port()


def _ld(b: bytes) -> bytes:
    """Length-delimited protobuf field body: varint length + bytes."""
    n, out = len(b), bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out) + b


def _status_details(msg: str, msp_id: str = "Org1MSP") -> bytes:
    """google.rpc.Status{code=10, details=[Any(gateway.ErrorDetail)]}."""
    d = gateway_pb2.ErrorDetail(address="peer", msp_id=msp_id, message=msg).SerializeToString()
    any_ = b"\x0a" + _ld(b"type.googleapis.com/gateway.ErrorDetail") + b"\x12" + _ld(d)
    return b"\x08\x0a" + b"\x1a" + _ld(any_)


class FakeGateway(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, membership):
        self.msp = membership
        self.submitted: list[str] = []
        self.codes: dict[str, int] = {}  # tx id -> validation code to report
        self.conflicts_left = 0
        self.events_calls: list[gateway_pb2.ChaincodeEventsRequest] = []
        self.hang_commit = False
        self.lag_left = 0  # "lagging": refusals by another organisation's peer still to come
        # the next submit is ordered, but the Gateway answers as on BFT orderers that got it from the
        # leader first: this detail message per refusing orderer (UNAVAILABLE, below a quorum)
        self.bft_refusal = ""
        self.commit_status_calls = 0
        self.deliver = FakeDeliver(membership)

    def _check(self, signed: proposal_pb2.SignedProposal, context) -> tuple[str, list[bytes]]:
        prop = proposal_pb2.Proposal.FromString(signed.proposal_bytes)
        header = common_pb2.Header.FromString(prop.header)
        chdr = common_pb2.ChannelHeader.FromString(header.channel_header)
        shdr = common_pb2.SignatureHeader.FromString(header.signature_header)
        try:
            self.msp.verify_signature(shdr.creator, signed.proposal_bytes, signed.signature)
        except AccessDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"access denied: {exc}")
        if chdr.tx_id != compute_tx_id(shdr.nonce, shdr.creator):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "incorrect txid")
        cis = chaincode_pb2.ChaincodeInvocationSpec.FromString(
            proposal_pb2.ChaincodeProposalPayload.FromString(prop.payload).input
        )
        return chdr.tx_id, list(cis.chaincode_spec.input.args)

    def _respond(self, args: list[bytes], context) -> bytes:
        if args[0] == b"missing":
            wire = NotFound("no such key", key="k").to_wire()
            context.set_trailing_metadata(
                (("grpc-status-details-bin", _status_details(f"chaincode response 404, {wire}")),)
            )
            context.abort(grpc.StatusCode.ABORTED, "failed to endorse transaction, see attached details")
        if args[0] == b"lagging" and self.lag_left > 0:
            self.lag_left -= 1
            wire = NotFound("image img:1 is not registered").to_wire()
            context.set_trailing_metadata(
                (("grpc-status-details-bin", _status_details(f"chaincode response 404, {wire}", "Org2MSP")),)
            )
            context.abort(grpc.StatusCode.ABORTED, "failed to endorse transaction, see attached details")
        return b"result:" + b",".join(args)

    def Evaluate(self, request, context):  # noqa: N802
        _, args = self._check(request.proposed_transaction, context)
        return gateway_pb2.EvaluateResponse(
            result=proposal_response_pb2.Response(status=200, payload=self._respond(args, context))
        )

    def Endorse(self, request, context):  # noqa: N802
        tx_id, args = self._check(request.proposed_transaction, context)
        action = proposal_pb2.ChaincodeAction(
            response=proposal_response_pb2.Response(status=200, payload=self._respond(args, context))
        )
        prp = proposal_response_pb2.ProposalResponsePayload(extension=action.SerializeToString())
        cap = transaction_pb2.ChaincodeActionPayload(
            action=transaction_pb2.ChaincodeEndorsedAction(proposal_response_payload=prp.SerializeToString())
        )
        tx = transaction_pb2.Transaction(
            actions=[transaction_pb2.TransactionAction(payload=cap.SerializeToString())]
        )
        creator = common_pb2.SignatureHeader.FromString(
            common_pb2.Header.FromString(
                proposal_pb2.Proposal.FromString(request.proposed_transaction.proposal_bytes).header
            ).signature_header
        ).creator
        payload = common_pb2.Payload(
            header=common_pb2.Header(
                channel_header=common_pb2.ChannelHeader(tx_id=tx_id).SerializeToString(),
                signature_header=common_pb2.SignatureHeader(creator=creator).SerializeToString(),
            ),
            data=tx.SerializeToString(),
        )
        if args[0] == b"conflict" and self.conflicts_left > 0:
            self.conflicts_left -= 1
            self.codes[tx_id] = transaction_pb2.MVCC_READ_CONFLICT
        return gateway_pb2.EndorseResponse(
            prepared_transaction=common_pb2.Envelope(payload=payload.SerializeToString())
        )

    def Submit(self, request, context):  # noqa: N802
        env = request.prepared_transaction
        shdr = common_pb2.SignatureHeader.FromString(
            common_pb2.Payload.FromString(env.payload).header.signature_header
        )
        try:
            self.msp.verify_signature(shdr.creator, env.payload, env.signature)
        except AccessDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"bad envelope signature: {exc}")
        self.submitted.append(request.transaction_id)
        self.deliver.commit(
            request.transaction_id, self.codes.get(request.transaction_id, transaction_pb2.VALID)
        )
        if self.bft_refusal:
            message, self.bft_refusal = self.bft_refusal, ""
            context.set_trailing_metadata((("grpc-status-details-bin", _status_details(message, "Org2MSP")),))
            context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "insufficient number of orderers could successfully process transaction to satisfy quorum requirement",
            )
        return gateway_pb2.SubmitResponse()

    def CommitStatus(self, request, context):  # noqa: N802
        self.commit_status_calls += 1
        req = gateway_pb2.CommitStatusRequest.FromString(request.request)
        self.msp.verify_signature(req.identity, request.request, request.signature)
        if self.hang_commit:
            threading.Event().wait(5)
        if req.transaction_id not in self.submitted:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown tx")
        return gateway_pb2.CommitStatusResponse(
            result=self.codes.get(req.transaction_id, transaction_pb2.VALID), block_number=7
        )

    def ChaincodeEvents(self, request, context):  # noqa: N802
        req = gateway_pb2.ChaincodeEventsRequest.FromString(request.request)
        self.msp.verify_signature(req.identity, request.request, request.signature)
        self.events_calls.append(req)
        start = req.start_position.specified.number
        blocks = {5: ["t1", "t2"], 6: ["t3"], 8: ["t4"]}
        first = len(self.events_calls) == 1
        for b in sorted(blocks):
            if b < start:
                continue
            ids = blocks[b]
            if b == start and req.after_transaction_id in ids:
                ids = ids[ids.index(req.after_transaction_id) + 1 :]
            if not ids:
                continue
            yield gateway_pb2.ChaincodeEventsResponse(
                block_number=b,
                events=[
                    chaincode_event_pb2.ChaincodeEvent(
                        chaincode_id="cc", tx_id=t, event_name="E", payload=t.encode()
                    )
                    for t in ids
                ],
            )
            if first and b == 5:
                context.abort(grpc.StatusCode.UNAVAILABLE, "peer going down")  # break the stream once
        threading.Event().wait(30)


class FakeDeliver(events_pb2_grpc.DeliverServicer):
    """The peer's Deliver service for filtered blocks: blocks 0..6 exist; each submit commits one
    more block holding that transaction (hold back with ``hold``); checks the seek envelope's
    signature; can refuse the stream or break it once after a given block."""

    def __init__(self, membership):
        self.msp = membership
        self.blocks: list[list[tuple[str, int]]] = [[] for _ in range(7)]
        self.changed = threading.Condition()
        self.seeks: list[ab_pb2.SeekInfo] = []
        self.refuse = False
        self.forbid = False  # refuse the open streams from now on (e.g. after a config change)
        self.hold = False
        self.break_after: int | None = None

    def commit(self, tx_id: str, code: int) -> None:
        with self.changed:
            self.blocks.append([(tx_id, code)])
            self.changed.notify_all()

    def DeliverFiltered(self, request_iterator, context):  # noqa: N802
        env = next(request_iterator)
        payload = common_pb2.Payload.FromString(env.payload)
        shdr = common_pb2.SignatureHeader.FromString(payload.header.signature_header)
        self.msp.verify_signature(shdr.creator, env.payload, env.signature)
        assert (
            common_pb2.ChannelHeader.FromString(payload.header.channel_header).type
            == common_pb2.DELIVER_SEEK_INFO
        )
        seek = ab_pb2.SeekInfo.FromString(payload.data)
        self.seeks.append(seek)
        if self.refuse:
            yield events_pb2.DeliverResponse(status=common_pb2.FORBIDDEN)
            return
        with self.changed:
            n = (
                len(self.blocks) - 1
                if seek.start.WhichOneof("Type") == "newest"
                else seek.start.specified.number
            )
        while context.is_active():
            if self.forbid:
                yield events_pb2.DeliverResponse(status=common_pb2.FORBIDDEN)
                return
            with self.changed:
                if n >= len(self.blocks) or self.hold:
                    self.changed.wait(0.2)
                    continue
                txs = self.blocks[n]
            yield events_pb2.DeliverResponse(
                filtered_block=events_pb2.FilteredBlock(
                    channel_id="ch",
                    number=n,
                    filtered_transactions=[
                        events_pb2.FilteredTransaction(txid=t, tx_validation_code=c) for t, c in txs
                    ],
                )
            )
            if self.break_after == n:
                self.break_after = None
                context.abort(grpc.StatusCode.UNAVAILABLE, "peer going down")
            n += 1


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("ids"), ["Org1", "Org2"])


@pytest.fixture
def gateway(consortium):
    fake = FakeGateway(consortium.membership())
    server = grpc.server(futures.ThreadPoolExecutor(16), options=[("grpc.so_reuseport", 0)])
    gateway_pb2_grpc.add_GatewayServicer_to_server(fake, server)
    events_pb2_grpc.add_DeliverServicer_to_server(fake.deliver, server)
    assert server.add_insecure_port(f"127.0.0.1:{PORT}") == PORT  # never a port shared with another run
    server.start()
    led = FabricLedger([PeerEndpoint("Org1MSP", f"127.0.0.1:{PORT}")], "ch", "cc")
    yield fake, led
    led.close()
    server.stop(0).wait()


def test_evaluate_and_submit_signed_as_the_peer_requires(gateway, consortium):
    fake, led = gateway
    ident = consortium.identity("Org2")  # no Org2 peer here: uses the first
    assert led.evaluate(ident, "get", "a", "b") == b"result:get,a,b"
    r = led.submit(ident, "put", "k", "v")
    assert (r.result, r.block_number, r.validation_code) == (b"result:put,k,v", 7, "VALID")
    assert fake.submitted == [r.tx_id]
    assert fake.commit_status_calls == 0  # learnt from the filtered block stream


def test_contract_error_from_error_details(gateway, consortium):
    _, led = gateway
    with pytest.raises(NotFound) as e:
        led.submit(consortium.identity("Org1"), "missing")
    assert e.value.details == {"key": "k"}


def test_refusal_by_another_organisations_peer_only_is_endorsed_again(gateway, consortium):
    """The caller's own peer endorsed, only another organisation's peer refused (it had not yet
    committed the block the caller's peer has, e.g. the image just registered): nothing was
    submitted, the submit endorses again; a refusal that persists is reported, typed."""
    fake, led = gateway
    org1 = consortium.identity("Org1")
    fake.lag_left = 2
    r = led.submit(org1, "lagging")
    assert (r.validation_code, fake.lag_left, fake.submitted) == ("VALID", 0, [r.tx_id])
    fake.lag_left = 100
    with pytest.raises(NotFound, match="not registered"):
        led.submit(org1, "lagging")
    assert fake.lag_left == 100 - 6 and len(fake.submitted) == 1  # 1 + 5 endorsements, none sent
    fake.lag_left = 1
    with pytest.raises(NotFound):  # endorse alone does not retry: it reports the refusal
        led.endorse(org1, "lagging")


def _two_peer_ledger() -> FabricLedger:
    """Org1's and Org2's peers: two addresses of the one fake Gateway."""
    return FabricLedger(
        [PeerEndpoint("Org1MSP", f"127.0.0.1:{PORT}"), PeerEndpoint("Org2MSP", f"localhost:{PORT}")],
        "ch",
        "cc",
    )


def test_callers_behind_one_peer_ask_its_height_once(gateway, consortium):
    """Read-your-writes: after Org1's commit in block 7, Org2's peer must reach block 8 before Org2
    reads. Eight concurrent Org2 readers share one height query instead of sending eight."""
    fake, _ = gateway
    led = _two_peer_ledger()
    asked: list[str] = []
    release = threading.Event()

    def block_height(identity) -> int:
        asked.append(identity.msp_id)
        release.wait(5)
        return 8

    led.block_height = block_height  # type: ignore[method-assign]
    try:
        assert led.submit(consortium.identity("Org1"), "put", "k", "v").block_number == 7
        assert led.evaluate(consortium.identity("Org1"), "get") == b"result:get"  # own peer: known
        assert asked == []
        with futures.ThreadPoolExecutor(8) as pool:
            reads = [pool.submit(led.evaluate, consortium.identity("Org2"), "get", str(i)) for i in range(8)]
            deadline = time.monotonic() + 5
            while not asked and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)  # the other seven are waiting by now
            release.set()
            assert [r.result(timeout=10) for r in reads] == [f"result:get,{i}".encode() for i in range(8)]
        assert asked == ["Org2MSP"]
        led.evaluate(consortium.identity("Org2"), "get")  # height 8 now known: no query
        assert asked == ["Org2MSP"]
    finally:
        led.close()


def test_commit_statuses_come_from_one_filtered_block_stream(gateway, consortium):
    """Submits learn validation code and block from the peer's filtered blocks: one stream, signed
    once, opened at the newest block; no CommitStatus call; an MVCC conflict arrives typed."""
    fake, led = gateway
    org1 = consortium.identity("Org1")
    with futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda i: led.submit(org1, "put", str(i)), range(6)))
    assert sorted(r.block_number for r in results) == list(range(7, 13))
    assert all(r.validation_code == "VALID" for r in results)
    fake.conflicts_left = 1
    with pytest.raises(MVCCConflict):
        led.submit(org1, "conflict")
    assert fake.commit_status_calls == 0
    assert [s.start.WhichOneof("Type") for s in fake.deliver.seeks] == ["newest"]
    assert not led._watchers[f"127.0.0.1:{PORT}"]._waiting  # nothing left registered


def test_a_bft_refusal_by_orderers_already_holding_the_transaction_waits_for_its_commit(gateway, consortium):
    """SmartBFT orderers that got the transaction from the leader before the Gateway's copy refuse it
    as "request already processed"; the transaction is ordered all the same: the submit waits for its
    commit and succeeds. A refusal for another reason stays a LedgerUnavailable."""
    fake, led = gateway
    org1 = consortium.identity("Org1")
    fake.bft_refusal = "received unsuccessful response from orderer: status=SERVICE_UNAVAILABLE, info=failed to submit request: request already processed"
    r = led.submit(org1, "put", "a")
    assert r.validation_code == "VALID" and fake.submitted == [r.tx_id]
    fake.bft_refusal = "rpc error: code = Unavailable desc = connection refused"
    with pytest.raises(LedgerUnavailable):
        led.submit(org1, "put", "b")


def test_a_broken_filtered_block_stream_reopens_after_the_last_block_seen(gateway, consortium):
    fake, led = gateway
    org1 = consortium.identity("Org1")
    fake.deliver.break_after = 7
    assert led.submit(org1, "put", "a").block_number == 7
    assert led.submit(org1, "put", "b").block_number == 8  # committed while the stream was reopened
    assert fake.commit_status_calls == 0
    assert [s.start.specified.number for s in fake.deliver.seeks[1:]] == [8]


def test_a_refused_filtered_block_stream_falls_back_to_commit_status(gateway, consortium):
    """Refused: submits ask CommitStatus, and the stream is tried again only after watch_retry_s."""
    fake, led = gateway
    org1 = consortium.identity("Org1")
    led.watch_retry_s = 0.3
    fake.deliver.refuse = True
    assert led.submit(org1, "put", "a").block_number == 7  # CommitStatus's answer
    assert led.submit(org1, "put", "b").validation_code == "VALID"
    assert fake.commit_status_calls == 2 and len(fake.deliver.seeks) == 1  # not asked again yet
    fake.deliver.refuse = False
    time.sleep(0.4)
    assert led.submit(org1, "put", "c").validation_code == "VALID"
    assert fake.commit_status_calls == 2 and len(fake.deliver.seeks) == 2  # watched again


def test_a_stream_refused_later_falls_back_to_commit_status(gateway, consortium):
    """The peer refuses the open stream after a while (say, a channel update removed the right):
    submits from then on ask CommitStatus, and the stream is not opened again."""
    fake, led = gateway
    org1 = consortium.identity("Org1")
    assert led.submit(org1, "put", "a").block_number == 7
    watcher = led._watchers[f"127.0.0.1:{PORT}"]
    fake.deliver.forbid = True
    deadline = time.monotonic() + 5
    while watcher._failure is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert led.submit(org1, "put", "b").validation_code == "VALID"
    assert fake.commit_status_calls == 1 and f"127.0.0.1:{PORT}" not in led._watchers
    assert led.submit(org1, "put", "c").validation_code == "VALID"
    assert fake.commit_status_calls == 2 and len(fake.deliver.seeks) == 1


def test_a_refusal_while_a_submit_waits_is_answered_by_commit_status(gateway, consortium):
    fake, led = gateway
    org1 = consortium.identity("Org1")
    led.submit(org1, "put", "warm")
    fake.deliver.hold = True  # the next block is not delivered ...
    with futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(led.submit, org1, "put", "k")
        deadline = time.monotonic() + 5
        while len(fake.submitted) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        fake.deliver.forbid = True  # ... and the stream is refused while the submit waits
        assert waiting.result(timeout=10).validation_code == "VALID"
    assert fake.commit_status_calls == 1


def test_closing_the_ledger_ends_a_wait_for_a_commit(gateway, consortium):
    fake, led = gateway
    org1 = consortium.identity("Org1")
    led.submit(org1, "put", "warm")
    fake.deliver.hold = True
    with futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(led.submit, org1, "put", "k")
        deadline = time.monotonic() + 5
        while len(fake.submitted) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        led.close()
        with pytest.raises(LedgerError, match="closed while"):
            waiting.result(timeout=10)
    assert fake.commit_status_calls == 0


def test_commit_timeout_while_watching_forgets_the_transaction(gateway, consortium):
    fake, led = gateway
    org1 = consortium.identity("Org1")
    led.submit(org1, "put", "warm")  # the stream is open
    fake.deliver.hold = True
    with pytest.raises(CommitTimeout):
        led.submit(org1, "put", "k", timeout=0.5)
    assert not led._watchers[f"127.0.0.1:{PORT}"]._waiting
    fake.deliver.hold = False


def test_watched_peers_need_no_height_query_for_read_your_writes(gateway, consortium):
    """Read-your-writes across organisations: a peer this client watches (its organisation
    submitted through it) is waited for on its stream; only a peer not watched yet is asked its
    height."""
    fake, _ = gateway
    led = _two_peer_ledger()
    asked: list[str] = []

    def block_height(identity) -> int:
        asked.append(identity.msp_id)
        return len(fake.deliver.blocks)

    led.block_height = block_height  # type: ignore[method-assign]
    org1, org2 = consortium.identity("Org1"), consortium.identity("Org2")
    try:
        assert led.submit(org1, "put", "a").block_number == 7
        assert led.submit(org2, "put", "b").block_number == 8  # Org2's peer not watched yet: asked
        assert asked == ["Org2MSP"]
        assert led.submit(org1, "put", "c").block_number == 9  # both watched from here on
        assert led.evaluate(org2, "get") == b"result:get"
        assert asked == ["Org2MSP"] and led._heights[f"localhost:{PORT}"] == 10
    finally:
        led.close()


def test_foreign_identity_refused(gateway, tmp_path):
    _, led = gateway
    stranger = Consortium.generate(tmp_path / "x", ["Org9"]).identity("Org9")
    with pytest.raises(AccessDenied):
        led.evaluate(stranger, "get")


def test_mvcc_conflict_typed_and_retried(gateway, consortium):
    fake, led = gateway
    fake.conflicts_left = 1
    with pytest.raises(MVCCConflict):
        led.submit(consortium.identity("Org1"), "conflict")
    fake.conflicts_left = 2
    r = submit_with_retry(led, consortium.identity("Org1"), "conflict", attempts=3)
    assert r.validation_code == "VALID"
    fake.conflicts_left = 5
    with pytest.raises(MVCCConflict):
        submit_with_retry(led, consortium.identity("Org1"), "conflict", attempts=2)


def test_commit_timeout(gateway, consortium):
    fake, led = gateway
    fake.hang_commit = True
    ident = consortium.identity("Org1")
    tx, env, _ = led.endorse(ident, "put", "k")
    led.send(ident, tx, env)
    with pytest.raises(CommitTimeout):
        led.commit_status(ident, tx, timeout=0.5)


def test_events_resume_after_broken_stream_without_loss_or_repeat(gateway, consortium):
    fake, led = gateway
    got = [
        (e.block_number, e.tx_id) for e in led.events(consortium.identity("Org1"), start_block=5, timeout=3)
    ]
    assert got == [(5, "t1"), (5, "t2"), (6, "t3"), (8, "t4")]
    first, second = fake.events_calls[0], fake.events_calls[1]
    assert (
        first.start_position.WhichOneof("Type") == "specified" and first.start_position.specified.number == 5
    )
    assert (second.start_position.specified.number, second.after_transaction_id) == (5, "t2")


def test_argument_validation(gateway, consortium):
    _, led = gateway
    with pytest.raises(ValueError):
        FabricLedger([], "ch", "cc")
    with pytest.raises(ValueError):
        list(led.events(consortium.identity("Org1"), start_block=-1))
    with pytest.raises(ValueError):
        led.block(consortium.identity("Org1"), -1)
    with pytest.raises(ValueError):
        submit_with_retry(led, consortium.identity("Org1"), "x", attempts=0)
