"""What the web explorer shows an auditor beyond the raw records (issue 16, item 8).

* **Signatures** (``GET /api/v1/processes/{id}/signatures``): for every execution record of a process,
  read from the ledger (not the index), who signed it and whether the signature holds. The task key
  that signs a result is registered on the record by the transaction that created the task, so the
  signer is that transaction's identity (``created_by`` at the executing organisation, e.g.
  ``User1@Org2MSP``); validity is :func:`audit.lineage.check_execution` -- the same check as
  ``POST /models/{id}/verify`` and the offline audit bundle (task signature over the canonical result,
  result fields equal to the record, pinned image) -- plus "the completing transaction is a valid
  transaction of its block".
* **Events with time and actor** (same answer): each ledger event of the process with the time of its
  transaction and who acted, both taken from the version of the record that transaction wrote.
* **Changes** (``GET .../changes`` of a process, an execution record, a model): every version of the
  record with its time, actor and a human-readable list of what changed from the version before.

Actors come from the records the contracts write: the creating identity (``created_by``) where the
contract keeps it, otherwise the organisation the contract enforces (the executing organisation of a
task result, ``status_by`` of a process transition, the owner of a model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends
from fastapi import Path as PathParam
from pydantic import BaseModel

from api import schemas as S
from api.responses import DepthSafeRoute
from audit.lineage import check_execution, execution_node_id
from audit.verification import transaction_validity
from ledger.client import ConsortiaClient, HistoryEntry
from ledger.errors import ContractError
from wire.canonical import canonical_json

SHORT = 72  # characters of a value shown in a change before it is cut
SILENT = frozenset({"tx_id"})  # fields every version changes; shown as the version's transaction
FIRST = ("status", "status_reason", "failure_reason", "result", "access")  # shown before other changes


class SignatureOut(BaseModel):
    node: str
    round: int
    organisation: str
    status: str
    signer: str
    valid: bool | None = None  # None: no result signed yet (running) or none at all (failed)
    detail: str = ""
    tx_valid: bool | None = None


class AuditEventOut(BaseModel):
    block: int
    tx_id: str
    name: str
    subject: str
    time: str = ""
    actor: str = ""


class ProcessSignaturesOut(BaseModel):
    process_id: str
    executions: list[SignatureOut]
    events: list[AuditEventOut]


class ChangeOut(BaseModel):
    field: str
    text: str


class VersionOut(BaseModel):
    tx_id: str
    time: str
    actor: str
    is_delete: bool
    changes: list[ChangeOut]


# ---------------------------------------------------------------------- human-readable diffs
def short(value: Any) -> str:
    """A JSON value as at most ``SHORT`` characters (depth-safe: canonical JSON, then cut)."""
    if value is None:
        return "none"
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = canonical_json(value).decode()
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def _scalars(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, (str, int, float)) for v in values)


def describe_changes(before: Any, after: Any, prefix: str = "", depth: int = 0) -> list[dict[str, str]]:
    """What changed from one version of a record to the next, one line per changed field: nested
    objects are descended two levels (``result.metrics.norm: 1.2 → 0.9``), lists of names are shown as
    additions and removals (``access: + Org3MSP``), anything else as ``old → new``."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [{"field": prefix, "text": f"{prefix}: {short(before)} → {short(after)}"}]
    out: list[dict[str, str]] = []
    keys = list(after) + [k for k in before if k not in after]
    if depth == 0:
        keys.sort(key=lambda k: FIRST.index(k) if k in FIRST else len(FIRST))
    for key in keys:
        if depth == 0 and key in SILENT:
            continue
        name = f"{prefix}.{key}" if prefix else key
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if name == "result" and isinstance(new, dict) and not old:
            out.append({"field": name, "text": "result signed: " + result_summary(new)})
        elif key not in before or old in (None, "", [], {}):
            out.append({"field": name, "text": f"{name} set to {short(new)}"})
        elif key not in after or new in (None, "", [], {}):
            out.append({"field": name, "text": f"{name} cleared (was {short(old)})"})
        elif isinstance(old, dict) and isinstance(new, dict) and depth < 2:
            out.extend(describe_changes(old, new, name, depth + 1))
        elif _scalars(old) and _scalars(new):
            added = [short(v) for v in new if v not in old]
            removed = [short(v) for v in old if v not in new]
            parts = [f"+ {v}" for v in added] + [f"− {v}" for v in removed]
            out.append({"field": name, "text": f"{name}: " + (", ".join(parts) or "reordered")})
        else:
            out.append({"field": name, "text": f"{name}: {short(old)} → {short(new)}"})
    return out


def result_summary(result: dict[str, Any]) -> str:
    """An execution result in one line: its outputs and metrics."""
    outs = result.get("outputs") or {}
    parts = [f"state {short(outs.get('state'))[:19]}…"] if outs.get("state") else []
    if outs.get("messages"):
        parts.append(f"{len(outs['messages'])} message(s)")
    if outs.get("model"):
        parts.append("a model")
    metrics = result.get("metrics") or {}
    shown = ", ".join(
        f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {short(v)}" for k, v in metrics.items()
    )
    return ", ".join(parts) + (f"; metrics {shown}" if shown else "")


def who(user: str, organisation: str) -> str:
    """``User1@org2.example.com (Org2MSP)``; the organisation alone when no user is recorded."""
    return f"{user} ({organisation})" if user else organisation


# ---------------------------------------------------------------------- actors
def version_actor(kind: str, value: dict[str, Any] | None, tx_id: str) -> str:
    """Who wrote this version of a record, as far as the record itself says (module docstring)."""
    if not value:
        return ""
    user = value.get("created_by") or ""
    if kind == "execution":
        org = value.get("organisation", "")
        created = value.get("tx_id") == tx_id and value.get("status") in ("running", "failed")
        return who(user if created else "", org)
    if kind == "process":
        if value.get("status") == "created":
            return who(user, value.get("creator", ""))
        return value.get("status_by") or value.get("creator", "")
    if kind == "model":
        return value.get("owner", "")
    return value.get("owner") or value.get("organisation") or ""


def versions(kind: str, history: list[HistoryEntry]) -> list[dict[str, Any]]:
    """Every version of a record, oldest first, with time, actor and what changed."""
    out, previous = [], None
    for h in history:
        if h.is_delete:
            changes = [{"field": "", "text": "deleted"}]
        elif previous is None:
            status = (h.value or {}).get("status")
            changes = [{"field": "", "text": "created" + (f" with status {status}" if status else "")}]
        else:
            changes = describe_changes(previous, h.value or {}) or [{"field": "", "text": "no field changed"}]
        out.append(
            {
                "tx_id": h.tx_id,
                "time": h.timestamp,
                "actor": version_actor(kind, h.value or previous, h.tx_id),
                "is_delete": h.is_delete,
                "changes": changes,
            }
        )
        previous = h.value if not h.is_delete else None
    return out


# ---------------------------------------------------------------------- signatures
def execution_signature(
    record: dict[str, Any], process: dict[str, Any], tx_valid: Callable[[str], bool | None]
) -> dict[str, Any]:
    """Signer and signature validity of one execution record (module docstring)."""
    org = record["organisation"]
    out: dict[str, Any] = {
        "node": execution_node_id(record["process_id"], record["round"], org),
        "round": record["round"],
        "organisation": org,
        "status": record["status"],
        "signer": who(record.get("created_by") or "", org),
    }
    if record["status"] != "completed":
        out["detail"] = "no signed result: the task " + (
            "is still running" if record["status"] == "running" else f"is {record['status']}"
        )
        return out
    try:
        check_execution(record, process)
        out.update(valid=True, detail="task signature verifies over the result; pinned image")
    except (ValueError, KeyError, TypeError) as exc:
        out.update(valid=False, detail=str(exc) or type(exc).__name__)
    out["tx_valid"] = tx_valid(record.get("completed_tx_id") or record["tx_id"])
    return out


def _subject_history(client: ConsortiaClient, subject: str) -> tuple[str, list[HistoryEntry]]:
    kind, _, key = subject.partition(":")
    try:
        if kind == "execution":
            pid, rnd, org = key.rsplit("/", 2)
            return kind, client.execution_history(pid, int(rnd), org)
        if kind == "process":
            return kind, client.process_history(key)
        if kind == "model":
            return kind, client.model_history(key)
    except (ContractError, ValueError):
        pass
    return kind, []


def timed_events(
    client: ConsortiaClient, events: list[dict[str, Any]], executions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The index's events with the time and actor of the version their transaction wrote: for task
    events from the execution records at hand (registration and completion transactions), for a
    member's acceptance from the acceptance itself, for the others from the history of the record the
    event names."""
    known: dict[str, tuple[str, str]] = {}
    for r in executions:
        if r.get("completed_tx_id"):
            known[r["completed_tx_id"]] = (r.get("completed") or "", r["organisation"])
        known[r["tx_id"]] = (r.get("created") or "", who(r.get("created_by") or "", r["organisation"]))
    answered = {e["subject"] for e in events if e["name"] == "ProcessAnswered"}
    for subject in answered:  # a member's acceptance is its own record: its time and signer
        for a in client.process_acceptances(subject.split(":", 1)[1]):
            known[a.tx_id] = (a.created, who(a.signed_by, a.organisation))
    histories: dict[str, tuple[str, dict[str, HistoryEntry]]] = {}
    out = []
    for e in events:
        time, actor = known.get(e["tx_id"], ("", ""))
        if not time:
            if e["subject"] not in histories:
                kind, hist = _subject_history(client, e["subject"])
                histories[e["subject"]] = (kind, {h.tx_id: h for h in hist})
            kind, by_tx = histories[e["subject"]]
            h = by_tx.get(e["tx_id"])
            time, actor = (h.timestamp, version_actor(kind, h.value, h.tx_id)) if h else ("", "")
        out.append({**{k: e[k] for k in ("block", "tx_id", "name", "subject")}, "time": time, "actor": actor})
    return out


def explorer_router(
    gw: Any, client: Callable[..., ConsortiaClient], errors: Callable[..., dict[int | str, dict[str, Any]]]
) -> APIRouter:
    """The explorer's routes for one gateway ``gw`` (:class:`api.gateway.Gateway`); ``client`` is
    the gateway's dependency giving the caller's ledger client, ``errors`` its OpenAPI error bodies."""
    router = APIRouter(route_class=DepthSafeRoute, tags=["explorer"])
    ProcessId = PathParam(pattern=S.ID, max_length=128)
    ModelId = PathParam(pattern=S.ID, max_length=128)

    @router.get(
        "/api/v1/processes/{process_id}/signatures",
        response_model=ProcessSignaturesOut,
        responses=errors(400, 404),
    )
    def signatures(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        """Signer and signature validity of every execution record (checked now, against the
        ledger's records), and the process's events with time and actor."""
        process = c.get_process(process_id).to_dict()
        valid = transaction_validity(c, gw.index)
        records = sorted(
            (r.to_dict() for r in c.query_executions(process_id)),
            key=lambda r: (r["round"], r["organisation"]),
        )
        gw.current()
        return {
            "process_id": process_id,
            "executions": [execution_signature(r, process, valid) for r in records],
            "events": timed_events(c, gw.index.events(process_id=process_id, limit=10_000), records),
        }

    @router.get(
        "/api/v1/processes/{process_id}/changes",
        response_model=list[VersionOut],
        responses=errors(400, 404),
    )
    def process_changes(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> list[dict]:
        """Every version of the process record: time, actor and what changed."""
        return versions("process", c.process_history(process_id))

    @router.get(
        "/api/v1/processes/{process_id}/executions/{round}/{organisation}/changes",
        response_model=list[VersionOut],
        responses=errors(400, 404),
    )
    def execution_changes(
        process_id: str = ProcessId,
        round: int = PathParam(ge=1, le=100_000),
        organisation: str = PathParam(pattern=S.MSP, max_length=64),
        c: ConsortiaClient = Depends(client),
    ) -> list[dict]:
        """Every version of an execution record: time, actor and what changed."""
        return versions("execution", c.execution_history(process_id, round, organisation))

    @router.get(
        "/api/v1/models/{model_id}/changes", response_model=list[VersionOut], responses=errors(400, 404)
    )
    def model_changes(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> list[dict]:
        """Every version of the model record: time, actor and what changed (access grants, key rotations)."""
        return versions("model", c.model_history(model_id))

    return router
