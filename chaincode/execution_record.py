"""ExecutionRecord contract: one signed record per organisation per round
(seed 003 §IV-C, Fig. 2 "signed execution records"; docs/design.md "One chaincode, two ledger hosts"; docs/ledger.md).

Life of a record: ``create_task`` registers the task's public key before the task runs;
``complete_task`` accepts the task's result only from the executing organisation, only with a
valid ECDSA P-256 signature by the registered key over the canonical JSON of the result, only
for the process's pinned image digest, only while the round is open, only once, and only while
the privacy budget holds (:mod:`chaincode.privacy`: the record keeps the round's charge, the node and
network totals and the accounting used; ``epsilon_total`` is the total of the budget's scope);
``fail_task`` records why a task did not run or did not finish, under the same open-round and
process-status rules as ``create_task``.

For a process with private terms (``private_sha256``, every process created now) ``complete_task``
takes the result only in its public form: the task key signs it with ``confidential_sha256`` in place
of the metrics, the data commitment and the validation scores, which travel in the transient map
(docs/confidentiality.md); a result signed in clear is refused (``InvalidArgument``), since the
arguments are in every organisation's blocks. A process recorded before private terms still takes it.

The result (what the task key signs) is::

    {process_id, round, organisation, image_digest, runtime,
     inputs:  {state, messages: [{sender, digest}], data_commitment},
     outputs: {state, messages: [{recipient, digest, size, ...}], model: {digest, size, ...} | null},
     metrics: {name: number}, numeric_profile?: {name, version, digest}, sdk?: "MAJOR.MINOR.PATCH",
     started, finished, validation?: {metric, collaborative, isolated, rows}}

``numeric_profile`` names the floating-point kernels the task computed with (the image's declared
profile, docs/reproducibility.md); ``sdk`` the version of the algorithm SDK the task ran with
(docs/sdk.md); a result without either is accepted (records made before they existed).
``validation`` (what the member's collaborative model and the model it would have got alone score on its
validation slice, docs/models.md) is required in the last round of a process that declares a validation
slice, and refused anywhere else.

Chaincode events reach every channel member, so ``TaskCreated`` / ``TaskCompleted`` /
``TaskFailed`` carry only (process id, round, organisation): a member reads digests, metrics and
failure reasons through :meth:`ExecutionRecordContract.get`, which checks process membership.
"""

from __future__ import annotations

import base64
import binascii
import json

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from chaincode.canonical import RawJSON, canonical_json
from chaincode.consent import require_approval
from chaincode.context import (
    TransactionContext,
    own_private_copy,
    parse_json_arg,
    require_keys,
    require_str,
    transient_part,
)
from chaincode.endorsement import endorse_by_members
from chaincode.errors import (
    AlreadyExists,
    BudgetExceeded,
    Forbidden,
    ImageMismatch,
    InvalidArgument,
    InvalidState,
    NotFound,
    SignatureInvalid,
)
from chaincode.learning_process import (
    EXECUTION,
    completed_organisations,
    load_process,
    require_member,
    round_key,
    with_transient_terms,
)
from chaincode.limits import MAX_FAILURE_DETAILS_BYTES, MAX_REASON_CHARS, bounded_json
from chaincode.privacy import charge
from chaincode.records import (
    CONFIDENTIAL_RESULT_KEYS,
    ID_PATTERN,
    PREVIOUS_EXECUTION_PRIVATE,
    RESULT_CONFIDENTIAL,
    RUNTIMES,
    ExecutionPrivate,
    ExecutionRecord,
    ExecutionResult,
    InboxEntry,
    OutputMessage,
    PrivacyCharge,
    ProcessRecord,
    ResultConfidential,
    check_result,
)
from chaincode.stub import KeyValue, implicit_collection, split_composite_key

P256_HALF_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551 // 2


def _round(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"round must be a positive integer, got {value!r}")
    return value


def _round_arg(text: str) -> int:
    try:
        return _round(int(text))
    except (TypeError, ValueError):
        raise InvalidArgument(f"round must be a positive integer, got {text!r}") from None


def _load_public_key(pem: str) -> ec.EllipticCurvePublicKey:
    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError):
        raise InvalidArgument("task public key is not a PEM public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise InvalidArgument("task public key must be an ECDSA P-256 key")
    return key


Inbox = tuple[str, str, str | None, tuple[tuple[str | None, OutputMessage], ...]]


def _inbox_summary(record: dict[str, object]) -> Inbox:
    """What ``inbox`` needs of a record's stored JSON: organisation, status, state digest (completed
    only) and each output message with its recipient (None: confidential, in the members' private
    copies) -- immutable, so it can be shared between calls."""
    result = record.get("result")
    outputs = (result.get("outputs") if isinstance(result, dict) else None) or {}
    completed = record["status"] == "completed"
    messages = tuple(
        (m.get("recipient"), OutputMessage.model_validate(m)) for m in outputs.get("messages", ())
    )
    return (
        str(record["organisation"]),
        str(record["status"]),
        outputs.get("state") if completed else None,
        messages,
    )


def _check_confidential_parties(result: ExecutionResult, part: ResultConfidential) -> None:
    """A result with ``confidential_parties`` has its part name one sender per input message and one
    recipient per output message; a result without has a part naming none."""
    what = f"the confidential part of the result of {result.organisation} for round {result.round}"
    if not result.confidential_parties:
        if part.senders is not None or part.recipients is not None:
            raise InvalidArgument(
                f"{what} names senders or recipients, but the signed result does not declare "
                "confidential_parties"
            )
        return
    for kind, messages, parties, name in (
        ("input", result.inputs.messages, part.senders, "senders"),
        ("output", result.outputs.messages, part.recipients, "recipients"),
    ):
        if parties is None or len(parties) != len(messages):
            raise InvalidArgument(
                f"{what} must list {name} for the result's {len(messages)} {kind} message(s), got "
                f"{'none' if parties is None else len(parties)}"
            )


def transient_confidential(ctx: TransactionContext, result: ExecutionResult) -> ResultConfidential:
    """The result's confidential part from the transient map, checked against the signed
    ``confidential_sha256`` (:class:`PrivateDataMismatch` if it does not hash to it)."""
    return transient_part(
        ctx,
        RESULT_CONFIDENTIAL,
        ResultConfidential,
        "the result's confidential part is missing",
        digest=result.confidential_sha256,
        mismatch=f"the confidential part given for the result of {result.organisation} for round "
        f"{result.round} of learning process {result.process_id} does not match its signed "
        f"confidential_sha256 {result.confidential_sha256}",
        process_id=result.process_id,
    )


def transient_previous(ctx: TransactionContext, previous: dict[str, object], what: str) -> ExecutionPrivate:
    """The caller's previous record's private part from the transient map, checked against that
    record's stored ``private_sha256`` (what the privacy charge continues from)."""
    return transient_part(
        ctx,
        PREVIOUS_EXECUTION_PRIVATE,
        ExecutionPrivate,
        f"the private part of {what} is needed",
        digest=str(previous["private_sha256"]),
        mismatch=f"the private part given for {what} does not match its on-chain hash {previous['private_sha256']}",
    )


def joined_record(
    ctx: TransactionContext, key: str, record: dict[str, object], purged: str | None = None
) -> dict[str, object]:
    """A stored execution record's JSON object, with the private part of the executing peer's own
    organisation's copy joined (``result`` with its confidential fields, ``epsilon_total``,
    ``privacy``, ``confidential_salt``), after checking the copy against ``private_sha256``; a record
    without one is returned as it is, and one whose process's private data was purged (``purged``:
    when) as it is stored, with ``private_purged``. An evaluation on a member's peer: ``get``,
    ``query``, ``history``."""
    digest = record.get("private_sha256")
    if digest is None:
        return record
    if purged is not None:
        return {**record, "private_purged": purged}
    what = f"the execution record of {record.get('organisation')} for round {record.get('round')} of {record.get('process_id')}"
    return own_private_copy(ctx, key, ExecutionPrivate, str(digest), what).joined(record)


def _joined_raw(ctx: TransactionContext, key: str, raw: bytes, purged: str | None) -> bytes:
    """:func:`joined_record` of stored bytes (the bytes unchanged for a record without a private part)."""
    if b'"private_sha256"' not in raw:
        return raw
    return canonical_json(joined_record(ctx, key, json.loads(raw), purged))


def _routed(
    ctx: TransactionContext, kv: KeyValue, purged: str | None
) -> tuple[tuple[str | None, OutputMessage], ...]:
    """The output messages of a record whose recipients are confidential, each with its recipient from
    the executing peer's own organisation's private copy (checked against the on-chain hash:
    :func:`joined_record`); after a purge, none has one."""
    result = joined_record(ctx, kv.key, json.loads(kv.value), purged).get("result")
    outputs = result.get("outputs") if isinstance(result, dict) else None
    messages = outputs.get("messages", ()) if isinstance(outputs, dict) else ()
    return tuple((m.get("recipient"), OutputMessage.model_validate(m)) for m in messages)


class ExecutionRecordContract:
    name = "ExecutionRecord"

    @staticmethod
    def _key(ctx: TransactionContext, process_id: str, rnd: int, org: str) -> str:
        return ctx.key(EXECUTION, process_id, round_key(rnd), org)

    def _check_round_open(
        self, ctx: TransactionContext, process: ProcessRecord, rnd: int, registered: bool = False
    ) -> None:
        """Refuse unless the process runs and round ``rnd`` is open (1..rounds, round rnd-1 completed by
        every member). ``registered``: the caller's running record of round ``rnd`` exists, created under
        this very rule; a round once open stays open (completed records are final), so the members'
        records of round rnd-1 are not read again (nor put in the read set)."""
        if process.status != "running":
            raise InvalidState(
                f"round {rnd} of learning process {process.id} is closed: the process is {process.status}"
            )
        if rnd > process.rounds:
            raise InvalidState(
                f"round {rnd} is closed: learning process {process.id} has {process.rounds} rounds"
            )
        if rnd > 1 and not registered:
            missing = set(process.consortium) - completed_organisations(ctx, process.id, rnd - 1)
            if missing:
                raise InvalidState(
                    f"round {rnd} of learning process {process.id} is not open: "
                    f"round {rnd - 1} not completed by {sorted(missing)}"
                )

    def create_task(self, ctx: TransactionContext, spec_json: str) -> ExecutionRecord:
        """Register the caller organisation's task for (process, round) with the task's public key."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "task specification"),
            {"process_id", "round", "public_key", "runtime"},
            {"process_id", "round", "public_key", "runtime"},
            "task specification",
        )
        pid = require_str(spec, "process_id", pattern=ID_PATTERN)
        rnd = _round(spec["round"])
        if spec["runtime"] not in RUNTIMES:
            raise InvalidArgument(f"runtime must be one of {RUNTIMES}")
        pem = require_str(spec, "public_key", max_len=1024)
        _load_public_key(pem)
        process = load_process(ctx, pid)
        require_member(ctx, process)
        key = self._key(ctx, pid, rnd, ctx.msp_id)
        if ctx.stub.get_state(key) is not None:
            raise AlreadyExists(f"{ctx.msp_id} already has a task for round {rnd} of learning process {pid}")
        self._check_round_open(ctx, process, rnd)
        require_approval(ctx, process)  # its approval of this exact image digest, for this dataset, now
        record = ExecutionRecord(
            process_id=pid,
            round=rnd,
            organisation=ctx.msp_id,
            image_digest=process.image_digest,
            runtime=spec["runtime"],
            public_key=pem,
            status="running",
            created=ctx.timestamp,
            created_by=ctx.subject,
            tx_id=ctx.tx_id,
            result=None,
            signature="",
            completed="",
            failure_reason="",
            epsilon_total=0.0,
        )
        ctx.put(key, record)
        endorse_by_members(ctx.stub, pid, process.consortium, key)
        ctx.emit("TaskCreated", {"process_id": pid, "round": rnd, "organisation": ctx.msp_id})
        return record

    def complete_task(self, ctx: TransactionContext, result_json: str, signature_b64: str) -> ExecutionRecord:
        """Accept a task's signed result (see the module docstring for every rule)."""
        ctx.require_submitter()
        result = check_result(parse_json_arg(result_json, "execution result"))
        pid, rnd, org = result.process_id, result.round, result.organisation
        if org != ctx.msp_id:
            raise Forbidden(
                f"{ctx.msp_id} cannot complete the task of {org}: a result is accepted only "
                f"from the executing organisation"
            )
        process = load_process(ctx, pid)
        require_member(ctx, process)
        if process.private_sha256 is not None and result.confidential_sha256 is None:
            # arguments are in every organisation's blocks: a process with private terms takes only the
            # public form (a process recorded before them still takes a result signed in clear)
            named = [k for k in CONFIDENTIAL_RESULT_KEYS if k in result.model_fields_set]
            raise InvalidArgument(
                f"execution result of {org} for round {rnd} of learning process {pid} is signed in clear "
                f"(it names {[*named, 'inputs.data_commitment']}): the process keeps its results confidential; "
                f"sign the public form, with confidential_sha256 in their place, and pass the confidential "
                f"part in the transient map under {RESULT_CONFIDENTIAL!r}",
                process_id=pid,
            )
        if (
            process.private_sha256 is not None
            and not result.confidential_parties
            and (result.inputs.messages or result.outputs.messages)
        ):
            raise InvalidArgument(
                f"execution result of {org} for round {rnd} of learning process {pid} names its messages' "
                f"senders and recipients in clear: the process keeps who sends to whom confidential; sign "
                f"the public form with confidential_parties, the parties in the part passed under "
                f"{RESULT_CONFIDENTIAL!r}",
                process_id=pid,
            )
        key = self._key(ctx, pid, rnd, org)
        record = ctx.find(ExecutionRecord, key)
        if record is None:
            raise NotFound(f"no task registered for {org} in round {rnd} of learning process {pid}")
        if record.status != "running":
            raise InvalidState(
                f"task of {org} for round {rnd} of learning process {pid} is already "
                f"{record.status}; a result is accepted only once"
            )
        self._check_round_open(ctx, process, rnd, registered=True)
        if result.image_digest != process.image_digest:
            raise ImageMismatch(
                f"result of {org} for round {rnd} was produced by image {result.image_digest}, "
                f"but learning process {pid} pins {process.image_digest}"
            )
        if result.runtime != record.runtime:
            raise InvalidArgument(
                f"result names runtime {result.runtime}, the task was registered for {record.runtime}"
            )
        try:
            signature = base64.b64decode(signature_b64, validate=True)
            _, s = decode_dss_signature(signature)
        except (binascii.Error, ValueError):
            raise SignatureInvalid(
                f"execution result of {org} for round {rnd} of {pid} carries a malformed signature"
            ) from None
        if s > P256_HALF_ORDER:
            raise SignatureInvalid("execution result signature is not in low-S form")
        try:
            # over the result as it will be stored: what is stored is what the task key signed
            _load_public_key(record.public_key).verify(
                signature, result.canonical(), ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            raise SignatureInvalid(
                f"execution result of {org} for round {rnd} of learning process {pid} "
                f"is not signed by the key registered for that task"
            ) from None
        # a confidential result: its part from the transient map, checked against the signed hash
        confidential = None if result.confidential_sha256 is None else transient_confidential(ctx, result)
        if confidential is not None:
            _check_confidential_parties(result, confidential)
        metrics = result.metrics if confidential is None else confidential.metrics
        scores = result.validation if confidential is None else confidential.validation
        slice_declared = bool(process.validation_fraction)
        if slice_declared and rnd == process.rounds and scores is None:
            raise InvalidArgument(
                f"learning process {pid} declares a validation slice: the last round's result of {org} "
                "must carry its validation scores (result.validation)"
            )
        if scores is not None and not (slice_declared and rnd == process.rounds):
            raise InvalidArgument(
                "result.validation is accepted only in the last round of a process with a validation slice"
            )
        total = 0.0
        privacy: PrivacyCharge | None = None
        # the privacy charge needs the budget and the hyper-parameters: from the transient map
        process = with_transient_terms(ctx, process)
        budget = process.privacy_budget
        if budget is not None:
            previous = None
            if rnd > 1:
                # only the previous round's privacy block is needed, not its result
                prev = ctx.get(self._key(ctx, pid, rnd - 1, org))
                if prev is not None and prev.get("private_sha256") is not None:  # private: transient
                    what = f"the execution record of {org} for round {rnd - 1} of learning process {pid}"
                    previous = transient_previous(ctx, prev, what).privacy
                elif prev is not None and prev.get("privacy") is not None:
                    previous = PrivacyCharge.model_validate(prev["privacy"])
            privacy = charge(budget, previous, metrics, f"learning process {pid}", process.hyperparameters)
            total = (privacy.network if budget.scope == "network" else privacy.node).epsilon
            if total > float(budget.epsilon) * (1 + 1e-12):
                raise BudgetExceeded(
                    f"round {rnd} of {org} would spend {budget.scope} ε = {total:.6g} in total "
                    f"({privacy.accounting} accounting), over the budget ε = {budget.epsilon} "
                    f"of learning process {pid}",
                    spent=total,
                    budget=budget.epsilon,
                    scope=budget.scope,
                    accounting=privacy.accounting,
                )
        private: dict[str, object] = {"epsilon_total": total, "privacy": privacy}
        if confidential is not None:
            # one copy per member (each endorsed by its owner); the public record keeps its hash
            part = ExecutionPrivate(result=confidential, epsilon_total=total, privacy=privacy)
            copy = part.canonical()
            for member in process.consortium:
                ctx.stub.put_private_data(implicit_collection(member), key, copy)
            private = {"private_sha256": part.digest()}
        record = record.replace(
            status="completed",
            result=result,
            signature=signature_b64,
            completed=ctx.timestamp,
            completed_tx_id=ctx.tx_id,
            **private,
        )
        ctx.put(key, record)  # the answer is this public record: a transaction's answer is in its block
        endorse_by_members(ctx.stub, pid, process.consortium, key)
        ctx.emit("TaskCompleted", {"process_id": pid, "round": rnd, "organisation": org})
        return record

    def fail_task(self, ctx: TransactionContext, spec_json: str) -> ExecutionRecord:
        """Record that the caller's task for (process, round) failed or was refused, with the reason."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "task failure"),
            {"process_id", "round", "reason", "details"},
            {"process_id", "round", "reason"},
            "task failure",
        )
        pid = require_str(spec, "process_id", pattern=ID_PATTERN)
        rnd = _round(spec["round"])
        reason = require_str(spec, "reason", max_len=MAX_REASON_CHARS)
        process = load_process(ctx, pid)
        require_member(ctx, process)
        key = self._key(ctx, pid, rnd, ctx.msp_id)
        record = ctx.find(ExecutionRecord, key)
        if record is not None and record.status != "running":
            raise InvalidState(f"task of {ctx.msp_id} for round {rnd} of {pid} is already {record.status}")
        # the rules of create_task: only a running process, only an existing round that is open
        self._check_round_open(ctx, process, rnd, registered=record is not None)
        details = spec.get("details") or {}
        if not isinstance(details, dict):
            raise InvalidArgument("failure details must be an object")
        bounded_json(details, "failure details", MAX_FAILURE_DETAILS_BYTES)
        if record is None:  # a failure before the task was registered (no key, no runtime)
            record = ExecutionRecord(
                process_id=pid,
                round=rnd,
                organisation=ctx.msp_id,
                image_digest=process.image_digest,
                runtime="",
                public_key="",
                created=ctx.timestamp,
                created_by=ctx.subject,
                tx_id=ctx.tx_id,
                result=None,
                signature="",
                epsilon_total=0.0,
                status="failed",
                failure_reason=reason,
                failure_details=details,
                completed=ctx.timestamp,
                completed_tx_id=ctx.tx_id,
            )
        else:
            record = record.replace(
                status="failed",
                failure_reason=reason,
                failure_details=details,
                completed=ctx.timestamp,
                completed_tx_id=ctx.tx_id,
            )
        ctx.put(key, record)
        endorse_by_members(ctx.stub, pid, process.consortium, key)
        ctx.emit("TaskFailed", {"process_id": pid, "round": rnd, "organisation": ctx.msp_id})
        return record

    def get(self, ctx: TransactionContext, process_id: str, rnd: str, organisation: str) -> RawJSON:
        """The :class:`ExecutionRecord`, as stored, with the caller's copy of its private part joined
        (:func:`joined_record`)."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        key = self._key(ctx, process_id, _round_arg(rnd), organisation)
        raw = ctx.get_raw(key, f"execution record of {organisation} for round {rnd} of {process_id}")
        return RawJSON(_joined_raw(ctx, key, bytes(raw), process.private_purged))

    def query(self, ctx: TransactionContext, filter_json: str) -> RawJSON:
        """Records of a process (:class:`ExecutionRecord` as stored), optionally for one round and/or
        one organisation (the last attribute of a record's key)."""
        flt = require_keys(
            parse_json_arg(filter_json, "query"),
            {"process_id", "round", "organisation"},
            {"process_id"},
            "query",
        )
        process = load_process(ctx, require_str(flt, "process_id", pattern=ID_PATTERN))
        require_member(ctx, process)
        attrs = [process.id]
        if flt.get("round") is not None:
            attrs.append(round_key(_round(flt["round"])))
        org = flt.get("organisation")
        return RawJSON.array(
            _joined_raw(ctx, kv.key, kv.value, process.private_purged)
            for kv in ctx.scan_raw(EXECUTION, *attrs)
            if org is None or split_composite_key(kv.key)[1][-1] == org
        )

    def inbox(self, ctx: TransactionContext, process_id: str, rnd: str) -> list[InboxEntry]:
        """What the caller's task of round ``rnd + 1`` takes from round ``rnd``, without the records:
        per organisation ``{organisation, status, state, messages}``, ``state`` the digest of the
        state it recorded (``null`` unless completed) and ``messages`` its signed output messages
        addressed to the caller (each ``{recipient, digest, size, ...}`` as in the record)."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        entries = list(ctx.scan_raw(EXECUTION, process_id, round_key(_round_arg(rnd))))
        inbox = []
        for kv, (org, status, state, messages) in zip(
            entries, ctx.summaries(_inbox_summary, entries), strict=True
        ):
            if any(recipient is None for recipient, _ in messages):
                messages = _routed(ctx, kv, process.private_purged)
            inbox.append(
                InboxEntry(
                    organisation=org,
                    status=status,
                    state=state,
                    messages=tuple(m for recipient, m in messages if recipient == ctx.msp_id),
                )
            )
        return inbox

    def history(
        self,
        ctx: TransactionContext,
        process_id: str,
        rnd: str,
        organisation: str,
        limit: str = "",
        after: str = "",
    ) -> RawJSON:
        """Every version of one execution record; with ``limit``/``after`` one page, newest first."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        key = self._key(ctx, process_id, _round_arg(rnd), organisation)
        if ctx.stub.get_state(key) is None:
            raise NotFound(f"no execution record of {organisation} for round {rnd} of {process_id}")
        raw = ctx.history(key, limit, after)
        if raw.find(b'"private_sha256"') < 0:
            return raw
        versions = json.loads(raw)  # the completed version's private part joined, as get joins it
        for entry in versions if isinstance(versions, list) else versions["items"]:
            if entry.get("value") is not None:
                entry["value"] = joined_record(ctx, key, entry["value"], process.private_purged)
        return RawJSON(canonical_json(versions))
