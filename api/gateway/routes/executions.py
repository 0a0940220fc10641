"""Provenance of a process's executions: the execution records (from the index, or one record and
its history from the ledger), the in-toto attestation of an execution, the timeline, "which
artifacts did each run publish" and "which executions produced and consumed this artifact"."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam

from api import schemas as S
from api.attestation import attest_execution
from api.gateway.deps import Offset, Org, ProcessId, Round, client, gateway, member_process, page
from api.gateway.errors import errors
from api.gateway.state import Gateway, record
from api.responses import DepthSafeRoute
from chaincode.errors import Forbidden, InvalidArgument, NotFound
from ledger.checkpoint import checkpoint_of
from ledger.client import ConsortiaClient

router = APIRouter(route_class=DepthSafeRoute)
EXECUTION = "/api/v1/processes/{process_id}/executions/{round}/{organisation}"


@router.get(
    "/api/v1/processes/{process_id}/executions",
    response_model=S.Page[S.ExecutionOut],
    tags=["provenance"],
    responses=errors(400, 404),
)
def list_executions(
    process_id: str = ProcessId,
    round: int | None = Query(None, ge=1, le=100_000),
    organisation: str | None = Query(None, pattern=S.MSP),
    limit: int = Query(1000, ge=1, le=10_000),
    offset: int = Offset,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    gw.current()
    member_process(c, process_id)
    p = gw.index.executions(process_id, round, organisation, limit, offset)
    return page(p.items, p.total, limit, offset)


@router.get(EXECUTION, response_model=S.ExecutionOut, tags=["provenance"], responses=errors(400, 404))
def get_execution(
    process_id: str = ProcessId,
    round: int = Round,
    organisation: str = Org,
    c: ConsortiaClient = Depends(client),
) -> dict[str, Any]:
    return record(c.get_execution(process_id, round, organisation))


@router.get(
    EXECUTION + "/history",
    response_model=list[S.HistoryEntryOut],
    tags=["provenance"],
    responses=errors(400, 404),
)
def execution_history(
    process_id: str = ProcessId,
    round: int = Round,
    organisation: str = Org,
    c: ConsortiaClient = Depends(client),
) -> list[dict]:
    return [h.__dict__ for h in c.execution_history(process_id, round, organisation)]


@router.get(
    EXECUTION + "/attestation",
    tags=["provenance"],
    responses={200: {"description": "DSSE envelope of an in-toto Statement v1"}, **errors(400, 404)},
)
def execution_attestation(
    process_id: str = ProcessId,
    round: int = Round,
    organisation: str = Org,
    c: ConsortiaClient = Depends(client),
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


@router.get(
    "/api/v1/processes/{process_id}/timeline",
    response_model=S.TimelineOut,
    tags=["provenance"],
    responses=errors(400, 404),
)
def timeline(
    process_id: str = ProcessId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    gw.current()
    process = member_process(c, process_id)
    return {
        "process": process,
        "executions": gw.index.executions(process_id, limit=10_000).items,
        "events": gw.index.events(process_id=process_id, limit=10_000),
        "last_indexed_block": gw.index.last_block,
    }


@router.get(
    "/api/v1/processes/{process_id}/artifacts",
    response_model=list[S.RunArtifacts],
    tags=["provenance"],
    responses=errors(400, 404),
)
def process_artifacts(
    process_id: str = ProcessId,
    organisation: str | None = Query(None, pattern=S.MSP),
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> list[dict[str, Any]]:
    """Which artifacts each run published -- or, with ``organisation``, which artifacts that
    organisation published for the process."""
    gw.current()
    member_process(c, process_id)
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for a in gw.index.published_artifacts(process_id, organisation):
        runs.setdefault((a["round"], a["organisation"]), []).append(a)
    return [{"round": r, "organisation": o, "artifacts": arts} for (r, o), arts in sorted(runs.items())]


@router.get(
    "/api/v1/artifacts/{digest}",
    response_model=S.ArtifactProvenance,
    tags=["provenance"],
    responses=errors(404),
)
def artifact(
    digest: str = PathParam(pattern=S.DIGEST),
    _: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    """Which executions produced and consumed an artifact (among processes this organisation sees)."""
    gw.current()
    found = gw.index.artifact(digest)
    if not found["produced_by"] and not found["consumed_by"]:
        raise NotFound(f"no execution visible to {gw.msp_id} produced or consumed {digest}")
    return {"digest": digest, **found}
