"""Where each organisation serves its artifacts: the one locations resolver given to a store
(docs/artifacts.md "Locations").

An organisation's store never opens another organisation's files. To read another organisation's
artifact (a message sent to it, a model it may download) it asks the owner's artifact service, and
:class:`Locations` says how to reach that service:

1. an organisation whose node runs in this same process (a consortium simulated on one machine:
   ``home.platform.Platform``'s agent threads, tests) is reached in memory through its own service
   (:class:`exchange.service.HostedServices`), under the same authorisation rule as over HTTPS;
2. an explicit endpoint (the command line's ``--peer-artifacts ORG=URL``), if given;
3. otherwise the owner's **membership record** on the ledger (``Membership`` contract): the public
   ``https://host:port`` of its service and the digest of its TLS CA certificate, checked against the TLS
   CA this organisation trusts for it. A record found is kept for the life of the resolver; a missing
   one is asked again after :data:`MISS_TTL` seconds; after an unreachable service the record is read
   again (its node may have moved).

Nothing else is a location: an endpoint that is not ``https://host[:port]`` is refused
(:class:`exchange.errors.LocationRefused`), an organisation with none is :class:`LocationUnknown`.
There is no module-wide TLS setting: whoever builds a store builds its resolver with its TLS identity
(:class:`exchange.tls.ClientTLS`) and gives it to the store.

Publishing one's own record is the other half: :func:`publish_own_membership`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES, ArtifactClient, https_endpoint
from exchange.errors import ArtifactUnreachable, LocationRefused, LocationUnknown
from exchange.tls import ClientTLS, tls_ca_path
from ledger.client import ConsortiaClient, MemberRecord
from ledger.errors import NotFound
from ledger.identity import Consortium
from wire.canonical import sha256_digest

log = logging.getLogger(__name__)

MISS_TTL = 30.0  #: seconds a missing membership record is remembered before the ledger is asked again
T = TypeVar("T")


class Peer(Protocol):
    """Another organisation's artifacts as this organisation reaches them: its service over HTTPS
    (:class:`exchange.client.ArtifactClient`) or in memory (:class:`exchange.service.HostedPeer`)."""

    owner: str

    def message_entry(self, process_id: str, round: int, recipient: str) -> dict[str, Any]:
        """The owner's index entry of its message to ``recipient`` in that round."""
        ...

    def get(self, digest: str, size: int | None = None) -> bytes:
        """The artifact's bytes, verified against ``digest``; at most ``size`` bytes (when given) and
        at most the resolver's ``max_bytes`` (:class:`exchange.errors.ArtifactTooLarge` otherwise)."""
        ...

    def fetch_to(self, digest: str, final: Path, top: Path, size: int | None = None) -> Path:
        """The artifact written to ``final`` (verified, atomic, 0600; directories below ``top`` 0700),
        bounded as :meth:`get`."""
        ...


class Hosted(Protocol):
    """The services of the organisations whose nodes run in this process."""

    def peer(self, owner: str, caller: str, max_bytes: int) -> Peer | None:
        """``owner``'s service as ``caller`` reaches it in memory (taking at most ``max_bytes`` per
        artifact), or None if not hosted here."""
        ...


def tls_ca_digest(consortium: Consortium, msp_id: str) -> str:
    """``sha256:<hex>`` of the organisation's TLS CA certificate PEM in ``consortium`` (what its
    membership record declares)."""
    return sha256_digest(tls_ca_path(consortium, msp_id).read_bytes())


def publish_own_membership(
    client: ConsortiaClient,
    consortium: Consortium,
    artifact_endpoint: str,
    gateway_endpoint: str | None = None,
) -> MemberRecord:
    """Publish ``client``'s organisation's record unless the ledger already holds the same one.
    ``gateway_endpoint=None`` keeps the gateway endpoint already published (if any)."""
    digest = tls_ca_digest(consortium, client.organisation)
    try:
        current: MemberRecord | None = client.get_member(client.organisation)
    except NotFound:
        current = None
    if gateway_endpoint is None:
        gateway_endpoint = current.gateway_endpoint if current else ""
    wanted = (artifact_endpoint.rstrip("/"), digest, gateway_endpoint.rstrip("/"))
    if (
        current is not None
        and (current.artifact_endpoint, current.tls_ca_digest, current.gateway_endpoint) == wanted
    ):
        return current
    record = client.publish_membership(*wanted[:2], gateway_endpoint=wanted[2])
    log.info("published membership of %s (version %d): %s", record.msp_id, record.version, artifact_endpoint)
    return record


def parse_endpoints(items: Iterable[str] | None) -> dict[str, str]:
    """``["Org2MSP=https://127.0.2.1:8443", ...]`` (command line ``--peer-artifacts``, an explicit
    override of the endpoints found on the ledger) as a mapping; never a path (:class:`LocationRefused`)."""
    out = {}
    for item in items or ():
        org, sep, url = item.partition("=")
        if not sep or not org:
            raise LocationRefused(f"expected ORG=https://host:port, got {item!r}")
        out[org] = https_endpoint(url)
    return out


class Locations:
    """How this organisation (``tls.organisation``) reaches every other organisation's artifacts.

    ``client`` reads the membership records (None: no ledger lookup); ``endpoints`` overrides them;
    ``hosted`` holds the services of nodes running in this process. ``patience``: seconds :meth:`reach`
    waits for a service that cannot be reached. ``max_bytes``: the largest artifact fetched from anyone
    (the home's ``[exchange] max_artifact_bytes``)."""

    def __init__(
        self,
        tls: ClientTLS,
        *,
        client: ConsortiaClient | None = None,
        endpoints: Mapping[str, str] | None = None,
        hosted: Hosted | None = None,
        miss_ttl: float = MISS_TTL,
        patience: float = 300.0,
        max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
    ):
        self.tls = tls
        self.organisation = tls.organisation
        self.client = client
        self.endpoints = {o: https_endpoint(url) for o, url in (endpoints or {}).items()}
        self.hosted = hosted
        self.miss_ttl = miss_ttl
        self.patience = patience
        self.max_bytes = max_bytes
        self._found: dict[str, str] = {}
        self._missing: dict[str, float] = {}
        self._clients: dict[str, ArtifactClient] = {}
        self._lock = threading.Lock()

    def endpoint(self, owner: str) -> str | None:
        """``owner``'s artifact endpoint: the explicit one, else its membership record's (None: none)."""
        url = self.endpoints.get(owner)
        if url is not None:
            return url
        if self.client is None:
            return None
        if owner in self._found:
            return self._found[owner]
        if time.monotonic() - self._missing.get(owner, -self.miss_ttl) < self.miss_ttl:
            return None
        try:
            record = self.client.get_member(owner)
        except NotFound:
            self._missing[owner] = time.monotonic()
            return None
        trusted = tls_ca_digest(self.tls.consortium, owner)
        if record.tls_ca_digest != trusted:
            raise LocationRefused(
                f"{owner}'s membership record declares TLS CA {record.tls_ca_digest}, but the TLS CA "
                f"this organisation holds for {owner} is {trusted}: refusing its endpoint"
            )
        self._missing.pop(owner, None)
        self._found[owner] = https_endpoint(record.artifact_endpoint)
        return self._found[owner]

    def peer(self, owner: str) -> Peer:
        """``owner``'s service as this organisation reaches it; :class:`LocationUnknown` if it has none."""
        hosted = self.hosted.peer(owner, self.organisation, self.max_bytes) if self.hosted else None
        if hosted is not None:
            return hosted
        url = self.endpoint(owner)
        if url is None:
            raise LocationUnknown(
                f"{owner} has no artifact location: no membership record with an artifact endpoint, "
                "and its node is not hosted in this process"
            )
        with self._lock:
            client = self._clients.get(owner)
            if client is None or client.endpoint != url:
                if client is not None:
                    client.close()
                client = self._clients[owner] = ArtifactClient(url, owner, self.tls, max_bytes=self.max_bytes)
            return client

    def unreachable(self, owner: str) -> None:
        """``owner``'s service could not be reached: read its membership record again next time."""
        self._found.pop(owner, None)

    def reach(self, owner: str, ask: Callable[[Peer], T]) -> T:
        """``ask(owner's peer)``, waiting with backoff (0.5 s doubling to 5 s) up to :attr:`patience`
        seconds while the owner's service cannot be reached (its node restarting): a round cannot go on
        without it, and a failed task would end the whole process. A refusal or a missing artifact is an
        answer and is raised at once."""
        deadline, delay = time.monotonic() + self.patience, 0.5
        while True:
            try:
                return ask(self.peer(owner))
            except ArtifactUnreachable as exc:
                self.unreachable(owner)
                if time.monotonic() + delay > deadline:
                    raise ArtifactUnreachable(
                        f"{exc} (still unreachable after {self.patience:.0f} s)"
                    ) from None
                log.warning("%s; waiting %.1f s for its node", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def close(self) -> None:
        """Close the kept-alive connections."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
