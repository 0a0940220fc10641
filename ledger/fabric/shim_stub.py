"""The chaincode stub of the CCaaS shim (:mod:`ledger.fabric.chaincode_server`):
``chaincode.stub.ChaincodeStub`` over one transaction of one chaincode stream, each state call a
round trip to the peer (fabric-chaincode-go ``shim/stub.go``). Private data travels in the same
messages with their ``collection`` field set (GET_STATE, PUT_STATE, DEL_STATE, GET_STATE_METADATA,
PUT_STATE_METADATA), plus GET_PRIVATE_DATA_HASH and PURGE_PRIVATE_DATA; the peer keeps the clear-text
writes in its private write set and puts their hashes in the transaction."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Protocol, TypeAlias

from fabric_protos.common import common_pb2
from fabric_protos.ledger.queryresult import kv_query_result_pb2
from fabric_protos.peer import chaincode_event_pb2, chaincode_pb2, chaincode_shim_pb2, proposal_pb2

from chaincode.endorsement import VALIDATION_PARAMETER
from chaincode.stub import (
    COMPOSITE_KEY_NAMESPACE,
    MAX_UNICODE_RUNE,
    KeyModification,
    KeyValue,
    PrivateDataUnavailable,
    TransactionHeader,
    collection_organisation,
    create_composite_key,
)

Msg: TypeAlias = chaincode_shim_pb2.ChaincodeMessage
EMPTY_KEY_SUBSTITUTE = "\x01"  # fabric-chaincode-go shim/stub.go
# the peer's refusal of a private read whose copy it lacks (Fabric core/ledger, pvtdata version check)
_NOT_AVAILABLE = "private data matching public hash version is not available"


class PeerCaller(Protocol):
    """The stream a stub's calls travel on (``_Stream`` of the server): ``call_peer`` returns the
    peer's reply or raises :class:`PeerError`."""

    def call_peer(self, channel_id: str, tx_id: str, kind: int, payload: bytes) -> bytes: ...


class PeerError(RuntimeError):
    """The peer answered a stub call with ERROR (e.g. a key outside the namespace, access denied)."""


# --------------------------------------------------------------------------- the stub


class FabricStub(TransactionHeader):
    """``chaincode.stub.ChaincodeStub`` over one transaction of one chaincode stream."""

    def __init__(self, handler: PeerCaller, msg: Msg, msp_id: str = ""):
        self._handler = handler
        self.event: chaincode_event_pb2.ChaincodeEvent | None = None
        inp = chaincode_pb2.ChaincodeInput.FromString(msg.payload)
        self.args: list[bytes] = list(inp.args)
        creator, timestamp = b"", 0.0
        transient: dict[str, bytes] = {}
        if msg.HasField("proposal"):
            prop = proposal_pb2.Proposal.FromString(msg.proposal.proposal_bytes)
            header = common_pb2.Header.FromString(prop.header)
            chdr = common_pb2.ChannelHeader.FromString(header.channel_header)
            shdr = common_pb2.SignatureHeader.FromString(header.signature_header)
            creator = shdr.creator
            timestamp = chdr.timestamp.seconds + chdr.timestamp.nanos / 1e9
            ccpp = proposal_pb2.ChaincodeProposalPayload.FromString(prop.payload)
            transient = dict(ccpp.TransientMap)
        super().__init__(msg.txid, msg.channel_id, timestamp, creator, transient, msp_id)

    def _call(self, kind: int, payload: bytes) -> bytes:
        return self._handler.call_peer(self._channel_id, self._tx_id, kind, payload)

    def get_state(self, key: str) -> bytes | None:
        value = self._call(Msg.GET_STATE, chaincode_shim_pb2.GetState(key=key).SerializeToString())
        return value or None  # Fabric: a missing key reads as empty

    def put_state(self, key: str, value: bytes) -> None:
        _validate_key(key)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError("put_state value must be bytes")
        self._call(
            Msg.PUT_STATE, chaincode_shim_pb2.PutState(key=key, value=bytes(value)).SerializeToString()
        )

    def del_state(self, key: str) -> None:
        _validate_key(key)
        self._call(Msg.DEL_STATE, chaincode_shim_pb2.DelState(key=key).SerializeToString())

    def set_state_validation_parameter(self, key: str, policy: bytes) -> None:
        """``PUT_STATE_METADATA`` with the ``VALIDATION_PARAMETER`` entry (fabric-chaincode-go
        ``SetStateValidationParameter``): the peer records it in the transaction's write set, and its
        validator checks every later write to the key against it."""
        _validate_key(key)
        if not isinstance(policy, (bytes, bytearray)):
            raise TypeError("a validation parameter is bytes")
        entry = chaincode_shim_pb2.StateMetadata(metakey=VALIDATION_PARAMETER, value=bytes(policy))
        req = chaincode_shim_pb2.PutStateMetadata(key=key, metadata=entry)
        self._call(Msg.PUT_STATE_METADATA, req.SerializeToString())

    def get_state_validation_parameter(self, key: str) -> bytes | None:
        """``GET_STATE_METADATA``: the key's committed ``VALIDATION_PARAMETER`` entry, if any."""
        _validate_key(key)
        reply = self._call(
            Msg.GET_STATE_METADATA, chaincode_shim_pb2.GetStateMetadata(key=key).SerializeToString()
        )
        entries = chaincode_shim_pb2.StateMetadataResult.FromString(reply).entries
        return next((bytes(e.value) for e in entries if e.metakey == VALIDATION_PARAMETER and e.value), None)

    # ---- private data (chaincode.stub module docstring)
    def get_private_data(self, collection: str, key: str) -> bytes | None:
        """GET_STATE with ``collection``: the executing peer's own copy. Only the executing
        organisation's implicit collection is read (the same rule as the embedded host); a copy the
        peer lacks is :class:`PrivateDataUnavailable`."""
        _validate_collection(collection)
        _validate_key(key)
        if collection_organisation(collection) != self._msp_id or not self._msp_id:
            raise PrivateDataUnavailable(
                f"collection {collection} is not held by the executing organisation {self._msp_id or '?'}"
            )
        try:
            value = self._call(
                Msg.GET_STATE, chaincode_shim_pb2.GetState(key=key, collection=collection).SerializeToString()
            )
        except PeerError as exc:
            if _NOT_AVAILABLE in str(exc):
                raise PrivateDataUnavailable(str(exc)) from None
            raise
        return value or None

    def put_private_data(self, collection: str, key: str, value: bytes) -> None:
        _validate_collection(collection)
        _validate_key(key)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError("private data values are bytes")
        req = chaincode_shim_pb2.PutState(key=key, value=bytes(value), collection=collection)
        self._call(Msg.PUT_STATE, req.SerializeToString())

    def del_private_data(self, collection: str, key: str) -> None:
        _validate_collection(collection)
        _validate_key(key)
        req = chaincode_shim_pb2.DelState(key=key, collection=collection)
        self._call(Msg.DEL_STATE, req.SerializeToString())

    def purge_private_data(self, collection: str, key: str) -> None:
        """PURGE_PRIVATE_DATA (a ``DelState`` payload; Fabric 2.5, channel capability V2_5)."""
        _validate_collection(collection)
        _validate_key(key)
        req = chaincode_shim_pb2.DelState(key=key, collection=collection)
        self._call(Msg.PURGE_PRIVATE_DATA, req.SerializeToString())

    def get_private_data_hash(self, collection: str, key: str) -> bytes | None:
        _validate_collection(collection)
        _validate_key(key)
        req = chaincode_shim_pb2.GetState(key=key, collection=collection)
        return self._call(Msg.GET_PRIVATE_DATA_HASH, req.SerializeToString()) or None

    def set_private_data_validation_parameter(self, collection: str, key: str, policy: bytes) -> None:
        _validate_collection(collection)
        _validate_key(key)
        if not isinstance(policy, (bytes, bytearray)):
            raise TypeError("a validation parameter is bytes")
        entry = chaincode_shim_pb2.StateMetadata(metakey=VALIDATION_PARAMETER, value=bytes(policy))
        req = chaincode_shim_pb2.PutStateMetadata(key=key, collection=collection, metadata=entry)
        self._call(Msg.PUT_STATE_METADATA, req.SerializeToString())

    def get_private_data_validation_parameter(self, collection: str, key: str) -> bytes | None:
        _validate_collection(collection)
        _validate_key(key)
        req = chaincode_shim_pb2.GetStateMetadata(key=key, collection=collection)
        entries = chaincode_shim_pb2.StateMetadataResult.FromString(
            self._call(Msg.GET_STATE_METADATA, req.SerializeToString())
        ).entries
        return next((bytes(e.value) for e in entries if e.metakey == VALIDATION_PARAMETER and e.value), None)

    def get_state_by_range(self, start_key: str, end_key: str) -> Iterator[KeyValue]:
        if start_key == "":
            start_key = EMPTY_KEY_SUBSTITUTE
        for k in (start_key, end_key):
            if k and k.startswith(COMPOSITE_KEY_NAMESPACE):
                raise ValueError(
                    "get_state_by_range takes simple keys; use get_state_by_partial_composite_key"
                )
        req = chaincode_shim_pb2.GetStateByRange(startKey=start_key, endKey=end_key)
        return self._kv_iter(self._call(Msg.GET_STATE_BY_RANGE, req.SerializeToString()))

    def get_state_by_partial_composite_key(
        self, object_type: str, attributes: list[str]
    ) -> Iterator[KeyValue]:
        start = create_composite_key(object_type, attributes)
        req = chaincode_shim_pb2.GetStateByRange(startKey=start, endKey=start + MAX_UNICODE_RUNE)
        return self._kv_iter(self._call(Msg.GET_STATE_BY_RANGE, req.SerializeToString()))

    def get_history_for_key(self, key: str, *, newest_first: bool = False) -> Iterator[KeyModification]:
        """Committed versions, oldest first (the ``ChaincodeStub`` contract) or, with ``newest_first``,
        in the order of Fabric's history iterator (newest first), read from the peer one batch at a
        time as the reader advances: closing the iterator early closes the peer's query. Oldest first
        needs the whole history read and reversed."""
        if newest_first:
            return self._history(key)
        return iter(list(self._history(key))[::-1])

    def _history(self, key: str) -> Iterator[KeyModification]:
        req = chaincode_shim_pb2.GetHistoryForKey(key=key).SerializeToString()
        results = self._results(self._call(Msg.GET_HISTORY_FOR_KEY, req))
        try:
            for raw in results:
                km = kv_query_result_pb2.KeyModification.FromString(raw)
                ts = km.timestamp.seconds + km.timestamp.nanos / 1e9
                yield KeyModification(km.tx_id, km.value, ts, km.is_delete)
        finally:
            results.close()

    def _kv_iter(self, first: bytes) -> Iterator[KeyValue]:
        for raw in self._results(first):
            kv = kv_query_result_pb2.KV.FromString(raw)
            yield KeyValue(kv.key, kv.value)

    def _results(self, first: bytes) -> Generator[bytes, None, None]:
        """Page through a QueryResponse (QUERY_STATE_NEXT), closing the iterator at the end."""
        resp = chaincode_shim_pb2.QueryResponse.FromString(first)
        try:
            while True:
                for r in resp.results:
                    yield r.resultBytes
                if not resp.has_more:
                    return
                nxt = chaincode_shim_pb2.QueryStateNext(id=resp.id).SerializeToString()
                resp = chaincode_shim_pb2.QueryResponse.FromString(self._call(Msg.QUERY_STATE_NEXT, nxt))
        finally:
            if resp.id:
                try:
                    self._call(
                        Msg.QUERY_STATE_CLOSE,
                        chaincode_shim_pb2.QueryStateClose(id=resp.id).SerializeToString(),
                    )
                except PeerError:
                    pass  # the peer closes finished iterators itself

    # ---- events
    def set_event(self, name: str, payload: bytes) -> None:
        if not name:
            raise ValueError("event name must not be empty")
        self.event = chaincode_event_pb2.ChaincodeEvent(event_name=name, payload=bytes(payload))


def _validate_collection(collection: str) -> None:
    if not isinstance(collection, str) or not collection:
        raise ValueError("a private data collection is a non-empty name")


def _validate_key(key: str) -> None:
    if not isinstance(key, str) or not key:
        raise ValueError("state keys must be non-empty strings")
