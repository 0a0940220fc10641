"""The FastAPI gateway of one organisation (``consortia serve``; docs/api.md).

Each organisation runs its own gateway with its own identity. Callers authenticate with an API
token (:mod:`api.tokens`) bound to a user of the gateway's organisation; the ledger calls are made
with that user's identity, so the acting organisation always comes from the certificate, never
from the request. Lists and audit queries are served from the off-chain index (:mod:`api.index`,
kept in step by :mod:`api.follower`); single records, histories and every write go to the ledger,
where the contracts enforce membership and access lists. Errors are typed JSON bodies
``{code, message, details}`` with the HTTP status of the contract error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from api import schemas as S
from api.artifacts import (
    ArtifactMissing,
    ArtifactStore,
    DigestMismatch,
    fetch_verified,
    sha256_digest,
    store_at,
)
from api.attestation import attest_execution
from api.explorer_routes import explorer_router
from api.follower import IndexFollower, sync
from api.http_rules import BodyLimit, allowed_methods, error_response, known_query_parameters
from api.index import AuditIndex
from api.responses import DepthSafeRoute
from api.sealing import open_data_key
from api.tokens import AuthenticationError, TokenOwner, TokenStore
from api.verification import verify_model_on_ledger
from executor.model_seal import model_aad, model_key_info
from ledger.checkpoint import checkpoint_of
from ledger.client import ConsortiaClient
from ledger.envelope import DecryptionError, decrypt_payload, encrypt_payload, seal
from ledger.errors import (
    AccessDenied,
    ContractError,
    Forbidden,
    InvalidArgument,
    LedgerError,
    MVCCConflict,
    NotFound,
)
from ledger.identity import Consortium, Identity
from ledger.interface import Ledger
from ledger.records import to_dict
from ledger.rules import MAX_ARGUMENT_BYTES

log = logging.getLogger("consortia.gateway")
WEB = Path(__file__).with_name("web")


ID = S.ID
DIGEST = S.DIGEST
MAX_REQUEST_BYTES = MAX_ARGUMENT_BYTES  # a body becomes (at most) one contract argument


@dataclass
class Gateway:
    """Everything one organisation's gateway holds: its ledger connection, crypto, index, tokens."""

    ledger: Ledger
    consortium: Consortium
    msp_id: str
    index: AuditIndex
    tokens: TokenStore
    artifacts: ArtifactStore
    follow_interval: float = 0.25
    _clients: dict[str, ConsortiaClient] = field(default_factory=dict)
    _sync_lock: threading.Lock = field(default_factory=threading.Lock)
    follower: IndexFollower | None = None
    mtls: bool = False  # accept TLS client certificates (api.mtls) when no token is sent

    def client(self, user: str = "User1") -> ConsortiaClient:
        c = self._clients.get(user)
        if c is None:
            try:
                identity: Identity = self.consortium.identity(self.msp_id, user)
            except (FileNotFoundError, StopIteration, KeyError):
                raise AuthenticationError(f"user {user} has no identity in {self.msp_id}") from None
            c = self._clients[user] = ConsortiaClient(self.ledger, identity)
        return c

    def refresh(self) -> None:
        """Bring the index up to the ledger's height now (after a write, before answering)."""
        with self._sync_lock:
            sync(self.index, self.client())

    def current(self) -> None:
        """Index reads see every committed block: catch up first if the follower is behind."""
        if self.index.last_block < self.ledger.block_height(self.client().identity) - 1:
            self.refresh()

    def start(self) -> None:
        self.refresh()
        if self.follow_interval > 0 and self.follower is None:
            self.follower = IndexFollower(self.index, self.client(), self.follow_interval, self._sync_lock)
            self.follower.start()

    def stop(self) -> None:
        if self.follower is not None:
            self.follower.stop()
            self.follower = None


def record(obj: Any) -> dict[str, Any]:
    """A typed ledger record (``ledger.records``) as the plain dict of its canonical JSON fields
    (depth-safe: :func:`ledger.records.to_dict` copies no nested JSON value)."""
    return to_dict(obj)


ERROR_DESCRIPTIONS = {
    400: "Invalid argument (INVALID_ARGUMENT: a contract rule on the value was broken)",
    401: "Unauthenticated: no or unknown API token / client certificate",
    403: "Forbidden: not a member, not the owner, not on the access list, or another organisation's token",
    404: "Not found: no such record (or artifact) visible to this organisation",
    409: "Conflict: already exists, invalid state, image digest mismatch, privacy budget exceeded, or MVCC "
    "conflict (retry)",
    413: "Request body larger than the gateway accepts",
    422: "Invalid request: the body or a parameter does not match the schema",
    502: "An artifact store returned bytes that do not match the on-chain digest, or that do not decrypt",
    503: "The ledger is unavailable",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route can answer, each with the error body."""
    return {c: {"model": S.ErrorBody, "description": ERROR_DESCRIPTIONS[c]} for c in codes}


def _install_error_handlers(app: FastAPI) -> None:
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

    @app.exception_handler(ArtifactMissing)
    async def missing(_: Request, exc: ArtifactMissing) -> JSONResponse:
        return error_response(404, "ARTIFACT_MISSING", str(exc))

    @app.exception_handler(DigestMismatch)
    async def mismatch(_: Request, exc: DigestMismatch) -> JSONResponse:
        return error_response(502, "DIGEST_MISMATCH", str(exc))


def create_app(gw: Gateway, *, start: bool = True) -> FastAPI:
    """The gateway's ASGI application. ``start`` runs the index follower for the app's lifetime."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        if start:
            gw.start()
        try:
            yield
        finally:
            gw.stop()

    app = FastAPI(
        title=f"Consortia gateway of {gw.msp_id}",
        version="1.0",
        description="Audit and provenance API: images, learning processes, provenance, models.",
        lifespan=lifespan,
        dependencies=[Depends(known_query_parameters)],
        responses=errors(401, 403, 413, 422, 503),
    )
    app.router.route_class = DepthSafeRoute  # answers at any depth (api.responses)
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_REQUEST_BYTES)

    @app.middleware("http")
    async def access_log(request: Request, call_next):
        """One structured log line per request (never the token or a payload)."""
        started = time.perf_counter()
        response = await call_next(request)
        log.info(
            "request",
            extra={
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "organisation": gw.msp_id,
                "ms": round((time.perf_counter() - started) * 1000, 2),
            },
        )
        return response

    bearer = HTTPBearer(
        auto_error=False,
        scheme_name="ApiToken",
        description="An API token of this gateway (`consortia token issue`), or a TLS client "
        "certificate of one of the organisation's users when the gateway runs with --mtls.",
    )

    def owner(request: Request, _: HTTPAuthorizationCredentials | None = Depends(bearer)) -> TokenOwner:
        header = request.headers.get("authorization", "")
        if not header and gw.mtls:
            from api.mtls import client_certificate_owner, peer_certificate

            der = peer_certificate(request.scope.get("client"))
            if der is not None:
                return client_certificate_owner(der, gw.consortium, gw.msp_id)
        scheme, _, token = header.partition(" ")
        if header and scheme.lower() != "bearer":
            raise AuthenticationError("use 'Authorization: Bearer <token>'")
        return gw.tokens.authenticate(token.strip() or None)

    def client(who: TokenOwner = Depends(owner)) -> ConsortiaClient:
        return gw.client(who.user)

    def page(items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
        return {"items": items, "total": total, "limit": limit, "offset": offset}

    Limit = Query(50, ge=1, le=1000)
    Offset = Query(0, ge=0, le=10**9)
    ImageId = PathParam(pattern=ID, max_length=128)
    ProcessId = PathParam(pattern=ID, max_length=128)
    ModelId = PathParam(pattern=ID, max_length=128)
    Org = PathParam(pattern=S.MSP, max_length=64)
    Round = PathParam(ge=1, le=100_000)

    # ------------------------------------------------------------------ service
    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/explorer/")

    @app.get("/api/v1/health", response_model=S.Health, tags=["service"])
    def health() -> dict[str, Any]:
        err = gw.follower.last_error if gw.follower else ""
        return {
            "status": "degraded" if err else "ok",
            "organisation": gw.msp_id,
            "last_indexed_block": gw.index.last_block,
            "block_height": gw.ledger.block_height(gw.client().identity),
            "index_error": err,
        }

    @app.get("/api/v1/whoami", response_model=S.WhoAmI, tags=["service"])
    def whoami(who: TokenOwner = Depends(owner)) -> dict[str, Any]:
        return {"organisation": who.msp_id, "user": who.user, "token_id": who.token_id}

    # ------------------------------------------------------------------ images
    @app.get("/api/v1/images", response_model=S.Page[S.ImageOut], tags=["images"])
    def list_images(
        limit: int = Limit,
        offset: int = Offset,
        status: str | None = Query(None, pattern="^(active|revoked)$"),
        _: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        gw.current()
        p = gw.index.images(limit, offset, status)
        return page(p.items, p.total, limit, offset)

    @app.post(
        "/api/v1/images",
        response_model=S.ImageOut,
        status_code=201,
        tags=["images"],
        responses=errors(400, 409),
    )
    def register_image(body: S.ImageIn, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
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

    @app.get(
        "/api/v1/images/{image_id}", response_model=S.ImageOut, tags=["images"], responses=errors(400, 404)
    )
    def get_image(image_id: str = ImageId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        return record(c.get_image(image_id))

    @app.post(
        "/api/v1/images/{image_id}/revoke",
        response_model=S.ImageOut,
        tags=["images"],
        responses=errors(400, 404, 409),
    )
    def revoke_image(
        body: S.RevokeImageIn, image_id: str = ImageId, c: ConsortiaClient = Depends(client)
    ) -> dict:
        rec = record(c.revoke_image(image_id, body.reason))
        gw.refresh()
        return rec

    @app.post(
        "/api/v1/images/{image_id}/approve",
        response_model=S.ApprovalOut,
        tags=["images"],
        responses=errors(400, 404, 409),
    )
    def approve_image(
        body: S.ApproveImageIn, image_id: str = ImageId, c: ConsortiaClient = Depends(client)
    ) -> dict:
        rec = c.approve_image(image_id, body.digest)
        gw.refresh()
        return rec

    @app.get(
        "/api/v1/images/{image_id}/history",
        response_model=list[S.HistoryEntryOut],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def image_history(image_id: str = ImageId, c: ConsortiaClient = Depends(client)) -> list[dict]:
        return [h.__dict__ for h in c.image_history(image_id)]

    # ------------------------------------------------------------------ processes
    @app.get("/api/v1/processes", response_model=S.Page[S.ProcessOut], tags=["processes"])
    def list_processes(
        limit: int = Limit,
        offset: int = Offset,
        status: str | None = Query(None, pattern="^(created|running|completed|failed|aborted)$"),
        _: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        gw.current()
        p = gw.index.processes(limit, offset, status)
        return page(p.items, p.total, limit, offset)

    @app.post(
        "/api/v1/processes",
        response_model=S.ProcessOut,
        status_code=201,
        tags=["processes"],
        responses=errors(400, 404, 409),
    )
    def create_process(body: S.ProcessIn, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        budget = body.privacy_budget.model_dump(exclude_none=True) if body.privacy_budget else None
        from executor.declarations import InvalidProcessSpec, validate_process

        try:  # the same check as the CLI and executor.process.launch: what the image declares
            validate_process(
                c.get_image(body.image_id).algorithm,
                body.topology.model_dump(),
                body.hyperparameters,
                body.dataset,
            )
        except InvalidProcessSpec as exc:
            raise InvalidArgument(
                f"process {body.id} refused: {exc}", problems="; ".join(exc.problems)
            ) from None
        rec = record(
            c.create_process(
                body.id,
                body.image_id,
                body.consortium,
                body.topology.model_dump(),
                body.rounds,
                body.hyperparameters,
                budget,
                body.dataset,
                image_digest=body.image_digest,
                description=body.description,
            )
        )
        if body.start:
            rec = record(c.start_process(body.id))
        gw.refresh()
        return rec

    @app.get(
        "/api/v1/processes/{process_id}",
        response_model=S.ProcessOut,
        tags=["processes"],
        responses=errors(400, 404),
    )
    def get_process(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        return record(c.get_process(process_id))

    @app.post(
        "/api/v1/processes/{process_id}/start",
        response_model=S.ProcessOut,
        tags=["processes"],
        responses=errors(400, 404, 409),
    )
    def start_process(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        rec = record(c.start_process(process_id))
        gw.refresh()
        return rec

    @app.post(
        "/api/v1/processes/{process_id}/abort",
        response_model=S.ProcessOut,
        tags=["processes"],
        responses=errors(400, 404, 409),
    )
    def abort_process(
        body: S.AbortIn, process_id: str = ProcessId, c: ConsortiaClient = Depends(client)
    ) -> dict:
        rec = record(c.abort_process(process_id, body.reason))
        gw.refresh()
        return rec

    @app.get(
        "/api/v1/processes/{process_id}/history",
        response_model=list[S.HistoryEntryOut],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def process_history(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> list[dict]:
        return [h.__dict__ for h in c.process_history(process_id)]

    def member_process(c: ConsortiaClient, process_id: str) -> dict[str, Any]:
        """The process, read through the contract (403 for a non-member, 404 if unknown)."""
        return record(c.get_process(process_id))

    @app.get(
        "/api/v1/processes/{process_id}/executions",
        response_model=S.Page[S.ExecutionOut],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def list_executions(
        process_id: str = ProcessId,
        round: int | None = Query(None, ge=1, le=100_000),
        organisation: str | None = Query(None, pattern=S.MSP),
        limit: int = Query(1000, ge=1, le=10_000),
        offset: int = Offset,
        c: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        gw.current()
        member_process(c, process_id)
        p = gw.index.executions(process_id, round, organisation, limit, offset)
        return page(p.items, p.total, limit, offset)

    @app.get(
        "/api/v1/processes/{process_id}/executions/{round}/{organisation}",
        response_model=S.ExecutionOut,
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def get_execution(
        process_id: str = ProcessId,
        round: int = Round,
        organisation: str = Org,
        c: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        return record(c.get_execution(process_id, round, organisation))

    @app.get(
        "/api/v1/processes/{process_id}/executions/{round}/{organisation}/history",
        response_model=list[S.HistoryEntryOut],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def execution_history(
        process_id: str = ProcessId,
        round: int = Round,
        organisation: str = Org,
        c: ConsortiaClient = Depends(client),
    ) -> list[dict]:
        return [h.__dict__ for h in c.execution_history(process_id, round, organisation)]

    @app.get(
        "/api/v1/processes/{process_id}/executions/{round}/{organisation}/attestation",
        tags=["provenance"],
        responses={200: {"description": "DSSE envelope of an in-toto Statement v1"}, **errors(400, 404)},
    )
    def execution_attestation(
        process_id: str = ProcessId,
        round: int = Round,
        organisation: str = Org,
        c: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        rec = record(c.get_execution(process_id, round, organisation))
        if organisation != c.organisation:
            raise Forbidden(
                f"only {organisation}'s gateway can attest its own execution records; "
                f"this is the gateway of {c.organisation}"
            )
        if rec["status"] != "completed":
            raise InvalidArgument(
                f"execution of {organisation} for round {round} of {process_id} is "
                f"{rec['status']}; only completed executions are attested"
            )
        return attest_execution(
            rec, c.identity, checkpoint_of(c.ledger, c.identity)
        )  # anchors the chain head

    @app.get(
        "/api/v1/processes/{process_id}/timeline",
        response_model=S.TimelineOut,
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def timeline(process_id: str = ProcessId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        gw.current()
        process = member_process(c, process_id)
        return {
            "process": process,
            "executions": gw.index.executions(process_id, limit=10_000).items,
            "events": gw.index.events(process_id=process_id, limit=10_000),
            "last_indexed_block": gw.index.last_block,
        }

    @app.get(
        "/api/v1/processes/{process_id}/watch",
        response_model=S.WatchOut,
        tags=["processes"],
        responses=errors(400, 404),
    )
    async def watch(
        process_id: str = ProcessId,
        after_block: int = Query(-1, ge=-1, le=2**62),
        wait: float = Query(10.0, ge=0, le=30),
        c: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        """Long poll: the process's events after ``after_block``, waiting up to ``wait`` s for one."""
        process = await asyncio.to_thread(member_process, c, process_id)
        await asyncio.to_thread(gw.current)
        deadline = time.monotonic() + wait
        while True:
            events = gw.index.events(process_id=process_id, after_block=after_block)
            if events or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.1)
        current = gw.index.process(process_id) or process
        return {"events": events, "last_indexed_block": gw.index.last_block, "status": current["status"]}

    @app.get(
        "/api/v1/processes/{process_id}/artifacts",
        response_model=list[S.RunArtifacts],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def process_artifacts(
        process_id: str = ProcessId,
        organisation: str | None = Query(None, pattern=S.MSP),
        c: ConsortiaClient = Depends(client),
    ) -> list[dict[str, Any]]:
        """Which artifacts each run published -- or, with ``organisation``, which artifacts that
        organisation published for the process."""
        gw.current()
        member_process(c, process_id)
        runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for a in gw.index.published_artifacts(process_id, organisation):
            runs.setdefault((a["round"], a["organisation"]), []).append(a)
        return [{"round": r, "organisation": o, "artifacts": arts} for (r, o), arts in sorted(runs.items())]

    @app.get(
        "/api/v1/processes/{process_id}/models",
        response_model=list[S.ModelOut],
        tags=["models"],
        responses=errors(400, 404),
    )
    def process_models(
        process_id: str = ProcessId, c: ConsortiaClient = Depends(client)
    ) -> list[dict[str, Any]]:
        gw.current()
        member_process(c, process_id)
        return gw.index.models(1000, 0, process_id).items

    @app.get(
        "/api/v1/artifacts/{digest}",
        response_model=S.ArtifactProvenance,
        tags=["provenance"],
        responses=errors(404),
    )
    def artifact(
        digest: str = PathParam(pattern=DIGEST), _: ConsortiaClient = Depends(client)
    ) -> dict[str, Any]:
        """Which executions produced and consumed an artifact (among processes this organisation sees)."""
        gw.current()
        found = gw.index.artifact(digest)
        if not found["produced_by"] and not found["consumed_by"]:
            raise NotFound(f"no execution visible to {gw.msp_id} produced or consumed {digest}")
        return {"digest": digest, **found}

    # ------------------------------------------------------------------ models
    @app.get("/api/v1/models", response_model=S.Page[S.ModelOut], tags=["models"])
    def list_models(
        limit: int = Limit,
        offset: int = Offset,
        process_id: str | None = Query(None, pattern=ID),
        _: ConsortiaClient = Depends(client),
    ) -> dict[str, Any]:
        gw.current()
        p = gw.index.models(limit, offset, process_id)
        return page(p.items, p.total, limit, offset)

    @app.get(
        "/api/v1/models/{model_id}", response_model=S.ModelOut, tags=["models"], responses=errors(400, 404)
    )
    def get_model(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        return record(c.get_model(model_id))

    @app.get(
        "/api/v1/models/{model_id}/history",
        response_model=list[S.HistoryEntryOut],
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def model_history(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> list[dict]:
        return [h.__dict__ for h in c.model_history(model_id)]

    @app.get(
        "/api/v1/models/{model_id}/lineage",
        response_model=S.LineageOut,
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def lineage(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        c.get_model(model_id)  # access list check by the contract
        found = gw.index.lineage(model_id)
        if found is None:
            gw.refresh()
            found = gw.index.lineage(model_id)
        if found is None:
            raise NotFound(f"model {model_id} is not in the index yet")
        return found

    @app.post(
        "/api/v1/models/{model_id}/verify",
        response_model=S.VerificationOut,
        tags=["provenance"],
        responses=errors(400, 404),
    )
    def verify_model(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict[str, Any]:
        """Re-check every signature and digest of the model's lineage against the ledger."""
        gw.refresh()
        return verify_model_on_ledger(c, gw.index, model_id).to_dict()

    @app.get(
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
    def download_model(model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> Response:
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

    @app.post(
        "/api/v1/models/{model_id}/grant",
        response_model=S.ModelOut,
        tags=["models"],
        responses=errors(400, 404, 409, 502),
    )
    def grant_model(body: S.AccessIn, model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict:
        rec = record(c.get_model(model_id))
        if rec["owner"] != c.organisation:
            raise Forbidden(
                f"model {model_id} is owned by {rec['owner']}; only the owner may change its access list"
            )
        try:
            cert = gw.consortium.encryption_certificate(body.organisation)
        except KeyError:
            raise NotFound(f"{body.organisation} is not an organisation of this consortium") from None
        data_key = open_data_key(gw.consortium, gw.msp_id, rec, model_key_info(rec))
        wrapped = seal(cert, data_key, model_key_info(rec))
        rec = record(c.grant_model(model_id, body.organisation, wrapped))
        gw.refresh()
        return rec

    @app.post(
        "/api/v1/models/{model_id}/revoke",
        response_model=S.ModelOut,
        tags=["models"],
        responses=errors(400, 404, 409),
    )
    def revoke_model(body: S.AccessIn, model_id: str = ModelId, c: ConsortiaClient = Depends(client)) -> dict:
        """Remove an organisation from the access list and rotate the model's data key (the stored
        ciphertext is replaced; the remaining members get new sealed keys)."""
        rec = record(revoke_with_rotation(gw, c, model_id, body.organisation))
        gw.refresh()
        return rec

    app.include_router(explorer_router(gw, client, errors))  # api.explorer_routes
    if WEB.is_dir():
        app.mount("/explorer", StaticFiles(directory=WEB, html=True), name="explorer")
    return app


def open_model_payload(gw: Gateway, record: dict[str, Any]) -> bytes:
    """Fetch the encrypted model (this organisation's store, else the store the record's location
    names), check the ciphertext digest, open it with this organisation's sealed data key and check
    the plaintext against the model's on-chain digest."""
    try:
        ciphertext = fetch_verified(gw.artifacts, record["ciphertext_digest"])
    except ArtifactMissing:
        remote = store_at(record.get("location") or "")
        if remote is None:
            raise
        ciphertext = fetch_verified(remote, record["ciphertext_digest"])
    try:
        plaintext = decrypt_payload(
            open_data_key(gw.consortium, gw.msp_id, record, model_key_info(record)),
            ciphertext,
            model_aad(record),
        )
    except DecryptionError as exc:
        raise DigestMismatch(f"model {record['id']} does not decrypt: {exc}") from None
    if sha256_digest(plaintext) != record["digest"]:
        raise DigestMismatch(
            f"model {record['id']} decrypts to {sha256_digest(plaintext)}, the ledger says {record['digest']}"
        )
    return plaintext


def _model_store(gw: Gateway, record: dict[str, Any]) -> tuple[Any, str]:
    """Where the owner keeps the model's ciphertext: the store its ``location`` names (the owner's
    own store, which other members fetch from), else this gateway's store. (store, location)"""
    remote = store_at(record.get("location") or "")
    if remote is not None and remote.home.is_dir():
        return remote, record["location"]
    local = gw.artifacts
    return local, str(getattr(local, "location", "") or record.get("location") or "")


def revoke_with_rotation(gw: Gateway, c: ConsortiaClient, model_id: str, organisation: str) -> Any:
    """Revoke ``organisation``'s access to a model this organisation owns, so that it revokes
    (issue: a sealed key fetched before revocation must open nothing stored afterwards):

    1. open the current ciphertext with the owner's sealed key (digest checked);
    2. encrypt it again under a fresh data key and store the new ciphertext;
    3. ``Model:revoke`` with the new ciphertext digest and the new key sealed for exactly the
       remaining access list -- the contract replaces every sealed key and the ciphertext digest;
    4. delete the old ciphertext from the owner's stores.

    A failed revocation deletes the new ciphertext and leaves the model as it was. Copies the
    revoked organisation made before (plaintext or old ciphertext with its old key) are beyond
    reach: see docs/models.md."""
    rec = record(c.get_model(model_id))
    if rec["owner"] != c.organisation:
        raise Forbidden(
            f"model {model_id} is owned by {rec['owner']}; only the owner may change its access list"
        )
    if organisation == rec["owner"]:
        raise InvalidArgument("the owner cannot revoke its own access")
    if organisation not in rec["access"]:
        raise NotFound(f"{organisation} has no access to model {model_id}")
    plaintext = open_model_payload(gw, rec)
    remaining = [o for o in rec["access"] if o != organisation]
    data_key, ciphertext = encrypt_payload(plaintext, model_aad(rec))
    try:
        wrapped = {
            o: seal(gw.consortium.encryption_certificate(o), data_key, model_key_info(rec)) for o in remaining
        }
    except KeyError as exc:
        raise NotFound(f"{exc} on the access list of {model_id} has no key-agreement certificate") from None
    store, location = _model_store(gw, rec)
    new_digest = store.put(ciphertext)
    new_digest = new_digest if isinstance(new_digest, str) else new_digest.digest
    try:
        revoked = c.revoke_model(model_id, organisation, new_digest, wrapped, location=location)
    except BaseException:
        store.delete(new_digest)
        raise
    for s in {id(store): store, id(gw.artifacts): gw.artifacts}.values():
        delete = getattr(s, "delete", None)
        if delete is not None:
            delete(rec["ciphertext_digest"])
    return revoked
