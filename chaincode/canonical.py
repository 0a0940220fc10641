"""Canonical JSON and digests for the contracts: the house convention lives in :mod:`wire.canonical`
(re-exported here); :class:`RawJSON` is the dispatcher's pre-encoded answer."""

from __future__ import annotations

from wire.canonical import DIGEST_RE, canonical_json, is_digest, sha256_digest

__all__ = ["DIGEST_RE", "RawJSON", "canonical_json", "is_digest", "sha256_digest"]


class RawJSON(bytes):
    """Bytes that already are canonical JSON; the dispatcher returns them unchanged (used to
    splice stored records into large answers, e.g. key histories, without re-encoding)."""
