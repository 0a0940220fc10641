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

The result (what the task key signs) is::

    {process_id, round, organisation, image_digest, runtime,
     inputs:  {state, messages: [{sender, digest}], data_commitment},
     outputs: {state, messages: [{recipient, digest, size, ...}], model: {digest, size, ...} | null},
     metrics: {name: number}, numeric_profile?: {name, version, digest}, started, finished}

``numeric_profile`` names the floating-point kernels the task computed with (the image's declared
profile, docs/reproducibility.md); a result without it is accepted (records made before it existed).

Chaincode events reach every channel member, so ``TaskCreated`` / ``TaskCompleted`` /
``TaskFailed`` carry only (process id, round, organisation): a member reads digests, metrics and
failure reasons through :meth:`ExecutionRecordContract.get`, which checks process membership.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from chaincode.canonical import RawJSON, canonical_json, is_digest
from chaincode.context import TransactionContext, parse_json_arg, require_keys, require_str
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
from chaincode.image import ID_PATTERN
from chaincode.learning_process import (
    EXECUTION,
    completed_organisations,
    load_process,
    require_member,
    round_key,
)
from chaincode.limits import MAX_FAILURE_DETAILS_BYTES, MAX_REASON_CHARS, bounded_json
from chaincode.privacy import charge

P256_HALF_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551 // 2
RUNTIMES = ("container", "sandbox", "inprocess")
RESULT_FIELDS = {
    "process_id",
    "round",
    "organisation",
    "image_digest",
    "runtime",
    "inputs",
    "outputs",
    "metrics",
    "numeric_profile",
    "started",
    "finished",
}


def _round(value: Any) -> int:
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


def _check_digest(value: Any, what: str) -> None:
    if not is_digest(value):
        raise InvalidArgument(f"{what} must be a digest sha256:<64 hex>, got {value!r}")


def _check_messages(messages: Any, where: str, kind: str, party: str) -> None:
    """A result's input (``party`` "sender") or output ("recipient") message references: a list of
    ``{party: str, digest: sha256:...}`` objects."""
    if not isinstance(messages, list):
        raise InvalidArgument(f"{where} must be a list")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get(party), str):
            raise InvalidArgument(f"each {kind} message needs a {party}")
        _check_digest(m.get("digest"), f"{kind} message digest")


def _validate_result(raw: Any) -> dict[str, Any]:
    result = require_keys(
        raw, RESULT_FIELDS, RESULT_FIELDS - {"started", "finished", "numeric_profile"}, "execution result"
    )
    _check_digest(result["image_digest"], "result.image_digest")
    if result["runtime"] not in RUNTIMES:
        raise InvalidArgument(f"result.runtime must be one of {RUNTIMES}")
    inputs = require_keys(
        result["inputs"],
        {"state", "messages", "data_commitment"},
        {"messages", "data_commitment"},
        "result.inputs",
    )
    if inputs.get("state") is not None:
        _check_digest(inputs["state"], "result.inputs.state")
    _check_digest(inputs["data_commitment"], "result.inputs.data_commitment")
    _check_messages(inputs["messages"], "result.inputs.messages", "input", "sender")
    outputs = require_keys(
        result["outputs"], {"state", "messages", "model"}, {"state", "messages"}, "result.outputs"
    )
    _check_digest(outputs["state"], "result.outputs.state")
    _check_messages(outputs["messages"], "result.outputs.messages", "output", "recipient")
    if outputs.get("model") is not None:
        if not isinstance(outputs["model"], dict):
            raise InvalidArgument("result.outputs.model must be an object")
        _check_digest(outputs["model"].get("digest"), "result.outputs.model.digest")
    if "numeric_profile" in result:
        profile = require_keys(
            result["numeric_profile"],
            {"name", "version", "digest"},
            {"name", "version", "digest"},
            "result.numeric_profile",
        )
        require_str(profile, "name", pattern=r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
        if not isinstance(profile["version"], int) or isinstance(profile["version"], bool):
            raise InvalidArgument("result.numeric_profile.version must be an integer")
        _check_digest(profile["digest"], "result.numeric_profile.digest")
    metrics = result["metrics"]
    if not isinstance(metrics, dict):
        raise InvalidArgument("result.metrics must be an object")
    for k, v in metrics.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise InvalidArgument(f"metric {k!r} must be a finite number")
    return result


def _inbox_summary(record: dict[str, Any]) -> tuple[str, str, str | None, tuple[tuple[str, str], ...]]:
    """What ``inbox`` needs of a record: organisation, status, state digest (completed only) and
    each output message as (recipient, its JSON) -- immutable, so it can be shared between calls."""
    outputs = (record.get("result") or {}).get("outputs") or {}
    completed = record["status"] == "completed"
    messages = tuple((m["recipient"], json.dumps(m)) for m in outputs.get("messages", ()))
    return record["organisation"], record["status"], outputs.get("state") if completed else None, messages


class ExecutionRecordContract:
    name = "ExecutionRecord"

    @staticmethod
    def _key(ctx: TransactionContext, process_id: str, rnd: int, org: str) -> str:
        return ctx.key(EXECUTION, process_id, round_key(rnd), org)

    def _check_round_open(
        self, ctx: TransactionContext, process: dict[str, Any], rnd: int, registered: bool = False
    ) -> None:
        """Refuse unless the process runs and round ``rnd`` is open (1..rounds, round rnd-1 completed by
        every member). ``registered``: the caller's running record of round ``rnd`` exists, created under
        this very rule; a round once open stays open (completed records are final), so the members'
        records of round rnd-1 are not read again (nor put in the read set)."""
        if process["status"] != "running":
            raise InvalidState(
                f"round {rnd} of learning process {process['id']} is closed: "
                f"the process is {process['status']}"
            )
        if rnd > process["rounds"]:
            raise InvalidState(
                f"round {rnd} is closed: learning process {process['id']} has {process['rounds']} rounds"
            )
        if rnd > 1 and not registered:
            missing = set(process["consortium"]) - completed_organisations(ctx, process["id"], rnd - 1)
            if missing:
                raise InvalidState(
                    f"round {rnd} of learning process {process['id']} is not open: "
                    f"round {rnd - 1} not completed by {sorted(missing)}"
                )

    def create_task(self, ctx: TransactionContext, spec_json: str) -> dict[str, Any]:
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
        record = {
            "process_id": pid,
            "round": rnd,
            "organisation": ctx.msp_id,
            "image_digest": process["image_digest"],
            "runtime": spec["runtime"],
            "public_key": pem,
            "status": "running",
            "created": ctx.timestamp,
            "created_by": ctx.subject,
            "tx_id": ctx.tx_id,
            "result": None,
            "signature": "",
            "completed": "",
            "failure_reason": "",
            "epsilon_total": 0.0,
        }
        ctx.put(key, record)
        ctx.emit("TaskCreated", {"process_id": pid, "round": rnd, "organisation": ctx.msp_id})
        return record

    def complete_task(self, ctx: TransactionContext, result_json: str, signature_b64: str) -> dict[str, Any]:
        """Accept a task's signed result (see the module docstring for every rule)."""
        ctx.require_submitter()
        result = _validate_result(parse_json_arg(result_json, "execution result"))
        pid = require_str(result, "process_id", pattern=ID_PATTERN)
        rnd = _round(result["round"])
        org = require_str(result, "organisation")
        if org != ctx.msp_id:
            raise Forbidden(
                f"{ctx.msp_id} cannot complete the task of {org}: a result is accepted only "
                f"from the executing organisation"
            )
        process = load_process(ctx, pid)
        require_member(ctx, process)
        key = self._key(ctx, pid, rnd, org)
        record = ctx.get(key)
        if record is None:
            raise NotFound(f"no task registered for {org} in round {rnd} of learning process {pid}")
        if record["status"] != "running":
            raise InvalidState(
                f"task of {org} for round {rnd} of learning process {pid} is already "
                f"{record['status']}; a result is accepted only once"
            )
        self._check_round_open(ctx, process, rnd, registered=True)
        if result["image_digest"] != process["image_digest"]:
            raise ImageMismatch(
                f"result of {org} for round {rnd} was produced by image {result['image_digest']}, "
                f"but learning process {pid} pins {process['image_digest']}"
            )
        if result["runtime"] != record["runtime"]:
            raise InvalidArgument(
                f"result names runtime {result['runtime']}, the task was registered for {record['runtime']}"
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
            _load_public_key(record["public_key"]).verify(
                signature, canonical_json(result), ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            raise SignatureInvalid(
                f"execution result of {org} for round {rnd} of learning process {pid} "
                f"is not signed by the key registered for that task"
            ) from None
        total = 0.0
        privacy = None
        budget = process.get("privacy_budget")
        if budget is not None:
            previous = None
            if rnd > 1:
                prev = ctx.get(self._key(ctx, pid, rnd - 1, org))
                previous = prev.get("privacy") if prev else None
            privacy = charge(budget, previous, result["metrics"], f"learning process {pid}")
            total = privacy[budget["scope"]]["epsilon"]
            if total > float(budget["epsilon"]) * (1 + 1e-12):
                raise BudgetExceeded(
                    f"round {rnd} of {org} would spend {budget['scope']} ε = {total:.6g} in total "
                    f"({budget['accounting']} accounting), over the budget ε = {budget['epsilon']} "
                    f"of learning process {pid}",
                    spent=total,
                    budget=budget["epsilon"],
                    scope=budget["scope"],
                    accounting=budget["accounting"],
                )
        record.update(
            status="completed",
            result=result,
            signature=signature_b64,
            completed=ctx.timestamp,
            completed_tx_id=ctx.tx_id,
            epsilon_total=total,
            privacy=privacy,
        )
        ctx.put(key, record)
        ctx.emit("TaskCompleted", {"process_id": pid, "round": rnd, "organisation": org})
        return record

    def fail_task(self, ctx: TransactionContext, spec_json: str) -> dict[str, Any]:
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
        record = ctx.get(key)
        if record is not None and record["status"] != "running":
            raise InvalidState(f"task of {ctx.msp_id} for round {rnd} of {pid} is already {record['status']}")
        # the rules of create_task: only a running process, only an existing round that is open
        self._check_round_open(ctx, process, rnd, registered=record is not None)
        if record is None:
            record = {
                "process_id": pid,
                "round": rnd,
                "organisation": ctx.msp_id,
                "image_digest": process["image_digest"],
                "runtime": "",
                "public_key": "",
                "created": ctx.timestamp,
                "created_by": ctx.subject,
                "tx_id": ctx.tx_id,
                "result": None,
                "signature": "",
                "completed": "",
                "epsilon_total": 0.0,
            }
        details = spec.get("details") or {}
        if not isinstance(details, dict):
            raise InvalidArgument("failure details must be an object")
        bounded_json(details, "failure details", MAX_FAILURE_DETAILS_BYTES)
        record.update(
            status="failed",
            failure_reason=reason,
            failure_details=details,
            completed=ctx.timestamp,
            completed_tx_id=ctx.tx_id,
        )
        ctx.put(key, record)
        ctx.emit("TaskFailed", {"process_id": pid, "round": rnd, "organisation": ctx.msp_id})
        return record

    def get(self, ctx: TransactionContext, process_id: str, rnd: str, organisation: str) -> dict[str, Any]:
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        return ctx.get_required(
            self._key(ctx, process_id, _round_arg(rnd), organisation),
            f"execution record of {organisation} for round {rnd} of {process_id}",
        )

    def query(self, ctx: TransactionContext, filter_json: str) -> list[dict[str, Any]]:
        """Records of a process, optionally for one round and/or one organisation."""
        flt = require_keys(
            parse_json_arg(filter_json, "query"),
            {"process_id", "round", "organisation"},
            {"process_id"},
            "query",
        )
        process = load_process(ctx, require_str(flt, "process_id", pattern=ID_PATTERN))
        require_member(ctx, process)
        attrs = [process["id"]]
        if flt.get("round") is not None:
            attrs.append(round_key(_round(flt["round"])))
        org = flt.get("organisation")
        return [r for r in ctx.scan(EXECUTION, *attrs) if org is None or r["organisation"] == org]

    def inbox(self, ctx: TransactionContext, process_id: str, rnd: str) -> list[dict[str, Any]]:
        """What the caller's task of round ``rnd + 1`` takes from round ``rnd``, without the records:
        per organisation ``{organisation, status, state, messages}``, ``state`` the digest of the
        state it recorded (``null`` unless completed) and ``messages`` its signed output messages
        addressed to the caller (each ``{recipient, digest, size, ...}`` as in the record)."""
        process = load_process(ctx, process_id)
        require_member(ctx, process)
        return [
            {
                "organisation": org,
                "status": status,
                "state": state,
                "messages": [json.loads(m) for recipient, m in messages if recipient == ctx.msp_id],
            }
            for org, status, state, messages in ctx.scan_summaries(
                _inbox_summary, EXECUTION, process_id, round_key(_round_arg(rnd))
            )
        ]

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
        return ctx.history(key, limit, after)
