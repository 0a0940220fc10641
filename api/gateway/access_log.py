"""The gateway's access log (docs/api.md "Authentication"): one JSON line per request on the
logger ``consortia.gateway.access`` -- method, path, status, duration in ms, the gateway's
organisation, the identity that acted (``user@MSP``, ``-`` before authentication) and a request id
(the caller's ``X-Request-ID`` when it is a plain token, else a fresh one; echoed in the response).
Never the token, a query string or a payload."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from typing import Any

from api.gateway.deps import IDENTITY_SCOPE_KEY

ACCESS_LOGGER = "consortia.gateway.access"
log = logging.getLogger(ACCESS_LOGGER)
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class AccessLog:
    """ASGI middleware writing the access line of every HTTP request once its answer has started
    (or failed: an exception the app did not handle is logged as 500 and re-raised)."""

    def __init__(self, app: Any, organisation: str):
        self.app = app
        self.organisation = organisation

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        status = 500

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())],
                }
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                json.dumps(
                    {
                        "event": "request",
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                        "organisation": self.organisation,
                        "identity": scope.get(IDENTITY_SCOPE_KEY, "-"),
                        "request_id": request_id,
                    },
                    separators=(",", ":"),
                )
            )


def ensure_handler() -> None:
    """``consortia serve`` runs the app under uvicorn, which configures only its own loggers: when
    nothing handles the access logger, give it a stderr handler at INFO so the lines appear."""
    if not log.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
