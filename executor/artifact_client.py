"""Fetching another organisation's artifacts from its artifact service (docs/artifacts.md).

:class:`HttpsArtifactSource` is an :class:`executor.artifacts.ArtifactSource` for an ``https://``
location: ``GET <location>/artifacts/<digest>`` with this organisation's TLS client certificate
(:class:`executor.artifact_tls.ClientTLS`), trusting only the owner's TLS CA. A transfer

* streams in :data:`CHUNK`-sized reads into a temporary file beside its final place (memory stays
  bounded whatever the size);
* after a broken connection asks for the rest with ``Range: bytes=<received>-`` (up to ``retries``
  attempts, exponential backoff), starting over if the server answers the whole body instead;
* re-hashes everything it received and refuses a mismatch (:class:`ArtifactCorrupted`, nothing
  kept);
* lands in the local store with one atomic rename (0600): a reader never sees a half-written file.

403 is :class:`ArtifactForbidden`, 404 :class:`ArtifactNotFound`. :func:`source_for` picks the
source a location's scheme names: ``file://`` (one machine) or ``https://`` (this module).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from executor.artifact_tls import ClientTLS
from executor.artifacts import (
    ArtifactRef,
    ArtifactSource,
    ArtifactStore,
    MessageRef,
    make_private_dirs,
    store_at,
    write_private_stream,
)
from executor.errors import ArtifactCorrupted, ArtifactError, ArtifactNotFound
from executor.membership import MemberEndpoints
from wire.canonical import is_digest

log = logging.getLogger(__name__)

CHUNK = 1 << 20


class ArtifactUnreachable(ArtifactError, ConnectionError):
    """The owner's artifact service cannot be reached (refused, reset, timed out): its node may be down
    for a while, unlike a refusal or a missing artifact, which are answers."""

    code = "ARTIFACT_UNREACHABLE"


class ArtifactForbidden(ArtifactError, PermissionError):
    """The owner's service refuses this organisation the artifact (403)."""

    code = "ARTIFACT_FORBIDDEN"


class _Retry(Exception):
    pass


class _Progress:
    """Bytes received so far and their running hash."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.received = 0
        self.hasher = hashlib.sha256()


class HttpsArtifactSource:
    """Artifacts of ``owner`` served at ``location`` (``https://host:port``)."""

    def __init__(
        self,
        location: str,
        owner: str,
        tls: ClientTLS,
        *,
        store: ArtifactStore | None = None,
        retries: int = 5,
        backoff: float = 0.2,
        timeout: float = 60.0,
    ):
        u = urlsplit(location)
        if u.scheme != "https" or not u.hostname:
            raise ValueError(f"not an https location: {location!r}")
        self.host, self.port = u.hostname, u.port or 443
        self.owner = owner
        self.tls = tls
        self.store = store
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None

    def _connection(self) -> http.client.HTTPSConnection:
        if self._context is None:
            self._context = self.tls.context(self.owner)
        conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._context)
        # dial the address, check the owner's name: the service's certificate names its peer
        conn.connect = _connect_with_name(conn, self._context, self.tls.server_name(self.owner))  # type: ignore[method-assign]
        return conn

    def message_entry(self, process_id: str, round: int, recipient: str) -> dict[str, Any]:
        """The owner's index entry of its message to ``recipient`` in that round (small JSON)."""
        conn = self._connection()
        try:
            conn.request("GET", f"/messages/{process_id}/{round}/{recipient}")
            resp = conn.getresponse()
            body = resp.read(1 << 16)
        except (OSError, http.client.HTTPException) as exc:
            raise ArtifactUnreachable(f"no message index from {self.owner}: {exc}") from None
        finally:
            conn.close()
        if resp.status == 403:
            raise ArtifactForbidden(f"{self.owner} refuses its round-{round} message index to {recipient}")
        if resp.status != 200:
            raise ArtifactNotFound(f"{self.owner} answered {resp.status} for its round-{round} message index")
        entry: dict[str, Any] = json.loads(body)
        return entry

    def get(self, digest: str) -> bytes:
        """The artifact's bytes (verified). With a ``store``, kept there too; prefer
        :meth:`fetch_into` for large artifacts (``get`` holds the whole artifact in memory)."""
        if self.store is not None:
            return self.store.get(digest) if self.store.has(digest) else self._read(self.fetch_into(digest))
        with tempfile.TemporaryDirectory(prefix="consortia-fetch-") as d:
            return self._read(self.fetch_to(digest, Path(d) / "artifact"))

    @staticmethod
    def _read(path: Path) -> bytes:
        return path.read_bytes()

    def fetch_into(self, digest: str, store: ArtifactStore | None = None) -> Path:
        """Fetch ``digest`` into ``store`` (default: this source's), unless already there; its path."""
        store = store or self.store
        if store is None:
            raise ValueError("no local store to fetch into")
        h = _hex(digest)
        final = store.base / h[:2] / h
        if final.exists():
            return final
        make_private_dirs(final.parent, store.home)
        return self.fetch_to(digest, final)

    def fetch_to(self, digest: str, final: Path) -> Path:
        """Stream ``digest`` to ``final`` (atomically, after verification)."""
        _hex(digest)
        write_private_stream(final, lambda out: self._transfer(digest, out), final.parent, ".fetch-")
        return final

    def _transfer(self, digest: str, out: BinaryIO) -> None:
        got, attempt = _Progress(), 0
        while True:
            try:
                self._attempt(digest, out, got)
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

    def _attempt(self, digest: str, out: BinaryIO, got: _Progress) -> None:
        conn = self._connection()
        try:
            headers = {"Range": f"bytes={got.received}-"} if got.received else {}
            try:
                conn.request("GET", f"/artifacts/{digest}", headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise _Retry(str(exc)) from exc
            if resp.status == 403:
                raise ArtifactForbidden(f"{self.owner} refuses {digest} to {self.tls.organisation}")
            if resp.status == 404:
                raise ArtifactNotFound(f"{digest} is not in the store of {self.owner}")
            if resp.status == 206 and got.received:
                total = int(resp.getheader("Content-Range", "*/0").rpartition("/")[2])
            elif resp.status == 200:
                if got.received:  # the server ignored the range: start over
                    out.seek(0)
                    out.truncate()
                    got.reset()
                total = int(resp.getheader("Content-Length", "0"))
            else:
                raise ArtifactError(f"{self.owner} answered {resp.status} for {digest}")
            try:
                while chunk := resp.read(CHUNK):
                    out.write(chunk)
                    got.hasher.update(chunk)
                    got.received += len(chunk)
            except (OSError, http.client.HTTPException) as exc:
                raise _Retry(str(exc)) from exc
            if got.received < total:
                raise _Retry(f"connection closed at {got.received} of {total} bytes") from OSError(
                    "short body"
                )
        finally:
            conn.close()


def _connect_with_name(
    conn: http.client.HTTPSConnection, context: ssl.SSLContext, name: str
) -> Callable[[], None]:
    def connect() -> None:
        http.client.HTTPConnection.connect(conn)
        conn.sock = context.wrap_socket(conn.sock, server_hostname=name)

    return connect


def _hex(digest: str) -> str:
    if not is_digest(digest):
        raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
    return digest[7:]


_DEFAULT_TLS: ClientTLS | None = None


def configure(tls: ClientTLS | None) -> None:
    """Set the TLS identity this process fetches ``https://`` locations with (node agent, gateway)."""
    global _DEFAULT_TLS
    _DEFAULT_TLS = tls


def source_for(
    location: str, owner: str, tls: ClientTLS | None = None, store: ArtifactStore | None = None
) -> ArtifactSource | None:
    """The source a location names: the store of a ``file://`` location, the service of an
    ``https://`` one (fetched with ``tls`` or the configured identity), None otherwise."""
    if location.startswith("https://"):
        tls = tls or _DEFAULT_TLS
        if tls is None:
            raise ArtifactError(f"no TLS identity configured to fetch from {location}")
        return HttpsArtifactSource(location, owner, tls, store=store)
    return store_at(location)


class ArtifactPeers:
    """How a node agent finds the messages sent to it: the other organisations' artifact services and
    the TLS identity this organisation fetches with.

    An owner's endpoint is its membership record on the ledger (``members``,
    :class:`executor.membership.MemberEndpoints`, bound by the node agent); ``endpoints`` (MSP id ->
    ``https://host:port``, the command line's ``--peer-artifacts``) is only an explicit override,
    consulted first. No endpoint: None, and the owner's messages are read in local file-store mode."""

    def __init__(
        self,
        tls: ClientTLS,
        endpoints: Mapping[str, str] | None = None,
        members: MemberEndpoints | None = None,
        patience: float = 300.0,
    ):
        self.tls = tls
        self.endpoints = dict(endpoints or {})
        self.members = members
        self.patience = patience  # seconds to wait for a sender's service that cannot be reached

    def endpoint(self, owner: str) -> str | None:
        url = self.endpoints.get(owner)
        if url is None and self.members is not None:
            url = self.members.endpoint(owner)
        return url

    def source(self, owner: str, store: ArtifactStore | None = None) -> HttpsArtifactSource | None:
        url = self.endpoint(owner)
        return HttpsArtifactSource(url, owner, self.tls, store=store) if url else None

    def fetch_message(
        self, sender: str, process_id: str, round: int, payload_digest: str, into: ArtifactStore
    ) -> MessageRef | None:
        """Ask ``sender``'s service where its message to us is, fetch the sealed bytes into our own
        store (verified), and return a ref to that copy; None if ``sender`` serves no endpoint.

        A sender whose service cannot be reached (its node restarting) is waited for, with backoff, up
        to ``patience`` seconds: the round cannot go on without its message, and failing the task would
        end the whole process. A refusal or a missing artifact is an answer and is raised at once."""
        src = self.source(sender, into)
        if src is None:
            return None
        deadline, delay = time.monotonic() + self.patience, 0.5
        while True:
            try:
                return self._fetch_message(src, sender, process_id, round, payload_digest, into)
            except ArtifactUnreachable as exc:
                if time.monotonic() + delay > deadline:
                    raise ArtifactUnreachable(
                        f"{exc} (still unreachable after {self.patience:.0f} s)"
                    ) from None
                log.warning("%s; waiting %.1f s for its node", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    @staticmethod
    def _fetch_message(
        src: HttpsArtifactSource,
        sender: str,
        process_id: str,
        round: int,
        payload_digest: str,
        into: ArtifactStore,
    ) -> MessageRef:
        entry = src.message_entry(process_id, round, into.organisation)
        if entry.get("payload_digest") != payload_digest:
            raise ArtifactCorrupted(
                f"{sender} indexes message {entry.get('payload_digest')}, the ledger names {payload_digest}"
            )
        stored = entry["stored"]["digest"]
        path = src.fetch_into(stored)
        local = ArtifactRef(stored, path.stat().st_size, into.organisation, into.home.resolve().as_uri())
        return MessageRef(sender, into.organisation, payload_digest, local)


def parse_endpoints(items: list[str] | None) -> dict[str, str]:
    """``["Org2MSP=https://127.0.2.1:8443", ...]`` (command line ``--peer-artifacts``, an explicit
    override of the endpoints found on the ledger) as a mapping."""
    out = {}
    for item in items or ():
        org, sep, url = item.partition("=")
        if not sep or not url.startswith("https://"):
            raise ValueError(f"expected ORG=https://host:port, got {item!r}")
        out[org] = url
    return out
