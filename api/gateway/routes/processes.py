"""Learning processes: list (from the index), create (through ``executor.process.launch``, the one
path that checks a process against what its image declares), read, start, abort, history, and the
long-poll ``watch`` of a process's events."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, Query

from api import schemas as S
from api.gateway.deps import Limit, Offset, ProcessId, client, gateway, member_process, page
from api.gateway.errors import errors
from api.gateway.state import Gateway, record
from api.responses import DepthSafeRoute
from chaincode.errors import InvalidArgument
from ledger.client import ConsortiaClient

router = APIRouter(route_class=DepthSafeRoute)


@router.get("/api/v1/processes", response_model=S.Page[S.ProcessOut], tags=["processes"])
def list_processes(
    limit: int = Limit,
    offset: int = Offset,
    status: str | None = Query(None, pattern="^(created|running|completed|failed|aborted)$"),
    _: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    gw.current()
    p = gw.index.processes(limit, offset, status)
    return page(p.items, p.total, limit, offset)


@router.post(
    "/api/v1/processes",
    response_model=S.ProcessOut,
    status_code=201,
    tags=["processes"],
    responses=errors(400, 404, 409),
)
def create_process(
    body: S.ProcessIn, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    """Create the process (and start it with ``start: true``) through ``executor.process.launch``:
    the topology, hyper-parameters and dataset are checked against what the image declares first,
    every problem listed (400 ``INVALID_ARGUMENT``), and nothing is written for a refused process."""
    from executor.declarations import InvalidProcessSpec
    from executor.process import ProcessSpec, launch

    budget = body.privacy_budget.model_dump(exclude_none=True) if body.privacy_budget else None
    try:
        spec = ProcessSpec(
            body.id,
            body.image_id,
            tuple(body.consortium),
            body.topology.model_dump(),
            body.hyperparameters,
            body.rounds,
            body.dataset,
            budget,
            body.description,
            image_digest=body.image_digest,
        )
    except (TypeError, ValueError) as exc:  # the spec's own checks (e.g. a privacy budget without clipping)
        raise InvalidArgument(f"process {body.id} refused: {exc}") from None
    try:
        rec = record(launch(c, spec, start=body.start))
    except InvalidProcessSpec as exc:
        raise InvalidArgument(f"process {body.id} refused: {exc}", problems="; ".join(exc.problems)) from None
    gw.refresh()
    return rec


@router.get(
    "/api/v1/processes/{process_id}",
    response_model=S.ProcessOut,
    tags=["processes"],
    responses=errors(400, 404),
)
def get_process(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
    return record(c.get_process(process_id))


@router.post(
    "/api/v1/processes/{process_id}/start",
    response_model=S.ProcessOut,
    tags=["processes"],
    responses=errors(400, 404, 409),
)
def start_process(
    process_id: str = ProcessId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    rec = record(c.start_process(process_id))
    gw.refresh()
    return rec


@router.post(
    "/api/v1/processes/{process_id}/abort",
    response_model=S.ProcessOut,
    tags=["processes"],
    responses=errors(400, 404, 409),
)
def abort_process(
    body: S.AbortIn,
    process_id: str = ProcessId,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict:
    rec = record(c.abort_process(process_id, body.reason))
    gw.refresh()
    return rec


@router.get(
    "/api/v1/processes/{process_id}/history",
    response_model=list[S.HistoryEntryOut],
    tags=["provenance"],
    responses=errors(400, 404),
)
def process_history(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> list[dict]:
    return [h.__dict__ for h in c.process_history(process_id)]


@router.get(
    "/api/v1/processes/{process_id}/watch",
    response_model=S.WatchOut,
    tags=["processes"],
    responses=errors(400, 404),
)
async def watch(
    process_id: str = ProcessId,
    after_block: int = Query(-1, ge=-1, le=2**62),
    wait: float = Query(10.0, ge=0, le=30),
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    """Long poll: the process's events after ``after_block``, waiting up to ``wait`` s for one."""
    process = await asyncio.to_thread(member_process, c, process_id)
    await asyncio.to_thread(gw.current)
    deadline = time.monotonic() + wait
    while True:
        events = gw.index.events(process_id=process_id, after_block=after_block)
        if events or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.1)
    current = gw.index.process(process_id) or process
    return {"events": events, "last_indexed_block": gw.index.last_block, "status": current["status"]}
