"""Algorithm images: list (from the index), register, read, revoke, approve, revoke an approval, history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api import schemas as S
from api.gateway.deps import Caller, GatewayDep, ImageId, Limit, Offset, page, reads, writes
from api.gateway.state import record
from api.responses import DepthSafeRoute
from ledger.client import HistoryEntry, ImageApproval, ImageRecord

router = APIRouter(route_class=DepthSafeRoute)
read, write = reads(router, "images"), writes(router, "images")


@reads(router, "images", ())("/api/v1/images", response_model=S.Page[ImageRecord])
def list_images(
    _: Caller,
    gw: GatewayDep,
    limit: Limit = 50,
    offset: Offset = 0,
    status: Annotated[str | None, Query(pattern="^(active|revoked)$")] = None,
) -> dict[str, Any]:
    gw.current()
    return page(gw.index.images(limit, offset, status))


@writes(router, "images", (400, 409))("/api/v1/images", response_model=ImageRecord, status_code=201)
def register_image(body: S.ImageIn, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    image = c.register_image(
        body.name,
        body.version,
        body.algorithm,
        body.digest,
        body.reference,
        image_id=body.id,
        description=body.description,
    )
    return gw.written(image)


@read("/api/v1/images/{image_id}", response_model=ImageRecord)
def get_image(image_id: ImageId, c: Caller) -> dict[str, Any]:
    return record(c.get_image(image_id))


@write("/api/v1/images/{image_id}/revoke", response_model=ImageRecord)
def revoke_image(body: S.RevokeImageIn, image_id: ImageId, c: Caller, gw: GatewayDep) -> dict:
    return gw.written(c.revoke_image(image_id, body.reason))


@write("/api/v1/images/{image_id}/approve", response_model=ImageApproval)
def approve_image(body: S.ApproveImageIn, image_id: ImageId, c: Caller, gw: GatewayDep) -> dict:
    """The caller's organisation approves the image's exact digest for use on its data (optionally
    for named datasets, until an expiry); only identities that consent for it (docs/consent.md)."""
    return gw.written(c.approve_image(image_id, body.digest, datasets=body.datasets, expires=body.expires))


@write("/api/v1/images/{image_id}/revoke-approval", response_model=ImageApproval)
def revoke_image_approval(body: S.RevokeApprovalIn, image_id: ImageId, c: Caller, gw: GatewayDep) -> dict:
    """The caller's organisation withdraws its approval: no new task of its runs the image."""
    return gw.written(c.revoke_image_approval(image_id, body.reason))


@reads(router, "provenance")("/api/v1/images/{image_id}/history", response_model=list[HistoryEntry])
def image_history(image_id: ImageId, c: Caller) -> list[dict]:
    return [record(h) for h in c.image_history(image_id)]
