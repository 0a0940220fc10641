"""The gateway's ASGI application (:func:`create_app`): the routers of :mod:`api.gateway.routes`,
typed errors, the HTTP rules (body limit, undeclared query parameters, 405 with ``Allow``), the
access log, the OpenAPI document with Swagger UI at ``/docs`` and ReDoc at ``/redoc`` served
offline, and the web explorer at ``/explorer/``."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from api.explorer_routes import explorer_router
from api.gateway import access_log
from api.gateway.deps import client
from api.gateway.errors import errors, install_error_handlers
from api.gateway.routes import ROUTERS
from api.gateway.state import Gateway
from api.http_rules import BodyLimit, known_query_parameters
from api.responses import DepthSafeRoute
from ledger.rules import MAX_ARGUMENT_BYTES

WEB = Path(__file__).resolve().parent.parent / "web"
MAX_REQUEST_BYTES = MAX_ARGUMENT_BYTES  # a body becomes (at most) one contract argument
#: where the Swagger UI and ReDoc scripts and styles are served from (files of the pinned
#: ``fastapi-offline`` package: no CDN, so /docs and /redoc work on a machine without Internet)
DOCS_ASSETS = "/docs-assets"


def create_app(gw: Gateway, *, start: bool = True) -> FastAPI:
    """The gateway's ASGI application. ``start`` runs the index follower for the app's lifetime."""

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        access_log.ensure_handler()
        if start:
            gw.start()
        try:
            yield
        finally:
            gw.stop()

    app = FastAPIOffline(
        title=f"Consortia gateway of {gw.msp_id}",
        version="1.0",
        description="Audit and provenance API: images, learning processes, provenance, models.",
        lifespan=lifespan,
        dependencies=[Depends(known_query_parameters)],
        responses=errors(401, 403, 413, 422, 503),
        static_url=DOCS_ASSETS,
    )
    app.state.gateway = gw
    app.router.route_class = DepthSafeRoute  # answers at any depth (api.responses)
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(explorer_router(gw, client, errors))  # api.explorer_routes (the web explorer's data)
    # a disclosure (data, states, inboxes) is no contract argument: its upload has its own bound
    replays = (
        gw.max_disclosure_bytes,
        "set with `consortia serve --max-disclosure-mib`; `consortia audit replay FILE` replays a disclosure "
        "of any size on this machine",
    )
    app.add_middleware(BodyLimit, max_bytes=MAX_REQUEST_BYTES, paths={"/api/v1/replays": replays})
    app.add_middleware(access_log.AccessLog, organisation=gw.msp_id)
    if WEB.is_dir():
        app.mount("/explorer", StaticFiles(directory=WEB, html=True), name="explorer")
    return app
