"""The minimal artifact-store interface the gateway needs: bytes by digest, with verification.

Payloads (states, messages, encrypted models) live off chain in a content-addressed store
(docs/design.md "One chaincode, two ledger hosts"); the executor owns the real store. The gateway only reads, so it
depends on this small protocol. :class:`DirectoryArtifactStore` reads the executor's layout of one
organisation's store, ``<store root>/<MSP>/sha256/<hex[:2]>/<hex>`` (``executor.artifacts.ArtifactStore``),
and :func:`store_at` opens the store a record's ``file://`` location names; any object with
``get(digest) -> bytes`` plugs in instead (the executor's ``ArtifactStore`` does as it is: its
``ARTIFACT_NOT_FOUND`` / ``ARTIFACT_CORRUPTED`` errors are mapped by :func:`fetch_verified`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
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
    try:
        data = store.get(digest)
    except (ArtifactMissing, DigestMismatch):
        raise
    except Exception as exc:  # a plugged-in store's own errors, by their stable code
        code = getattr(exc, "code", "")
        if code == "ARTIFACT_NOT_FOUND" or isinstance(exc, (LookupError, FileNotFoundError)):
            raise ArtifactMissing(str(exc)) from None
        if code == "ARTIFACT_CORRUPTED":
            raise DigestMismatch(str(exc)) from None
        raise
    actual = sha256_digest(data)
    if actual != digest:
        raise DigestMismatch(f"artifact store returned bytes with digest {actual} for {digest}")
    return data


class DirectoryArtifactStore:
    """One organisation's content-addressed files ``<root>/sha256/<hex[:2]>/<hex>`` (read and write).

    Written files are 0600 and directories 0700, like the executor's store: only the
    organisation's own user reads them."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def location(self) -> str:
        """The ``file://`` location other organisations fetch from (as the executor records it)."""
        return self.root.resolve().as_uri()

    def _path(self, digest: str) -> Path:
        if not is_digest(digest):
            raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
        h = digest.split(":", 1)[1]
        return self.root / "sha256" / h[:2] / h

    def get(self, digest: str) -> bytes:
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(f"no artifact {digest} in {self.root}") from None

    def put(self, data: bytes) -> str:
        digest = sha256_digest(data)
        path = self._path(digest)
        if not path.exists():
            _private_dirs(path.parent, self.root)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")  # 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        return digest

    def delete(self, digest: str) -> bool:
        """Remove an artifact (a model ciphertext replaced by a key rotation); False if absent."""
        try:
            self._path(digest).unlink()
            return True
        except FileNotFoundError:
            return False


def _private_dirs(d: Path, top: Path) -> None:
    """``mkdir -p d`` with every directory from ``top`` down to ``d`` at mode 0700."""
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    p = d
    while True:
        if p.stat().st_mode & 0o777 != 0o700:
            p.chmod(0o700)
        if p == top or top not in p.parents:
            break
        p = p.parent


def store_at(location: str) -> DirectoryArtifactStore | None:
    """The store a ``file://`` location names (as the executor records it), or None for other schemes."""
    if not location.startswith("file://"):
        return None
    return DirectoryArtifactStore(Path(location[len("file://") :]))
