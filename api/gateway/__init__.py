"""The FastAPI gateway of one organisation (``consortia serve``; docs/api.md).

Each organisation runs its own gateway with its own identity. Callers authenticate with an API
token (:mod:`api.tokens`) bound to a user of the gateway's organisation; the ledger calls are made
with that user's identity, so the acting organisation always comes from the certificate, never
from the request. Lists and audit queries are served from the off-chain index (:mod:`api.index`,
kept in step by :mod:`api.follower`); single records, histories and every write go to the ledger,
where the contracts enforce membership and access lists. Errors are typed JSON bodies
``{code, message, details}`` with the HTTP status of the contract error.

Modules: :mod:`~api.gateway.state` (:class:`Gateway`), :mod:`~api.gateway.app` (:func:`create_app`),
:mod:`~api.gateway.routes` (one ``APIRouter`` per resource), :mod:`~api.gateway.deps` (authentication
and shared parameters), :mod:`~api.gateway.errors`, :mod:`~api.gateway.access_log`,
:mod:`~api.gateway.sealed_models` (opening, granting and revoking encrypted models).
"""

from __future__ import annotations

from api.gateway.app import create_app
from api.gateway.sealed_models import (
    data_key,
    grant_with_sealed_key,
    open_model_payload,
    revoke_with_rotation,
)
from api.gateway.state import Gateway, record

__all__ = [
    "Gateway",
    "create_app",
    "data_key",
    "grant_with_sealed_key",
    "open_model_payload",
    "record",
    "revoke_with_rotation",
]
