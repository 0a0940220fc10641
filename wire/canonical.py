"""Canonical JSON and digests: what is hashed and signed, on and off the chain.

Canonical JSON = sorted keys, no whitespace, UTF-8, no NaN/Infinity (docs/ledger.md "On-chain
records and their keys"). Its SHA-256 is stable across machines and languages. A digest is written
``sha256:<64 hex>`` everywhere (records, artifacts, images, models).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

DIGEST_RE = re.compile(
    r"^sha256:[0-9a-f]{64}$"
)  #: anchored for pattern users (pydantic); match it with fullmatch


def canonical_json(value: Any) -> bytes:
    """Canonical JSON of ``value`` at any nesting depth.

    The C encoder recurses once per level and gives up at the interpreter's recursion limit;
    such a value is encoded by :func:`_canonical_json_iterative` instead (same bytes)."""
    try:
        return _dumps(value).encode("utf-8")
    except RecursionError:
        return _canonical_json_iterative(value).encode("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _key(k: Any) -> str:
    """A dict key as ``json.dumps`` writes it."""
    if isinstance(k, str):
        return k
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, (int, float)):
        return _dumps(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def _canonical_json_iterative(value: Any) -> str:
    """The canonical JSON text of ``value`` with an explicit stack instead of recursion (the same
    text as ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``)."""
    out: list[str] = []
    # stack items: a value still to encode, or a literal piece of text (marked by the tuple)
    stack: list[Any] = [("v", value)]
    while stack:
        kind, item = stack.pop()
        if kind == "t":
            out.append(item)
            continue
        if isinstance(item, dict):
            pairs = sorted(item.items())
            pieces: list[tuple[str, Any]] = [("t", "{")]
            for i, (k, v) in enumerate(pairs):
                pieces.append(("t", ("," if i else "") + _dumps(_key(k)) + ":"))
                pieces.append(("v", v))
            pieces.append(("t", "}"))
            stack.extend(reversed(pieces))
        elif isinstance(item, (list, tuple)):
            pieces = [("t", "[")]
            for i, v in enumerate(item):
                if i:
                    pieces.append(("t", ","))
                pieces.append(("v", v))
            pieces.append(("t", "]"))
            stack.extend(reversed(pieces))
        else:
            out.append(_dumps(item))
    return "".join(out)


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data`` (the house digest format)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: Any) -> bool:
    """``value`` is a digest string in the house format."""
    return isinstance(value, str) and DIGEST_RE.fullmatch(value) is not None
