"""Algorithm images: list (from the index), register, read, revoke, approve, history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from api import schemas as S
from api.gateway.deps import ImageId, Limit, Offset, client, gateway, page
from api.gateway.errors import errors
from api.gateway.state import Gateway, record
from api.responses import DepthSafeRoute
from ledger.client import ConsortiaClient

router = APIRouter(route_class=DepthSafeRoute)


@router.get("/api/v1/images", response_model=S.Page[S.ImageOut], tags=["images"])
def list_images(
    limit: int = Limit,
    offset: int = Offset,
    status: str | None = Query(None, pattern="^(active|revoked)$"),
    _: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict[str, Any]:
    gw.current()
    p = gw.index.images(limit, offset, status)
    return page(p.items, p.total, limit, offset)


@router.post(
    "/api/v1/images", response_model=S.ImageOut, status_code=201, tags=["images"], responses=errors(400, 409)
)
def register_image(
    body: S.ImageIn, c: ConsortiaClient = Depends(client), gw: Gateway = Depends(gateway)
) -> dict[str, Any]:
    rec = record(
        c.register_image(
            body.name,
            body.version,
            body.algorithm,
            body.digest,
            body.reference,
            image_id=body.id,
            description=body.description,
        )
    )
    gw.refresh()
    return rec


@router.get(
    "/api/v1/images/{image_id}", response_model=S.ImageOut, tags=["images"], responses=errors(400, 404)
)
def get_image(image_id: str = ImageId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
    return record(c.get_image(image_id))


@router.post(
    "/api/v1/images/{image_id}/revoke",
    response_model=S.ImageOut,
    tags=["images"],
    responses=errors(400, 404, 409),
)
def revoke_image(
    body: S.RevokeImageIn,
    image_id: str = ImageId,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict:
    rec = record(c.revoke_image(image_id, body.reason))
    gw.refresh()
    return rec


@router.post(
    "/api/v1/images/{image_id}/approve",
    response_model=S.ApprovalOut,
    tags=["images"],
    responses=errors(400, 404, 409),
)
def approve_image(
    body: S.ApproveImageIn,
    image_id: str = ImageId,
    c: ConsortiaClient = Depends(client),
    gw: Gateway = Depends(gateway),
) -> dict:
    rec = c.approve_image(image_id, body.digest)
    gw.refresh()
    return rec


@router.get(
    "/api/v1/images/{image_id}/history",
    response_model=list[S.HistoryEntryOut],
    tags=["provenance"],
    responses=errors(400, 404),
)
def image_history(image_id: str = ImageId, c: ConsortiaClient = Depends(client)) -> list[dict]:
    return [h.__dict__ for h in c.image_history(image_id)]
