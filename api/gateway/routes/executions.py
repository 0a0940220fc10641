"""Provenance of a process's executions: the execution records (from the index, or one record and
its history from the ledger), the in-toto attestation of an execution, the timeline, "which
artifacts did each run publish" and "which executions produced and consumed this artifact"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam

from api import schemas as S
from api.gateway.deps import (
    Caller,
    GatewayDep,
    Offset,
    Org,
    ProcessId,
    Round,
    member_process,
    page,
    reads,
    with_privacy_and_gains,
)
from api.gateway.errors import errors
from api.gateway.state import record
from api.responses import DepthSafeRoute
from audit.attestations import attest_execution
from ledger.checkpoint import checkpoint_of
from ledger.client import ExecutionRecord, HistoryEntry
from ledger.errors import Forbidden, InvalidArgument, NotFound

router = APIRouter(route_class=DepthSafeRoute)
read = reads(router, "provenance")
PROCESS = "/api/v1/processes/{process_id}"
EXECUTION = PROCESS + "/executions/{round}/{organisation}"


@read(PROCESS + "/executions", response_model=S.Page[ExecutionRecord])
def list_executions(
    process_id: ProcessId,
    c: Caller,
    gw: GatewayDep,
    round: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    organisation: Annotated[str | None, Query(pattern=S.MSP)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
) -> dict[str, Any]:
    gw.current()
    member_process(c, process_id)
    return page(gw.index.executions(process_id, round, organisation, limit, offset))


@read(EXECUTION, response_model=ExecutionRecord)
def get_execution(process_id: ProcessId, round: Round, organisation: Org, c: Caller) -> dict[str, Any]:
    return record(c.get_execution(process_id, round, organisation))


@read(EXECUTION + "/history", response_model=list[HistoryEntry])
def execution_history(process_id: ProcessId, round: Round, organisation: Org, c: Caller) -> list[dict]:
    return [record(h) for h in c.execution_history(process_id, round, organisation)]


@router.get(
    EXECUTION + "/attestation",
    tags=["provenance"],
    responses={200: {"description": "DSSE envelope of an in-toto Statement v1"}, **errors(400, 404)},
)
def execution_attestation(
    process_id: ProcessId, round: Round, organisation: Org, c: Caller
) -> dict[str, Any]:
    rec = record(c.get_execution(process_id, round, organisation))
    if organisation != c.organisation:
        raise Forbidden(
            f"only {organisation}'s gateway can attest its own execution records; "
            f"this is the gateway of {c.organisation}"
        )
    if rec["status"] != "completed":
        raise InvalidArgument(
            f"execution of {organisation} for round {round} of {process_id} is "
            f"{rec['status']}; only completed executions are attested"
        )
    return attest_execution(rec, c.identity, checkpoint_of(c.ledger, c.identity))  # anchors the chain head


@read(PROCESS + "/timeline", response_model=S.TimelineOut)
def timeline(process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    gw.current()
    process = with_privacy_and_gains(member_process(c, process_id), gw)
    return {
        "process": process,
        "executions": gw.index.executions(process_id, limit=10_000).items,
        "events": gw.index.events(process_id=process_id, limit=10_000),
        "last_indexed_block": gw.index.last_block,
    }


@read(PROCESS + "/artifacts", response_model=list[S.RunArtifacts])
def process_artifacts(
    process_id: ProcessId,
    c: Caller,
    gw: GatewayDep,
    organisation: Annotated[str | None, Query(pattern=S.MSP)] = None,
) -> list[dict[str, Any]]:
    """Which artifacts each run published -- or, with ``organisation``, which artifacts that
    organisation published for the process."""
    gw.current()
    member_process(c, process_id)
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for a in gw.index.published_artifacts(process_id, organisation):
        runs.setdefault((a["round"], a["organisation"]), []).append(a)
    return [{"round": r, "organisation": o, "artifacts": arts} for (r, o), arts in sorted(runs.items())]


@reads(router, "provenance", (404,))("/api/v1/artifacts/{digest}", response_model=S.ArtifactProvenance)
def artifact(
    digest: Annotated[str, PathParam(pattern=S.DIGEST)], _: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """Which executions produced and consumed an artifact (among processes this organisation sees)."""
    gw.current()
    found = gw.index.artifact(digest)
    if not found["produced_by"] and not found["consumed_by"]:
        raise NotFound(f"no execution visible to {gw.msp_id} produced or consumed {digest}")
    return {"digest": digest, **found}
