"""The Fabric host of the ``Ledger`` interface: a Fabric Gateway client on
``hyperledger-fabric-protos`` + ``grpcio`` + ``cryptography`` (docs/fabric.md "Gateway client").

Each call acts for an explicit :class:`ledger.identity.Identity` and goes to the Gateway of that
identity's organisation (its own peer, as fabric-gateway applications do); an identity of an
organisation without a peer here uses the first peer, which then judges it. ``submit`` =
Endorse -> sign -> Submit -> the commit, told by the peer's filtered block stream
(:mod:`ledger.fabric.commits`; ``CommitStatus`` where the peer refuses that stream);
``evaluate`` = Evaluate; ``events`` = ChaincodeEvents from a block (:mod:`ledger.fabric.events`);
block queries go through the ``qscc`` system chaincode. Errors: ContractError subclasses for contract refusals,
:mod:`ledger.errors` for the rest (see :mod:`ledger.fabric.errors`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from fabric_protos.common import common_pb2, ledger_pb2
from fabric_protos.gateway import gateway_pb2, gateway_pb2_grpc
from fabric_protos.peer import events_pb2_grpc, transaction_pb2

from ledger.errors import CommitTimeout, EndorsementFailure, LedgerError
from ledger.fabric.blocks import BLOCK_FORMAT as FABRIC_BLOCK_FORMAT
from ledger.fabric.blocks import block_info
from ledger.fabric.commits import CommitWatcher, WatcherClosed, WatcherFailed
from ledger.fabric.errors import error_details, held_by_orderers, translate, validation_error
from ledger.fabric.events import chaincode_events
from ledger.fabric.proposal import build_proposal, envelope_result, seek_envelope, sign_envelope
from ledger.identity import Identity
from ledger.interface import BlockInfo, ChaincodeEvent, SubmitResult

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 100 * 1024 * 1024
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 120_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # a peer back after an outage is connected to again within seconds (gRPC's default waits up to
    # 120 s between reconnection attempts, failing every call meanwhile: docs/executor.md "Ledger outages")
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5_000),
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
        # commit statuses and peer heights from one filtered block stream per peer (ledger.fabric.
        # commits); a peer whose stream failed is asked CommitStatus until _unwatched[address]
        self._watchers: dict[str, CommitWatcher] = {}
        self._unwatched: dict[str, float] = {}
        self._opening: dict[str, threading.Lock] = {}  # one watcher opened per peer at a time
        self._generation = 0  # close() increments it: a watcher opened across a close is dropped

    catch_up_timeout = 10.0  #: seconds to wait for a peer to reach a block this object committed
    watch_retry_s = 60.0  #: seconds before a peer whose commit stream failed is watched again

    # ---- construction from fabric-network/ output
    @classmethod
    def from_profile(cls, path: str | Path, chaincode: str | None = None) -> FabricLedger:
        """Read ``connection.json`` written by ``fabric-network`` (``network up``) or ``consortia join``;
        a relative ``tls_ca_file`` is relative to the profile's own folder."""
        prof = json.loads(Path(path).read_text())
        here = Path(path).resolve().parent
        peers = [
            PeerEndpoint(
                p["msp_id"],
                p["address"],
                (here / p["tls_ca_file"]).read_bytes() if p.get("tls_ca_file") else None,
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

    def gateway(self, identity: Identity) -> gateway_pb2_grpc.GatewayStub:
        """The Gateway service of ``identity``'s own peer."""
        return self._stub(self._peer_for(identity))

    def _stub(self, peer: PeerEndpoint) -> gateway_pb2_grpc.GatewayStub:
        return gateway_pb2_grpc.GatewayStub(self._channel(peer))

    def _channel(self, peer: PeerEndpoint) -> grpc.Channel:
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
        return ch

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            watchers, self._watchers = list(self._watchers.values()), {}
            self._generation += 1
        for w in watchers:
            w.close()
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
        caught up cost nothing; a peer this object watches (``ledger.fabric.commits``) is waited for;
        otherwise the peer's height is asked (``qscc``)."""
        peer = self._peer_for(identity)
        with self._lock:
            target = self._committed
            if self._reached(peer.address, target):
                return
            watcher = self._watchers.get(peer.address)
            asking = self._asking.setdefault(peer.address, threading.Lock())
        deadline = time.monotonic() + self.catch_up_timeout
        if watcher is not None:
            watcher.wait_height(target + 1, self.catch_up_timeout)
            if not watcher.failed:
                return  # reached, or still behind at the deadline: it answers from its own state
        with asking:
            while True:
                with self._lock:
                    if self._reached(peer.address, target):
                        return  # possibly learnt by the caller that held ``asking`` before us
                try:
                    height = self.block_height(identity)
                except LedgerError:
                    return  # an unreachable peer: the call itself reports it
                self._note_height(peer.address, height)
                if height > target or time.monotonic() >= deadline:
                    return  # a peer that stays behind answers from its own state, as it would anyway
                time.sleep(0.05)

    def _note_height(self, address: str, height: int) -> None:
        """The peer at ``address`` has committed ``height`` blocks at least."""
        with self._lock:
            self._heights[address] = max(self._heights.get(address, 0), height)

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
            resp = self.gateway(identity).Evaluate(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            raise translate(err, "evaluate", self._peer_for(identity).address) from None
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
            resp = self.gateway(identity).Endorse(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            error = translate(err, "endorse", self._peer_for(identity).address)
            failed = {d.msp_id for d in error_details(err)}
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
            self.gateway(identity).Submit(req, timeout=self.endorse_timeout)
        except grpc.RpcError as err:
            if held_by_orderers(err):  # BFT: the orderers that refused already hold it; its commit tells
                log.debug("transaction %s already held by the orderers that refused it: %s", tx_id, err)
                return
            raise translate(err, "submit", self._peer_for(identity).address) from None

    def commit_status(self, identity: Identity, tx_id: str, timeout: float = 60.0) -> tuple[int, int]:
        """Wait for the commit; return (TxValidationCode, block number)."""
        req = gateway_pb2.CommitStatusRequest(
            transaction_id=tx_id, channel_id=self.channel, identity=identity.serialized()
        ).SerializeToString()
        signed = gateway_pb2.SignedCommitStatusRequest(request=req, signature=identity.sign(req))
        try:
            resp = self.gateway(identity).CommitStatus(signed, timeout=timeout)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CommitTimeout(tx_id, timeout) from None
            raise translate(err, "commit", self._peer_for(identity).address) from None
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
        code, block = self._send_and_wait(identity, tx_id, envelope, timeout)
        peer = self._peer_for(identity)
        with self._lock:
            self._committed = max(self._committed, block)
        self._note_height(peer.address, block + 1)
        if code != transaction_pb2.VALID:
            raise validation_error(tx_id, code)
        return SubmitResult(tx_id=tx_id, block_number=block, result=result)

    def _send_and_wait(
        self, identity: Identity, tx_id: str, envelope: common_pb2.Envelope, timeout: float
    ) -> tuple[int, int]:
        """Send, then wait up to ``timeout`` seconds for the commit: told by the peer's filtered
        block stream, registered before the send (docs/fabric.md "Commit statuses"), else asked
        with ``CommitStatus``."""
        address = self._peer_for(identity).address
        watcher = self._watcher(identity)
        if watcher is not None:
            try:
                watcher.expect(tx_id)
            except WatcherFailed as exc:
                self._unwatch(address, watcher, exc)
                watcher = None
        try:
            self.send(identity, tx_id, envelope)
        except BaseException:
            if watcher is not None:
                watcher.forget(tx_id)
            raise
        deadline = time.monotonic() + timeout
        if watcher is not None:
            try:
                return watcher.wait(tx_id, timeout)
            except WatcherClosed:
                raise LedgerError(
                    f"the ledger was closed while transaction {tx_id} waited for its commit"
                ) from None
            except WatcherFailed as exc:
                self._unwatch(address, watcher, exc)
        return self.commit_status(identity, tx_id, max(0.0, deadline - time.monotonic()))

    def _watcher(self, identity: Identity) -> CommitWatcher | None:
        """The commit watcher of ``identity``'s peer, opened with ``identity`` on first use; None
        while that peer's stream is known to fail (then submits ask ``CommitStatus``)."""
        peer = self._peer_for(identity)
        with self._lock:
            decided, known = self._known_watcher(peer.address)
            if decided:
                return known
            opening = self._opening.setdefault(peer.address, threading.Lock())
            generation = self._generation
        with opening:
            with self._lock:  # another caller may have opened it (or failed to) meanwhile
                decided, known = self._known_watcher(peer.address)
                if decided:
                    return known
            deliver = events_pb2_grpc.DeliverStub(self._channel(peer))

            def open_stream(start: int | None) -> Any:
                return deliver.DeliverFiltered(iter([seek_envelope(identity, self.channel, start)]))

            try:
                watcher = CommitWatcher(
                    open_stream, lambda block: self._note_height(peer.address, block + 1), name=peer.address
                )
            except WatcherFailed as exc:
                self._unwatch(peer.address, None, exc)
                return None
            with self._lock:
                if self._generation == generation:
                    self._watchers[peer.address] = watcher
                    return watcher
            watcher.close()  # this object was closed meanwhile
            return None

    def _known_watcher(self, address: str) -> tuple[bool, CommitWatcher | None]:
        """(decided, watcher) for the peer at ``address`` (hold ``_lock``): its open watcher, or None
        while its stream is known to fail; not decided when a watcher should be opened."""
        if (known := self._watchers.get(address)) is not None:
            return True, known
        return time.monotonic() < self._unwatched.get(address, 0.0), None

    def _unwatch(self, address: str, watcher: CommitWatcher | None, why: Exception) -> None:
        """Stop using a failed watcher (none: one that could not open); the peer is watched again
        after ``watch_retry_s``, with the identity submitting then."""
        with self._lock:
            if watcher is None or self._watchers.get(address) is watcher:
                self._watchers.pop(address, None)
                self._unwatched[address] = time.monotonic() + self.watch_retry_s
                log.warning(
                    "%s; commit statuses are asked per transaction for %.0f s", why, self.watch_retry_s
                )
        if watcher is not None:
            watcher.close()

    # ---- events
    def events(
        self, identity: Identity, start_block: int = 0, timeout: float | None = None
    ) -> Iterator[ChaincodeEvent]:
        """Chaincode events from ``start_block`` on (:func:`ledger.fabric.events.chaincode_events`)."""
        return chaincode_events(self, identity, start_block, timeout)

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

    #: how :meth:`raw_blocks` encodes a block (``audit.write_sets`` reads it)
    block_format = FABRIC_BLOCK_FORMAT

    def raw_blocks(self, identity: Identity, start: int, stop: int | None = None) -> Iterator[bytes]:
        """Blocks ``start`` to ``stop`` (None: the last committed), each a serialized ``common.Block``
        as the Deliver service hands it (:meth:`delivered_blocks`)."""
        return self.delivered_blocks(identity, start, stop)

    def delivered_blocks(
        self, identity: Identity, start: int = 0, stop: int | None = None
    ) -> Iterator[bytes]:
        """The channel's blocks ``start`` to ``stop`` (None: the last committed when called), whole, as
        ``identity``'s own peer's Deliver service hands them to ``identity`` (``Deliver``, not the
        filtered stream: every transaction with its read-write sets, as any reader of the channel
        receives it; docs/confidentiality.md "What a non-member can read, measured")."""
        if stop is None:
            stop = self.block_height(identity) - 1
        if stop < start:
            return
        deliver = events_pb2_grpc.DeliverStub(self._channel(self._peer_for(identity)))
        stream = deliver.Deliver(iter([seek_envelope(identity, self.channel, start, stop)]))
        try:
            for response in stream:
                kind = response.WhichOneof("Type")
                if kind == "block":
                    yield response.block.SerializeToString()
                    if response.block.header.number >= stop:
                        return
                elif kind == "status":
                    if response.status != common_pb2.Status.Value("SUCCESS"):
                        name = common_pb2.Status.Name(response.status)
                        raise LedgerError(f"the Deliver service refused blocks {start}-{stop}: {name}")
                    return
        finally:
            stream.cancel()


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
