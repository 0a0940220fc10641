"""Final models: list (from the index), read, history, lineage, verification against the ledger,
download (decrypted and checked against the on-chain digest), grant and revoke (with key rotation)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from api import schemas as S
from api.gateway.deps import (
    Caller,
    GatewayDep,
    Limit,
    ModelId,
    Offset,
    ProcessId,
    member_process,
    page,
    reads,
    writes,
)
from api.gateway.errors import errors
from api.gateway.sealed_models import grant_with_sealed_key, open_model_payload, revoke_with_rotation
from api.gateway.state import record
from api.responses import DepthSafeRoute
from audit import verification
from ledger.client import HistoryEntry, HistoryPage
from ledger.errors import NotFound
from ledger.rules import BOOKMARK_PATTERN, MAX_BOOKMARK_CHARS, MAX_HISTORY_PAGE

router = APIRouter(route_class=DepthSafeRoute)
read, provenance, write = reads(router, "models"), reads(router, "provenance"), writes(router, "models")
MODEL = "/api/v1/models/{model_id}"


@read("/api/v1/processes/{process_id}/models", response_model=list[S.ModelOut])
def process_models(process_id: ProcessId, c: Caller, gw: GatewayDep) -> list[dict[str, Any]]:
    gw.current()
    member_process(c, process_id)
    return gw.index.models(1000, 0, process_id).items


@reads(router, "models", ())("/api/v1/models", response_model=S.Page[S.ModelOut])
def list_models(
    _: Caller,
    gw: GatewayDep,
    limit: Limit = 50,
    offset: Offset = 0,
    process_id: Annotated[str | None, Query(pattern=S.ID)] = None,
) -> dict[str, Any]:
    gw.current()
    return page(gw.index.models(limit, offset, process_id))


@read(MODEL, response_model=S.ModelOut)
def get_model(model_id: ModelId, c: Caller) -> dict[str, Any]:
    """The model record with ``gain``: what collaboration bought its owner on its validation slice (null
    if the process declared none); ``gain.negative`` is true when the model is worse than the one its owner
    would have got alone."""
    model = c.get_model(model_id)
    return record(model.view(gain=c.model_gain(model)))


HistoryLimit = Annotated[
    int | None,
    Query(ge=1, le=MAX_HISTORY_PAGE, description="Page size: the newest versions first, one page"),
]
HistoryAfter = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_BOOKMARK_CHARS,
        pattern=f"^{BOOKMARK_PATTERN}$",
        description="The bookmark (`next`) of the previous page: versions older than it",
    ),
]


@provenance(MODEL + "/history", response_model=list[HistoryEntry] | HistoryPage)
def model_history(
    model_id: ModelId, c: Caller, limit: HistoryLimit = None, after: HistoryAfter = None
) -> list[dict] | dict[str, Any]:
    """Every version of the model record, oldest first; with `limit` and/or `after` one page of
    versions, newest first (default page size 100), with the bookmark `next` of the following page."""
    if limit is None and after is None:
        return [record(h) for h in c.model_history(model_id)]
    return record(c.history_page("Model:history", model_id, limit=limit, after=after))


@provenance(MODEL + "/lineage", response_model=S.LineageOut)
def lineage(model_id: ModelId, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    c.get_model(model_id)  # access list check by the contract
    found = gw.index.lineage(model_id)
    if found is None:
        gw.refresh()
        found = gw.index.lineage(model_id)
    if found is None:
        raise NotFound(f"model {model_id} is not in the index yet")
    return found


@writes(router, "provenance", (400, 404))(MODEL + "/verify", response_model=S.VerificationOut)
def verify_model(model_id: ModelId, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Re-check every signature and digest of the model's lineage against the ledger, and the
    index's copy of it (:func:`audit.verification.verify_model`)."""
    gw.refresh()
    return verification.verify_model(c, model_id, index=gw.index).to_dict()


@router.get(
    MODEL + "/download",
    tags=["models"],
    responses={
        200: {
            "content": {"application/octet-stream": {}},
            "description": "The model payload, verified against its on-chain digest",
        },
        **errors(400, 404, 502),
    },
)
def download_model(model_id: ModelId, c: Caller, gw: GatewayDep) -> Response:
    """The model payload. With a validation slice, ``X-Consortia-Gain`` carries ``metric isolated
    collaborative gain`` and ``X-Consortia-Gain-Negative: true`` warns that collaboration made the owner's
    model worse than training alone."""
    model = c.get_model(model_id)
    rec = record(model)
    data = open_model_payload(gw, rec)
    headers = {
        "X-Consortia-Digest": rec["digest"],
        "Content-Disposition": f'attachment; filename="{model_id.replace(":", "_")}.bin"',
    }
    gain = c.model_gain(model)
    if gain is not None:
        headers["X-Consortia-Gain"] = f"{gain.metric} {gain.isolated!r} {gain.collaborative!r} {gain.gain!r}"
        headers["X-Consortia-Gain-Negative"] = "true" if gain.negative else "false"
    return Response(data, media_type="application/octet-stream", headers=headers)


@writes(router, "models", (400, 404, 409, 502))(MODEL + "/grant", response_model=S.ModelOut)
def grant_model(body: S.AccessIn, model_id: ModelId, c: Caller, gw: GatewayDep) -> dict:
    """Add an organisation to the access list, sealing the model's data key to it."""
    return gw.written(grant_with_sealed_key(gw, c, model_id, body.organisation))


@write(MODEL + "/revoke", response_model=S.ModelOut)
def revoke_model(body: S.AccessIn, model_id: ModelId, c: Caller, gw: GatewayDep) -> dict:
    """Remove an organisation from the access list and rotate the model's data key (the stored
    ciphertext is replaced; the remaining members get new sealed keys)."""
    return gw.written(revoke_with_rotation(gw, c, model_id, body.organisation))
