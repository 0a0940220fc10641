"""Chaincode-as-a-service: the Consortia contracts served to Fabric peers over the chaincode
protocol (``protos.Chaincode/Connect``), a small shim on ``hyperledger-fabric-protos``.

This ports the behaviour of fabric-chaincode-go's ``shim/handler.go`` and ``shim/stub.go``
and avoids each defect of fabric-chaincode-python 2.5.4 (docs/fabric.md "Chaincode service"):

1. one writer per stream, so concurrent transactions never write to the stream at the same time
   (Go: ``serialSend``);
2. an ERROR reply from the peer raises :class:`~ledger.fabric.shim_stub.PeerError` inside the contract, it is never data;
3. the transaction's chaincode event (last ``set_event`` wins) is sent in COMPLETED;
3b. a failure before the contract runs (bad proposal) is answered with an ERROR message, so the
   peer never waits for its execute timeout;
4. KEEPALIVE is echoed;
6. an empty range start key becomes ``"\\x01"`` and simple-key range bounds are validated, so
   composite keys never leak into simple-key scans;
7. server keepalive options accept the peer's pings on idle streams; 100 MiB message limits;
8. TLS from explicit arguments (:func:`serve`) or environment variables (:func:`main`);
9. no payload, key or value is logged;
10. the organisation whose peers it serves is told (``--msp-id``, default ``CORE_PEER_LOCALMSPID`` as
    fabric-chaincode-go's ``shim.GetMSPID`` reads it): ``stub.get_msp_id()``, whose implicit private
    data collection the contracts read.

How it runs (docs/fabric.md "Chaincode service: one thread"): an asyncio gRPC server on a thread of
its own; each transaction is a greenlet on that thread. A stub call switches from the transaction
back to its stream, which sends the request; the peer's reply switches into the transaction again.
No message crosses a thread of this module: a transaction costs its messages and its contract, not
the thread hand-offs of a thread per call (``benchmarks.ledger_fabric``: a quarter less of this
service's CPU per submitted transaction than with a thread pool). Contracts run one at a time, as
the interpreter lock made them run before; a stub call outside its transaction's greenlet raises
``PeerError``.

A contract is any callable ``dispatch(stub, function, args) -> bytes`` raising
:class:`chaincode.errors.ContractError` (``chaincode.dispatch.invoke``). A ContractError becomes
``peer.Response(status=err.status, message=err.to_wire())``, which the Gateway client turns back
into the same typed error; any other exception becomes status 500 with an ``InternalError`` naming only its type.

One server serves any number of peers: each ``Connect`` stream has its own :class:`_Stream`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from typing import TypeAlias

import greenlet
import grpc
from fabric_protos.peer import (
    chaincode_pb2,
    chaincode_shim_pb2,
    chaincode_shim_pb2_grpc,
    proposal_response_pb2,
)

from chaincode.errors import ContractError, InternalError
from ledger.fabric.shim_stub import EMPTY_KEY_SUBSTITUTE as EMPTY_KEY_SUBSTITUTE
from ledger.fabric.shim_stub import FabricStub, PeerError
from wire.env import environment

log = logging.getLogger(__name__)

Msg: TypeAlias = chaincode_shim_pb2.ChaincodeMessage
Dispatch = Callable[[object, str, list[str]], bytes]
TxKey = tuple[str, str]  # (channel, transaction id): how the peer routes a transaction's messages

MAX_MESSAGE_BYTES = 100 * 1024 * 1024  # Fabric internal/pkg/comm/config.go
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # The peer pings every 60 s even without calls in flight (PermitWithoutStream): accept that.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share it
)
PEER_CALL_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0  # beyond the grace period, for the loop to stop
HEALTH_FUNCTION = "__health__"  # answered by the shim itself: readiness probes


# --------------------------------------------------------------------------- one stream


class _Stream:
    """The chaincode side of one ``Connect`` stream (fabric-chaincode-go ``Handler``).

    Every method runs on the server's event loop thread; ``send`` queues a message for the
    stream's one writer. A transaction is a greenlet whose parent is that thread's loop: it runs
    until it needs the peer (:meth:`call_peer` switches back with the request) or ends (it returns
    its COMPLETED or ERROR message)."""

    def __init__(
        self,
        dispatch: Dispatch,
        send: Callable[[Msg], None],
        loop: asyncio.AbstractEventLoop,
        call_timeout: float = PEER_CALL_TIMEOUT_S,
        msp_id: str = "",
    ):
        self._dispatch = dispatch
        self.msp_id = msp_id
        self._send = send
        self._loop = loop
        self._call_timeout = call_timeout
        self._running: dict[TxKey, greenlet.greenlet] = {}  # transactions in flight
        self._waiting: dict[TxKey, tuple[greenlet.greenlet, asyncio.TimerHandle]] = {}
        self.closed = False

    # ---- messages from the peer
    def receive(self, msg: Msg) -> None:
        t = msg.type
        if t in (Msg.RESPONSE, Msg.ERROR):
            waiter = self._waiting.pop((msg.channel_id, msg.txid), None)
            if waiter is None:
                log.warning("reply %s for transaction %s dropped (no call waiting)", _name(t), msg.txid)
                return
            waiter[1].cancel()
            self._step((msg.channel_id, msg.txid), waiter[0], msg)
        elif t in (Msg.TRANSACTION, Msg.INIT):
            key = (msg.channel_id, msg.txid)
            if key in self._running:
                self._send(_error(key, "transaction already running on this stream"))
                return
            tx = self._running[key] = greenlet.greenlet(self._run_transaction)
            self._step(key, tx, msg)
        elif t == Msg.KEEPALIVE:
            self.send(Msg(type=Msg.KEEPALIVE))
        elif t == Msg.REGISTERED:
            log.info("chaincode registered with the peer")
        elif t == Msg.READY:
            log.info("chaincode ready")
        else:
            log.warning("unexpected message %s from the peer", _name(t))

    def send(self, msg: Msg) -> None:
        if not self.closed:
            self._send(msg)

    def close(self) -> None:
        """The stream ended: every transaction waiting for the peer gets ``PeerError``."""
        self.closed = True
        for key in list(self._waiting):
            self._fail(key, "chaincode stream closed")

    # ---- a transaction's greenlet
    def _step(self, key: TxKey, tx: greenlet.greenlet, value: object, error: PeerError | None = None) -> None:
        """Run ``tx`` until it asks the peer something (the request is sent and ``tx`` parked until
        the reply or the call timeout) or ends (its final message is sent)."""
        try:
            out = tx.switch(value) if error is None else tx.throw(error)
        except BaseException as exc:  # _run_transaction answers every Exception; this is a bug
            log.error("transaction %s ended abnormally: %s", key[1], type(exc).__name__)
            self._running.pop(key, None)
            self.send(_error(key, "chaincode transaction aborted"))
            return
        if tx.dead:
            self._running.pop(key, None)
        else:
            timer = self._loop.call_later(
                self._call_timeout, self._fail, key, f"no reply from the peer within {self._call_timeout} s"
            )
            self._waiting[key] = (tx, timer)
        self.send(out)

    def _fail(self, key: TxKey, reason: str) -> None:
        waiter = self._waiting.pop(key, None)
        if waiter is not None:
            waiter[1].cancel()
            self._step(key, waiter[0], None, PeerError(reason))

    def call_peer(self, channel_id: str, tx_id: str, kind: int, payload: bytes) -> bytes:
        """One round trip to the peer from inside a transaction (``FabricStub``'s calls): only from
        that transaction's own greenlet (a call for another transaction, e.g. from a generator of
        it finalised later, would park this one under the wrong id)."""
        me = self._running.get((channel_id, tx_id))
        if me is None or me is not greenlet.getcurrent():
            raise PeerError("stub calls run inside their transaction only")
        if self.closed:
            raise PeerError("chaincode stream closed")
        reply: Msg = me.parent.switch(Msg(type=kind, payload=payload, txid=tx_id, channel_id=channel_id))
        if reply.type == Msg.RESPONSE:
            answer: bytes = reply.payload
            return answer
        if reply.type == Msg.ERROR:
            raise PeerError(reply.payload.decode("utf-8", "replace"))
        raise PeerError(f"unexpected reply {_name(reply.type)} from the peer")

    def _run_transaction(self, msg: Msg) -> Msg:
        try:
            stub = FabricStub(self, msg, msp_id=self.msp_id)
        except Exception as exc:  # malformed proposal: answer at once (defect 3b)
            log.error("transaction %s rejected before dispatch: %s", msg.txid, type(exc).__name__)
            return _error((msg.channel_id, msg.txid), f"chaincode could not read the proposal: {exc}")
        if msg.type == Msg.INIT or not stub.args:
            response = proposal_response_pb2.Response(status=200)
        else:
            response = self._invoke(stub)
        done = Msg(
            type=Msg.COMPLETED, payload=response.SerializeToString(), txid=msg.txid, channel_id=msg.channel_id
        )
        if stub.event is not None and response.status < 400:
            done.chaincode_event.CopyFrom(stub.event)
        return done

    def _invoke(self, stub: FabricStub) -> proposal_response_pb2.Response:
        function = stub.args[0].decode("utf-8", "replace")
        if function == HEALTH_FUNCTION:
            return proposal_response_pb2.Response(status=200, payload=b"ok")
        try:
            args = [a.decode("utf-8") for a in stub.args[1:]]
            result = self._dispatch(stub, function, args)
            if not isinstance(result, (bytes, bytearray)):
                raise TypeError(f"{function} returned {type(result).__name__}, not bytes")
            return proposal_response_pb2.Response(status=200, payload=bytes(result))
        except ContractError as err:
            log.info("transaction %s: %s refused with %s", stub.get_tx_id(), function, err.code)
            return proposal_response_pb2.Response(
                status=err.status if err.status >= 400 else 400, message=err.to_wire()
            )
        except UnicodeDecodeError:
            refusal = ContractError("arguments must be UTF-8 strings")
            return proposal_response_pb2.Response(status=400, message=refusal.to_wire())
        except Exception as exc:  # a bug or a peer failure: status 500, no payloads in the message
            log.error("transaction %s: %s failed: %s", stub.get_tx_id(), function, type(exc).__name__)
            failure = InternalError(f"internal chaincode error in {function}: {type(exc).__name__}")
            return proposal_response_pb2.Response(status=500, message=failure.to_wire())


def _name(message_type: int) -> str:
    """A message type's name; a number unknown to these protos is named by its value."""
    try:
        name: str = Msg.Type.Name(message_type)
    except ValueError:
        return str(message_type)
    return name


def _error(key: TxKey, text: str) -> Msg:
    """The ERROR message that ends transaction ``key`` (channel, txid) without a response."""
    return Msg(type=Msg.ERROR, payload=text.encode(), txid=key[1], channel_id=key[0])


# the generated servicer base is untyped (fabric_protos ships no stubs: pyproject.toml [tool.mypy])
class ChaincodeService(chaincode_shim_pb2_grpc.ChaincodeServicer):  # type: ignore[misc]
    """``protos.Chaincode`` service: every ``Connect`` stream is one peer."""

    def __init__(self, chaincode_id: str, dispatch: Dispatch, msp_id: str = ""):
        if not chaincode_id:
            raise ValueError("chaincode_id (the package id, e.g. 'consortia_1.0:<sha256>') is required")
        self.chaincode_id = chaincode_id
        self._dispatch = dispatch
        self.msp_id = msp_id

    async def Connect(self, request_iterator: object, context: grpc.aio.ServicerContext) -> None:  # noqa: N802 (gRPC method name)
        outgoing: asyncio.Queue[Msg | None] = asyncio.Queue()
        stream = _Stream(self._dispatch, outgoing.put_nowait, asyncio.get_running_loop(), msp_id=self.msp_id)
        register = chaincode_pb2.ChaincodeID(name=self.chaincode_id).SerializeToString()
        outgoing.put_nowait(Msg(type=Msg.REGISTER, payload=register))
        writer = asyncio.ensure_future(_write(outgoing, context))
        log.info("peer connected from %s", context.peer())
        try:
            while not writer.done():
                msg = await context.read()
                if msg is grpc.aio.EOF:
                    break
                stream.receive(msg)
        except grpc.RpcError:
            pass
        finally:
            stream.close()
            outgoing.put_nowait(None)
            await writer
            log.info("peer stream from %s closed", context.peer())


async def _write(outgoing: asyncio.Queue[Msg | None], context: grpc.aio.ServicerContext) -> None:
    """The stream's one writer (serial send): until ``None`` or a broken stream."""
    try:
        while (msg := await outgoing.get()) is not None:
            await context.write(msg)
    except Exception as exc:  # grpc.aio's UsageError, AbortError, ... as well as RpcError
        log.info("chaincode stream write failed: %s", type(exc).__name__)


class ChaincodeServer:
    """A running chaincode service: a gRPC asyncio server on an event loop thread of its own."""

    def __init__(
        self,
        address: str,
        service: ChaincodeService,
        credentials: grpc.ServerCredentials | None,
        max_streams: int,
    ):
        self.service = service
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._server: grpc.aio.Server | None = None
        self._thread = threading.Thread(
            target=self._run, args=(address, credentials, max_streams), daemon=True, name="chaincode-loop"
        )
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure

    def _run(self, address: str, credentials: grpc.ServerCredentials | None, max_streams: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start(address, credentials, max_streams))
        except BaseException as exc:  # reported by __init__ in the caller's thread
            self._failure = exc
            self._started.set()
            self._loop.close()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(
        self, address: str, credentials: grpc.ServerCredentials | None, max_streams: int
    ) -> None:
        server = grpc.aio.server(options=list(SERVER_OPTIONS), maximum_concurrent_rpcs=max_streams)
        chaincode_shim_pb2_grpc.add_ChaincodeServicer_to_server(self.service, server)
        try:
            port = (
                server.add_secure_port(address, credentials)
                if credentials is not None
                else server.add_insecure_port(address)
            )
        except RuntimeError:  # grpcio reports a failed bind this way
            port = 0
        if port == 0:
            raise OSError(f"could not bind the chaincode server to {address}")
        await server.start()
        self._server = server

    def stop(self, grace: float | None = None) -> None:
        """Stop serving (in-flight streams get ``grace`` seconds) and end the loop thread; a loop
        held by a contract that never returns is left to end with the process (a daemon thread)."""
        if not self._thread.is_alive():
            return
        bound = (grace or 0.0) + STOP_TIMEOUT_S
        if self._server is not None:
            stopping = asyncio.run_coroutine_threadsafe(self._server.stop(grace), self._loop)
            try:
                stopping.result(timeout=bound)
            except TimeoutError:
                log.error("chaincode server did not stop within %.0f s", bound)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=bound)


def serve(
    address: str,
    chaincode_id: str,
    dispatch: Dispatch,
    *,
    tls_cert: bytes | None = None,
    tls_key: bytes | None = None,
    client_ca_certs: bytes | None = None,
    max_streams: int = 16,
    msp_id: str = "",
) -> ChaincodeServer:
    """Start the chaincode server on ``address`` (``host:port``); stop it with ``.stop(grace)``.

    TLS is on when ``tls_cert`` and ``tls_key`` are given; with ``client_ca_certs`` the peer must
    present a client certificate signed by one of those CAs (``client_auth_required``)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key must be given together")
    service = ChaincodeService(chaincode_id, dispatch, msp_id)
    creds = None
    if tls_cert is not None:
        creds = grpc.ssl_server_credentials(
            [(tls_key, tls_cert)],
            root_certificates=client_ca_certs,
            require_client_auth=client_ca_certs is not None,
        )
    return ChaincodeServer(address, service, creds, max_streams)


def load_dispatch(spec: str) -> Dispatch:
    """``"module:function"`` -> the callable (default ``chaincode.dispatch:invoke``)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"dispatch must be 'module:function', got {spec!r}")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise TypeError(f"{spec} is not callable")
    dispatch: Dispatch = fn
    return dispatch


def main(argv: Sequence[str] | None = None) -> int:
    env = environment()
    p = argparse.ArgumentParser(description="Serve Consortia chaincode to Fabric peers (CCaaS)")
    p.add_argument("--address", default=env.chaincode_address)
    p.add_argument("--chaincode-id", default=env.chaincode_id)
    p.add_argument("--dispatch", default=env.chaincode_dispatch)
    p.add_argument("--tls-cert", default=env.chaincode_tls_cert)
    p.add_argument("--tls-key", default=env.chaincode_tls_key)
    p.add_argument("--client-ca", default=env.chaincode_client_ca)
    p.add_argument("--log-level", default=env.chaincode_log_level)
    p.add_argument("--msp-id", default=env.chaincode_msp_id, help="the organisation it serves")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")

    def read(path: str | None) -> bytes | None:
        return open(path, "rb").read() if path else None

    server = serve(
        a.address,
        a.chaincode_id,
        load_dispatch(a.dispatch),
        tls_cert=read(a.tls_cert),
        tls_key=read(a.tls_key),
        client_ca_certs=read(a.client_ca),
        msp_id=a.msp_id,
    )
    log.info("chaincode %s serving on %s (tls=%s)", a.chaincode_id, a.address, a.tls_cert is not None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
