"""The service itself: ``/`` (to the explorer), ``health`` (no authentication) and ``whoami``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import RedirectResponse

from api import schemas as S
from api.gateway.deps import GatewayDep, owner
from api.responses import DepthSafeRoute
from api.tokens import TokenOwner

router = APIRouter(route_class=DepthSafeRoute)


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    return RedirectResponse("/explorer/")


@router.get("/api/v1/health", response_model=S.Health, tags=["service"])
def health(gw: GatewayDep) -> dict[str, Any]:
    err = gw.follower.last_error if gw.follower else ""
    return {
        "status": "degraded" if err else "ok",
        "organisation": gw.msp_id,
        "last_indexed_block": gw.index.last_block,
        "block_height": gw.ledger.block_height(gw.client().identity),
        "index_error": err,
    }


@router.get("/api/v1/whoami", response_model=S.WhoAmI, tags=["service"])
def whoami(who: Annotated[TokenOwner, Depends(owner)]) -> dict[str, Any]:
    return {"organisation": who.msp_id, "user": who.user, "token_id": who.token_id}
