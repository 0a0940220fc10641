"""Canonical JSON and digests (house convention, DESIGN.md "On-chain data").

Canonical JSON = sorted keys, no whitespace, UTF-8, no NaN/Infinity. Its SHA-256 is stable
across machines and languages, so it is what gets hashed and signed.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and DIGEST_RE.match(value) is not None


class RawJSON(bytes):
    """Bytes that already are canonical JSON; the dispatcher returns them unchanged (used to
    splice stored records into large answers, e.g. key histories, without re-encoding)."""
