"""An organisation's artifact service: its own content-addressed store over HTTPS with mutual TLS
(docs/artifacts.md).

``GET /artifacts/sha256:<hex>`` (and ``HEAD``) streams the stored bytes in chunks (bounded
memory), honours ``Range: bytes=<start>-[<end>]`` (206 + ``Content-Range``; 416 past the end) so a
client resumes a broken transfer, and answers:

* 403 unless the caller's organisation -- the one whose TLS CA issued its client certificate
  (:mod:`executor.artifact_tls`) -- is a *reader* of the artifact; 403 too for an unknown digest
  (an outsider learns nothing about what the store holds);
* 404 only to a reader, when the store has lost the bytes; 400 for a malformed digest.

Readers come from the ledger, never from the request (:class:`LedgerReaders`):

* a **message** -- sealed bytes this organisation stored for one recipient -- is found through the
  organisation's own message index (``<store>/messages/<process>/<round>/<recipient>.json``,
  written by the node agent) and is served to that recipient only once the organisation's
  *completed* execution record of that process and round names an output message to that
  recipient with the indexed payload digest;
* a **model ciphertext** is served to the organisations on the access list of the model record
  (owned by this organisation) whose ``ciphertext_digest`` it is -- read at every request, so a
  revocation takes effect at once;
* the organisation itself may read its own artifacts; everything else is refused.

``GET /messages/<process>/<round>/<recipient>`` answers the index entry of the message this
organisation sealed to ``recipient`` in that round (``{"payload_digest", "stored": {digest, size,
producer, location}}``: the ledger names only the payload digest), to that recipient only and
under the same rule as the message itself.

Listen address: loopback only (``127.x.y.z``), e.g. ``127.0.N.1`` for organisation N.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from executor.artifact_tls import CertificateOrganisations, server_context
from executor.artifacts import ArtifactStore
from ledger.identity import Consortium
from wire.canonical import is_digest

CHUNK = 1 << 20  # bytes per write: the memory a transfer holds
HANDSHAKE_TIMEOUT = 10.0
IO_TIMEOUT = 60.0
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")  # process ids and MSP ids (chaincode.image)


class Readers(Protocol):
    def readers(self, digest: str) -> Iterable[str]:
        """Organisations allowed to read ``digest`` (empty if none or unknown)."""
        ...


class StaticReaders:
    """Readers fixed in advance (digest -> organisations): benchmarks and tests of the transport."""

    def __init__(self, readers: dict[str, Iterable[str]]):
        self._readers = {d: frozenset(orgs) for d, orgs in readers.items()}

    def readers(self, digest: str) -> frozenset[str]:
        return self._readers.get(digest, frozenset())


class LedgerReaders:
    """Who may read an artifact of ``store``'s organisation, decided from the ledger (``client``: a
    :class:`ledger.client.ConsortiaClient` of that organisation)."""

    def __init__(self, client: Any, store: ArtifactStore):
        self.client = client
        self.store = store
        self.org = store.organisation
        self._index: dict[str, list[tuple[str, int, str, str]]] = {}
        self._confirmed: dict[str, frozenset[str]] = {}  # messages: immutable once recorded
        self._lock = threading.Lock()

    def _scan_index(self) -> None:
        index: dict[str, list[tuple[str, int, str, str]]] = {}
        for p in (self.store.home / "messages").glob("*/*/*.json"):
            try:
                entry = json.loads(p.read_text())
                item = (p.parent.parent.name, int(p.parent.name), p.stem, entry["payload_digest"])
                index.setdefault(entry["stored"]["digest"], []).append(item)
            except (OSError, ValueError, KeyError, TypeError):
                continue
        self._index = index

    def _message_readers(self, digest: str) -> frozenset[str]:
        with self._lock:
            if digest in self._confirmed:
                return self._confirmed[digest]
            if digest not in self._index:
                self._scan_index()
            entries = list(self._index.get(digest, ()))
        readers = set()
        for pid, rnd, recipient, payload_digest in entries:
            try:
                rec = self.client.get_execution(pid, rnd, self.org)
            except Exception:  # not on the ledger (yet): not served
                continue
            if rec.status != "completed" or rec.result is None:
                continue
            if any(
                m.recipient == recipient and m.digest == payload_digest for m in rec.result.outputs.messages
            ):
                readers.add(recipient)
        if readers:
            with self._lock:
                self._confirmed[digest] = frozenset(readers)
        return frozenset(readers)

    def _model_readers(self, digest: str) -> set[str]:
        readers: set[str] = set()
        for m in self.client.list_models():
            if m.owner == self.org and m.ciphertext_digest == digest:
                readers.update(m.access)
        return readers

    def readers(self, digest: str) -> frozenset[str]:
        return frozenset({self.org} | self._message_readers(digest) | self._model_readers(digest))


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a ``Range: bytes=a-[b]`` header; None for the whole body.
    ValueError if unsatisfiable or malformed (answered 416)."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
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

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        if self.server.log is not None:
            self.server.log(format % args)

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
        srv = self.server
        der = self.connection.getpeercert(binary_form=True)
        caller = srv.organisations.organisation(der)
        if caller is None or caller not in srv.readers.readers(digest):
            return self._refuse(403, f"{caller or 'this client'} may not read {digest}")
        path = srv.store.base / digest[7:9] / digest[7:]
        try:
            f = path.open("rb")
        except FileNotFoundError:
            return self._refuse(404, f"{digest} is not in the store of {srv.store.organisation}")
        with f:
            size = path.stat().st_size
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
        if (
            len(parts) != 3
            or not _NAME.match(parts[0])
            or not parts[1].isdigit()
            or not _NAME.match(parts[2])
        ):
            return self._refuse(400, "expected /messages/<process>/<round>/<recipient>")
        srv = self.server
        caller = srv.organisations.organisation(self.connection.getpeercert(binary_form=True))
        path = srv.store.home / "messages" / parts[0] / f"{int(parts[1]):06d}" / f"{parts[2]}.json"
        try:
            body = path.read_bytes()
            stored = json.loads(body)["stored"]["digest"]
        except (OSError, ValueError, KeyError, TypeError):
            stored = None
        if (
            caller is None
            or caller != parts[2]
            or stored is None
            or caller not in srv.readers.readers(stored)
        ):
            return self._refuse(403, f"{caller or 'this client'} may not read this message")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_body(self, f: Any, length: int) -> None:
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
    """The service of ``store``'s organisation; TLS handshakes happen in the request's thread."""

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
        self.store = store
        self.readers = readers
        self.organisations = CertificateOrganisations(consortium)
        self.ssl_context = server_context(consortium, store.organisation)
        self.log = log
        super().__init__(address, handler)

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
        super().finish_request(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        assert isinstance(host, str)
        return f"https://{host}:{port}"

    def start(self) -> ArtifactServer:
        """Serve in a background thread (tests, embedding in the node agent)."""
        threading.Thread(target=self.serve_forever, name="artifact-service", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> None:
    from home.ledger import open_ledger
    from home.settings import load
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger

    ap = argparse.ArgumentParser(prog="python -m executor.artifact_service", description=__doc__)
    ap.add_argument("--org", help="this organisation (MSP id or name; default: the home's [node] table)")
    ap.add_argument("--home", help="a Consortia home: consortium, store and ledger (embedded or Fabric)")
    ap.add_argument("--consortium", help="the consortium's crypto directory")
    ap.add_argument("--store", help="artifact store root (holds <msp id>/)")
    ap.add_argument("--ledger", help="embedded ledger file")
    ap.add_argument(
        "--listen",
        help="loopback host:port, e.g. 127.0.1.1:8443 (default: the home's [node] listen, else 127.0.0.1:0)",
    )
    args = ap.parse_args(argv)
    settings = load(args.home) if args.home else None
    args.org = args.org or (settings.node_setting("organisation") if settings else None)
    args.listen = args.listen or (settings.node_setting("listen") if settings else None) or "127.0.0.1:0"
    if args.org is None:
        ap.error("--org is required (or a home whose [node] table names the organisation)")
    crypto = args.consortium or (settings.crypto if settings else None)
    store_root = args.store or (settings.paths.store_root if settings else None)
    if crypto is None or store_root is None or (settings is None and args.ledger is None):
        ap.error("give --home, or --consortium, --store and --ledger")
    consortium = Consortium(crypto)
    org = consortium.organisation(args.org).msp_id
    ledger = EmbeddedLedger(args.ledger, consortium) if args.ledger else open_ledger(settings, consortium)
    host, _, port = args.listen.rpartition(":")
    store = ArtifactStore(Path(store_root), org)
    readers = LedgerReaders(ConsortiaClient(ledger, consortium.identity(org)), store)
    srv = ArtifactServer((host, int(port)), store, consortium, readers, log=print)
    print(f"artifact service of {org} at {srv.url}", flush=True)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
        ledger.close()


if __name__ == "__main__":
    main()
