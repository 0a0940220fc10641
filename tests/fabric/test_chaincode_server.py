"""The Python CCaaS shim against a fake peer speaking Fabric's chaincode protocol in-process.

Each test checks one behaviour that fabric-chaincode-python 2.5.4 gets wrong (docs/fabric.md,
"Chaincode service"): concurrency on one stream, ERROR replies, chaincode events, early errors, keepalive, range keys.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time

import grpc
import pytest
from fabric_protos.ledger.queryresult import kv_query_result_pb2
from fabric_protos.peer import (
    chaincode_pb2,
    chaincode_shim_pb2,
    chaincode_shim_pb2_grpc,
    proposal_response_pb2,
)

from chaincode.errors import ContractError, NotFound
from chaincode.stub import create_composite_key
from ledger.fabric import chaincode_server
from ledger.fabric.chaincode_server import SERVER_OPTIONS, load_dispatch, serve
from ledger.fabric.proposal import build_proposal
from ledger.identity import Consortium

Msg = chaincode_shim_pb2.ChaincodeMessage
CHANNEL = "ch"


class FakePeer:
    """Drives one Connect stream like a peer: answers state calls from a dict; pages ranges by 2."""

    def __init__(
        self,
        address: str,
        fail_keys: tuple[str, ...] = (),
        delay_s: float = 0.0,
        options: tuple[tuple[str, int], ...] = (),
        credentials: grpc.ChannelCredentials | None = None,
    ):
        self.state: dict[str, bytes] = {}
        self.fail_keys = fail_keys
        self.delay_s = delay_s
        self.out: queue.Queue[Msg | None] = queue.Queue()
        self.completed: dict[str, Msg] = {}
        self.errors: dict[str, Msg] = {}
        self.keepalives = 0
        self.registered_as = ""
        self.queries: dict[str, list[bytes]] = {}
        self._done = threading.Condition()
        self.channel = (
            grpc.secure_channel(address, credentials, options=list(options))
            if credentials
            else grpc.insecure_channel(address, options=list(options))
        )
        self.call = chaincode_shim_pb2_grpc.ChaincodeStub(self.channel).Connect(self._requests())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _requests(self):
        while True:
            m = self.out.get()
            if m is None:
                return
            yield m

    def _page(self, qid: str) -> bytes:
        rest = self.queries[qid]
        page, self.queries[qid] = rest[:2], rest[2:]
        return chaincode_shim_pb2.QueryResponse(
            results=[chaincode_shim_pb2.QueryResultBytes(resultBytes=b) for b in page],
            has_more=bool(self.queries[qid]),
            id=qid,
        ).SerializeToString()

    def _answer(self, m: Msg) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        reply = Msg(type=Msg.RESPONSE, txid=m.txid, channel_id=m.channel_id)
        if m.type == Msg.GET_STATE:
            key = chaincode_shim_pb2.GetState.FromString(m.payload).key
            if key in self.fail_keys:
                reply = Msg(
                    type=Msg.ERROR, payload=b"access denied for key", txid=m.txid, channel_id=m.channel_id
                )
            else:
                reply.payload = self.state.get(key, b"")
        elif m.type == Msg.PUT_STATE:
            p = chaincode_shim_pb2.PutState.FromString(m.payload)
            self.state[p.key] = p.value
        elif m.type == Msg.DEL_STATE:
            self.state.pop(chaincode_shim_pb2.DelState.FromString(m.payload).key, None)
        elif m.type == Msg.GET_STATE_BY_RANGE:
            r = chaincode_shim_pb2.GetStateByRange.FromString(m.payload)
            keys = sorted(k for k in self.state if r.startKey <= k and (not r.endKey or k < r.endKey))
            qid = f"q{len(self.queries)}"
            self.queries[qid] = [
                kv_query_result_pb2.KV(key=k, value=self.state[k]).SerializeToString() for k in keys
            ]
            reply.payload = self._page(qid)
        elif m.type == Msg.QUERY_STATE_NEXT:
            reply.payload = self._page(chaincode_shim_pb2.QueryStateNext.FromString(m.payload).id)
        elif m.type == Msg.QUERY_STATE_CLOSE:
            reply.payload = b""
        else:
            reply = Msg(type=Msg.ERROR, payload=b"unsupported", txid=m.txid, channel_id=m.channel_id)
        self.out.put(reply)

    def _read(self) -> None:
        try:
            for m in self.call:
                if m.type == Msg.REGISTER:
                    self.registered_as = chaincode_pb2.ChaincodeID.FromString(m.payload).name
                    self.out.put(Msg(type=Msg.REGISTERED))
                    self.out.put(Msg(type=Msg.READY))
                elif m.type in (Msg.COMPLETED, Msg.ERROR) and m.txid:
                    with self._done:
                        (self.completed if m.type == Msg.COMPLETED else self.errors)[m.txid] = m
                        self._done.notify_all()
                elif m.type == Msg.KEEPALIVE:
                    with self._done:
                        self.keepalives += 1
                        self._done.notify_all()
                else:
                    threading.Thread(target=self._answer, args=(m,), daemon=True).start()
        except grpc.RpcError:
            pass

    def invoke(
        self, identity, function: str, *args: str, proposal: bool = True, tx: str | None = None
    ) -> str:
        p = build_proposal(identity, CHANNEL, "cc", function, args, {"secret": b"s3"})
        txid = tx or p.tx_id
        msg = Msg(
            type=Msg.TRANSACTION,
            txid=txid,
            channel_id=CHANNEL,
            payload=chaincode_pb2.ChaincodeInput(
                args=[function.encode()] + [a.encode() for a in args]
            ).SerializeToString(),
        )
        if proposal:
            msg.proposal.CopyFrom(p.signed)
        else:
            msg.proposal.proposal_bytes = b"\xff\xff not a proposal"
        self.out.put(msg)
        return txid

    def wait(self, txids, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        with self._done:
            while not all(t in self.completed or t in self.errors for t in txids):
                left = deadline - time.monotonic()
                assert left > 0, (
                    f"{sum(t not in self.completed and t not in self.errors for t in txids)} transactions hang"
                )
                self._done.wait(left)

    def response(self, txid: str) -> proposal_response_pb2.Response:
        return proposal_response_pb2.Response.FromString(self.completed[txid].payload)

    def close(self) -> None:
        self.out.put(None)
        self.channel.close()


def contract(stub, function: str, args: list[str]) -> bytes:
    if function == "put":
        stub.put_state(args[0], args[1].encode())
        stub.set_event("first", b"1")
        stub.set_event("Put", args[0].encode())  # last one wins (Go shim)
        return b"ok"
    if function == "get":
        v = stub.get_state(args[0])
        if v is None:
            raise NotFound(f"no {args[0]}", key=args[0])
        return v
    if function == "reads":  # many sequential round trips
        return str(sum(len(stub.get_state(f"k{i}") or b"") for i in range(int(args[0])))).encode()
    if function == "range":
        return json.dumps([kv.key for kv in stub.get_state_by_range(args[0], args[1])]).encode()
    if function == "composite":
        return json.dumps([kv.key for kv in stub.get_state_by_partial_composite_key("T", [])]).encode()
    if function == "context":
        return json.dumps(
            {
                "tx": stub.get_tx_id(),
                "ch": stub.get_channel_id(),
                "ts": stub.get_tx_timestamp(),
                "creator": len(stub.get_creator()),
                "transient": stub.get_transient()["secret"].decode(),
            }
        ).encode()
    if function == "boom":
        raise RuntimeError("secret-payload-xyz")
    if function == "del":
        stub.del_state(args[0])
        return b""
    raise ContractError(f"unknown {function}")


@pytest.fixture(scope="module")
def identity(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("ids"), ["Org1"]).identity("Org1")


def _free_address() -> str:
    """A port of this run's own (a fixed one collided with concurrent runs of other checkouts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def server():
    address = _free_address()
    srv = serve(address, "cc_1:abc", contract)
    yield address
    srv.stop(0)


def test_registers_with_package_id_and_runs_a_transaction(server, identity):
    peer = FakePeer(server)
    try:
        tx = peer.invoke(identity, "put", "a", "1")
        peer.wait([tx])
        assert peer.registered_as == "cc_1:abc"
        assert peer.response(tx).status == 200 and peer.response(tx).payload == b"ok"
        assert peer.state == {"a": b"1"}
    finally:
        peer.close()


def test_chaincode_event_sent_in_completed_last_one_wins(server, identity):
    peer = FakePeer(server)
    try:
        tx = peer.invoke(identity, "put", "b", "2")
        peer.wait([tx])
        ev = peer.completed[tx].chaincode_event
        assert (ev.event_name, ev.payload) == ("Put", b"b")
    finally:
        peer.close()


def test_contract_error_is_status_400_with_wire_json(server, identity):
    peer = FakePeer(server)
    try:
        tx = peer.invoke(identity, "get", "missing")
        peer.wait([tx])
        r = peer.response(tx)
        assert r.status == 404
        err = ContractError.from_wire(r.message)
        assert isinstance(err, NotFound) and err.details == {"key": "missing"}
        assert not peer.completed[tx].HasField("chaincode_event")
    finally:
        peer.close()


def test_unexpected_exception_is_status_500(server, identity):
    peer = FakePeer(server)
    try:
        tx = peer.invoke(identity, "boom")
        peer.wait([tx])
        assert peer.response(tx).status == 500
        err = ContractError.from_wire(peer.response(tx).message)
        assert (
            err.code == "INTERNAL" and "RuntimeError" in err.message and "secret-payload" not in err.message
        )
    finally:
        peer.close()


def test_peer_error_reply_raises_in_contract_not_returned_as_data(server, identity):
    peer = FakePeer(server, fail_keys=("locked",))
    try:
        tx = peer.invoke(identity, "get", "locked")
        peer.wait([tx])
        r = peer.response(tx)
        assert r.status == 500 and "PeerError" in ContractError.from_wire(r.message).message
        assert r.payload == b""
    finally:
        peer.close()


def test_unreadable_proposal_answered_with_error_at_once(server, identity):
    peer = FakePeer(server)
    try:
        t0 = time.monotonic()
        tx = peer.invoke(identity, "put", "x", "1", proposal=False, tx="badtx")
        peer.wait([tx], timeout=5)
        assert tx in peer.errors and time.monotonic() - t0 < 5
        assert peer.state == {}
    finally:
        peer.close()


def test_concurrent_transactions_on_one_stream_none_hang(server, identity):
    peer = FakePeer(server, delay_s=0.001)
    try:
        for i in range(20):
            peer.state[f"k{i}"] = b"xx"
        txs = [peer.invoke(identity, "reads", "20") for _ in range(50)]
        peer.wait(txs, timeout=60)
        assert not peer.errors
        assert all(peer.response(t).payload == b"40" for t in txs)
    finally:
        peer.close()


def test_two_peers_share_one_server(server, identity):
    a, b = FakePeer(server), FakePeer(server)
    try:
        ta, tb = a.invoke(identity, "put", "k", "A"), b.invoke(identity, "put", "k", "B")
        a.wait([ta])
        b.wait([tb])
        assert a.state == {"k": b"A"} and b.state == {"k": b"B"}
    finally:
        a.close()
        b.close()


def test_keepalive_is_echoed(server, identity):
    peer = FakePeer(server)
    try:
        peer.out.put(Msg(type=Msg.KEEPALIVE))
        deadline = time.monotonic() + 5
        while peer.keepalives == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert peer.keepalives == 1
    finally:
        peer.close()


def test_range_pages_and_skips_composite_keys(server, identity):
    peer = FakePeer(server)
    try:
        for k in ("a", "b", "c", "d", "e"):
            peer.state[k] = b"v"
        peer.state[create_composite_key("T", ["1"])] = b"v"
        t1 = peer.invoke(identity, "range", "", "")
        t2 = peer.invoke(identity, "composite")
        peer.wait([t1, t2])
        assert json.loads(peer.response(t1).payload) == ["a", "b", "c", "d", "e"]  # 3 pages of 2
        assert json.loads(peer.response(t2).payload) == [create_composite_key("T", ["1"])]
    finally:
        peer.close()


def test_transaction_context_from_the_proposal(server, identity):
    peer = FakePeer(server)
    try:
        t0 = time.time()
        tx = peer.invoke(identity, "context")
        peer.wait([tx])
        ctx = json.loads(peer.response(tx).payload)
        assert ctx["tx"] == tx and ctx["ch"] == CHANNEL and ctx["transient"] == "s3"
        assert abs(ctx["ts"] - t0) < 5 and ctx["creator"] == len(identity.serialized())
    finally:
        peer.close()


def test_idle_stream_survives_frequent_pings(server, identity):
    """The peer's gRPC client pings idle streams (PermitWithoutStream); a default C-core server
    answers GOAWAY too_many_pings. Ping every 1 s for 7 s without a call, then run a transaction."""
    peer = FakePeer(
        server,
        options=(
            ("grpc.keepalive_time_ms", 1000),
            ("grpc.keepalive_timeout_ms", 5000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ),
    )
    try:
        tx = peer.invoke(identity, "put", "warm", "1")
        peer.wait([tx])
        time.sleep(7)
        tx = peer.invoke(identity, "put", "after-idle", "1")
        peer.wait([tx], timeout=10)
        assert peer.response(tx).status == 200
    finally:
        peer.close()


def test_mutual_tls_when_configured(tmp_path, identity):
    """TLS with client authentication: the peer presents its TLS certificate (docs/fabric.md "Topology")."""
    cons = Consortium.generate(tmp_path / "tls", ["Org1"])
    tls = cons.organisations[0].path / "peers" / "peer0.org1.example.com" / "tls"
    ca, cert, key = ((tls / n).read_bytes() for n in ("ca.crt", "server.crt", "server.key"))
    address = _free_address()
    srv = serve(address, "cc_tls:1", contract, tls_cert=cert, tls_key=key, client_ca_certs=ca)
    try:
        peer = FakePeer(address, credentials=grpc.ssl_channel_credentials(ca, key, cert))
        tx = peer.invoke(identity, "put", "t", "1")
        peer.wait([tx])
        assert peer.response(tx).status == 200
        peer.close()
        anonymous = grpc.secure_channel(address, grpc.ssl_channel_credentials(ca))
        call = chaincode_shim_pb2_grpc.ChaincodeStub(anonymous).Connect(iter([Msg(type=Msg.KEEPALIVE)]))
        with pytest.raises(grpc.RpcError):
            next(iter(call))
        anonymous.close()
    finally:
        srv.stop(0)


def test_server_options_accept_idle_pings_and_large_messages():
    opts = dict(SERVER_OPTIONS)
    assert opts["grpc.http2.max_ping_strikes"] == 0
    assert opts["grpc.keepalive_permit_without_calls"] == 1
    assert opts["grpc.max_receive_message_length"] == 100 * 1024 * 1024


def test_validation_of_arguments():
    with pytest.raises(ValueError, match="chaincode_id"):
        serve("127.0.0.1:0", "", contract)
    with pytest.raises(ValueError, match="together"):
        serve("127.0.0.1:0", "cc", contract, tls_cert=b"x")
    with pytest.raises(ValueError, match="module:function"):
        load_dispatch("nocolon")
    assert load_dispatch("tests.support.probe_contract:invoke").__name__ == "invoke"
    assert chaincode_server.EMPTY_KEY_SUBSTITUTE == "\x01"


def test_second_server_on_a_taken_port_fails():
    address = _free_address()
    srv = serve(address, "cc_1:abc", contract)
    try:
        with pytest.raises(OSError, match="could not bind"):
            serve(address, "cc_1:abc", contract)
    finally:
        srv.stop(0)


class _Recorder:
    """A stream's outgoing side and loop for driving :class:`_Stream` directly: records what it
    sends; timers are kept, not run, so a test fires them itself."""

    def __init__(self):
        self.sent: list[Msg] = []
        self.timers: list[tuple[float, object, tuple]] = []

    def call_later(self, delay, fn, *args):
        self.timers.append((delay, fn, args))
        return _Timer()


class _Timer:
    cancelled = False

    def cancel(self):
        self.cancelled = True


def _tx(txid: str, function: str, *args: str) -> Msg:
    payload = chaincode_pb2.ChaincodeInput(args=[function.encode(), *(a.encode() for a in args)])
    return Msg(type=Msg.TRANSACTION, txid=txid, channel_id="ch", payload=payload.SerializeToString())


def _status(m: Msg) -> int:
    return proposal_response_pb2.Response.FromString(m.payload).status


def test_a_transaction_parks_at_each_stub_call_and_resumes_on_its_reply():
    """Two transactions interleave on one stream: each stub call sends its request and parks the
    transaction; the peer's reply (routed by channel and txid) resumes exactly that one."""
    from ledger.fabric.chaincode_server import _Stream

    rec = _Recorder()
    s = _Stream(contract, rec.sent.append, rec)
    s.receive(_tx("t1", "get", "a"))
    s.receive(_tx("t2", "get", "b"))
    assert [(m.type, m.txid) for m in rec.sent] == [(Msg.GET_STATE, "t1"), (Msg.GET_STATE, "t2")]
    s.receive(Msg(type=Msg.RESPONSE, payload=b"B", txid="t2", channel_id="ch"))
    s.receive(Msg(type=Msg.RESPONSE, payload=b"A", txid="t1", channel_id="ch"))
    done = {m.txid: m for m in rec.sent if m.type == Msg.COMPLETED}
    assert proposal_response_pb2.Response.FromString(done["t1"].payload).payload == b"A"
    assert proposal_response_pb2.Response.FromString(done["t2"].payload).payload == b"B"
    assert not s._waiting and not s._running


def test_duplicate_reply_close_and_timeout_never_hang_a_transaction():
    """A second reply for a call is dropped; a call that the peer never answers fails with
    PeerError after the call timeout; closing the stream fails every waiting call. Each failed
    call ends its transaction with status 500, so nothing stays parked."""
    from ledger.fabric.chaincode_server import _Stream

    rec = _Recorder()
    s = _Stream(contract, rec.sent.append, rec, call_timeout=7.0)
    s.receive(_tx("t1", "get", "a"))
    reply = Msg(type=Msg.RESPONSE, payload=b"v", txid="t1", channel_id="ch")
    s.receive(reply)
    s.receive(reply)  # duplicate: dropped
    assert [m.type for m in rec.sent] == [Msg.GET_STATE, Msg.COMPLETED] and _status(rec.sent[-1]) == 200

    s.receive(_tx("t2", "get", "never"))
    delay, fire, args = rec.timers[-1]
    assert delay == 7.0
    fire(*args)  # the call timeout elapses
    assert rec.sent[-1].type == Msg.COMPLETED and _status(rec.sent[-1]) == 500
    assert (
        "PeerError"
        in ContractError.from_wire(
            proposal_response_pb2.Response.FromString(rec.sent[-1].payload).message
        ).message
    )

    s.receive(_tx("t3", "get", "c"))
    s.receive(_tx("t3", "get", "c"))  # the same transaction again while it runs: refused
    assert rec.sent[-1].type == Msg.ERROR and rec.sent[-1].txid == "t3"
    sent = len(rec.sent)
    s.close()
    assert not s._waiting and not s._running
    assert len(rec.sent) == sent  # nothing is written to a closed stream


def test_a_stub_call_outside_its_transaction_is_refused():
    """Only a transaction's own greenlet may call the peer for it: not code outside any
    transaction, and not another transaction (e.g. a generator of one finalised while another runs),
    which would park itself under the wrong id and wait for a reply that goes elsewhere."""
    from ledger.fabric.chaincode_server import _Stream
    from ledger.fabric.shim_stub import PeerError

    rec = _Recorder()
    s = _Stream(contract, rec.sent.append, rec)
    with pytest.raises(PeerError, match="inside their transaction"):
        s.call_peer("ch", "t1", Msg.GET_STATE, b"")

    def crosses(stub, function, args):
        return s.call_peer("ch", "other", Msg.GET_STATE, b"")  # another transaction's id

    s._dispatch = crosses
    s.receive(_tx("t2", "x"))
    assert [m.type for m in rec.sent] == [Msg.COMPLETED] and _status(rec.sent[0]) == 500
    assert (
        "PeerError"
        in ContractError.from_wire(
            proposal_response_pb2.Response.FromString(rec.sent[0].payload).message
        ).message
    )
    assert not s._waiting and not s._running
