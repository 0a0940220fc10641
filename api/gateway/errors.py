"""Typed error bodies of the gateway (docs/api.md "Endpoints"): every failure answers
``{code, message, details}`` with the HTTP status of its kind, and the OpenAPI document declares,
per operation, each error status it can answer (:func:`errors`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api import schemas as S
from api.http_rules import allowed_methods, error_response
from api.tokens import AuthenticationError
from exchange.errors import ArtifactCorrupted, ArtifactError, ArtifactNotFound, LocationUnknown
from ledger.errors import AccessDenied, ContractError, LedgerError, MVCCConflict

ERROR_DESCRIPTIONS = {
    400: "Invalid argument (INVALID_ARGUMENT: a contract rule on the value was broken)",
    401: "Unauthenticated: no or unknown API token / client certificate",
    403: "Forbidden: not a member, not the owner, not on the access list, or another organisation's token",
    404: "Not found: no such record (or artifact) visible to this organisation",
    409: "Conflict: already exists, invalid state, image digest mismatch, privacy budget exceeded, or MVCC "
    "conflict (retry)",
    413: "Request body larger than the gateway accepts",
    422: "Invalid request: the body or a parameter does not match the schema",
    502: "An artifact store returned bytes that do not match the on-chain digest, or that do not decrypt; or "
    "the owner's artifact service refused the artifact or could not be reached",
    503: "The ledger is unavailable",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route can answer, each with the error body."""
    return {c: {"model": S.ErrorBody, "description": ERROR_DESCRIPTIONS[c]} for c in codes}


def install_error_handlers(app: FastAPI) -> None:
    """Map every error the routes can raise to its status and typed body."""

    @app.exception_handler(ContractError)
    async def contract_error(_: Request, exc: ContractError) -> JSONResponse:
        return error_response(
            exc.status,
            exc.code,
            exc.message,
            {k: str(v) if not isinstance(v, (int, float, str, bool)) else v for k, v in exc.details.items()},
        )

    @app.exception_handler(AuthenticationError)
    async def auth_error(_: Request, exc: AuthenticationError) -> JSONResponse:
        resp = error_response(exc.status, exc.code, str(exc))
        if exc.status == 401:
            resp.headers["WWW-Authenticate"] = "Bearer"
        return resp

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"location": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"location": "", "message": "invalid request"}
        return error_response(
            422, "INVALID_REQUEST", f"{first['location']}: {first['message']}", {"errors": errors}
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 401: "UNAUTHENTICATED", 403: "FORBIDDEN"}
        resp = error_response(exc.status_code, codes.get(exc.status_code, "HTTP_ERROR"), str(exc.detail))
        resp.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # RFC 9110 §15.5.6: a 405 lists every method of the resource (Starlette names only those
            # of the first route matching the path, and a path may have a GET and a POST route)
            resp.headers["Allow"] = ", ".join(allowed_methods(request))
        return resp

    @app.exception_handler(AccessDenied)
    async def access_denied(_: Request, exc: AccessDenied) -> JSONResponse:
        return error_response(403, "ACCESS_DENIED", str(exc))

    @app.exception_handler(MVCCConflict)
    async def conflict(_: Request, exc: MVCCConflict) -> JSONResponse:
        return error_response(409, "MVCC_CONFLICT", f"{exc}; retry the request")

    @app.exception_handler(LedgerError)
    async def ledger_error(_: Request, exc: LedgerError) -> JSONResponse:
        return error_response(503, "LEDGER_UNAVAILABLE", str(exc))

    @app.exception_handler(ArtifactNotFound)
    async def missing(_: Request, exc: ArtifactNotFound) -> JSONResponse:
        return error_response(404, "ARTIFACT_MISSING", str(exc))

    @app.exception_handler(LocationUnknown)
    async def unlocated(_: Request, exc: LocationUnknown) -> JSONResponse:
        return error_response(404, exc.code, str(exc))

    @app.exception_handler(ArtifactCorrupted)
    async def mismatch(_: Request, exc: ArtifactCorrupted) -> JSONResponse:
        return error_response(502, "DIGEST_MISMATCH", str(exc))

    @app.exception_handler(ArtifactError)
    async def artifact_unavailable(_: Request, exc: ArtifactError) -> JSONResponse:
        return error_response(502, exc.code, str(exc))  # the owner's service refused or is out of reach
