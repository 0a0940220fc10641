"""Canonical JSON and digests for the contracts: the house convention lives in :mod:`wire.canonical`
(re-exported here); :class:`RawJSON` is the dispatcher's pre-encoded answer."""

from __future__ import annotations

from collections.abc import Iterable

from wire.canonical import DIGEST_RE, canonical_json, is_digest, sha256_digest

__all__ = ["DIGEST_RE", "RawJSON", "canonical_json", "is_digest", "sha256_digest"]


class RawJSON(bytes):
    """Bytes that already are canonical JSON; the dispatcher returns them unchanged (used to
    splice stored records into answers, e.g. key histories, without decoding and re-encoding)."""

    @classmethod
    def array(cls, items: Iterable[bytes]) -> RawJSON:
        """The JSON array of ``items`` (each canonical JSON): itself canonical JSON."""
        return cls(b"[" + b",".join(items) + b"]")
