"""Final models: list (from the index), read, history, lineage, verification against the ledger,
download (decrypted and checked against the on-chain digest), grant and revoke (with key rotation)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from api import schemas as S
from api.gateway.deps import Limit, ModelId, Offset, ProcessId, client, gateway, member_process, page
from api.gateway.errors import errors
from api.gateway.sealed_models import grant_with_sealed_key, open_model_payload, revoke_with_rotation
from api.gateway.state import Gateway, record
from api.responses import DepthSafeRoute
from api.verification import verify_model_on_ledger
from chaincode.errors import NotFound
from ledger.client import ConsortiaClient

router = APIRouter(route_class=DepthSafeRoute)


@router.get(
    "/api/v1/processes/{process_id}/models",
    response_model=list[S.ModelOut],
    tags=["models"],
    responses=errors(400, 404),
)
def process_models(
    process_id: str = ProcessId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> list[dict[str, Any]]:
    gw.current()
    member_process(c, process_id)
    return gw.index.models(1000, 0, process_id).items


@router.get("/api/v1/models", response_model=S.Page[S.ModelOut], tags=["models"])
def list_models(
    limit: int = Limit,
    offset: int = Offset,
    process_id: str | None = Query(None, pattern=S.ID),
    _: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    gw.current()
    p = gw.index.models(limit, offset, process_id)
    return page(p.items, p.total, limit, offset)


@router.get(
    "/api/v1/models/{model_id}", response_model=S.ModelOut, tags=["models"], responses=errors(400, 404)
)
def get_model(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
    return record(c.get_model(model_id))


@router.get(
    "/api/v1/models/{model_id}/history",
    response_model=list[S.HistoryEntryOut],
    tags=["provenance"],
    responses=errors(400, 404),
)
def model_history(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> list[dict]:
    return [h.__dict__ for h in c.model_history(model_id)]


@router.get(
    "/api/v1/models/{model_id}/lineage",
    response_model=S.LineageOut,
    tags=["provenance"],
    responses=errors(400, 404),
)
def lineage(
    model_id: str = ModelId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    c.get_model(model_id)  # access list check by the contract
    found = gw.index.lineage(model_id)
    if found is None:
        gw.refresh()
        found = gw.index.lineage(model_id)
    if found is None:
        raise NotFound(f"model {model_id} is not in the index yet")
    return found


@router.post(
    "/api/v1/models/{model_id}/verify",
    response_model=S.VerificationOut,
    tags=["provenance"],
    responses=errors(400, 404),
)
def verify_model(
    model_id: str = ModelId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    """Re-check every signature and digest of the model's lineage against the ledger."""
    gw.refresh()
    return verify_model_on_ledger(c, gw.index, model_id).to_dict()


@router.get(
    "/api/v1/models/{model_id}/download",
    tags=["models"],
    responses={
        200: {
            "content": {"application/octet-stream": {}},
            "description": "The model payload, verified against its on-chain digest",
        },
        **errors(400, 404, 502),
    },
)
def download_model(
    model_id: str = ModelId, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> Response:
    rec = record(c.get_model(model_id))
    data = open_model_payload(gw, rec)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={
            "X-Consortia-Digest": rec["digest"],
            "Content-Disposition": f'attachment; filename="{model_id.replace(":", "_")}.bin"',
        },
    )


@router.post(
    "/api/v1/models/{model_id}/grant",
    response_model=S.ModelOut,
    tags=["models"],
    responses=errors(400, 404, 409, 502),
)
def grant_model(
    body: S.AccessIn,
    model_id: str = ModelId,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict:
    """Add an organisation to the access list, sealing the model's data key to it."""
    rec = record(grant_with_sealed_key(gw, c, model_id, body.organisation))
    gw.refresh()
    return rec


@router.post(
    "/api/v1/models/{model_id}/revoke",
    response_model=S.ModelOut,
    tags=["models"],
    responses=errors(400, 404, 409),
)
def revoke_model(
    body: S.AccessIn,
    model_id: str = ModelId,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict:
    """Remove an organisation from the access list and rotate the model's data key (the stored
    ciphertext is replaced; the remaining members get new sealed keys)."""
    rec = record(revoke_with_rotation(gw, c, model_id, body.organisation))
    gw.refresh()
    return rec
