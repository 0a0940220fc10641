"""The service itself: ``/`` (to the explorer), ``health`` (no authentication), ``whoami`` and the
channel's ``membership/history`` (its configuration blocks, docs/governance.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import RedirectResponse

from api import schemas as S
from api.gateway.deps import GatewayDep, owner
from api.gateway.errors import errors
from api.responses import DepthSafeRoute
from api.tokens import TokenOwner
from network.governance import ConfigChange

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


@router.get(
    "/api/v1/membership/history",
    response_model=list[ConfigChange],
    responses=errors(404),
    tags=["service"],
)
def membership_history(gw: GatewayDep, who: Annotated[TokenOwner, Depends(owner)]) -> list[ConfigChange]:
    """The channel's configuration blocks, read as the caller through ``qscc`` (a Fabric ledger only):
    the members, consenters and revocations each one changed."""
    from ledger.fabric.gateway import FabricLedger
    from network.governance import membership_history as history

    ledger, identity = gw.ledger, gw.client().identity
    if not isinstance(ledger, FabricLedger):
        raise HTTPException(
            404, "this gateway's ledger is not a Fabric channel: it has no configuration blocks"
        )

    def block(n: int | None) -> bytes:
        number = ledger.block_height(identity) - 1 if n is None else n
        return ledger.evaluate(identity, "GetBlockByNumber", ledger.channel, str(number), chaincode="qscc")

    return history(block)
