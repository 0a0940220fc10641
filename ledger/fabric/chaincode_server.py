"""Chaincode-as-a-service: the Consortia contracts served to Fabric peers over the chaincode
protocol (``protos.Chaincode/Connect``), a small shim on ``hyperledger-fabric-protos``.

This ports the behaviour of fabric-chaincode-go's ``shim/handler.go`` and ``shim/stub.go``
and avoids each defect of fabric-chaincode-python 2.5.4 (docs/fabric.md "Chaincode service"):

1. one lock-free outgoing queue per stream, so concurrent transactions never write to the stream
   at the same time (Go: ``serialSend``);
2. an ERROR reply from the peer raises :class:`~ledger.fabric.shim_stub.PeerError` inside the contract, it is never data;
3. the transaction's chaincode event (last ``set_event`` wins) is sent in COMPLETED;
3b. a failure before the contract runs (bad proposal) is answered with an ERROR message, so the
   peer never waits for its execute timeout;
4. KEEPALIVE is echoed;
6. an empty range start key becomes ``"\\x01"`` and simple-key range bounds are validated, so
   composite keys never leak into simple-key scans;
7. server keepalive options accept the peer's pings on idle streams; 100 MiB message limits;
8. TLS from explicit arguments (:func:`serve`) or environment variables (:func:`main`);
9. no payload, key or value is logged.

A contract is any callable ``dispatch(stub, function, args) -> bytes`` raising
:class:`chaincode.errors.ContractError` (``chaincode.dispatch.invoke``). A ContractError becomes
``peer.Response(status=err.status, message=err.to_wire())``, which the Gateway client turns back
into the same typed error; any other exception becomes status 500 with an ``InternalError`` naming only its type.

One server serves any number of peers: each ``Connect`` stream has its own :class:`_StreamHandler`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import TypeAlias

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
HEALTH_FUNCTION = "__health__"  # answered by the shim itself: readiness probes


# --------------------------------------------------------------------------- one stream


def _offer(q: queue.Queue[Msg], msg: Msg) -> bool:
    """Hand a reply to the one waiting call without ever blocking the stream's reader."""
    try:
        q.put_nowait(msg)
        return True
    except queue.Full:
        return False


class _StreamHandler:
    """The chaincode side of one ``Connect`` stream (fabric-chaincode-go ``Handler``)."""

    def __init__(self, chaincode_id: str, dispatch: Dispatch, pool: futures.Executor):
        self.chaincode_id = chaincode_id
        self._dispatch = dispatch
        self._pool = pool
        self._out: queue.Queue[Msg | None] = queue.Queue()
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, str], queue.Queue[Msg]] = {}
        self._closed = threading.Event()

    # outgoing messages are only ever produced by this generator (serial send)
    def outgoing(self) -> Iterator[Msg]:
        yield Msg(
            type=Msg.REGISTER, payload=chaincode_pb2.ChaincodeID(name=self.chaincode_id).SerializeToString()
        )
        while True:
            m = self._out.get()
            if m is None:
                return
            yield m

    def send(self, msg: Msg) -> None:
        if not self._closed.is_set():
            self._out.put(msg)

    def close(self) -> None:
        self._closed.set()
        self._out.put(None)
        with self._lock:
            waiting = list(self._waiting.values())
        for q in waiting:
            _offer(q, Msg(type=Msg.ERROR, payload=b"chaincode stream closed"))

    def call_peer(self, channel_id: str, tx_id: str, kind: int, payload: bytes) -> bytes:
        key = (channel_id, tx_id)
        q: queue.Queue[Msg] = queue.Queue(maxsize=1)
        with self._lock:
            if key in self._waiting:
                raise PeerError(f"concurrent stub calls within transaction {tx_id}")
            self._waiting[key] = q
        try:
            if self._closed.is_set():
                raise PeerError("chaincode stream closed")
            self.send(Msg(type=kind, payload=payload, txid=tx_id, channel_id=channel_id))
            try:
                reply = q.get(timeout=PEER_CALL_TIMEOUT_S)
            except queue.Empty:
                raise PeerError(f"no reply from the peer within {PEER_CALL_TIMEOUT_S} s") from None
        finally:
            with self._lock:
                self._waiting.pop(key, None)
        if reply.type == Msg.RESPONSE:
            answer: bytes = reply.payload
            return answer
        if reply.type == Msg.ERROR:
            raise PeerError(reply.payload.decode("utf-8", "replace"))
        raise PeerError(f"unexpected reply {Msg.Type.Name(reply.type)} from the peer")

    def receive(self, msg: Msg) -> None:
        t = msg.type
        if t in (Msg.RESPONSE, Msg.ERROR):
            with self._lock:
                q = self._waiting.get((msg.channel_id, msg.txid))
            if q is None or not _offer(q, msg):
                log.warning(
                    "reply %s for transaction %s dropped (no call waiting)", Msg.Type.Name(t), msg.txid
                )
        elif t in (Msg.TRANSACTION, Msg.INIT):
            self._pool.submit(self._run_transaction, msg)
        elif t == Msg.KEEPALIVE:
            self.send(Msg(type=Msg.KEEPALIVE))
        elif t == Msg.REGISTERED:
            log.info("chaincode %s registered with the peer", self.chaincode_id)
        elif t == Msg.READY:
            log.info("chaincode %s ready", self.chaincode_id)
        else:
            log.warning("unexpected message %s from the peer", Msg.Type.Name(t))

    def _run_transaction(self, msg: Msg) -> None:
        try:
            stub = FabricStub(self, msg)
        except Exception as exc:  # malformed proposal: answer at once (defect 3b)
            log.error("transaction %s rejected before dispatch: %s", msg.txid, type(exc).__name__)
            self.send(
                Msg(
                    type=Msg.ERROR,
                    payload=f"chaincode could not read the proposal: {exc}".encode(),
                    txid=msg.txid,
                    channel_id=msg.channel_id,
                )
            )
            return
        if msg.type == Msg.INIT or not stub.args:
            response = proposal_response_pb2.Response(status=200)
        else:
            response = self._invoke(stub)
        done = Msg(
            type=Msg.COMPLETED, payload=response.SerializeToString(), txid=msg.txid, channel_id=msg.channel_id
        )
        if stub.event is not None and response.status < 400:
            done.chaincode_event.CopyFrom(stub.event)
        self.send(done)

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


# the generated servicer base is untyped (fabric_protos ships no stubs: pyproject.toml [tool.mypy])
class ChaincodeService(chaincode_shim_pb2_grpc.ChaincodeServicer):  # type: ignore[misc]
    """``protos.Chaincode`` service: every ``Connect`` stream is one peer."""

    def __init__(self, chaincode_id: str, dispatch: Dispatch, workers: int = 16):
        if not chaincode_id:
            raise ValueError("chaincode_id (the package id, e.g. 'consortia_1.0:<sha256>') is required")
        self.chaincode_id = chaincode_id
        self._dispatch = dispatch
        self._pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cc-tx")

    def Connect(self, request_iterator: Iterator[Msg], context: grpc.ServicerContext) -> Iterator[Msg]:  # noqa: N802 (gRPC method name)
        handler = _StreamHandler(self.chaincode_id, self._dispatch, self._pool)
        log.info("peer connected from %s", context.peer())

        def read() -> None:
            try:
                for msg in request_iterator:
                    handler.receive(msg)
            except grpc.RpcError:
                pass
            finally:
                handler.close()
                log.info("peer stream from %s closed", context.peer())

        threading.Thread(target=read, daemon=True, name="cc-stream").start()
        context.add_callback(handler.close)
        return handler.outgoing()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def serve(
    address: str,
    chaincode_id: str,
    dispatch: Dispatch,
    *,
    tls_cert: bytes | None = None,
    tls_key: bytes | None = None,
    client_ca_certs: bytes | None = None,
    max_streams: int = 16,
    workers: int = 16,
) -> tuple[grpc.Server, ChaincodeService]:
    """Start the chaincode server on ``address`` (``host:port``); returns (server, service).

    TLS is on when ``tls_cert`` and ``tls_key`` are given; with ``client_ca_certs`` the peer must
    present a client certificate signed by one of those CAs (``client_auth_required``)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key must be given together")
    service = ChaincodeService(chaincode_id, dispatch, workers=workers)
    # each stream holds one server thread for its lifetime: size the pool for the peers + slack
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_streams, thread_name_prefix="cc-stream"),
        options=list(SERVER_OPTIONS),
        maximum_concurrent_rpcs=max_streams,
    )
    chaincode_shim_pb2_grpc.add_ChaincodeServicer_to_server(service, server)
    try:
        if tls_cert is not None:
            creds = grpc.ssl_server_credentials(
                [(tls_key, tls_cert)],
                root_certificates=client_ca_certs,
                require_client_auth=client_ca_certs is not None,
            )
            port = server.add_secure_port(address, creds)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError:  # grpcio reports a failed bind this way
        port = 0
    if port == 0:
        raise OSError(f"could not bind the chaincode server to {address}")
    server.start()
    return server, service


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
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")

    def read(path: str | None) -> bytes | None:
        return open(path, "rb").read() if path else None

    server, service = serve(
        a.address,
        a.chaincode_id,
        load_dispatch(a.dispatch),
        tls_cert=read(a.tls_cert),
        tls_key=read(a.tls_key),
        client_ca_certs=read(a.client_ca),
    )
    log.info("chaincode %s serving on %s (tls=%s)", a.chaincode_id, a.address, a.tls_cert is not None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=2).wait()
    service.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
