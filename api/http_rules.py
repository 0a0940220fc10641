"""HTTP-level rules of the gateway (issue 14, items 8 and 11): a request body over the size limit
is refused (413) before any route reads it, a query parameter the operation does not declare is
refused (422), and a 405 names every method of the resource in ``Allow``."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def error_response(status: int, code: str, message: str, details: dict | None = None) -> JSONResponse:
    """The gateway's error body ``{code, message, details}``."""
    return JSONResponse(
        status_code=status, content={"code": code, "message": message, "details": details or {}}
    )


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app serves at the request's path (HEAD where served). Asked
    of each route with the request as if made with each method, so routes of included routers
    count too (FastAPI keeps those inside the router they were declared in); mounted apps (the
    explorer's static files) are not asked."""
    from starlette.routing import Match, Mount

    routes = [r for r in request.app.router.routes if not isinstance(r, Mount)]
    return [
        m for m in METHODS if any(r.matches({**request.scope, "method": m})[0] == Match.FULL for r in routes)
    ]


def known_query_parameters(request: Request) -> None:
    """A query parameter the operation does not declare is refused (422), not silently ignored: a
    misspelt filter (``?stauts=revoked``) must not answer as if no filter had been asked for."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = {p.alias for p in _query_params(dependant)}
    unknown = sorted(set(request.query_params) - declared)
    if unknown:
        raise RequestValidationError(
            [
                {"loc": ("query", name), "msg": "unknown query parameter", "type": "extra_forbidden"}
                for name in unknown
            ]
        )


def _query_params(dependant) -> list:
    """The query parameters of a route and of all its dependencies, iteratively."""
    out, stack = [], [dependant]
    while stack:
        d = stack.pop()
        out.extend(d.query_params)
        stack.extend(d.dependencies)
    return out


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 before any route reads it
    (by ``Content-Length``, or by counting the chunks of a body sent without one). ``paths`` gives a
    path its own limit, and a note the 413 adds (how to raise it, what else to do)."""

    def __init__(self, app, max_bytes: int, paths: Mapping[str, tuple[int, str]] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.paths = dict(paths or {})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, note = self.paths.get(scope.get("path", ""), (self.max_bytes, ""))
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await self._refuse(scope, receive, send, limit, note)
        if length is not None or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        # no Content-Length (chunked): read the body here, within the limit, then replay it
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, receive, send)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                return await self._refuse(scope, receive, send, limit, note)
        body, sent = b"".join(chunks), False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _refuse(self, scope, receive, send, limit: int, note: str):
        where = f" to {scope['path']}" if note else ""
        resp = error_response(
            413,
            "REQUEST_TOO_LARGE",
            f"request bodies{where} are limited to {limit} bytes" + (f" ({note})" if note else ""),
            {"limit": limit},
        )
        await resp(scope, receive, send)
