"""Typed views of the on-chain records, as the client returns them (house convention:
typed records at package boundaries). Field names mirror the contracts' canonical JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def _from(cls: type[T], data: dict[str, Any]) -> T:
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    known = {k: v for k, v in data.items() if k in names}
    extra = {k: v for k, v in data.items() if k not in names}
    obj = cls(**known)
    if "extra" in names:
        object.__setattr__(obj, "extra", extra)
    return obj


def to_dict(record: Any) -> dict[str, Any]:
    """A typed record as the plain dict of its canonical JSON fields (``extra`` merged back in).

    Not ``dataclasses.asdict``: that deep-copies every nested value recursively, so one record
    nested deeper than the interpreter's recursion limit made every answer that holds it fail.
    Only the record and the typed records it holds (an image's approvals) are converted; the
    JSON values inside are passed on as they are, whatever their depth."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name == "extra":
            continue
        if isinstance(value, tuple) and any(is_dataclass(v) for v in value):
            value = [to_dict(v) if is_dataclass(v) else v for v in value]
        elif is_dataclass(value) and not isinstance(value, type):
            value = to_dict(value)
        out[f.name] = value
    out.update(getattr(record, "extra", None) or {})
    return out


@dataclass(frozen=True)
class ImageApproval:
    image_id: str
    organisation: str
    digest: str
    approved_by: str
    created: str
    tx_id: str


@dataclass(frozen=True)
class ImageRecord:
    id: str
    name: str
    version: str
    algorithm: str
    digest: str
    reference: str
    owner: str
    created: str
    status: str
    tx_id: str
    registered_by: str = ""
    description: str = ""
    revoked_reason: str = ""
    approvals: tuple[ImageApproval, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ImageRecord:
        d = dict(d)
        d["approvals"] = tuple(_from(ImageApproval, a) for a in d.get("approvals", []))
        return _from(cls, d)


@dataclass(frozen=True)
class ProcessRecord:
    id: str
    image_id: str
    image_digest: str
    algorithm: str
    consortium: tuple[str, ...]
    topology: dict[str, Any]
    hyperparameters: dict[str, Any]
    rounds: int
    privacy_budget: dict[str, Any] | None
    creator: str
    created: str
    status: str
    status_reason: str
    updated: str
    tx_id: str
    dataset: str = ""
    description: str = ""
    created_by: str = ""
    current_round: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProcessRecord:
        d = dict(d)
        d["consortium"] = tuple(d["consortium"])
        return _from(cls, d)


@dataclass(frozen=True)
class ProcessProgress:
    """Where a process stands (``LearningProcess:progress``): its status, current round, the members
    that completed the current round so far, and the number of completed tasks."""

    id: str
    status: str
    rounds: int
    organisations: int
    current_round: int
    completed: tuple[str, ...]
    completed_tasks: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProcessProgress:
        d = dict(d)
        d["completed"] = tuple(d["completed"])
        return cls(**{k: d[k] for k in (f.name for f in fields(cls))})


@dataclass(frozen=True)
class InboxEntry:
    """One organisation's part of a round as the next round's task of the caller needs it
    (``ExecutionRecord:inbox``): its status, the digest of the state it recorded (completed only) and
    its output messages addressed to the caller."""

    organisation: str
    status: str
    state: str | None
    messages: tuple[dict[str, Any], ...]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InboxEntry:
        return cls(d["organisation"], d["status"], d.get("state"), tuple(d.get("messages") or ()))


@dataclass(frozen=True)
class ExecutionRecord:
    process_id: str
    round: int
    organisation: str
    image_digest: str
    runtime: str
    public_key: str
    status: str
    created: str
    tx_id: str
    result: dict[str, Any] | None = None
    signature: str = ""
    completed: str = ""
    failure_reason: str = ""
    epsilon_total: float = 0.0
    created_by: str = ""
    completed_tx_id: str = ""
    failure_details: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecutionRecord:
        return _from(cls, d)


@dataclass(frozen=True)
class ModelRecord:
    id: str
    process_id: str
    owner: str
    digest: str
    size: int
    ciphertext_digest: str
    access: tuple[str, ...]
    wrapped_key: str | None
    created: str
    tx_id: str
    image_digest: str = ""
    round: int = 0
    location: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    estimators: tuple[Any, ...] = ()
    published_by: str = ""
    updated: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelRecord:
        d = dict(d)
        d["access"] = tuple(d["access"])
        d["estimators"] = tuple(d.get("estimators", ()))
        return _from(cls, d)


@dataclass(frozen=True)
class HistoryEntry:
    tx_id: str
    timestamp: str
    is_delete: bool
    value: dict[str, Any] | None


@dataclass(frozen=True)
class HistoryPage:
    """One page of a record's history, newest first; ``next`` is the bookmark to pass as ``after``
    for the following (older) page, ``None`` on the last page."""

    items: tuple[HistoryEntry, ...]
    next: str | None


@dataclass(frozen=True)
class MemberRecord:
    """An organisation's membership record: where its artifact service (and gateway) is reached and
    the sha256 digest of its TLS CA certificate PEM (``Membership`` contract)."""

    msp_id: str
    artifact_endpoint: str
    tls_ca_digest: str
    version: int
    updated_at: str
    tx_id: str
    gateway_endpoint: str = ""
    created: str = ""
    published_by: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemberRecord:
        return _from(cls, d)
