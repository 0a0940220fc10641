"""The gateway's and the CLI's names for the one content-addressed store (``executor.artifacts``).

Payloads (states, messages, encrypted models) live off chain in each organisation's store
``<artifacts>/<MSP>/sha256/<hex[:2]>/<hex>``; there is one implementation,
:class:`executor.artifacts.ArtifactStore`, and one error hierarchy (``executor.errors``). This module
only re-exports them under the names the API uses: :data:`ArtifactMissing` *is*
``ArtifactNotFound`` (HTTP 404, exit 3) and :data:`DigestMismatch` *is* ``ArtifactCorrupted``
(HTTP 502, exit 1: docs/cli.md "Exit codes").
"""

from __future__ import annotations

from executor.artifacts import ArtifactSource, ArtifactStore, fetch_verified, sha256_digest, store_at
from executor.errors import ArtifactCorrupted, ArtifactNotFound

ArtifactMissing = ArtifactNotFound
DigestMismatch = ArtifactCorrupted

__all__ = [
    "ArtifactMissing",
    "ArtifactSource",
    "ArtifactStore",
    "DigestMismatch",
    "fetch_verified",
    "sha256_digest",
    "store_at",
]
