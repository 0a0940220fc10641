"""Chaincode events of a Fabric Gateway client: the Gateway's ``ChaincodeEvents`` stream from a
block on, resumed after a broken stream from the last event seen (docs/fabric.md "Gateway client").
The client is seen through :class:`EventSource`, the little of it the stream needs
(:class:`~ledger.fabric.gateway.FabricLedger` is one); this module does not import the client."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import grpc
from fabric_protos.common import common_pb2
from fabric_protos.gateway import gateway_pb2, gateway_pb2_grpc
from fabric_protos.orderer import ab_pb2
from google.protobuf.message import DecodeError

from ledger.errors import LedgerError
from ledger.fabric.blocks import block_has_events
from ledger.fabric.errors import translate
from ledger.identity import Identity
from ledger.interface import ChaincodeEvent


class EventSource(Protocol):
    """What the event stream needs of the Gateway client: its channel and chaincode, its Gateway
    stub per identity, block heights and ``qscc`` reads, and its endorsement timeout."""

    channel: str
    chaincode: str
    endorse_timeout: float

    def gateway(self, identity: Identity) -> gateway_pb2_grpc.GatewayStub: ...

    def block_height(self, identity: Identity) -> int: ...

    def evaluate(
        self, identity: Identity, function: str, *args: str, chaincode: str | None = None
    ) -> bytes: ...


log = logging.getLogger(__name__)

_RETRYABLE_EVENT_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED,
)
_CATCH_UP_SCAN = 1000  # blocks looked at, from the head backwards, for the last event


def chaincode_events(
    ledger: EventSource, identity: Identity, start_block: int = 0, timeout: float | None = None
) -> Iterator[ChaincodeEvent]:
    """Chaincode events from ``start_block`` on; a broken stream is reopened from the last
    event delivered (``after_transaction_id``), so nothing is lost or repeated.

    ``timeout`` (the ``Ledger`` interface): the iteration ends after ``timeout`` seconds
    without an event -- also while the peer is unreachable and the stream keeps breaking
    (reconnection attempts count against the same clock). As on the embedded host, events
    already committed when the call is made are delivered first (``timeout=0`` means "what is
    there now"): the stream does not say when it has caught up, so the last block below the
    current height that carries an event of this chaincode is looked up (``qscc``) and the
    idle clock starts once that block's events have arrived (waiting at most
    ``max(timeout, endorse_timeout)`` for them). If the peer cannot be asked, the idle clock
    starts at once."""
    if start_block < 0:
        raise ValueError("start_block must be >= 0")
    next_block, after_tx = start_block, ""
    started = last_event = time.monotonic()
    target = None if timeout is None else _last_event_block(ledger, identity, start_block)

    def remaining() -> float | None:
        if timeout is None:
            return None
        if target is not None:  # still catching up with committed events
            return max(timeout, ledger.endorse_timeout) - (time.monotonic() - started)
        return timeout - (time.monotonic() - last_event)

    while True:
        call, q = _open_events(ledger, identity, next_block, after_tx)
        broken = False
        try:
            while True:
                left = remaining()
                if left is not None and left <= 0:
                    return
                try:
                    item = q.get(timeout=left)
                except queue.Empty:
                    return
                if isinstance(item, grpc.RpcError):
                    if item.code() in _RETRYABLE_EVENT_CODES:
                        log.info(
                            "event stream broken (%s); reconnecting from block %d",
                            item.code().name,
                            next_block,
                        )
                        broken = True
                        break
                    raise translate(item, "events") from None
                if item is None:  # server closed the stream
                    broken = True
                    break
                for ev in item.events:
                    next_block, after_tx = item.block_number, ev.tx_id
                    yield ChaincodeEvent(
                        block_number=item.block_number,
                        tx_id=ev.tx_id,
                        chaincode=ev.chaincode_id,
                        name=ev.event_name,
                        payload=ev.payload,
                    )
                    last_event = time.monotonic()
                if target is not None and item.block_number >= target:
                    target, last_event = None, time.monotonic()
        finally:
            call.cancel()
        if broken:
            left = remaining()
            if left is not None and left <= 0:
                return
            time.sleep(0.5 if left is None else min(0.5, left))


def _last_event_block(ledger: EventSource, identity: Identity, start_block: int) -> int | None:
    """The last block in [start_block, height) with a chaincode event of this chaincode in a
    valid transaction; None if there is none (within the scan) or the peer cannot be asked."""
    try:
        height = ledger.block_height(identity)
        for n in range(height - 1, max(start_block, height - _CATCH_UP_SCAN) - 1, -1):
            raw = ledger.evaluate(identity, "GetBlockByNumber", ledger.channel, str(n), chaincode="qscc")
            if block_has_events(common_pb2.Block.FromString(raw), ledger.chaincode):
                return n
    except (LedgerError, DecodeError) as exc:
        log.info("cannot look up the last event block (%s); events idle clock starts now", exc)
    return None


def _open_events(
    ledger: EventSource, identity: Identity, start_block: int, after_tx: str
) -> tuple[grpc.Call, queue.Queue[Any]]:
    req = gateway_pb2.ChaincodeEventsRequest(
        channel_id=ledger.channel,
        chaincode_id=ledger.chaincode,
        identity=identity.serialized(),
        start_position=ab_pb2.SeekPosition(specified=ab_pb2.SeekSpecified(number=start_block)),
        after_transaction_id=after_tx,
    ).SerializeToString()
    signed = gateway_pb2.SignedChaincodeEventsRequest(request=req, signature=identity.sign(req))
    call = ledger.gateway(identity).ChaincodeEvents(signed)
    # ChaincodeEventsResponse messages, then None (stream closed) or the grpc.RpcError that broke it
    q: queue.Queue[Any] = queue.Queue()

    def pump() -> None:
        try:
            for resp in call:
                q.put(resp)
            q.put(None)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED or not call.cancelled():
                q.put(err)

    threading.Thread(target=pump, daemon=True, name="fabric-events").start()
    return call, q
