"""The protobuf wire format, by hand, for the few messages parsed without generated classes.

The contracts read the creator's ``msp.SerializedIdentity`` and the Fabric client reads
``google.rpc.Status`` details without a protobuf dependency. Every read is bounds-checked: a
varint longer than ten bytes or above 2**64 - 1, a length or fixed-width field running past the end,
an unknown wire type or field number 0 is a :class:`WireError`, never an ``IndexError``, a silent
short slice or an unbounded integer.
"""

from __future__ import annotations

MAX_VARINT_BYTES = 10  # 64 bits in 7-bit groups
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not well-formed protobuf wire format."""


def encode_varint(n: int) -> bytes:
    """The base-128 varint of ``0 <= n < 2**64`` (least significant group first)."""
    if not 0 <= n < 1 << 64:
        raise WireError(f"varint out of range: {n}")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos:]``; :class:`WireError` if it is
    truncated, longer than ten bytes or larger than 64 bits."""
    n = shift = 0
    for i in range(pos, min(pos + MAX_VARINT_BYTES, len(buf))):
        b = buf[i]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            if n >> 64:
                raise WireError(f"varint at byte {pos} exceeds 64 bits")
            return n, i + 1
        shift += 7
    if len(buf) - pos >= MAX_VARINT_BYTES:
        raise WireError(f"varint at byte {pos} is longer than {MAX_VARINT_BYTES} bytes")
    raise WireError(f"truncated varint at byte {pos}")


def _take(buf: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    if n > len(buf) - pos:
        raise WireError(f"truncated {what} at byte {pos}: {n} bytes announced, {len(buf) - pos} left")
    return bytes(buf[pos : pos + n]), pos + n


def read_fields(buf: bytes) -> list[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of each field of a message, in order: varints as ``int``,
    length-delimited and fixed-width fields as ``bytes``. Groups (wire types 3, 4) are refused."""
    out: list[tuple[int, int, bytes | int]] = []
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise WireError(f"field number 0 at byte {pos}")
        value: bytes | int
        if wt == VARINT:
            value, pos = read_varint(buf, pos)
        elif wt == LENGTH_DELIMITED:
            n, pos = read_varint(buf, pos)
            value, pos = _take(buf, pos, n, f"field {num}")
        elif wt == FIXED64:
            value, pos = _take(buf, pos, 8, f"field {num}")
        elif wt == FIXED32:
            value, pos = _take(buf, pos, 4, f"field {num}")
        else:
            raise WireError(f"unsupported wire type {wt} (field {num})")
        out.append((num, wt, value))
    return out


def length_delimited(buf: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a message by number (the last occurrence wins, as protobuf
    merges a repeated singular field); a field of another wire type is a :class:`WireError`."""
    fields: dict[int, bytes] = {}
    for num, wt, value in read_fields(buf):
        if wt != LENGTH_DELIMITED or not isinstance(value, bytes):
            raise WireError(f"field {num} has wire type {wt}, expected {LENGTH_DELIMITED}")
        fields[num] = value
    return fields
