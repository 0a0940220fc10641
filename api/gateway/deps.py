"""What every router of the gateway depends on: the gateway of the app (:func:`gateway`), the
caller's identity (:func:`owner`: an API token, or a TLS client certificate with ``--mtls``), a
ledger client acting as that user (:func:`client`), and the shared path and paging parameters.

A new router (``api.gateway.routes``) is an ``APIRouter(route_class=DepthSafeRoute)`` whose
operations take ``gw: GatewayDep`` (the gateway) and ``c: Caller`` (the authenticated user's ledger
client); :func:`reads` and :func:`writes` declare an operation with the error statuses it can answer."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api import schemas as S
from api.gateway.errors import errors
from api.gateway.state import Gateway, record
from api.index import Page
from api.tokens import AuthenticationError, TokenOwner
from ledger.client import ConsortiaClient, ExecutionRecord, MemberGain, PrivacyBudget, privacy_status

#: the request scope key under which the access log (api.gateway.access_log) finds who acted
IDENTITY_SCOPE_KEY = "consortia.identity"

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiToken",
    description="An API token of this gateway (`consortia token issue`), or a TLS client "
    "certificate of one of the organisation's users when the gateway runs with --mtls.",
)


async def gateway(request: Request) -> Gateway:
    """The gateway the app serves (``create_app`` puts it in ``app.state.gateway``)."""
    return request.app.state.gateway


def owner(
    request: Request,
    _: HTTPAuthorizationCredentials | None = Depends(bearer),
    gw: Gateway = Depends(gateway),
) -> TokenOwner:
    """The user the request acts as: its bearer token's, else (``--mtls``) its client certificate's."""
    header = request.headers.get("authorization", "")
    who: TokenOwner | None = None
    if not header and gw.mtls:
        from api.mtls import client_certificate_owner, peer_certificate

        der = peer_certificate(request.scope.get("client"))
        if der is not None:
            who = client_certificate_owner(der, gw.consortium, gw.msp_id)
    if who is None:
        scheme, _sep, token = header.partition(" ")
        if header and scheme.lower() != "bearer":
            raise AuthenticationError("use 'Authorization: Bearer <token>'")
        who = gw.tokens.authenticate(token.strip() or None)
    request.scope[IDENTITY_SCOPE_KEY] = f"{who.user}@{who.msp_id}"
    return who


def client(who: TokenOwner = Depends(owner), gw: Gateway = Depends(gateway)) -> ConsortiaClient:
    """A ledger client acting as the authenticated user (the contracts check its certificate)."""
    return gw.client(who.user)


def member_process(c: ConsortiaClient, process_id: str) -> dict[str, Any]:
    """The process, read through the contract (403 for a non-member, 404 if unknown)."""
    return record(c.get_process(process_id))


def with_privacy_and_gains(process: dict[str, Any], gw: Gateway) -> dict[str, Any]:
    """A process answer with its ``privacy`` (the ledger's rigorous ε spent of the budget, δ) and, with a
    validation slice, its members' ``gains`` over training alone (those that completed the last round),
    read from each member's latest completed record in the index (:func:`chaincode.privacy.privacy_status`,
    :meth:`chaincode.records.MemberGain.of`)."""
    budget = process.get("privacy_budget")
    records = [ExecutionRecord.model_validate(r) for r in gw.index.latest_completed_executions(process["id"])]
    status = privacy_status(None if budget is None else PrivacyBudget.model_validate(budget), records)
    answer = {**process, "privacy": status.to_dict()}
    if process.get("validation_fraction"):
        last = (MemberGain.of(r) for r in records if r.round == process["rounds"])
        answer["gains"] = [g.to_dict() for g in last if g is not None]
    return answer


def page(p: Page) -> dict[str, Any]:
    """A page of an index listing as the answer ``{items, total, limit, offset}``."""
    return {"items": p.items, "total": p.total, "limit": p.limit, "offset": p.offset}


GatewayDep = Annotated[Gateway, Depends(gateway)]
Caller = Annotated[ConsortiaClient, Depends(client)]
ImageId = Annotated[str, PathParam(pattern=S.ID, max_length=128)]
ProcessId = Annotated[str, PathParam(pattern=S.ID, max_length=128)]
ModelId = Annotated[str, PathParam(pattern=S.ID, max_length=128)]
Org = Annotated[str, PathParam(pattern=S.MSP, max_length=64)]
Round = Annotated[int, PathParam(ge=1, le=100_000)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10**9)]


def reads(router: APIRouter, tag: str, codes: tuple[int, ...] = (400, 404)) -> partial:
    """``@reads(router, tag)(path, response_model=...)``: a GET answering ``codes`` besides the
    statuses every operation can answer (a record: 400/404; a list from the index: none)."""
    return partial(router.get, tags=[tag], responses=errors(*codes))


def writes(router: APIRouter, tag: str, codes: tuple[int, ...] = (400, 404, 409)) -> partial:
    """``@writes(router, tag)(path, response_model=...)``: a POST that changes the ledger."""
    return partial(router.post, tags=[tag], responses=errors(*codes))
