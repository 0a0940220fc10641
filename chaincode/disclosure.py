"""Disclosure contract: who disclosed the inputs of which tasks to which auditor, and when
(docs/audit-replay.md).

An organisation that lets an auditor re-run some of its tasks seals their inputs (its data, its previous
states, its inbox messages) to the auditor's key-agreement certificate, off chain, and records here that
it did: ``record`` stores a :class:`~chaincode.records.DisclosureRecord` naming the process, the
disclosing organisation (always the caller's own MSP id), the rounds, the recipient and the digest of the
sealed bundle. Only a member of the process may disclose, only rounds its own completed execution records
cover, and only once per bundle.

Reading: the members of the process see every disclosure of it (``get``, ``list``); the recipient sees the
disclosures addressed to it, and through ``records`` exactly what the replay needs of the ledger: the
disclosure, the process and the discloser's execution records of the disclosed rounds -- nothing of
another organisation, another round or another process, even when the recipient is not a member.
"""

from __future__ import annotations

import re

from chaincode.canonical import is_digest
from chaincode.context import TransactionContext, parse_json_arg, require_keys, require_str
from chaincode.errors import AlreadyExists, Forbidden, InvalidArgument, InvalidState, NotFound
from chaincode.learning_process import EXECUTION, load_process, round_key
from chaincode.records import (
    ID_PATTERN,
    MSP_PATTERN,
    DisclosedRecords,
    DisclosureRecord,
    ExecutionRecord,
    ProcessRecord,
)

DISCLOSURE = "Disclosure"


def _digest(value: object) -> str:
    if not isinstance(value, str) or not is_digest(value):
        raise InvalidArgument(f"bundle digest {value!r} is not of the form sha256:<64 hex>")
    return value


class DisclosureContract:
    name = "Disclosure"

    @staticmethod
    def _key(ctx: TransactionContext, process_id: str, bundle_digest: str) -> str:
        return ctx.key(DISCLOSURE, process_id, bundle_digest[len("sha256:") :])

    def record(self, ctx: TransactionContext, spec_json: str) -> DisclosureRecord:
        """Record the caller's organisation's disclosure ``{process_id, rounds, recipient, bundle_digest}``."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "disclosure"),
            {"process_id", "rounds", "recipient", "bundle_digest"},
            {"process_id", "rounds", "recipient", "bundle_digest"},
            "disclosure",
        )
        process = load_process(ctx, require_str(spec, "process_id", pattern=ID_PATTERN))
        if ctx.msp_id not in process.consortium:
            raise Forbidden(
                f"{ctx.msp_id} is not a member of learning process {process.id}: it has no task to disclose"
            )
        recipient = spec["recipient"]
        if not isinstance(recipient, str) or not re.fullmatch(MSP_PATTERN, recipient):
            raise InvalidArgument(f"recipient {recipient!r} must be an MSP id matching {MSP_PATTERN}")
        if recipient == ctx.msp_id:
            raise InvalidArgument("an organisation does not disclose to itself")
        rounds = spec["rounds"]
        if (
            not isinstance(rounds, list)
            or not rounds
            or not all(
                isinstance(r, int) and not isinstance(r, bool) and 1 <= r <= process.rounds for r in rounds
            )
        ):
            raise InvalidArgument(
                f"rounds must be a non-empty list of rounds in 1..{process.rounds}, got {rounds!r}"
            )
        if len(set(rounds)) != len(rounds):
            raise InvalidArgument(f"rounds {rounds} name a round twice")
        for r in rounds:
            own = ctx.find(ExecutionRecord, ctx.key(EXECUTION, process.id, round_key(r), ctx.msp_id))
            if own is None or own.status != "completed":
                raise InvalidState(
                    f"{ctx.msp_id} has no completed execution record of round {r} of {process.id}"
                )
        digest = _digest(spec["bundle_digest"])
        key = self._key(ctx, process.id, digest)
        if ctx.stub.get_state(key) is not None:
            raise AlreadyExists(f"the disclosure of bundle {digest} is already recorded")
        record = DisclosureRecord(
            process_id=process.id,
            organisation=ctx.msp_id,
            rounds=tuple(sorted(rounds)),
            recipient=recipient,
            bundle_digest=digest,
            disclosed_by=ctx.subject,
            role=ctx.role or "",
            created=ctx.timestamp,
            tx_id=ctx.tx_id,
        )
        ctx.put(key, record)
        # events reach every channel member: ids only
        ctx.emit("Disclosed", {"process_id": process.id, "organisation": ctx.msp_id, "recipient": recipient})
        return record

    @staticmethod
    def _may_read(ctx: TransactionContext, process: ProcessRecord, record: DisclosureRecord) -> bool:
        return ctx.msp_id in process.consortium or ctx.msp_id == record.recipient

    def _load(
        self, ctx: TransactionContext, process_id: str, bundle_digest: str
    ) -> tuple[ProcessRecord, DisclosureRecord]:
        process = load_process(ctx, process_id)
        record = ctx.find(DisclosureRecord, self._key(ctx, process.id, _digest(bundle_digest)))
        if record is None or not self._may_read(ctx, process, record):
            # the same answer whether it does not exist or is not the caller's to see
            raise NotFound(
                f"no disclosure of bundle {bundle_digest} in {process_id} addressed to {ctx.msp_id}"
            )
        return process, record

    def get(self, ctx: TransactionContext, process_id: str, bundle_digest: str) -> DisclosureRecord:
        return self._load(ctx, process_id, bundle_digest)[1]

    def list(self, ctx: TransactionContext, process_id: str) -> list[DisclosureRecord]:
        """The disclosures of a process the caller may see (a member: all; otherwise those to it)."""
        process = load_process(ctx, process_id)
        return sorted(
            (
                r
                for r in ctx.scan(DisclosureRecord, DISCLOSURE, process.id)
                if self._may_read(ctx, process, r)
            ),
            key=lambda r: (r.created, r.organisation, r.bundle_digest),
        )

    def records(self, ctx: TransactionContext, process_id: str, bundle_digest: str) -> DisclosedRecords:
        """For the recipient (and the process's members): the disclosure, the process and the disclosing
        organisation's execution records of the disclosed rounds, as stored."""
        process, record = self._load(ctx, process_id, bundle_digest)
        executions = []
        for r in record.rounds:
            found = ctx.find(
                ExecutionRecord, ctx.key(EXECUTION, process.id, round_key(r), record.organisation)
            )
            if found is None:
                raise NotFound(f"no execution record of {record.organisation} for round {r} of {process.id}")
            executions.append(found)
        return DisclosedRecords(disclosure=record, process=process, executions=tuple(executions))
