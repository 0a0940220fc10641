"""An organisation serving its own store to the others (docs/artifacts.md): over HTTPS with mutual TLS
(:class:`ArtifactServer`), or in memory to the nodes hosted in the same process (:class:`HostedServices`).
Both answer through one :class:`ArtifactService` under :mod:`exchange.readers`' rule.

``GET /artifacts/sha256:<hex>`` (and ``HEAD``) streams the stored bytes in chunks (bounded memory),
honours ``Range: bytes=<start>-[<end>]`` (206 + ``Content-Range``; 416 past the end) so a client resumes a
broken transfer, and answers:

* 403 unless the caller's organisation -- the one whose TLS CA issued its client certificate
  (:mod:`exchange.tls`) -- may read the artifact; 403 too for an unknown digest (an outsider learns
  nothing about what the store holds);
* 404 only to a reader, when the store has lost the bytes; 400 for a malformed digest.

``GET /messages/<process>/<round>/<recipient>`` answers the index entry of the message this organisation
sealed to ``recipient`` in that round (``{"payload_digest", "stored": {digest, size, producer,
location}}``: the ledger names only the payload digest), to that recipient only and under the same rule as
the message itself.

Listen address: loopback only (``127.x.y.z``), e.g. ``127.0.N.1`` for organisation N. The service's command
line is ``consortia artifacts serve`` (:mod:`api.cli.artifacts`, which reads the home).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

from exchange import messages
from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES
from exchange.errors import (
    ArtifactCorrupted,
    ArtifactForbidden,
    ArtifactNotFound,
    ArtifactTooLarge,
    ArtifactUnreachable,
)
from exchange.files import write_private_stream
from exchange.locations import Locations
from exchange.readers import LedgerReaders, Readers
from exchange.store import ArtifactStore
from exchange.tls import CertificateOrganisations, ClientTLS, server_context
from ledger.client import ConsortiaClient
from ledger.identity import Consortium
from wire.canonical import is_digest

CHUNK = 1 << 20  # bytes per write: the memory a transfer holds
HANDSHAKE_TIMEOUT = 10.0
IO_TIMEOUT = 60.0
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")  # process ids and MSP ids (chaincode.image)


class ArtifactService:
    """What ``store``'s organisation hands out, to whom (``readers``). The caller is established by the
    transport (the TLS CA of its client certificate; the hosting process), never by the request."""

    def __init__(self, store: ArtifactStore, readers: Readers):
        self.store = store
        self.readers = readers

    @property
    def organisation(self) -> str:
        return self.store.organisation

    def open(self, caller: str | None, digest: str) -> BinaryIO:
        """The stored file of ``digest``, opened for reading: :class:`ArtifactForbidden` unless ``caller``
        may read it, :class:`ArtifactNotFound` if a reader asks for bytes the store has lost, ValueError
        for a malformed digest."""
        if not is_digest(digest):
            raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
        if caller is None or not self.readers.may_read(caller, digest):
            raise ArtifactForbidden(f"{caller or 'this client'} may not read {digest}")
        try:
            return self.store.path(digest).open("rb")
        except FileNotFoundError:
            raise ArtifactNotFound(f"{digest} is not in the store of {self.organisation}") from None

    def message_entry(self, caller: str | None, process_id: str, round: int, recipient: str) -> bytes:
        """The index entry (JSON bytes) of the message this organisation sealed to ``recipient`` in that
        round: to that recipient only, once the ledger confirms it (:class:`ArtifactForbidden`
        otherwise, also when there is no such entry); ValueError for malformed names."""
        if not _NAME.fullmatch(process_id) or not _NAME.fullmatch(recipient) or round < 0:
            raise ValueError("expected /messages/<process>/<round>/<recipient>")
        try:
            body = messages.entry_path(self.store, process_id, round, recipient).read_bytes()
            entry = json.loads(body)
        except (OSError, ValueError):
            entry = None
        if (
            caller is None
            or not isinstance(entry, dict)
            or not self.readers.may_read_message(caller, process_id, round, recipient, entry)
        ):
            raise ArtifactForbidden(f"{caller or 'this client'} may not read this message")
        return body


class HostedPeer:
    """``service``'s organisation as ``caller`` reaches it in this process (an
    :class:`exchange.locations.Peer`): the owner's service opens the owner's files, under its rule,
    and hands out at most ``max_bytes`` per artifact (and at most the size the caller expects), as the
    HTTPS client does."""

    def __init__(self, service: ArtifactService, caller: str, max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES):
        self.service = service
        self.caller = caller
        self.owner = service.organisation
        self.max_bytes = max_bytes

    def _open(self, digest: str, size: int | None) -> BinaryIO:
        """The owner's file of ``digest``, refused (:class:`ArtifactTooLarge`) over the bound."""
        limit, why = (
            (size, "its owner's index entry (or its record) names")
            if size is not None and size <= self.max_bytes
            else (self.max_bytes, "this node fetches at most (max_artifact_bytes)")
        )
        f = self.service.open(self.caller, digest)
        have = os.fstat(f.fileno()).st_size
        if have > limit:
            f.close()
            raise ArtifactTooLarge(self.owner, digest, limit, have, why)
        return f

    def message_entry(self, process_id: str, round: int, recipient: str) -> dict[str, Any]:
        entry: dict[str, Any] = json.loads(
            self.service.message_entry(self.caller, process_id, round, recipient)
        )
        return entry

    def get(self, digest: str, size: int | None = None) -> bytes:
        with self._open(digest, size) as f:
            data = f.read()
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise ArtifactCorrupted(f"{self.owner} served bytes that do not hash to {digest}")
        return data

    def fetch_to(self, digest: str, final: Path, top: Path, size: int | None = None) -> Path:
        def copy(out: BinaryIO) -> None:
            hasher = hashlib.sha256()
            with self._open(digest, size) as f:
                while chunk := f.read(CHUNK):
                    out.write(chunk)
                    hasher.update(chunk)
            if "sha256:" + hasher.hexdigest() != digest:
                raise ArtifactCorrupted(f"{self.owner} served bytes that do not hash to {digest}")

        write_private_stream(final, copy, top, ".fetch-")
        return final


class HostedServices:
    """The artifact services of the organisations whose nodes run in this process (a consortium simulated
    on one machine): each hands out its own store's artifacts in memory, under the same rule as over
    HTTPS (an :class:`exchange.locations.Hosted`)."""

    def __init__(self) -> None:
        self._services: dict[str, ArtifactService] = {}
        self._lock = threading.Lock()

    def serve(self, service: ArtifactService) -> None:
        """Host ``service`` (replacing its organisation's previous one: a restarted node)."""
        with self._lock:
            self._services[service.organisation] = service

    def peer(self, owner: str, caller: str, max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES) -> HostedPeer | None:
        with self._lock:
            service = self._services.get(owner)
        return HostedPeer(service, caller, max_bytes) if service is not None else None


def node_store(
    client: ConsortiaClient,
    consortium: Consortium,
    root: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    endpoints: Mapping[str, str] | None = None,
    hosted: HostedServices | None = None,
    max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
) -> ArtifactStore:
    """The store of a node of ``client``'s organisation under ``root``: ``endpoint`` is its HTTPS service
    if it has one (its agent publishes it in its membership record when it starts); it reaches the others'
    services through one resolver with this organisation's TLS identity -- those hosted in this process
    (``hosted``, which then serves this store in memory too), else ``endpoints``, else their membership
    records (docs/artifacts.md "Locations"), fetching no artifact over ``max_artifact_bytes`` (the home's
    ``[exchange] max_artifact_bytes``)."""
    org = client.organisation
    locations = Locations(
        ClientTLS(consortium, org),
        client=client,
        endpoints=endpoints,
        hosted=hosted,
        max_bytes=max_artifact_bytes,
    )
    store = ArtifactStore(root, org, endpoint=endpoint, locations=locations)
    if hosted is not None:
        hosted.serve(ArtifactService(store, LedgerReaders(client, store)))
    return store


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a ``Range: bytes=a-[b]`` header; None for the whole body.
    ValueError if unsatisfiable or malformed (answered 416)."""
    if not header:
        return None
    m = _RANGE.fullmatch(header.strip())
    if not m:
        raise ValueError(f"unsupported range {header!r}")
    start = int(m.group(1))
    end = min(int(m.group(2)) + 1, size) if m.group(2) else size
    if start >= size or end <= start:
        raise ValueError(f"range {header!r} outside 0..{size}")
    return start, end


class ArtifactHandler(BaseHTTPRequestHandler):
    server: ArtifactServer
    protocol_version = "HTTP/1.1"
    server_version = "ConsortiaArtifacts/1"
    disable_nagle_algorithm = True  # headers and a small body leave at once (no delayed-ACK stall)

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        if self.server.log is not None:
            self.server.log(format % args)

    def _caller(self) -> str | None:
        return self.server.organisations.organisation(self.connection.getpeercert(binary_form=True))

    def _refuse(self, code: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        prefix = "/artifacts/"
        if self.path.startswith("/messages/"):
            return self._message_entry()
        if not self.path.startswith(prefix):
            return self._refuse(404, "not found")
        digest = self.path[len(prefix) :]
        if not is_digest(digest):
            return self._refuse(400, "malformed digest")
        try:
            f = self.server.service.open(self._caller(), digest)
        except ArtifactUnreachable as exc:  # its ledger cannot be asked now: come back later
            return self._refuse(503, str(exc))
        except ArtifactForbidden as exc:
            return self._refuse(403, str(exc))
        except ArtifactNotFound as exc:
            return self._refuse(404, str(exc))
        with f:
            size = os.fstat(f.fileno()).st_size
            try:
                span = parse_range(self.headers.get("Range"), size)
            except ValueError as exc:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return self.log_message("%s", str(exc))
            start, end = span or (0, size)
            self.send_response(206 if span else 200)
            if span:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{digest}"')
            self.end_headers()
            if self.command != "HEAD":
                f.seek(start)
                self.send_body(f, end - start)

    def _message_entry(self) -> None:
        """``GET /messages/<process>/<round>/<recipient>``: where the message this organisation sealed
        to ``recipient`` in that round is stored (its index entry), under the message's own rule."""
        parts = self.path.split("/")[2:]
        if len(parts) != 3 or not parts[1].isdigit():
            return self._refuse(400, "expected /messages/<process>/<round>/<recipient>")
        try:
            body = self.server.service.message_entry(self._caller(), parts[0], int(parts[1]), parts[2])
        except ValueError as exc:
            return self._refuse(400, str(exc))
        except ArtifactUnreachable as exc:
            return self._refuse(503, str(exc))
        except ArtifactForbidden as exc:
            return self._refuse(403, str(exc))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_body(self, f: BinaryIO, length: int) -> None:
        """Stream ``length`` bytes of ``f`` in :data:`CHUNK`-sized writes."""
        while length > 0:
            chunk = f.read(min(CHUNK, length))
            if not chunk:
                raise OSError("artifact shrank while being served")
            self.wfile.write(chunk)
            length -= len(chunk)


def check_loopback(host: str) -> None:
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the artifact service listens on loopback addresses only, not {host}")


class ArtifactServer(ThreadingHTTPServer):
    """The HTTPS service of ``store``'s organisation; TLS handshakes happen in the request's thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        store: ArtifactStore,
        consortium: Consortium,
        readers: Readers,
        *,
        handler: type[ArtifactHandler] = ArtifactHandler,
        log: Callable[[str], None] | None = None,
    ):
        check_loopback(address[0])
        self.service = ArtifactService(store, readers)
        self.organisations = CertificateOrganisations(consortium)
        self.ssl_context = server_context(consortium, store.organisation)
        self.log = log
        self._open: set[socket.socket] = set()  # connections being served (kept alive between requests)
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

    @property
    def store(self) -> ArtifactStore:
        return self.service.store

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        return self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(HANDSHAKE_TIMEOUT)
            request.do_handshake()
            request.settimeout(IO_TIMEOUT)
        except (OSError, ssl.SSLError):
            return  # no certificate, a foreign CA, or a dropped connection: nothing to answer
        with self._open_lock:
            self._open.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        assert isinstance(host, str)
        return f"https://{host}:{port}"

    def start(self) -> ArtifactServer:
        """Serve in a background thread (tests, a node serving its own store)."""
        threading.Thread(target=self.serve_forever, name="artifact-service", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving, and end the connections kept alive (as a node going down would)."""
        self.shutdown()
        self.server_close()
        with self._open_lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
