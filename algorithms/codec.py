"""Deterministic binary encoding of algorithm payloads (states, messages, models).

The simulator and the audited platform both pass every state and message through
:func:`encode` / :func:`decode`, so the bytes they hash and the objects the next step
sees are identical in both settings (docs/design.md, "Algorithms").
The format is private to Consortia but stable and fully specified here:

    payload  := b"CPL1" + u32 header_length + header(JSON, canonical) + blobs
    header   := the value with every ndarray replaced by {"$nd": [index, dtype, shape]}
                and every bytes value by {"$b": index}
    blobs    := the arrays (C order, raw little-endian bytes) and byte strings, concatenated,
                with their lengths recorded in header["$lengths"].

Supported values: None, bool, int, float (finite or not), str, bytes, list/tuple (decoded as
list), dict with str keys, numpy arrays of numeric/bool dtypes (also structured dtypes made of
them) and numpy scalars (decoded as Python scalars). Floats round-trip exactly (repr of a
Python float is exact).
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

from wire.canonical import sha256_digest

MAGIC = b"CPL1"


class CodecError(ValueError):
    """A value cannot be encoded, or bytes are not a valid payload."""


def _float_to_json(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"$f": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def encode(value: Any) -> bytes:
    """Encode ``value`` to canonical bytes (same value -> same bytes, on every machine)."""
    blobs: list[bytes] = []

    def walk(v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, (float, np.floating)):
            return _float_to_json(float(v))
        if isinstance(v, (bytes, bytearray, memoryview)):
            blobs.append(bytes(v))
            return {"$b": len(blobs) - 1}
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                raise CodecError("object arrays cannot be encoded")
            arr = np.ascontiguousarray(v)
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            blobs.append(arr.tobytes())
            descr = np.lib.format.dtype_to_descr(arr.dtype)
            return {"$nd": [len(blobs) - 1, descr, list(arr.shape)]}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            out = {}
            if not all(isinstance(k, str) for k in v):
                raise CodecError("dict keys must be str")
            for k in sorted(v):  # blob order must not depend on insertion order
                x = v[k]
                if not isinstance(k, str):
                    raise CodecError(f"dict keys must be str, got {type(k).__name__}")
                if k.startswith("$"):
                    raise CodecError(f"dict key {k!r} is reserved")
                out[k] = walk(x)
            return out
        raise CodecError(f"cannot encode value of type {type(v).__name__}")

    tree = walk(value)
    header = {"v": tree, "$lengths": [len(b) for b in blobs]}
    hbytes = json.dumps(
        header, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    return MAGIC + struct.pack("<I", len(hbytes)) + hbytes + b"".join(blobs)


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`. Arrays come back writeable and independent of ``data``."""
    if len(data) < 8 or data[:4] != MAGIC:
        raise CodecError("not a Consortia payload (bad magic)")
    (hlen,) = struct.unpack("<I", data[4:8])
    try:
        header = json.loads(data[8 : 8 + hlen].decode("utf-8"))
        lengths = header["$lengths"]
    except (ValueError, KeyError, UnicodeDecodeError) as exc:
        raise CodecError(f"corrupt payload header: {exc}") from None
    offsets = []
    pos = 8 + hlen
    for n in lengths:
        offsets.append((pos, pos + n))
        pos += n
    if pos != len(data):
        raise CodecError("payload length does not match its header")

    def walk(v: Any) -> Any:
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            if "$nd" in v:
                idx, descr, shape = v["$nd"]
                a, b = offsets[idx]
                dtype = np.lib.format.descr_to_dtype(descr)
                return np.frombuffer(data[a:b], dtype=dtype).reshape(shape).copy()
            if "$b" in v:
                a, b = offsets[v["$b"]]
                return bytes(data[a:b])
            if "$f" in v:
                return float(v["$f"])
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(header["v"])


digest = sha256_digest  # ``sha256:<hex>`` of raw bytes (the house digest format, wire.canonical)
