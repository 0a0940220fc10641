"""The transaction context a contract method runs in: the stub plus who is calling.

The calling organisation is always taken from the creator's certificate (its MSP id), never
from an argument. Records (:mod:`chaincode.records`) are stored as canonical JSON under composite keys.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, Self, TypeVar

from cryptography import x509
from cryptography.x509.oid import NameOID
from fabric_protos.msp.identities_pb2 import SerializedIdentity
from google.protobuf.message import DecodeError

from chaincode.canonical import RawJSON, canonical_json
from chaincode.endorsement import RecordView
from chaincode.errors import Forbidden, InvalidArgument, InvalidState, NotFound, PrivateDataMismatch
from chaincode.limits import MAX_ARGUMENT_BYTES, history_page_request, parse_json
from chaincode.records import Record
from chaincode.stub import (
    ChaincodeStub,
    KeyModification,
    KeyValue,
    PrivateDataUnavailable,
    create_composite_key,
    implicit_collection,
)
from wire.memo import Memo

SUBMITTER_ROLES = ("client", "admin")


_SECONDS: dict[int, str] = {}


def iso_time(ts: float) -> str:
    """UTC ISO-8601 with microseconds, e.g. ``2026-11-22T01:52:38.690341Z`` (transaction times)."""
    secs, micros = divmod(int(round(ts * 1_000_000)), 1_000_000)
    head = _SECONDS.get(secs)
    if head is None:
        if len(_SECONDS) > 4096:
            _SECONDS.clear()
        head = _SECONDS[secs] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{head}.{micros:06d}Z"


def _parse_creator(creator: bytes) -> tuple[str, x509.Certificate]:
    """(MSP id, certificate) of Fabric's ``msp.SerializedIdentity`` (the official message); a
    ``ValueError`` for bytes that are not one or lack a field."""
    try:
        identity = SerializedIdentity.FromString(creator)
    except DecodeError:
        raise ValueError(f"malformed SerializedIdentity ({len(creator)} bytes)") from None
    if not identity.mspid:
        raise ValueError("SerializedIdentity lacks mspid")
    return str(identity.mspid), x509.load_pem_x509_certificate(bytes(identity.id_bytes))


Creator = tuple[str, x509.Certificate, str | None, str]  # msp id, certificate, role, subject
_CREATORS: Memo[bytes, Creator] = Memo(4096)


def creator_of(creator: bytes) -> Creator:
    """(MSP id, certificate, NodeOU role, common name) of a serialized creator identity.

    A consortium has few identities and each submits many transactions: the parsed identity is
    kept per exact serialized bytes (a different certificate is different bytes, so nothing is
    trusted that was not parsed from these bytes; the peer verified the creator's signature before
    the contract runs). Bounded (:class:`wire.memo.Memo`)."""
    key = bytes(creator)
    hit = _CREATORS.get(key)  # a known identity: one dict look-up
    return hit if hit is not None else _CREATORS.remember(key, _read_creator(key))


def _read_creator(creator: bytes) -> Creator:
    msp_id, certificate = _parse_creator(creator)
    ous = [a.value for a in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
    role = next((str(o) for o in ous if o in ("client", "admin", "peer", "orderer")), None)
    cns = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return msp_id, certificate, role, str(cns[0].value) if cns else ""


_T = TypeVar("_T")
_R = TypeVar("_R", bound=Record)


def _summary(summarise: Callable[[dict[str, Any]], _T], raw: bytes) -> _T:
    return summarise(json.loads(raw))


# (summariser, sha256 of a stored value) -> summary
_SUMMARIES: Memo[tuple[Callable[..., Any], bytes], Any] = Memo(8192)
_MISSING = object()


class TransactionContext:
    def __init__(self, stub: ChaincodeStub):
        self.stub: ChaincodeStub = RecordView(stub)  # a placeholder of a future record reads as none
        self._stored: dict[int, tuple[Record, bytes]] = {}
        try:
            self.msp_id, self.certificate, self.role, self.subject = creator_of(stub.get_creator())
        except ValueError as exc:
            raise Forbidden(f"cannot read the submitter's identity: {exc}") from None

    # ---- caller
    def require_submitter(self) -> None:
        if self.role not in SUBMITTER_ROLES:
            raise Forbidden(
                f"identity {self.subject} of {self.msp_id} has role {self.role!r}; "
                f"only client or admin identities may invoke contracts"
            )

    # ---- time and ids
    @property
    def tx_id(self) -> str:
        return self.stub.get_tx_id()

    @property
    def timestamp(self) -> str:
        return iso_time(self.stub.get_tx_timestamp())

    # ---- records
    def key(self, object_type: str, *attributes: str) -> str:
        return create_composite_key(object_type, list(attributes))

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored JSON object under ``key`` (None if there is none)."""
        raw = self.stub.get_state(key)
        return None if raw is None else json.loads(raw)

    def find(self, cls: type[_R], key: str) -> _R | None:
        """The record of type ``cls`` under ``key`` (None if there is none)."""
        raw = self.stub.get_state(key)
        return None if raw is None else cls.from_json(raw)

    def load(self, cls: type[_R], key: str, what: str) -> _R:
        """The record of type ``cls`` under ``key``; :class:`NotFound` ("``what`` does not exist")."""
        record = self.find(cls, key)
        if record is None:
            raise NotFound(f"{what} does not exist")
        return record

    def put(self, key: str, record: Record) -> None:
        """Store ``record`` as the canonical JSON of its fields (:meth:`Record.json_object`)."""
        raw = record.canonical()
        self._stored[id(record)] = (record, raw)
        self.stub.put_state(key, raw)

    def stored_json(self, record: Record) -> bytes | None:
        """The bytes :meth:`put` stored for this very record object (a write's answer is often the
        record it wrote: encoded once), else None."""
        hit = self._stored.get(id(record))
        return hit[1] if hit is not None and hit[0] is record else None

    def get_raw(self, key: str, what: str) -> RawJSON:
        """The stored canonical JSON under ``key``, as it is; :class:`NotFound` ("``what`` does not
        exist"). A read that answers a record unchanged splices its bytes (no decoding, no encoding)."""
        raw = self.stub.get_state(key)
        if raw is None:
            raise NotFound(f"{what} does not exist")
        return RawJSON(raw)

    def scan_raw(self, object_type: str, *attributes: str) -> Iterator[KeyValue]:
        """The stored (key, canonical JSON) pairs whose keys start with these attributes, in key order."""
        yield from self.stub.get_state_by_partial_composite_key(object_type, list(attributes))

    def scan(self, cls: type[_R], object_type: str, *attributes: str) -> Iterator[_R]:
        """The records of type ``cls`` whose keys start with ``object_type`` and ``attributes``."""
        for kv in self.stub.get_state_by_partial_composite_key(object_type, list(attributes)):
            yield cls.from_json(kv.value)

    def scan_summaries(
        self, summarise: Callable[[dict[str, Any]], _T], object_type: str, *attributes: str
    ) -> Iterator[_T]:
        """``summarise(record)`` of the stored JSON object of each record :meth:`scan` would yield
        (:meth:`summaries`)."""
        yield from self.summaries(
            summarise, self.stub.get_state_by_partial_composite_key(object_type, list(attributes))
        )

    @staticmethod
    def summaries(summarise: Callable[[dict[str, Any]], _T], entries: Iterable[KeyValue]) -> Iterator[_T]:
        """``summarise(record)`` of the stored JSON object of each entry (as :meth:`scan_raw` yields
        them), decoded and summarised once per distinct stored value (its sha256) in this process: a
        round's execution records are read by every member's every progress query, and decoding them
        whole (manifests, provenance) cost far more than the few fields a rule needs. ``summarise``
        must be a pure function of the record returning a value nobody mutates."""
        for kv in entries:
            key = (summarise, hashlib.sha256(kv.value).digest())  # the function itself: names may repeat
            hit = _SUMMARIES.get(key, _MISSING)  # a known value: one dict look-up
            yield hit if hit is not _MISSING else _SUMMARIES.remember(key, _summary(summarise, kv.value))

    def history(self, key: str, limit: str = "", after: str = "") -> RawJSON:
        """Committed versions of ``key`` as ``{is_delete, timestamp, tx_id, value}`` objects, spliced
        from the stored canonical JSON values (no decoding and re-encoding; keys in canonical order).

        Without ``limit`` and ``after``: every version, oldest first, as one JSON array (the answer
        from before paging). Otherwise one page, **newest first** (the order of Fabric's history
        iterator), as ``{"items": [...], "next": bookmark | null}``: at most ``limit`` versions
        (:func:`chaincode.limits.history_page_request`) older than the version whose transaction
        id is ``after`` (empty: from the newest). ``next`` is the transaction id of the page's
        last (oldest) version when older versions exist, else ``null``. Only the versions up to
        the end of the page (plus one, to know whether more exist) are read from the host."""
        page = history_page_request(limit, after)
        if page is None:
            return RawJSON(b"[" + b",".join(map(_version_json, self.stub.get_history_for_key(key))) + b"]")
        size, bookmark = page
        versions = self.stub.get_history_for_key(key, newest_first=True)
        parts: list[bytes] = []
        last, more = "", False
        try:
            if bookmark is not None and not any(m.tx_id == bookmark for m in versions):
                raise InvalidArgument(f"history bookmark {bookmark!r} is not a version of this record")
            for m in versions:
                if len(parts) == size:
                    more = True
                    break
                parts.append(_version_json(m))
                last = m.tx_id
        finally:
            close = getattr(versions, "close", None)
            if close is not None:
                close()
        nxt = b'"%s"' % last.encode() if more else b"null"
        return RawJSON(b'{"items":[' + b",".join(parts) + b'],"next":' + nxt + b"}")

    def emit(self, name: str, payload: dict[str, Any]) -> None:
        self.stub.set_event(name, canonical_json(payload))


def _version_json(m: KeyModification) -> bytes:
    """One history entry as canonical JSON, around the stored canonical JSON value."""
    return b'{"is_delete":%s,"timestamp":"%s","tx_id":"%s","value":%s}' % (
        b"true" if m.is_delete else b"false",
        iso_time(m.timestamp).encode(),
        m.tx_id.encode(),
        b"null" if m.is_delete else m.value,
    )


def parse_json_arg(arg: str, what: str) -> Any:
    """A JSON argument within the limits of :mod:`chaincode.limits` (depth, finite numbers)."""
    return parse_json(arg, what)


def require_str(obj: dict[str, Any], field: str, *, max_len: int = 256, pattern: str | None = None) -> str:
    import re

    v = obj.get(field)
    if not isinstance(v, str) or not v:
        raise InvalidArgument(f"field {field!r} must be a non-empty string")
    if len(v) > max_len:
        raise InvalidArgument(f"field {field!r} is longer than {max_len} characters")
    if pattern is not None and not re.fullmatch(pattern, v):
        raise InvalidArgument(f"field {field!r} = {v!r} does not match {pattern}")
    if "\x00" in v or "\U0010ffff" in v:
        raise InvalidArgument(f"field {field!r} contains a reserved character")
    return v


def require_keys(obj: Any, allowed: set[str], required: set[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    unknown = set(obj) - allowed
    if unknown:
        raise InvalidArgument(f"{what} has unknown fields {sorted(unknown)}")
    missing = required - set(obj)
    if missing:
        raise InvalidArgument(f"{what} lacks required fields {sorted(missing)}")
    return obj


class PrivatePart(Protocol):
    """A record's private part as its copies hold it (:class:`~chaincode.records.PrivateTerms`,
    ``ExecutionPrivate``, ``ModelPrivate``): parsed from a copy, hashed as the public record's
    ``private_sha256``."""

    @classmethod
    def from_json(cls, raw: bytes | str) -> Self: ...

    def digest(self) -> str: ...


_P = TypeVar("_P", bound=PrivatePart)


def own_private_copy(
    ctx: TransactionContext, key: str, cls: type[_P], digest: str, what: str, **details: Any
) -> _P:
    """The private part of the record at ``key`` from the executing peer's own organisation's implicit
    collection, checked against the public record's ``private_sha256`` (``digest``): an evaluation on a
    member's peer (docs/confidentiality.md). No copy, or none available, is :class:`InvalidState`; a copy
    that does not parse or does not hash to ``digest`` (altered after commit) is
    :class:`PrivateDataMismatch`. ``details`` go into the errors."""
    org = ctx.stub.get_msp_id()
    try:
        raw = ctx.stub.get_private_data(implicit_collection(org), key)
    except PrivateDataUnavailable as exc:
        raise InvalidState(
            f"the private copy of {what} is not available on {org}'s peer: {exc}", **details
        ) from None
    if raw is None:
        raise InvalidState(f"{org}'s peer holds no private copy of {what}", **details)
    try:
        part = cls.from_json(raw)
    except ValueError as exc:
        raise PrivateDataMismatch(
            f"the private copy of {what} on {org}'s peer is not readable: {exc}", organisation=org, **details
        ) from None
    if part.digest() != digest:
        raise PrivateDataMismatch(
            f"private copy of {what} on {org}'s peer does not match the on-chain hash {digest}",
            organisation=org,
            **details,
        )
    return part


def transient_part(
    ctx: TransactionContext,
    name: str,
    cls: type[_P],
    why: str,
    *,
    digest: str | None = None,
    mismatch: str = "",
    **details: Any,
) -> _P:
    """A private part given in the proposal's transient map under ``name``, parsed (within one
    argument's size); missing or unparsable is :class:`InvalidArgument` (``why`` says what is missing).
    With ``digest`` (the on-chain hash the part must have: what a transaction endorsed by several
    organisations checks, since each can read only its own copy), a part that hashes otherwise is
    :class:`PrivateDataMismatch` with the message ``mismatch``. ``details`` go into the errors."""
    raw = ctx.stub.get_transient().get(name)
    if raw is None:
        raise InvalidArgument(f"{why}: pass it in the transient map under {name!r}", **details)
    if len(raw) > MAX_ARGUMENT_BYTES:
        raise InvalidArgument(
            f"transient {name!r} is {len(raw)} bytes, over the limit of {MAX_ARGUMENT_BYTES} bytes per "
            "contract argument",
            limit=MAX_ARGUMENT_BYTES,
            size=len(raw),
            **details,
        )
    try:
        part = cls.from_json(raw)
    except ValueError as exc:
        raise InvalidArgument(f"transient {name!r} is not a {cls.__name__}: {exc}", **details) from None
    if digest is not None and part.digest() != digest:
        raise PrivateDataMismatch(
            mismatch or f"transient {name!r} does not match its on-chain hash {digest}", **details
        )
    return part
