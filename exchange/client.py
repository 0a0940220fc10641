"""Fetching from another organisation's artifact service over HTTPS with mutual TLS (docs/artifacts.md
"Client"), on httpx.

:class:`ArtifactClient` reaches one owner's service (``https://host:port``, from
:class:`exchange.locations.Locations`) with this organisation's TLS client certificate
(:class:`exchange.tls.ClientTLS`), trusting only the owner's TLS CA and checking the owner's peer name
(``peer0.<owner domain>``) rather than the address it dials. Connections are kept alive between requests.
A transfer

* streams the body as it arrives into a temporary file beside its final place (memory stays bounded
  whatever the size);
* after a broken connection asks for the rest with ``Range: bytes=<received>-`` (up to ``retries``
  attempts, exponential backoff), starting over if the server answers the whole body instead;
* reads at most its bound -- the size the caller expects (the owner's index entry, a model record) and
  the client's ``max_bytes`` (``[exchange] max_artifact_bytes``), whichever is smaller: a length
  announced over it is refused before a byte is read, a body (chunked, or longer than announced) that
  runs past it is cut there (:class:`ArtifactTooLarge`, nothing kept);
* re-hashes everything it received and refuses a mismatch (:class:`ArtifactCorrupted`, nothing kept);
* lands with one atomic rename (0600): a reader never sees a half-written file.

403 is :class:`ArtifactForbidden`, 404 :class:`ArtifactNotFound`; a service that cannot be reached (after
the retries), or answers 503 (it cannot ask its ledger now), is :class:`ArtifactUnreachable`. An endpoint that is not ``https://host[:port]`` is refused
(:class:`LocationRefused`): another organisation's artifacts are never read from a path.
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import httpx

from exchange.errors import (
    ArtifactCorrupted,
    ArtifactError,
    ArtifactForbidden,
    ArtifactNotFound,
    ArtifactTooLarge,
    ArtifactUnreachable,
    LocationRefused,
)
from exchange.files import write_private_stream
from exchange.tls import ClientTLS
from wire import bounded_json
from wire.canonical import is_digest

MAX_ENTRY = 1 << 16  #: bytes of a message index entry the client accepts
MAX_ENTRY_DEPTH = 4  #: nesting of an index entry ({"payload_digest", "stored": {...}})
DEFAULT_MAX_ARTIFACT_BYTES = 2 << 30
"""The largest artifact a node fetches unless its home says otherwise (``[exchange]
max_artifact_bytes``; docs/configuration.md): 2 GiB."""


def https_endpoint(location: str) -> str:
    """``location`` as an endpoint ``https://host[:port]`` (no path, query or credentials), else
    :class:`LocationRefused`."""
    try:
        u = urlsplit(location)
        port = u.port
    except ValueError:
        raise LocationRefused(f"not an https endpoint: {location!r}") from None
    if u.scheme != "https" or not u.hostname or u.username or u.path not in ("", "/") or u.query:
        raise LocationRefused(f"not an https endpoint (https://host:port): {location!r}")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return f"https://{host}:{port or 443}"


class _Retry(Exception):
    pass


class _Progress:
    """Bytes received so far and their running hash."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.received = 0
        self.hasher = hashlib.sha256()


class ArtifactClient:
    """The artifact service of ``owner`` at ``endpoint``, reached with ``tls`` (an
    :class:`exchange.locations.Peer`)."""

    def __init__(
        self,
        endpoint: str,
        owner: str,
        tls: ClientTLS,
        *,
        retries: int = 5,
        backoff: float = 0.2,
        timeout: float = 60.0,
        max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
    ):
        self.endpoint = https_endpoint(endpoint)
        self.owner = owner
        self.tls = tls
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.max_bytes = max_bytes
        # dial the address, check the owner's name: the service's certificate names its peer
        self._extensions = {"sni_hostname": tls.server_name(owner)}
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(
                    base_url=self.endpoint, verify=self.tls.context(self.owner), timeout=self.timeout
                )
            return self._http

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def message_entry(self, process_id: str, round: int, recipient: str) -> dict[str, Any]:
        """The owner's index entry of its message to ``recipient`` in that round (small JSON)."""
        url = f"/messages/{process_id}/{round}/{recipient}"
        try:
            with self._client().stream("GET", url, extensions=self._extensions) as resp:
                body = b""
                for chunk in resp.iter_raw():
                    body += chunk
                    if len(body) > MAX_ENTRY:
                        raise ArtifactCorrupted(f"{self.owner}'s index entry is over {MAX_ENTRY} bytes")
        except httpx.TransportError as exc:
            raise ArtifactUnreachable(f"no message index from {self.owner}: {exc}") from None
        if resp.status_code == 503:  # the owner cannot ask its ledger now
            raise ArtifactUnreachable(f"{self.owner} is unavailable: {body[:300].decode(errors='replace')}")
        if resp.status_code == 403:
            raise ArtifactForbidden(f"{self.owner} refuses its round-{round} message index to {recipient}")
        if resp.status_code != 200:
            raise ArtifactNotFound(
                f"{self.owner} answered {resp.status_code} for its round-{round} message index"
            )
        try:
            entry = bounded_json.loads(body, f"{self.owner}'s index entry", MAX_ENTRY_DEPTH)
        except ValueError as exc:
            raise ArtifactCorrupted(f"{self.owner} answered an index entry that is not JSON: {exc}") from None
        if not isinstance(entry, dict):
            raise ArtifactCorrupted(f"{self.owner} answered an index entry that is not an object")
        return entry

    def get(self, digest: str, size: int | None = None) -> bytes:
        """The artifact's bytes, verified (held in memory: use :meth:`fetch_to` for large artifacts).
        ``size``: the bytes the caller knows it has (more is :class:`ArtifactTooLarge`)."""
        _check(digest)
        buffer = io.BytesIO()
        self._transfer(digest, buffer, size)
        return buffer.getvalue()

    def fetch_to(self, digest: str, final: Path, top: Path, size: int | None = None) -> Path:
        """Stream ``digest`` to ``final`` (atomically, 0600, after verification; missing directories
        below ``top`` made 0700); nothing is left behind on failure. ``size``: as for :meth:`get`."""
        _check(digest)
        write_private_stream(final, lambda out: self._transfer(digest, out, size), top, ".fetch-")
        return final

    def _bound(self, size: int | None) -> tuple[int, str]:
        """(the most bytes a transfer may take, why)."""
        if size is not None and size <= self.max_bytes:
            return size, "its owner's index entry (or its record) names"
        return self.max_bytes, "this node fetches at most (max_artifact_bytes)"

    def _transfer(self, digest: str, out: BinaryIO, size: int | None = None) -> None:
        got, attempt = _Progress(), 0
        bound = self._bound(size)
        while True:
            try:
                self._attempt(digest, out, got, bound)
                break
            except _Retry as exc:
                attempt += 1
                if attempt > self.retries:
                    raise ArtifactUnreachable(
                        f"fetching {digest} from {self.owner} failed after {attempt} attempts: {exc.__cause__}"
                    ) from None
                time.sleep(self.backoff * 2 ** (attempt - 1))
        actual = "sha256:" + got.hasher.hexdigest()
        if actual != digest:
            raise ArtifactCorrupted(f"{self.owner} served bytes hashing to {actual} for {digest}")

    def _attempt(self, digest: str, out: BinaryIO, got: _Progress, bound: tuple[int, str]) -> None:
        limit, why = bound
        headers = {"Range": f"bytes={got.received}-"} if got.received else {}
        try:
            with self._client().stream(
                "GET", f"/artifacts/{digest}", headers=headers, extensions=self._extensions
            ) as resp:
                if resp.status_code == 503:  # the owner cannot ask its ledger now
                    raise ArtifactUnreachable(f"{self.owner} is unavailable for {digest}")
                if resp.status_code == 403:
                    raise ArtifactForbidden(f"{self.owner} refuses {digest} to {self.tls.organisation}")
                if resp.status_code == 404:
                    raise ArtifactNotFound(f"{digest} is not in the store of {self.owner}")
                if resp.status_code == 206 and got.received:
                    total = _length(resp.headers.get("Content-Range", "*/0").rpartition("/")[2])
                elif resp.status_code == 200:
                    if got.received:  # the server ignored the range: start over
                        out.seek(0)
                        out.truncate()
                        got.reset()
                    total = _length(resp.headers.get("Content-Length", "0"))
                else:
                    raise ArtifactError(f"{self.owner} answered {resp.status_code} for {digest}")
                if total is None:
                    raise ArtifactCorrupted(f"{self.owner} announced no valid length for {digest}")
                if total > limit:  # announced over the bound: not a byte is read
                    raise ArtifactTooLarge(self.owner, digest, limit, total, why)
                for chunk in resp.iter_raw():  # as received: a cut loses no byte already read
                    if got.received + len(chunk) > limit:  # sent past it: stop reading here
                        raise ArtifactTooLarge(self.owner, digest, limit, got.received + len(chunk), why)
                    out.write(chunk)
                    got.hasher.update(chunk)
                    got.received += len(chunk)
        except httpx.TransportError as exc:
            raise _Retry(str(exc)) from exc
        if got.received < total:
            raise _Retry(f"connection closed at {got.received} of {total} bytes") from OSError("short body")


def _length(text: str) -> int | None:
    """A length header's value (digits only), or None."""
    text = text.strip()
    return int(text) if text.isdigit() and len(text) <= 20 else None


def _check(digest: str) -> None:
    if not is_digest(digest):
        raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
