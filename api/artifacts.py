"""The minimal artifact-store interface the gateway needs: bytes by digest, with verification.

Payloads (states, messages, encrypted models) live off chain in a content-addressed store
(DESIGN.md "On-chain data"); the executor owns the real store. The gateway only reads, so it
depends on this small protocol; :class:`DirectoryArtifactStore` reads the layout
``<root>/sha256/<hex>`` and any object with ``get(digest) -> bytes`` plugs in instead.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from chaincode.canonical import is_digest


class ArtifactMissing(LookupError):
    """The store holds no artifact with this digest."""


class DigestMismatch(ValueError):
    """The bytes the store returned do not hash to the digest asked for."""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@runtime_checkable
class ArtifactStore(Protocol):
    def get(self, digest: str) -> bytes:
        """The artifact's bytes; raises :class:`ArtifactMissing` if absent."""
        ...


def fetch_verified(store: ArtifactStore, digest: str) -> bytes:
    """Bytes of ``digest`` from ``store``, checked against the digest (never trust the store)."""
    if not is_digest(digest):
        raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
    data = store.get(digest)
    actual = sha256_digest(data)
    if actual != digest:
        raise DigestMismatch(f"artifact store returned bytes with digest {actual} for {digest}")
    return data


class DirectoryArtifactStore:
    """Content-addressed files ``<root>/sha256/<hex>`` (read and write)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def _path(self, digest: str) -> Path:
        if not is_digest(digest):
            raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
        return self.root / "sha256" / digest.split(":", 1)[1]

    def get(self, digest: str) -> bytes:
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(f"no artifact {digest} in {self.root}") from None

    def put(self, data: bytes) -> str:
        digest = sha256_digest(data)
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return digest
