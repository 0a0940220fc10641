"""API tokens of a gateway: random secrets bound to a user identity of the gateway's organisation.

A token reads ``cst_<MSP id>_<43 url-safe characters>`` (256 random bits). Only its SHA-256 is
stored, in ``tokens.json`` in the gateway's home (mode 0600), with the user it is bound to. The MSP
id in the token lets a gateway tell "a token of another organisation's gateway" (403: each
organisation runs its own gateway and acts only for itself) from "no such token" (401); the hash
lookup, not the prefix, is what authenticates.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

TOKEN_RE = re.compile(r"cst_([A-Za-z0-9][A-Za-z0-9.-]{0,63})_([A-Za-z0-9_-]{43})")
USER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class AuthenticationError(Exception):
    """No valid token (HTTP 401)."""

    status = 401
    code = "UNAUTHENTICATED"


class WrongOrganisation(AuthenticationError):
    """A token issued by another organisation's gateway (HTTP 403)."""

    status = 403
    code = "WRONG_ORGANISATION"


@dataclass(frozen=True)
class TokenOwner:
    """Who a token authenticates: a user of the gateway's organisation."""

    msp_id: str
    user: str
    token_id: str  # first 12 hex of the token's hash: names it in logs without revealing it
    created: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The hashed tokens of one gateway (``<home>/tokens.json``)."""

    def __init__(self, path: str | os.PathLike, msp_id: str):
        self.path = Path(path)
        self.msp_id = msp_id
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def issue(self, user: str) -> str:
        """A new token for ``user`` of this organisation. The clear token is returned once, never stored."""
        if not isinstance(user, str) or not USER_RE.fullmatch(user):
            raise ValueError(f"user name {user!r} must match {USER_RE.pattern}")
        token = f"cst_{self.msp_id}_{secrets.token_urlsafe(32)}"
        with self._lock:
            data = self._load()
            data[_hash(token)] = {
                "msp_id": self.msp_id,
                "user": user,
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            self._save(data)
        return token

    def revoke(self, token_id: str) -> bool:
        """Remove the token whose hash starts with ``token_id`` (at least 12 hex characters)."""
        if len(token_id) < 12:
            raise ValueError("give at least 12 hex characters of the token id")
        with self._lock:
            data = self._load()
            hits = [h for h in data if h.startswith(token_id)]
            for h in hits:
                del data[h]
            self._save(data)
        return bool(hits)

    def owners(self) -> list[TokenOwner]:
        return [
            TokenOwner(v["msp_id"], v["user"], h[:12], v["created"]) for h, v in sorted(self._load().items())
        ]

    def authenticate(self, token: str | None) -> TokenOwner:
        """The owner of ``token``; :class:`AuthenticationError` or :class:`WrongOrganisation` otherwise."""
        if not token:
            raise AuthenticationError("missing API token: send 'Authorization: Bearer <token>'")
        m = TOKEN_RE.fullmatch(token)
        if m is None:
            raise AuthenticationError("malformed API token")
        if m.group(1) != self.msp_id:
            raise WrongOrganisation(
                f"this is the gateway of {self.msp_id}; a token issued for {m.group(1)} "
                f"cannot act here (each organisation acts only through its own gateway)"
            )
        digest = _hash(token)
        data = self._load()
        for h, v in data.items():
            if hmac.compare_digest(h, digest):
                if v["msp_id"] != self.msp_id:
                    raise WrongOrganisation(f"token bound to {v['msp_id']}, not to {self.msp_id}")
                return TokenOwner(v["msp_id"], v["user"], h[:12], v["created"])
        raise AuthenticationError("unknown or revoked API token")
