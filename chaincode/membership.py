"""Membership contract: where each organisation of the consortium can be reached (issue 12, item 2).

Each organisation publishes its own membership record: the public HTTPS endpoint of its artifact
service (and optionally of its gateway) and the sha256 digest of its TLS CA certificate, so that a
fetcher finds a peer's endpoint on the ledger -- never by a path or a flag -- and can cross-check
the TLS root it trusts for it against what the organisation itself declared.

The record's key is the invoker's MSP id, taken from its certificate: an organisation can only ever
write its own record. Publishing again replaces the record and increments ``version``; every
version stays in the key's history.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from chaincode.canonical import RawJSON, is_digest
from chaincode.context import TransactionContext, parse_json_arg, require_keys
from chaincode.errors import Forbidden, InvalidArgument, NotFound
from chaincode.limits import MAX_ENDPOINT_CHARS, bounded_text
from chaincode.records import MSP_PATTERN, MemberRecord

MEMBER = "Member"

_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_ENDPOINT_RE = re.compile(
    r"https://(?P<host>\[[0-9A-Fa-f:.]+\]|" + _HOST_LABEL + r"(?:\." + _HOST_LABEL + r")*)"
    r":(?P<port>[0-9]{1,5})/?"
)


def check_endpoint(value: Any, what: str) -> str:
    """``https://host:port`` (a DNS name, an IPv4 address or a bracketed IPv6 address; port 1..65535;
    no user, path, query or fragment) of at most :data:`MAX_ENDPOINT_CHARS` characters."""
    text = bounded_text(value, what, MAX_ENDPOINT_CHARS)
    m = _ENDPOINT_RE.fullmatch(text)
    if m is None:
        raise InvalidArgument(f"{what} {text!r} is not of the form https://host:port")
    if not 1 <= int(m["port"]) <= 65535:
        raise InvalidArgument(f"{what} {text!r} has port {m['port']} outside 1..65535")
    host = m["host"]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise InvalidArgument(f"{what} {text!r} names an invalid IPv6 address") from None
    elif re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise InvalidArgument(f"{what} {text!r} names an invalid IPv4 address") from None
    return text.rstrip("/")


class MembershipContract:
    name = "Membership"

    @staticmethod
    def _key(ctx: TransactionContext, msp_id: str) -> str:
        return ctx.key(MEMBER, msp_id)

    def publish(self, ctx: TransactionContext, spec_json: str) -> MemberRecord:
        """Create or replace the caller's own record:
        ``{artifact_endpoint, tls_ca_digest, gateway_endpoint?, consent_roles?}``. ``consent_roles``
        (NodeOU roles besides admin that may consent for the organisation, docs/consent.md) is set
        only by an admin; when absent the previous record's are kept."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "membership record"),
            {"artifact_endpoint", "gateway_endpoint", "tls_ca_digest", "consent_roles"},
            {"artifact_endpoint", "tls_ca_digest"},
            "membership record",
        )
        artifact = check_endpoint(spec["artifact_endpoint"], "artifact endpoint")
        gateway = spec.get("gateway_endpoint")
        gateway = "" if gateway in (None, "") else check_endpoint(gateway, "gateway endpoint")
        if not is_digest(spec["tls_ca_digest"]):
            raise InvalidArgument(
                f"TLS CA digest {spec['tls_ca_digest']!r} is not of the form sha256:<64 hex>"
            )
        key = self._key(ctx, ctx.msp_id)
        previous = ctx.find(MemberRecord, key)
        extra: dict[str, Any] = {}
        roles = spec.get("consent_roles")
        if roles is not None:
            if not isinstance(roles, list) or not all(r in ("client", "admin") for r in roles):
                raise InvalidArgument("consent_roles must be a list of NodeOU roles among client, admin")
            if ctx.role != "admin":
                raise Forbidden(f"only an admin of {ctx.msp_id} may name the roles that consent for it")
            extra["consent_roles"] = tuple(sorted(set(roles)))
        elif previous is not None and "consent_roles" in previous.__pydantic_fields_set__:
            extra["consent_roles"] = previous.consent_roles
        record = MemberRecord(
            msp_id=ctx.msp_id,
            artifact_endpoint=artifact,
            gateway_endpoint=gateway,
            tls_ca_digest=spec["tls_ca_digest"],
            version=1 if previous is None else previous.version + 1,
            created=ctx.timestamp if previous is None else previous.created,
            updated_at=ctx.timestamp,
            published_by=ctx.subject,
            tx_id=ctx.tx_id,
            **extra,
        )
        ctx.put(key, record)
        ctx.emit("MemberPublished", {"msp_id": ctx.msp_id, "version": record.version})
        return record

    def _load(self, ctx: TransactionContext, msp_id: str) -> MemberRecord:
        if not isinstance(msp_id, str) or not re.fullmatch(MSP_PATTERN, msp_id):
            raise InvalidArgument(f"MSP id {msp_id!r} must match {MSP_PATTERN}")
        record = ctx.find(MemberRecord, self._key(ctx, msp_id))
        if record is None:
            raise NotFound(
                f"organisation {msp_id} has published no membership record "
                f"(its node publishes one when started with --artifact-endpoint)",
                msp_id=msp_id,
            )
        return record

    def get(self, ctx: TransactionContext, msp_id: str) -> MemberRecord:
        return self._load(ctx, msp_id)

    def list(self, ctx: TransactionContext) -> list[MemberRecord]:
        return sorted(ctx.scan(MemberRecord, MEMBER), key=lambda r: r.msp_id)

    def history(self, ctx: TransactionContext, msp_id: str, limit: str = "", after: str = "") -> RawJSON:
        """Every version of the membership record; with ``limit``/``after`` one page, newest first."""
        self._load(ctx, msp_id)
        return ctx.history(self._key(ctx, msp_id), limit, after)
