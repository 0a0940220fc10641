"""Organisations' endpoints on the ledger (issue 12, item 2; docs/artifacts.md "Endpoints on the ledger").

Each organisation's node publishes its own membership record (``Membership`` contract) naming the
public ``https://host:port`` of its artifact service and the sha256 digest of its TLS CA certificate;
every other organisation finds that endpoint there -- never by a path, and no longer by a flag.

* :func:`tls_ca_digest` -- the digest an organisation publishes: sha256 of its TLS CA certificate PEM
  as it lies in the consortium tree (``tlsca/tlsca.<domain>-cert.pem``);
* :func:`publish_own_membership` -- publish (or update, only when something differs) this
  organisation's record; an existing gateway endpoint is kept;
* :class:`MemberEndpoints` -- an owner's artifact endpoint from its record, cached for the run, after
  checking that the TLS CA it declared is the one this organisation trusts for it.
"""

from __future__ import annotations

import logging
import time

from executor.artifact_tls import tls_ca_path
from executor.errors import ArtifactError
from ledger.client import ConsortiaClient, MemberRecord
from ledger.errors import NotFound
from ledger.identity import Consortium
from wire.canonical import sha256_digest

log = logging.getLogger(__name__)

MISS_TTL = 30.0  #: seconds a missing record is remembered before the ledger is asked again


def tls_ca_digest(consortium: Consortium, msp_id: str) -> str:
    """``sha256:<hex>`` of the organisation's TLS CA certificate PEM in ``consortium``."""
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


class MemberEndpoints:
    """Artifact endpoints of the consortium's organisations, read from their membership records.

    A record found is kept for the life of this object (one run of a node agent); a missing record
    means "no service" (``None``: the owner's messages are read in local file-store mode) and is asked
    again after :data:`MISS_TTL` seconds. A record whose TLS CA digest differs from the certificate
    this organisation trusts for the owner is refused (:class:`ArtifactError`)."""

    def __init__(self, client: ConsortiaClient, consortium: Consortium, miss_ttl: float = MISS_TTL):
        self.client = client
        self.consortium = consortium
        self.miss_ttl = miss_ttl
        self._found: dict[str, str] = {}
        self._missing: dict[str, float] = {}

    def endpoint(self, owner: str) -> str | None:
        if owner in self._found:
            return self._found[owner]
        if time.monotonic() - self._missing.get(owner, -self.miss_ttl) < self.miss_ttl:
            return None
        try:
            record = self.client.get_member(owner)
        except NotFound:
            self._missing[owner] = time.monotonic()
            return None
        trusted = tls_ca_digest(self.consortium, owner)
        if record.tls_ca_digest != trusted:
            raise ArtifactError(
                f"{owner}'s membership record declares TLS CA {record.tls_ca_digest}, but the TLS CA "
                f"this organisation holds for {owner} is {trusted}: refusing its endpoint"
            )
        self._missing.pop(owner, None)
        self._found[owner] = record.artifact_endpoint
        return record.artifact_endpoint
