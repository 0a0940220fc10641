"""LearningProcess contract: orchestration metadata of a collaborative learning process
(seed 003 §IV-B/C, Fig. 2 "learning-process orchestration").

A process pins an image by digest, names its consortium (MSP ids), topology, hyper-parameters,
number of rounds and privacy budget. Status: created -> running -> completed | failed | aborted;
created -> declined when a member declines. It starts only once every member accepted its terms
(docs/consent.md).
The current round is derived from execution records (never stored in a hot key).
Events (seen by every channel member) carry the process id and, for ``ProcessStatus``, the new
status only; consortium, image, reason and actor are read through ``get`` by members.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from typing import Any

from chaincode.canonical import RawJSON
from chaincode.consent import ACCEPTANCE, acceptance_key, missing_acceptances, require_consent_role
from chaincode.context import (
    TransactionContext,
    own_private_copy,
    parse_json_arg,
    require_keys,
    require_str,
    transient_part,
)
from chaincode.endorsement import KeyPolicy, endorse_by_members, protect_process
from chaincode.errors import (
    AlreadyExists,
    ConsentMissing,
    Forbidden,
    ImageMismatch,
    InvalidArgument,
    InvalidState,
    NotFound,
)
from chaincode.image import IMAGE
from chaincode.limits import (
    MAX_ARGUMENT_BYTES,
    MAX_CONSORTIUM,
    MAX_DATASET_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_HYPERPARAMETERS_BYTES,
    MAX_STATUS_REASON_CHARS,
    MAX_TOPOLOGY_BYTES,
    bounded_json,
    bounded_text,
    process_size_problem,
)
from chaincode.privacy import parse_budget
from chaincode.records import (
    ID_PATTERN,
    MODEL,
    MSP_PATTERN,
    PRIVATE_TERMS,
    ImageRecord,
    ModelRecord,
    PrivateTerms,
    ProcessAcceptance,
    ProcessEndorsement,
    ProcessProgress,
    ProcessRecord,
)
from chaincode.stub import KeyValue, implicit_collection

PROCESS = "LearningProcess"
EXECUTION = "Execution"
MAX_ROUNDS = 100_000
TERMINAL = ("completed", "failed", "aborted", "declined")


def round_key(rnd: int) -> str:
    """Execution keys sort by round: zero-padded decimal."""
    return f"{rnd:06d}"


def load_process(ctx: TransactionContext, process_id: str) -> ProcessRecord:
    return ctx.load(ProcessRecord, ctx.key(PROCESS, process_id), f"learning process {process_id}")


def require_member(ctx: TransactionContext, process: ProcessRecord) -> None:
    if ctx.msp_id not in process.consortium:
        raise Forbidden(f"{ctx.msp_id} is not a member of the consortium of learning process {process.id}")


def transient_terms(ctx: TransactionContext) -> bytes | None:
    """The private part given in the proposal's transient map (None: none), within the size of one
    contract argument."""
    raw = ctx.stub.get_transient().get(PRIVATE_TERMS)
    if raw is not None and len(raw) > MAX_ARGUMENT_BYTES:
        raise InvalidArgument(
            f"transient {PRIVATE_TERMS!r} is {len(raw)} bytes, over the limit of {MAX_ARGUMENT_BYTES} "
            "bytes per contract argument",
            limit=MAX_ARGUMENT_BYTES,
            size=len(raw),
        )
    return raw


def with_transient_terms(ctx: TransactionContext, process: ProcessRecord) -> ProcessRecord:
    """``process`` with its private part joined from the proposal's transient map (key
    :data:`PRIVATE_TERMS`), checked against its ``private_sha256``: what a transaction endorsed by
    several members uses (each endorser reads only its own organisation's copy, so reading it would
    diverge). A process recorded before its terms were private is returned as it is. Never stored."""
    if process.private_sha256 is None:
        return process
    terms = transient_part(
        ctx,
        PRIVATE_TERMS,
        PrivateTerms,
        f"learning process {process.id} has private terms (a member reads them with LearningProcess:get)",
        digest=process.private_sha256,
        mismatch=f"the private terms given for learning process {process.id} do not match the on-chain hash "
        f"{process.private_sha256}",
        process_id=process.id,
    )
    return process.joined(terms)


def with_own_terms(ctx: TransactionContext, process: ProcessRecord) -> ProcessRecord:
    """``process`` with its private part joined from the executing peer's own organisation's copy,
    checked against its ``private_sha256`` (an evaluation on a member's peer: ``get``, ``list``). A
    copy that does not match is :class:`PrivateDataMismatch` (it was altered after commit)."""
    if process.private_sha256 is None or process.private_purged is not None:
        return process  # in clear, or purged: the public record (hash-attested) is all there is
    terms = own_private_copy(
        ctx,
        ctx.key(PROCESS, process.id),
        PrivateTerms,
        process.private_sha256,
        f"learning process {process.id}",
        process_id=process.id,
    )
    return process.joined(terms)


def organisation_status(record: dict[str, Any]) -> tuple[str, str]:
    """(organisation, status) of an execution record's stored JSON object."""
    return record["organisation"], record["status"]


def completed_organisations(ctx: TransactionContext, process_id: str, rnd: int) -> set[str]:
    return _completed(ctx.scan_summaries(organisation_status, EXECUTION, process_id, round_key(rnd)))


def _completed(statuses: Iterable[tuple[str, str]]) -> set[str]:
    return {org for org, status in statuses if status == "completed"}


def rounds_started(ctx: TransactionContext, process: ProcessRecord) -> tuple[int, list[KeyValue]]:
    """(h, the stored records of round h): h the highest round with an execution record (0: none yet).

    A record of round r is created only once every member completed round r - 1 (the rules of
    ``ExecutionRecord:create_task`` and ``fail_task``), so the rounds holding records are exactly
    1..h: found by bisection, one range read per step (about log2(rounds) reads, no record decoded),
    instead of reading every record of the process. The records of the last round found are kept,
    so that the caller does not read that round again."""
    lo, hi = 0, process.rounds
    found: list[KeyValue] = []
    while lo < hi:
        mid = (lo + hi + 1) // 2
        records = list(ctx.scan_raw(EXECUTION, process.id, round_key(mid)))
        if records:
            lo, found = mid, records
        else:
            hi = mid - 1
    return lo, found


def round_state(ctx: TransactionContext, process: ProcessRecord) -> tuple[int, set[str]]:
    """(current round, the members that completed it so far). The current round is the first round
    not yet completed by every organisation (rounds + 1 when all are done); round r is complete when
    every consortium member has a completed record for r. Reads one round's records once (those
    :func:`rounds_started` found)."""
    started, records = rounds_started(ctx, process)
    if started == 0:
        return 1, set()
    done = _completed(ctx.summaries(organisation_status, records))
    if done >= set(process.consortium):
        return started + 1, set()
    return started, done


def current_round(ctx: TransactionContext, process: ProcessRecord) -> int:
    """The first round not yet completed by every organisation (rounds + 1 when all are done)."""
    return round_state(ctx, process)[0]


def future_records(ctx: TransactionContext, process: ProcessRecord) -> list[str]:
    """The keys of every record the process's members will write: each member's acceptance and each
    (round, member) execution record (:func:`chaincode.endorsement.protect_process`)."""
    members = sorted(process.consortium)
    keys = [acceptance_key(ctx, process.id, org) for org in members]
    keys += [
        ctx.key(EXECUTION, process.id, round_key(r), org)
        for r in range(1, process.rounds + 1)
        for org in members
    ]
    return keys


def _private_models(ctx: TransactionContext, process_id: str) -> Iterable[ModelRecord]:
    """The process's models that have a private part (one copy per organisation on the access list)."""
    return (
        m for m in ctx.scan(ModelRecord, MODEL) if m.process_id == process_id and m.private_sha256 is not None
    )


def validation_fraction(value: Any) -> int | float:
    """A process's validation fraction: a number in [0, 1) (0: no validation slice), else
    :class:`InvalidArgument`. Whether a member's data holds enough rows for it is checked by its own agent
    (its data never reaches the ledger)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InvalidArgument(
            f"validation_fraction must be a number in [0, 1) (the share of its rows each member holds out; "
            f"0: none), got {value!r}"
        )
    return value


class LearningProcessContract:
    name = "LearningProcess"

    def create(self, ctx: TransactionContext, spec_json: str) -> ProcessRecord:
        """Create a process: ``{id, image_id, image_digest?, consortium, topology, rounds, dataset?,
        validation_fraction?}``, and its private part ``{hyperparameters?, privacy_budget?,
        description?, salt}`` in the transient map under :data:`PRIVATE_TERMS` (arguments are in
        the block; the transient map is not). The image's digest is pinned; a privacy budget is
        validated and resolved by :func:`chaincode.privacy.parse_budget` (it requires clipping). The
        private part is written into each member's implicit collection (each copy endorsed by its
        owner: creation needs every member's peer) and the public record keeps its digest."""
        ctx.require_submitter()
        parsed = parse_json_arg(spec_json, "process specification")
        if isinstance(parsed, dict) and (
            named := sorted({"hyperparameters", "privacy_budget", "description"} & set(parsed))
        ):
            raise InvalidArgument(
                f"process specification names {named}: they are private and go in the transient map under "
                f"{PRIVATE_TERMS!r}, never in the arguments (which every organisation's blocks carry)"
            )
        spec = require_keys(
            parsed,
            {
                "id",
                "image_id",
                "image_digest",
                "consortium",
                "topology",
                "rounds",
                "dataset",
                "validation_fraction",
            },
            {"id", "image_id", "consortium", "topology", "rounds"},
            "process specification",
        )
        pid = require_str(spec, "id", pattern=ID_PATTERN)
        key = ctx.key(PROCESS, pid)
        if ctx.stub.get_state(key) is not None:
            raise AlreadyExists(f"learning process {pid} already exists", process_id=pid)
        image = ctx.find(ImageRecord, ctx.key(IMAGE, require_str(spec, "image_id", pattern=ID_PATTERN)))
        if image is None:
            raise NotFound(f"image {spec['image_id']} is not registered")
        if image.status != "active":
            raise InvalidState(f"image {image.id} is revoked and cannot be used by a new process")
        if "image_digest" in spec and spec["image_digest"] != image.digest:
            raise ImageMismatch(
                f"process names digest {spec['image_digest']} for image {image.id}, "
                f"but the registered digest is {image.digest}"
            )
        consortium = spec["consortium"]
        if (
            not isinstance(consortium, list)
            or not consortium
            or not all(isinstance(m, str) and re.fullmatch(MSP_PATTERN, m) for m in consortium)
        ):
            raise InvalidArgument("consortium must be a non-empty list of MSP ids")
        if len(consortium) > MAX_CONSORTIUM:
            raise InvalidArgument(
                f"consortium lists {len(consortium)} organisations, over the limit of {MAX_CONSORTIUM}"
            )
        if len(set(consortium)) != len(consortium):
            raise InvalidArgument("consortium lists an organisation twice")
        if ctx.msp_id not in consortium:
            raise Forbidden(f"{ctx.msp_id} cannot create a process for a consortium it is not part of")
        topology = spec["topology"]
        if not isinstance(topology, dict) or not isinstance(topology.get("kind"), str):
            raise InvalidArgument("topology must be an object with a 'kind'")
        bounded_json(topology, "topology", MAX_TOPOLOGY_BYTES)
        seed = topology.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
            raise InvalidArgument("topology seed must be an integer in [0, 2^63)")
        rounds = spec["rounds"]
        if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= MAX_ROUNDS:
            raise InvalidArgument(f"rounds must be an integer in [1, {MAX_ROUNDS}]")
        if (too_large := process_size_problem(rounds, len(consortium))) is not None:
            raise InvalidArgument(too_large)
        dataset = bounded_text(spec.get("dataset"), "dataset", MAX_DATASET_CHARS)
        extra: dict[str, Any] = {}
        if "validation_fraction" in spec:
            extra["validation_fraction"] = validation_fraction(spec["validation_fraction"])
        raw_private = transient_terms(ctx)
        if raw_private is None:
            raise InvalidArgument(
                f"a process's private part (hyperparameters, privacy_budget, salt) goes in the transient "
                f"map under {PRIVATE_TERMS!r}: none was given"
            )
        try:
            private_text = raw_private.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument(f"transient {PRIVATE_TERMS!r} is not UTF-8 text") from None
        private = require_keys(
            parse_json_arg(private_text, "private terms"),
            {"hyperparameters", "privacy_budget", "description", "salt"},
            {"salt"},
            "private terms",
        )
        description = bounded_text(private.get("description"), "process description", MAX_DESCRIPTION_CHARS)
        salt = private["salt"]
        if not isinstance(salt, str) or not re.fullmatch(r"[0-9a-f]{64}", salt):
            raise InvalidArgument("private terms: salt must be 32 random bytes in lower-case hex")
        hyper = private.get("hyperparameters", {})
        if not isinstance(hyper, dict):
            raise InvalidArgument("hyperparameters must be an object")
        bounded_json(hyper, "hyperparameters", MAX_HYPERPARAMETERS_BYTES)
        terms = PrivateTerms(
            hyperparameters=hyper,
            privacy_budget=parse_budget(private.get("privacy_budget"), hyper),
            description=description,
            salt=salt,
        )
        record = ProcessRecord(
            id=pid,
            image_id=image.id,
            image_digest=image.digest,
            algorithm=image.algorithm,
            consortium=tuple(consortium),
            topology={**topology, "seed": seed},
            rounds=rounds,
            private_sha256=terms.digest(),
            dataset=dataset,
            creator=ctx.msp_id,
            created_by=ctx.subject,
            created=ctx.timestamp,
            status="created",
            status_reason="",
            updated=ctx.timestamp,
            tx_id=ctx.tx_id,
            **extra,
        )
        ctx.put(key, record)
        copy = terms.canonical()
        for member in record.consortium:
            ctx.stub.put_private_data(implicit_collection(member), key, copy)
        protect_process(ctx.stub, pid, record.consortium, key, future_records(ctx, record))
        ctx.emit("ProcessCreated", {"id": pid})
        return record  # the public record: a transaction's answer is part of its block

    def get(self, ctx: TransactionContext, process_id: str) -> ProcessRecord:
        """The process, joined with the private part of the executing peer's organisation's copy
        (:func:`with_own_terms`): an evaluation on the caller's own peer, members only."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        return with_own_terms(ctx, process).view(current_round=current_round(ctx, process))

    def progress(self, ctx: TransactionContext, process_id: str) -> ProcessProgress:
        """Where the process stands, in a few bytes (what a waiting agent and a progress display
        need, without the records): ``{id, status, rounds, organisations, current_round, completed,
        completed_tasks}``, ``completed`` the members that completed the current round so far,
        ``completed_tasks`` the completed records of the process (every member completed each
        earlier round)."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        rnd, done = round_state(ctx, process)
        members = len(process.consortium)
        return ProcessProgress(
            id=process_id,
            status=process.status,
            rounds=process.rounds,
            organisations=members,
            current_round=rnd,
            completed=tuple(sorted(done)),
            completed_tasks=(rnd - 1) * members + len(done),
        )

    def endorsement(self, ctx: TransactionContext, process_id: str) -> ProcessEndorsement:
        """The key-level endorsement policy of the process's record, read back from its metadata."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        raw = ctx.stub.get_state_validation_parameter(ctx.key(PROCESS, process_id))
        policy = KeyPolicy.from_bytes(raw) if raw else KeyPolicy(0, ())
        return ProcessEndorsement(
            process_id=process_id, organisations=policy.organisations, required=policy.required
        )

    def list(self, ctx: TransactionContext) -> list[ProcessRecord]:
        """Processes whose consortium includes the caller's organisation, each joined with its private
        part as ``get`` joins it."""
        return [
            with_own_terms(ctx, p) for p in ctx.scan(ProcessRecord, PROCESS) if ctx.msp_id in p.consortium
        ]

    def _transition(
        self, ctx: TransactionContext, process_id: str, to: str, reason: str, allowed_from: tuple[str, ...]
    ) -> ProcessRecord:
        ctx.require_submitter()
        reason = bounded_text(reason, "reason", MAX_STATUS_REASON_CHARS)
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        if process.status not in allowed_from:
            raise InvalidState(f"learning process {process_id} is {process.status}; cannot become {to}")
        process = process.replace(
            status=to, status_reason=reason, updated=ctx.timestamp, tx_id=ctx.tx_id, status_by=ctx.msp_id
        )
        ctx.put(ctx.key(PROCESS, process_id), process)
        endorse_by_members(ctx.stub, process_id, process.consortium, ctx.key(PROCESS, process_id))
        ctx.emit("ProcessStatus", {"id": process_id, "status": to})
        return process

    def start(self, ctx: TransactionContext, process_id: str) -> ProcessRecord:
        """created -> running, by any member, only once every member has accepted the process's terms
        as recorded (:func:`chaincode.consent.missing_acceptances`)."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        if process.status == "created" and (missing := missing_acceptances(ctx, process)):
            raise ConsentMissing(
                f"learning process {process_id} cannot start: not accepted by {missing}",
                process_id=process_id,
                missing=missing,
            )
        return self._transition(ctx, process_id, "running", "", ("created",))

    def accept(self, ctx: TransactionContext, process_id: str, terms_digest: str) -> ProcessAcceptance:
        """The caller's organisation accepts the process it is named in, binding ``terms_digest``, the
        digest of the terms it read (:meth:`ProcessRecord.terms_digest`); a digest of other terms is
        refused. Signed by its admin or a role its membership record names. Only while created."""
        return self._answer(ctx, process_id, "accepted", terms_digest, "")

    def decline(self, ctx: TransactionContext, process_id: str, reason: str) -> ProcessAcceptance:
        """The caller's organisation declines the process: it ends ``declined`` with the reason."""
        if not reason:
            raise InvalidArgument("declining a process needs a reason")
        return self._answer(ctx, process_id, "declined", "", reason)

    def _answer(
        self, ctx: TransactionContext, process_id: str, decision: str, terms_digest: str, reason: str
    ) -> ProcessAcceptance:
        require_consent_role(ctx, "accept or decline processes")
        reason = bounded_text(reason, "reason", MAX_STATUS_REASON_CHARS)
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        if process.status != "created":
            raise InvalidState(
                f"learning process {process_id} is {process.status}; it can be accepted or declined "
                "only before it starts"
            )
        terms = process.terms_digest()
        if decision == "accepted" and terms_digest != terms:
            raise ConsentMissing(
                f"acceptance of learning process {process_id} names terms {terms_digest!r}, but its "
                f"terms as recorded have digest {terms}: read the process again",
                process_id=process_id,
            )
        answer = ProcessAcceptance(
            process_id=process_id,
            organisation=ctx.msp_id,
            decision=decision,
            terms_digest=terms,
            reason=reason,
            signed_by=ctx.subject,
            role=ctx.role or "",
            created=ctx.timestamp,
            tx_id=ctx.tx_id,
        )
        ctx.put(acceptance_key(ctx, process_id, ctx.msp_id), answer)
        endorse_by_members(
            ctx.stub, process_id, process.consortium, acceptance_key(ctx, process_id, ctx.msp_id)
        )
        ctx.emit("ProcessAnswered", {"id": process_id, "organisation": ctx.msp_id})
        if decision == "declined":
            declined = process.replace(
                status="declined",
                status_reason=f"declined by {ctx.msp_id}: {reason}",
                updated=ctx.timestamp,
                tx_id=ctx.tx_id,
                status_by=ctx.msp_id,
            )
            ctx.put(ctx.key(PROCESS, process_id), declined)
            ctx.emit("ProcessStatus", {"id": process_id, "status": "declined"})
        return answer

    def acceptances(self, ctx: TransactionContext, process_id: str) -> builtins.list[ProcessAcceptance]:
        """Every member's answer so far (accepted or declined), by organisation."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        return sorted(ctx.scan(ProcessAcceptance, ACCEPTANCE, process_id), key=lambda a: a.organisation)

    def complete(self, ctx: TransactionContext, process_id: str) -> ProcessRecord:
        """running -> completed, accepted only when every organisation completed the last round."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        missing = set(process.consortium) - completed_organisations(ctx, process_id, process.rounds)
        if missing:
            raise InvalidState(
                f"learning process {process_id} cannot complete: round {process.rounds} "
                f"not completed by {sorted(missing)}"
            )
        return self._transition(ctx, process_id, "completed", "", ("running",))

    def fail(self, ctx: TransactionContext, process_id: str, reason: str) -> ProcessRecord:
        """created/running -> failed, by any member, with the reason on the ledger."""
        if not reason:
            raise InvalidArgument("a failed process needs a reason")
        return self._transition(ctx, process_id, "failed", reason, ("created", "running"))

    def abort(self, ctx: TransactionContext, process_id: str, reason: str = "") -> ProcessRecord:
        """created/running -> aborted, only by the organisation that created the process."""
        process = load_process(ctx, process_id)
        if process.creator != ctx.msp_id:
            raise Forbidden(f"only the creator {process.creator} may abort learning process {process_id}")
        return self._transition(
            ctx, process_id, "aborted", reason or "aborted by creator", ("created", "running")
        )

    def purge_private(self, ctx: TransactionContext, process_id: str) -> ProcessRecord:
        """A member purges a finished process's private data from every member's collection (Fabric
        2.5 ``PurgePrivateData``; issue 32 "purge on request"): its private terms, the private part
        of each of its execution records and that of each of its models (from every organisation on
        the model's access list). Each collection's owner endorses (its policy), so every
        member's peer takes part. The public records keep their ``private_sha256``; the process
        records ``private_purged``, and reads then answer the public records, hash-attested."""
        ctx.require_submitter()
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        if process.private_sha256 is None:
            raise InvalidState(f"learning process {process_id} has no private terms to purge")
        if process.private_purged is not None:
            raise InvalidState(f"the private terms of learning process {process_id} were purged already")
        if process.status not in TERMINAL:
            raise InvalidState(
                f"learning process {process_id} is {process.status}; its private terms are purged only once "
                f"it is {', '.join(TERMINAL)}"
            )
        key = ctx.key(PROCESS, process_id)
        private_keys = [key] + [
            kv.key for kv in ctx.scan_raw(EXECUTION, process_id) if b'"private_sha256"' in kv.value
        ]
        for member in process.consortium:
            for private_key in private_keys:
                ctx.stub.purge_private_data(implicit_collection(member), private_key)
        for model in _private_models(ctx, process_id):  # each private model's copies, on its access list
            for holder in model.access:
                ctx.stub.purge_private_data(implicit_collection(holder), ctx.key(MODEL, model.id))
        process = process.replace(private_purged=ctx.timestamp, updated=ctx.timestamp, tx_id=ctx.tx_id)
        ctx.put(key, process)
        endorse_by_members(ctx.stub, process_id, process.consortium, key)
        ctx.emit("ProcessStatus", {"id": process_id, "status": process.status})
        return process

    def purge_endorsers(self, ctx: TransactionContext, process_id: str) -> builtins.list[str]:
        """The organisations whose peers endorse :meth:`purge_private` of the process (members only):
        every member, and every organisation on the access list of one of its private models (a model
        granted outside the process too), since the purge writes each one's implicit collection."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        holders = {org for model in _private_models(ctx, process_id) for org in model.access}
        return sorted(set(process.consortium) | holders)

    def history(self, ctx: TransactionContext, process_id: str, limit: str = "", after: str = "") -> RawJSON:
        """Every version of the process record; with ``limit``/``after`` one page, newest first."""
        process = ctx.find(ProcessRecord, ctx.key(PROCESS, process_id))
        if process is None:
            raise NotFound(f"learning process {process_id} does not exist")
        require_member(ctx, process)
        return ctx.history(ctx.key(PROCESS, process_id), limit, after)
