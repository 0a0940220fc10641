"""The Fabric host of the ``Ledger`` interface: a Fabric Gateway client on
``hyperledger-fabric-protos`` + ``grpcio`` + ``cryptography`` (docs/fabric.md "Gateway client").

Each call acts for an explicit :class:`ledger.identity.Identity` and goes to the Gateway of that
identity's organisation (its own peer, as fabric-gateway applications do); an identity of an
organisation without a peer here uses the first peer, which then judges it. ``submit`` =
Endorse -> sign -> Submit -> CommitStatus; ``evaluate`` = Evaluate; ``events`` = ChaincodeEvents
from a block, resumed after a broken stream from the last event seen; block queries go through
the ``qscc`` system chaincode. Errors: ContractError subclasses for contract refusals,
:mod:`ledger.errors` for the rest (see :mod:`ledger.fabric.errors`).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from fabric_protos.common import common_pb2, ledger_pb2
from fabric_protos.gateway import gateway_pb2, gateway_pb2_grpc
from fabric_protos.orderer import ab_pb2
from fabric_protos.peer import transaction_pb2
from google.protobuf.message import DecodeError

from ledger.errors import CommitTimeout, EndorsementFailure, LedgerError
from ledger.fabric.blocks import block_has_events, block_info
from ledger.fabric.errors import error_details, translate, validation_error
from ledger.fabric.proposal import build_proposal, envelope_result, sign_envelope
from ledger.identity import Identity
from ledger.interface import BlockInfo, ChaincodeEvent, SubmitResult

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 100 * 1024 * 1024
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 120_000),
    ("grpc.keepalive_timeout_ms", 20_000),
)
_RETRYABLE_EVENT_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED,
)


@dataclass(frozen=True)
class PeerEndpoint:
    """A peer's Gateway: organisation, ``host:port`` and the PEM of its TLS CA (None: plaintext)."""

    msp_id: str
    address: str
    tls_root_cert: bytes | None = None
    server_name: str | None = None  # TLS name override when the address is not in the cert SAN


_LAG_RETRIES = 5  # endorsement retries when peers disagree because one lags a block behind


class _RemoteLag(Exception):
    """An endorsement refused because a peer lags a block behind: only other organisations' peers
    refused, or the endorsers' responses differ (``error``: the refusal, typed)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class FabricLedger:
    """``ledger.interface.Ledger`` on a real Fabric network."""

    def __init__(
        self, peers: Sequence[PeerEndpoint], channel: str, chaincode: str, *, endorse_timeout: float = 60.0
    ):
        if not peers:
            raise ValueError("at least one peer endpoint is required")
        if not channel or not chaincode:
            raise ValueError("channel and chaincode are required")
        self.channel = channel
        self.chaincode = chaincode
        self.peers = tuple(peers)
        self.endorse_timeout = endorse_timeout
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        # Read-your-writes across the peers this object talks to: the highest block a submit through
        # this object committed, and the height each peer is known to have reached.
        self._committed = -1
        self._heights: dict[str, int] = {}
        # one height query per peer at a time: the callers that find the same peer behind wait for
        # that one answer instead of each asking (docs/fabric.md "Read-your-writes")
        self._asking: dict[str, threading.Lock] = {}

    catch_up_timeout = 10.0  #: seconds to wait for a peer to reach a block this object committed

    # ---- construction from fabric-network/ output
    @classmethod
    def from_profile(cls, path: str | Path, chaincode: str | None = None) -> FabricLedger:
        """Read ``connection.json`` written by ``fabric-network`` (``network up``)."""
        prof = json.loads(Path(path).read_text())
        peers = [
            PeerEndpoint(
                p["msp_id"],
                p["address"],
                Path(p["tls_ca_file"]).read_bytes() if p.get("tls_ca_file") else None,
                p.get("server_name"),
            )
            for p in prof["peers"]
        ]
        return cls(peers, prof["channel"], chaincode or prof["chaincode"])

    # ---- connections
    def _peer_for(self, identity: Identity) -> PeerEndpoint:
        for p in self.peers:
            if p.msp_id == identity.msp_id:
                return p
        return self.peers[0]

    def _stub(self, peer: PeerEndpoint) -> gateway_pb2_grpc.GatewayStub:
        with self._lock:
            ch = self._channels.get(peer.address)
            if ch is None:
                opts: list[tuple[str, str | int]] = list(CHANNEL_OPTIONS)
                if peer.server_name:
                    opts.append(("grpc.ssl_target_name_override", peer.server_name))
                if peer.tls_root_cert is not None:
                    ch = grpc.secure_channel(
                        peer.address, grpc.ssl_channel_credentials(peer.tls_root_cert), opts
                    )
                else:
                    ch = grpc.insecure_channel(peer.address, opts)
                self._channels[peer.address] = ch
        return gateway_pb2_grpc.GatewayStub(ch)

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            ch.close()

    def __enter__(self) -> FabricLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- evaluate
    def _caught_up(self, identity: Identity) -> None:
        """Wait (bounded) until ``identity``'s peer has committed every block a submit through this
        object committed. Each organisation queries its own peer; right after another organisation's
        commit that peer may still be a block behind, and would simulate against the older state
        (e.g. refuse a task for a round the caller has just seen opened). Peers already known to be
        caught up cost nothing; otherwise the peer's height is asked (``qscc``)."""
        peer = self._peer_for(identity)
        with self._lock:
            target = self._committed
            if self._reached(peer.address, target):
                return
            asking = self._asking.setdefault(peer.address, threading.Lock())
        deadline = time.monotonic() + self.catch_up_timeout
        with asking:
            while True:
                with self._lock:
                    if self._reached(peer.address, target):
                        return  # possibly learnt by the caller that held ``asking`` before us
                try:
                    height = self.block_height(identity)
                except LedgerError:
                    return  # an unreachable peer: the call itself reports it
                with self._lock:
                    self._heights[peer.address] = max(self._heights.get(peer.address, 0), height)
                if height > target or time.monotonic() >= deadline:
                    return  # a peer that stays behind answers from its own state, as it would anyway
                time.sleep(0.05)

    def _reached(self, address: str, target: int) -> bool:
        """Whether the peer at ``address`` is known to have committed block ``target`` (hold ``_lock``)."""
        return target < 0 or self._heights.get(address, 0) > target

    def evaluate(self, identity: Identity, function: str, *args: str, chaincode: str | None = None) -> bytes:
        if chaincode is None:
            self._caught_up(identity)
        prop = build_proposal(identity, self.channel, chaincode or self.chaincode, function, args)
        req = gateway_pb2.EvaluateRequest(
            transaction_id=prop.tx_id, channel_id=self.channel, proposed_transaction=prop.signed
        )
        try:
            resp = self._stub(self._peer_for(identity)).Evaluate(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            raise translate(err, "evaluate") from None
        payload: bytes = resp.result.payload
        return payload

    # ---- submit (the four Gateway steps)
    def endorse(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
    ) -> tuple[str, common_pb2.Envelope, bytes]:
        """Collect endorsements; return (tx id, prepared envelope, chaincode result)."""
        try:
            return self._endorse(identity, function, args, transient, endorsing_organisations)
        except _RemoteLag as lag:
            raise lag.error from None

    def _endorse(
        self,
        identity: Identity,
        function: str,
        args: Sequence[str],
        transient: Mapping[str, bytes] | None,
        endorsing_organisations: Sequence[str] | None,
    ) -> tuple[str, common_pb2.Envelope, bytes]:
        """:meth:`endorse`; raises :class:`_RemoteLag` when only other organisations' peers refused."""
        self._caught_up(identity)
        prop = build_proposal(identity, self.channel, self.chaincode, function, args, transient)
        req = gateway_pb2.EndorseRequest(
            transaction_id=prop.tx_id,
            channel_id=self.channel,
            proposed_transaction=prop.signed,
            endorsing_organizations=list(endorsing_organisations or ()),
        )
        try:
            resp = self._stub(self._peer_for(identity)).Endorse(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            error, failed = translate(err, "endorse"), {d.msp_id for d in error_details(err)}
            if (failed and identity.msp_id not in failed) or (
                isinstance(error, EndorsementFailure)
                and "ProposalResponsePayloads do not match" in str(error)
            ):
                # a peer simulated against an older block than the caller's own caught-up peer (typical
                # right after a commit): only other organisations' peers refused, or the responses differ
                raise _RemoteLag(error) from None
            raise error from None
        return prop.tx_id, resp.prepared_transaction, envelope_result(resp.prepared_transaction)

    def send(self, identity: Identity, tx_id: str, envelope: common_pb2.Envelope) -> None:
        """Sign the prepared transaction and hand it to the orderer (through the Gateway)."""
        req = gateway_pb2.SubmitRequest(
            transaction_id=tx_id,
            channel_id=self.channel,
            prepared_transaction=sign_envelope(identity, envelope),
        )
        try:
            self._stub(self._peer_for(identity)).Submit(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            raise translate(err, "submit") from None

    def commit_status(self, identity: Identity, tx_id: str, timeout: float = 60.0) -> tuple[int, int]:
        """Wait for the commit; return (TxValidationCode, block number)."""
        req = gateway_pb2.CommitStatusRequest(
            transaction_id=tx_id, channel_id=self.channel, identity=identity.serialized()
        ).SerializeToString()
        signed = gateway_pb2.SignedCommitStatusRequest(request=req, signature=identity.sign(req))
        try:
            resp = self._stub(self._peer_for(identity)).CommitStatus(signed, timeout=timeout)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CommitTimeout(tx_id, timeout) from None
            raise translate(err, "commit") from None
        return resp.result, resp.block_number

    def submit(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
        timeout: float = 60.0,
    ) -> SubmitResult:
        for attempt in range(_LAG_RETRIES + 1):
            try:
                tx_id, envelope, result = self._endorse(
                    identity, function, args, transient, endorsing_organisations
                )
                break
            except _RemoteLag as lag:
                # a lagging peer (e.g. "image not registered" for the image this client registered a
                # block ago): nothing was submitted; endorse again once it has caught up, else report
                if attempt == _LAG_RETRIES:
                    raise lag.error from None
                time.sleep(0.2 * (attempt + 1))
        self.send(identity, tx_id, envelope)
        code, block = self.commit_status(identity, tx_id, timeout)
        peer = self._peer_for(identity)
        with self._lock:
            self._committed = max(self._committed, block)
            self._heights[peer.address] = max(self._heights.get(peer.address, 0), block + 1)
        if code != transaction_pb2.VALID:
            raise validation_error(tx_id, code)
        return SubmitResult(tx_id=tx_id, block_number=block, result=result)

    # ---- events
    def events(
        self, identity: Identity, start_block: int = 0, timeout: float | None = None
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
        target = None if timeout is None else self._last_event_block(identity, start_block)

        def remaining() -> float | None:
            if timeout is None:
                return None
            if target is not None:  # still catching up with committed events
                return max(timeout, self.endorse_timeout) - (time.monotonic() - started)
            return timeout - (time.monotonic() - last_event)

        while True:
            call, q = self._open_events(identity, next_block, after_tx)
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

    _CATCH_UP_SCAN = 1000  # blocks looked at, from the head backwards, for the last event

    def _last_event_block(self, identity: Identity, start_block: int) -> int | None:
        """The last block in [start_block, height) with a chaincode event of this chaincode in a
        valid transaction; None if there is none (within the scan) or the peer cannot be asked."""
        try:
            height = self.block_height(identity)
            for n in range(height - 1, max(start_block, height - self._CATCH_UP_SCAN) - 1, -1):
                raw = self.evaluate(identity, "GetBlockByNumber", self.channel, str(n), chaincode="qscc")
                if block_has_events(common_pb2.Block.FromString(raw), self.chaincode):
                    return n
        except (LedgerError, DecodeError) as exc:
            log.info("cannot look up the last event block (%s); events idle clock starts now", exc)
        return None

    def _open_events(
        self, identity: Identity, start_block: int, after_tx: str
    ) -> tuple[grpc.Call, queue.Queue[Any]]:
        req = gateway_pb2.ChaincodeEventsRequest(
            channel_id=self.channel,
            chaincode_id=self.chaincode,
            identity=identity.serialized(),
            start_position=ab_pb2.SeekPosition(specified=ab_pb2.SeekSpecified(number=start_block)),
            after_transaction_id=after_tx,
        ).SerializeToString()
        signed = gateway_pb2.SignedChaincodeEventsRequest(request=req, signature=identity.sign(req))
        call = self._stub(self._peer_for(identity)).ChaincodeEvents(signed)
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

    # ---- blocks (qscc)
    def block_height(self, identity: Identity) -> int:
        raw = self.evaluate(identity, "GetChainInfo", self.channel, chaincode="qscc")
        height: int = ledger_pb2.BlockchainInfo.FromString(raw).height
        return height

    def block(self, identity: Identity, number: int) -> BlockInfo:
        if number < 0:
            raise ValueError("block number must be >= 0")
        raw = self.evaluate(identity, "GetBlockByNumber", self.channel, str(number), chaincode="qscc")
        return block_info(common_pb2.Block.FromString(raw))


def submit_with_retry(
    ledger: FabricLedger, identity: Identity, function: str, *args: str, attempts: int = 3, **kwargs: Any
) -> SubmitResult:
    """``submit`` that re-runs the whole transaction after an MVCC conflict (safe: a conflicting
    transaction changed nothing) up to ``attempts`` times, then re-raises."""
    from ledger.errors import MVCCConflict

    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    for i in range(attempts):
        try:
            return ledger.submit(identity, function, *args, **kwargs)
        except MVCCConflict:
            if i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))
    raise LedgerError("unreachable")
