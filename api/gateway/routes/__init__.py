"""The gateway's routers, one per resource. ``create_app`` includes :data:`ROUTERS` in this order
(the order of the OpenAPI document); a new resource is one more module with an ``APIRouter`` here."""

from __future__ import annotations

from api.gateway.routes import executions, images, models, processes, replays, service

ROUTERS = (service.router, images.router, processes.router, executions.router, models.router, replays.router)
