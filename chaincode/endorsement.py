"""Key-level (state-based) endorsement of a learning process's records: a majority of its members.

A learning process is endorsed by its members, not by the channel. When a process is created, its
record and its **endorsement guard** (``ProcessEndorsement/<process id>``) get a key-level
endorsement policy, Fabric's ``VALIDATION_PARAMETER`` key metadata: a serialized
``common.SignaturePolicyEnvelope`` of ``OutOf(n // 2 + 1, member1.peer, ..., memberN.peer)`` over
the process's members -- the bytes fabric-chaincode-go's ``statebased`` package would build, so a
Fabric peer's validator (VSCC) and the embedded host (:mod:`ledger.embedded.validation`) evaluate
the same policy. Every later transaction that writes a record of the process also writes its guard
(a blind write: nothing reads it, so concurrent members' transactions never conflict on it), so every
such transaction needs endorsements by a majority of the process's members and endorsements by
non-members do not count (docs/ledger.md, "Who endorses what").

Fabric judges the write of a key that does not exist yet by the chaincode's policy alone (any two
organisations), whatever else the transaction writes. So that no record of a process is ever a new
key after its creation, creation also writes every key the process's members will write -- each
member's acceptance and each (round, member) execution record -- as a :data:`PLACEHOLDER` with the
members' policy. Every later write of them, by the contracts or by a read-write set made outside them,
is then an update judged by that policy. Contracts never see a placeholder: :class:`RecordView` (the
stub every :class:`chaincode.context.TransactionContext` reads through) answers it as no record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from fabric_protos.common import policies_pb2
from fabric_protos.msp import msp_principal_pb2
from google.protobuf.message import DecodeError

from chaincode.canonical import canonical_json
from chaincode.stub import ChaincodeStub, KeyModification, KeyValue, create_composite_key

VALIDATION_PARAMETER = "VALIDATION_PARAMETER"  # Fabric's metadata key of a key-level policy
GUARD = "ProcessEndorsement"
#: the value of a record key that a process will write and has not written yet (no record is this)
PLACEHOLDER = b'{"placeholder":true}'


_Entry = TypeVar("_Entry", KeyValue, KeyModification)


@dataclass(frozen=True)
class KeyPolicy:
    """A key-level policy: ``required`` of the peers of ``organisations`` (MSP ids, in order)."""

    required: int
    organisations: tuple[str, ...]

    def to_bytes(self) -> bytes:
        """The serialized ``common.SignaturePolicyEnvelope`` (version 0): ``NOutOf(required,
        [SignedBy(i)])`` over ``MSPRole(msp, PEER)`` principals, as fabric-chaincode-go builds it."""
        identities = [
            msp_principal_pb2.MSPPrincipal(
                principal_classification=msp_principal_pb2.MSPPrincipal.ROLE,
                principal=msp_principal_pb2.MSPRole(
                    msp_identifier=org, role=msp_principal_pb2.MSPRole.PEER
                ).SerializeToString(),
            )
            for org in self.organisations
        ]
        rule = policies_pb2.SignaturePolicy(
            n_out_of=policies_pb2.SignaturePolicy.NOutOf(
                n=self.required,
                rules=[policies_pb2.SignaturePolicy(signed_by=i) for i in range(len(identities))],
            )
        )
        envelope = policies_pb2.SignaturePolicyEnvelope(version=0, rule=rule, identities=identities)
        return bytes(envelope.SerializeToString())

    @classmethod
    def from_bytes(cls, raw: bytes) -> KeyPolicy:
        """The policy of a validation parameter :meth:`to_bytes` wrote; ``ValueError`` for bytes of
        any other shape (a nested rule, a principal that is not an MSP peer role)."""
        envelope = parse_envelope(raw)
        rule = envelope.rule
        if rule.WhichOneof("Type") != "n_out_of":
            raise ValueError("key-level policy is not an OutOf rule")
        orgs: list[str] = []
        for sub in rule.n_out_of.rules:
            if sub.WhichOneof("Type") != "signed_by" or not 0 <= sub.signed_by < len(envelope.identities):
                raise ValueError("key-level policy rule is not a list of SignedBy principals")
            role = principal_role(envelope.identities[sub.signed_by])
            if role is None or role[1] != "peer":
                raise ValueError("key-level policy names a principal that is not a peer role")
            orgs.append(role[0])
        return cls(rule.n_out_of.n, tuple(orgs))


def parse_envelope(raw: bytes) -> policies_pb2.SignaturePolicyEnvelope:
    try:
        return policies_pb2.SignaturePolicyEnvelope.FromString(raw)
    except DecodeError:
        raise ValueError(f"malformed SignaturePolicyEnvelope ({len(raw)} bytes)") from None


_ROLES = {
    msp_principal_pb2.MSPRole.MEMBER: "member",
    msp_principal_pb2.MSPRole.ADMIN: "admin",
    msp_principal_pb2.MSPRole.CLIENT: "client",
    msp_principal_pb2.MSPRole.PEER: "peer",
    msp_principal_pb2.MSPRole.ORDERER: "orderer",
}


def principal_role(principal: msp_principal_pb2.MSPPrincipal) -> tuple[str, str] | None:
    """(MSP id, role name) of an ``MSPRole`` principal, else None."""
    if principal.principal_classification != msp_principal_pb2.MSPPrincipal.ROLE:
        return None
    try:
        role = msp_principal_pb2.MSPRole.FromString(principal.principal)
    except DecodeError:
        return None
    name = _ROLES.get(role.role)
    return None if name is None else (str(role.msp_identifier), name)


def member_majority(members: Sequence[str]) -> KeyPolicy:
    """A majority of the peers of ``members`` (a process's consortium)."""
    orgs = tuple(sorted(set(members)))
    return KeyPolicy(len(orgs) // 2 + 1, orgs)


def guard_key(process_id: str) -> str:
    return create_composite_key(GUARD, [process_id])


def protect_process(
    stub: ChaincodeStub, process_id: str, members: Sequence[str], process_key: str, future_keys: Iterable[str]
) -> None:
    """At creation: the process record and its guard get the members' majority policy, and so does
    each of ``future_keys`` (every record key the process will write), written as a placeholder."""
    policy = member_majority(members).to_bytes()
    stub.put_state(guard_key(process_id), _guard_value(process_id, members))
    stub.set_state_validation_parameter(guard_key(process_id), policy)
    stub.set_state_validation_parameter(process_key, policy)
    for key in future_keys:
        stub.put_state(key, PLACEHOLDER)
        stub.set_state_validation_parameter(key, policy)


def endorse_by_members(stub: ChaincodeStub, process_id: str, members: Sequence[str], *written: str) -> None:
    """In a transaction that writes records of the process (the keys ``written``): write its guard,
    so that the transaction needs the members' majority, and give each written key that has no
    key-level policy yet the same policy (a key a process created before placeholders never got one)."""
    stub.put_state(guard_key(process_id), _guard_value(process_id, members))
    policy: bytes | None = None
    for key in written:
        if stub.get_state_validation_parameter(key) is None:
            policy = policy or member_majority(members).to_bytes()
            stub.set_state_validation_parameter(key, policy)


def _guard_value(process_id: str, members: Sequence[str]) -> bytes:
    policy = member_majority(members)
    return canonical_json(
        {"process_id": process_id, "organisations": list(policy.organisations), "required": policy.required}
    )


class RecordView:
    """The stub as the contracts read it: a key holding :data:`PLACEHOLDER` reads as absent (``get_state``
    answers None, scans skip it, its history leaves the placeholder's version out). Writes, metadata,
    the caller and events pass through unchanged."""

    def __init__(self, stub: ChaincodeStub):
        self._stub = stub

    def get_tx_id(self) -> str:
        return self._stub.get_tx_id()

    def get_channel_id(self) -> str:
        return self._stub.get_channel_id()

    def get_tx_timestamp(self) -> float:
        return self._stub.get_tx_timestamp()

    def get_creator(self) -> bytes:
        return self._stub.get_creator()

    def get_state(self, key: str) -> bytes | None:
        raw = self._stub.get_state(key)
        return None if raw == PLACEHOLDER else raw

    def put_state(self, key: str, value: bytes) -> None:
        self._stub.put_state(key, value)

    def del_state(self, key: str) -> None:
        self._stub.del_state(key)

    def get_state_by_range(self, start_key: str, end_key: str) -> Iterator[KeyValue]:
        return _Written(self._stub.get_state_by_range(start_key, end_key))

    def get_state_by_partial_composite_key(
        self, object_type: str, attributes: list[str]
    ) -> Iterator[KeyValue]:
        return _Written(self._stub.get_state_by_partial_composite_key(object_type, attributes))

    def get_history_for_key(self, key: str, *, newest_first: bool = False) -> Iterator[KeyModification]:
        return _Written(self._stub.get_history_for_key(key, newest_first=newest_first))

    def set_state_validation_parameter(self, key: str, policy: bytes) -> None:
        self._stub.set_state_validation_parameter(key, policy)

    def get_state_validation_parameter(self, key: str) -> bytes | None:
        return self._stub.get_state_validation_parameter(key)

    def set_event(self, name: str, payload: bytes) -> None:
        self._stub.set_event(name, payload)

    def get_transient(self) -> dict[str, bytes]:
        return self._stub.get_transient()

    def get_msp_id(self) -> str:
        return self._stub.get_msp_id()

    def get_private_data(self, collection: str, key: str) -> bytes | None:
        return self._stub.get_private_data(collection, key)

    def put_private_data(self, collection: str, key: str, value: bytes) -> None:
        self._stub.put_private_data(collection, key, value)

    def del_private_data(self, collection: str, key: str) -> None:
        self._stub.del_private_data(collection, key)

    def purge_private_data(self, collection: str, key: str) -> None:
        self._stub.purge_private_data(collection, key)

    def get_private_data_hash(self, collection: str, key: str) -> bytes | None:
        return self._stub.get_private_data_hash(collection, key)

    def set_private_data_validation_parameter(self, collection: str, key: str, policy: bytes) -> None:
        self._stub.set_private_data_validation_parameter(collection, key, policy)

    def get_private_data_validation_parameter(self, collection: str, key: str) -> bytes | None:
        return self._stub.get_private_data_validation_parameter(collection, key)


class _Written(Iterator[_Entry]):
    """The entries of a host's iterator (key values or versions) whose value is not a placeholder;
    ``close()`` closes the host's iterator (a reader that stops early closes it)."""

    def __init__(self, entries: Iterable[_Entry]):
        self._source: Iterable[_Entry] = entries
        self._entries: Iterator[_Entry] = iter(entries)

    def __next__(self) -> _Entry:
        while True:
            entry = next(self._entries)
            if entry.value != PLACEHOLDER:
                return entry

    def close(self) -> None:
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
