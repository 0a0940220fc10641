"""Learning processes: list (from the index), create (through ``executor.process.launch``, the one
path that checks a process against what its image declares), read, accept, decline, the members'
answers, start (once every member accepted), abort, history, and the
long-poll ``watch`` of a process's events."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from api import schemas as S
from api.gateway.deps import (
    Caller,
    GatewayDep,
    Limit,
    Offset,
    ProcessId,
    member_process,
    page,
    reads,
    with_privacy_and_gains,
    writes,
)
from api.gateway.state import record
from api.responses import DepthSafeRoute
from ledger.client import HistoryEntry, ProcessAcceptance, ProcessRecord
from ledger.errors import InvalidArgument

router = APIRouter(route_class=DepthSafeRoute)
read, write = reads(router, "processes"), writes(router, "processes")
STATUS = "^(created|running|completed|failed|aborted|declined)$"


@reads(router, "processes", ())("/api/v1/processes", response_model=S.Page[ProcessRecord])
def list_processes(
    _: Caller,
    gw: GatewayDep,
    limit: Limit = 50,
    offset: Offset = 0,
    status: Annotated[str | None, Query(pattern=STATUS)] = None,
) -> dict[str, Any]:
    gw.current()
    listing = page(gw.index.processes(limit, offset, status))
    listing["items"] = [with_privacy_and_gains(p, gw) for p in listing["items"]]
    return listing


@write("/api/v1/processes", response_model=ProcessRecord, status_code=201)
def create_process(body: S.ProcessIn, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Create the process (and start it with ``start: true``) through ``executor.process.launch``:
    the topology, hyper-parameters and dataset are checked against what the image declares first,
    every problem listed (400 ``INVALID_ARGUMENT``), and nothing is written for a refused process.
    With ``start: true`` the caller's organisation approves the image and accepts the process first
    (the caller must be an identity that consents for it), and the start is refused (409
    ``CONSENT_MISSING``, the process stays created) until every other member accepted."""
    from executor.images.declarations import InvalidProcessSpec
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
            validation_fraction=body.validation_fraction,
        )
    except (TypeError, ValueError) as exc:  # the spec's own checks (the schema makes the same ones first)
        raise InvalidArgument(f"process {body.id} refused: {exc}") from None
    try:
        consent = {c.organisation: c} if body.start else None
        return gw.written(launch(c, spec, start=body.start, consent=consent))
    except InvalidProcessSpec as exc:
        raise InvalidArgument(f"process {body.id} refused: {exc}", problems="; ".join(exc.problems)) from None


@read("/api/v1/processes/{process_id}", response_model=ProcessRecord)
def get_process(process_id: ProcessId, c: Caller) -> dict[str, Any]:
    """The process as ``LearningProcess:get`` answers it, with its ``privacy``: the ledger's rigorous ε
    spent of its budget and δ (:meth:`ledger.client.ConsortiaClient.process_privacy`), and with a
    validation slice its ``gains``: per member that completed the last round, its metric alone and
    together, the gain and whether it is negative (:meth:`ledger.client.ConsortiaClient.process_gains`)."""
    process = c.get_process(process_id)
    views: dict[str, Any] = {"privacy": c.process_privacy(process)}
    if process.validation_fraction:
        views["gains"] = c.process_gains(process)
    return record(process.view(**views))


@write("/api/v1/processes/{process_id}/accept", response_model=ProcessAcceptance)
def accept_process(body: S.AcceptProcessIn, process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict:
    """The caller's organisation accepts the process's terms as recorded (their digest is bound);
    only identities that consent for it (docs/consent.md)."""
    return gw.written(c.accept_process(process_id, body.terms_digest))


@write("/api/v1/processes/{process_id}/decline", response_model=ProcessAcceptance)
def decline_process(body: S.DeclineProcessIn, process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict:
    """The caller's organisation declines the process: it ends ``declined`` with the reason."""
    return gw.written(c.decline_process(process_id, body.reason))


@read("/api/v1/processes/{process_id}/acceptances", response_model=list[ProcessAcceptance])
def process_acceptances(process_id: ProcessId, c: Caller) -> list[dict]:
    """Every member's answer so far (accepted with the terms digest, or declined with the reason)."""
    return [record(a) for a in c.process_acceptances(process_id)]


@write("/api/v1/processes/{process_id}/start", response_model=ProcessRecord)
def start_process(process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Start the process: refused (409 ``CONSENT_MISSING``) until every member accepted it."""
    return gw.written(c.start_process(process_id))


@write("/api/v1/processes/{process_id}/abort", response_model=ProcessRecord)
def abort_process(body: S.AbortIn, process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict:
    return gw.written(c.abort_process(process_id, body.reason))


@reads(router, "provenance")("/api/v1/processes/{process_id}/history", response_model=list[HistoryEntry])
def process_history(process_id: ProcessId, c: Caller) -> list[dict]:
    return [record(h) for h in c.process_history(process_id)]


@read("/api/v1/processes/{process_id}/watch", response_model=S.WatchOut)
async def watch(
    process_id: ProcessId,
    c: Caller,
    gw: GatewayDep,
    after_block: Annotated[int, Query(ge=-1, le=2**62)] = -1,
    wait: Annotated[float, Query(ge=0, le=30)] = 10.0,
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
