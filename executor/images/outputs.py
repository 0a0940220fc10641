"""What an accepted image may send, as it declares it, and the host's check of a task's outputs
against the declaration before anything is sealed (docs/consent.md "What an image may send").

An image declares, in its ``image.json`` (inside the image, so covered by its digest)::

    "outputs": {
      "message": {"max_bytes": 65536, "schema": {...}},
      "model":   {"max_bytes": 1048576, "schema": {...}},
      "raw_rows": false
    }

``max_bytes`` bounds the encoded payload (:mod:`algorithms.codec`) of each message, and of the model;
``schema`` describes the decoded payload in a small JSON-Schema-like language, made for codec values
(which hold numpy arrays and bytes, which JSON Schema cannot describe):

* ``{"type": "object", "properties": {key: schema}, "required": [key], "additional": false | schema}``
  (``additional`` absent: ``false``, no other key);
* ``{"type": "list", "items": schema, "max_items": n}``;
* ``{"type": "ndarray", "dtypes": ["<f8", ...], "ndim": [1, 2], "max_size": n}`` (a numpy array:
  dtype descriptors, numbers of dimensions, elements);
* ``{"type": "number" | "integer" | "string" | "boolean" | "null" | "bytes"}`` (``max_length`` for
  strings and bytes), ``{"enum": [values]}``, ``{"any_of": [schema, ...]}``, and ``{}`` for any value.

``raw_rows`` says whether the image may ever send the member's own feature rows. When it is false
(also when the image declares nothing), :class:`RawRows` looks for them in every message and the model
(:meth:`RawRows.find`): every numeric array and every list of numbers, read as rows of the dataset's
width in its order and transposed, at float64 and at float32 precision, and every byte string read as
little-endian float64 or float32 rows at every offset, are compared with the rows of the local data
(a set of row hashes, made once per dataset). That catches rows sent as they are, cast, flattened,
transposed, listed or serialised as raw bytes. It does not catch rows transformed in any way (scaled,
shifted, noised, columns permuted or dropped, compressed, encrypted, or split across messages or
rounds), nor single columns; constant rows (every value equal, e.g. all zeros) are not looked for, as
a legitimate vector (a zero model) would match them; a dataset of fewer than two columns is not
checked. It makes what a member approved checkable; it does not make a hostile image safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from algorithms import codec
from executor.errors import ExecutorError

#: the bound on a message or model of an image that declares none (docs/consent.md)
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_TYPES = ("object", "list", "ndarray", "number", "integer", "string", "boolean", "null", "bytes")


class OutputRefused(ExecutorError):
    """A task's output breaks what its image declares (the task fails with the reason)."""

    code = "OUTPUT_DECLARATION"


class DeclarationInvalid(ExecutorError, ValueError):
    """An image's ``outputs`` declaration is not one this host can check."""

    code = "INVALID_ARGUMENT"


@dataclass(frozen=True)
class PayloadBound:
    """What one kind of output (a message, the model) may be."""

    max_bytes: int = DEFAULT_MAX_BYTES
    schema: Mapping[str, Any] | None = None  # None: not declared (any value)


@dataclass(frozen=True)
class OutputDeclaration:
    """An image's ``outputs`` declaration (:func:`parse`); ``declared``: whether the image made one."""

    message: PayloadBound = PayloadBound()
    model: PayloadBound = PayloadBound()
    raw_rows: bool = False
    declared: bool = False


def parse(meta: Mapping[str, Any]) -> OutputDeclaration:
    """The ``outputs`` declaration of an image.json object (none: the defaults, raw rows refused)."""
    raw = meta.get("outputs")
    if raw is None:
        return OutputDeclaration()
    if not isinstance(raw, Mapping) or set(raw) - {"message", "model", "raw_rows"}:
        raise DeclarationInvalid("image.json 'outputs' must be an object of message, model, raw_rows")
    if not isinstance(raw.get("raw_rows", False), bool):
        raise DeclarationInvalid("image.json outputs.raw_rows must be true or false")

    def bound(name: str) -> PayloadBound:
        part = raw.get(name)
        if part is None:
            return PayloadBound()
        if not isinstance(part, Mapping) or set(part) - {"max_bytes", "schema"}:
            raise DeclarationInvalid(f"image.json outputs.{name} must be an object of max_bytes, schema")
        limit = part.get("max_bytes", DEFAULT_MAX_BYTES)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise DeclarationInvalid(f"image.json outputs.{name}.max_bytes must be a positive integer")
        schema = part.get("schema")
        if schema is not None:
            _check_schema(schema, f"outputs.{name}.schema")
        return PayloadBound(limit, schema)

    return OutputDeclaration(bound("message"), bound("model"), bool(raw.get("raw_rows", False)), True)


def read(folder: Path) -> OutputDeclaration:
    """The declaration of the image whose recipe files are in ``folder`` (its ``image.json``)."""
    import json

    try:
        meta = json.loads((Path(folder) / "image.json").read_text())
    except FileNotFoundError:
        return OutputDeclaration()
    except ValueError as exc:
        raise DeclarationInvalid(f"{folder}/image.json is not JSON: {exc}") from None
    return parse(meta)


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, Mapping):
        raise DeclarationInvalid(f"{where} must be an object")
    known = {"type", "properties", "required", "additional", "items", "max_items", "dtypes", "ndim"}
    known |= {"max_size", "max_length", "enum", "any_of", "description"}
    if unknown := set(schema) - known:
        raise DeclarationInvalid(f"{where} has unknown keys {sorted(unknown)}")
    if "type" in schema and schema["type"] not in _TYPES:
        raise DeclarationInvalid(f"{where}.type must be one of {_TYPES}")
    for key, sub in (schema.get("properties") or {}).items():
        _check_schema(sub, f"{where}.properties.{key}")
    for name in ("items", "additional"):
        if isinstance(schema.get(name), Mapping):
            _check_schema(schema[name], f"{where}.{name}")
    for i, sub in enumerate(schema.get("any_of") or ()):
        _check_schema(sub, f"{where}.any_of[{i}]")


# ---------------------------------------------------------------------------- the schema


def schema_problem(value: Any, schema: Mapping[str, Any], where: str = "payload") -> str | None:
    """Why ``value`` (a decoded codec payload) does not match ``schema``, or None."""
    if "any_of" in schema:
        problems = [schema_problem(value, s, where) for s in schema["any_of"]]
        if all(p is not None for p in problems):
            return f"{where} matches none of its declared forms ({'; '.join(p for p in problems if p)})"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} = {value!r} is not one of {schema['enum']}"
    kind = schema.get("type")
    if kind is None:
        return None
    if kind == "object":
        if not isinstance(value, dict):
            return f"{where} must be an object, not {_kind(value)}"
        props = schema.get("properties") or {}
        missing = [k for k in schema.get("required", ()) if k not in value]
        if missing:
            return f"{where} lacks {missing}"
        extra = schema.get("additional", False)
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, Mapping) else None)
            if sub is None:
                if extra is False:
                    return f"{where} has key {k!r}, which the image does not declare"
                continue
            if (p := schema_problem(v, sub, f"{where}.{k}")) is not None:
                return p
        return None
    if kind == "list":
        if not isinstance(value, list):
            return f"{where} must be a list, not {_kind(value)}"
        if len(value) > schema.get("max_items", len(value)):
            return f"{where} has {len(value)} items, over the declared {schema['max_items']}"
        items = schema.get("items")
        if items is None:  # the items' form is not declared: any
            return None
        for i, v in enumerate(value):
            if (p := schema_problem(v, items, f"{where}[{i}]")) is not None:
                return p
        return None
    if kind == "ndarray":
        if not isinstance(value, np.ndarray):
            return f"{where} must be an array, not {_kind(value)}"
        descr = np.lib.format.dtype_to_descr(value.dtype)
        if "dtypes" in schema and descr not in schema["dtypes"]:
            return f"{where} has dtype {descr}, not one of {schema['dtypes']}"
        if "ndim" in schema and value.ndim not in schema["ndim"]:
            return f"{where} has {value.ndim} dimensions, not {schema['ndim']}"
        if value.size > schema.get("max_size", value.size):
            return f"{where} has {value.size} elements, over the declared {schema['max_size']}"
        return None
    ok = {
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "bytes": isinstance(value, bytes),
    }[kind]
    if not ok:
        return f"{where} must be {kind}, not {_kind(value)}"
    if isinstance(value, (str, bytes)) and len(value) > schema.get("max_length", len(value)):
        return f"{where} is {len(value)} long, over the declared {schema['max_length']}"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array ({value.dtype})"
    return type(value).__name__


# ---------------------------------------------------------------------------- raw rows


@dataclass
class RawRows:
    """The local dataset's feature rows, as hashes (float64 and float32 precision), to find them in
    outputs (see the module docstring for what this catches and what it cannot)."""

    width: int
    hashes: set[int] = field(default_factory=set)
    firsts: np.ndarray = field(default_factory=lambda: np.empty(0))  # first values, sorted: a cheap filter

    @classmethod
    def of(cls, features: np.ndarray) -> RawRows:
        x = np.asarray(features)
        if x.ndim != 2 or x.dtype.kind not in "biuf" or x.shape[1] < 2:
            return cls(0)
        x = x.astype(np.float64)
        x = x[~np.all(x == x[:, :1], axis=1)]  # constant rows: a zero vector is not a leak
        rows = cls(x.shape[1])
        casts = (x, x.astype(np.float32).astype(np.float64))
        for cast in casts:
            rows.hashes.update(_row_hashes(np.ascontiguousarray(cast)))
        rows.firsts = np.unique(np.concatenate([c[:, 0] for c in casts]))
        return rows

    def _hit(self, rows: np.ndarray) -> bool:
        """Whether a row of ``rows`` (2-D float64) is a local row: the rows whose first value is a
        local row's first value (vectorised) are hashed."""
        col = rows[:, 0]
        at = np.minimum(np.searchsorted(self.firsts, col), len(self.firsts) - 1)
        maybe = rows[self.firsts[at] == col]
        return any(h in self.hashes for h in _row_hashes(np.ascontiguousarray(maybe)))

    def find(self, value: Any, where: str = "payload") -> str | None:
        """Where a local row appears in ``value`` (a decoded payload), or None."""
        if self.width == 0 or not self.hashes:
            return None
        for path, candidate in _candidates(value, where):
            if isinstance(candidate, bytes):
                if self._in_bytes(candidate):
                    return f"{path} holds raw feature rows of this organisation's data (as bytes)"
                continue
            for rows in self._views(candidate):
                if self._hit(rows):
                    return f"{path} holds raw feature rows of this organisation's data"
        return None

    def _views(self, arr: np.ndarray) -> Iterator[np.ndarray]:
        d = self.width
        if arr.dtype.kind not in "biuf" or arr.size < d:
            return
        x = arr.astype(np.float64)
        if x.size % d == 0:
            yield np.ascontiguousarray(x.reshape(-1, d))
        if x.ndim >= 2 and x.shape[-2] == d:  # rows stored as columns (of each matrix)
            yield np.ascontiguousarray(np.swapaxes(x, -1, -2)).reshape(-1, d)

    def _in_bytes(self, blob: bytes) -> bool:
        d = self.width
        for dtype, size in ((np.dtype("<f8"), 8), (np.dtype("<f4"), 4)):
            for offset in range(size):
                n = (len(blob) - offset) // size
                if n < d:
                    continue
                with np.errstate(invalid="ignore", over="ignore"):
                    values = np.frombuffer(blob, dtype=dtype, count=n, offset=offset).astype(np.float64)
                if self._hit(np.lib.stride_tricks.sliding_window_view(values, d)):
                    return True
        return False


def _row_hashes(rows: np.ndarray) -> Iterator[int]:
    """A hash of each row's float64 bytes (Python's own hash of bytes, in this process)."""
    raw = np.ascontiguousarray(np.where(rows == 0, 0.0, rows), dtype="<f8")  # -0.0 as 0.0
    width = raw.shape[1] * 8 if raw.ndim == 2 else 0
    buf = raw.tobytes()
    for i in range(0, len(buf), width or 1):
        yield hash(buf[i : i + width])


def _candidates(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every array, list of numbers (as an array) and byte string inside ``value``."""
    if isinstance(value, np.ndarray):
        if value.dtype.names is None:
            yield where, value
        return
    if isinstance(value, bytes):
        yield where, value
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _candidates(v, f"{where}.{k}")
        return
    if isinstance(value, list):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.size:
            yield where, arr
            return
        for i, v in enumerate(value):
            yield from _candidates(v, f"{where}[{i}]")


# ---------------------------------------------------------------------------- the check


def check_outputs(
    declaration: OutputDeclaration,
    outbox: Mapping[str, bytes],
    model: bytes | None,
    rows: RawRows | None,
) -> None:
    """Check a task's messages and model against its image's declaration, before they are sealed;
    :class:`OutputRefused` naming the first output and rule broken."""
    parts: list[tuple[str, bytes, PayloadBound]] = [
        (f"message to {r}", blob, declaration.message) for r, blob in sorted(outbox.items())
    ]
    if model is not None:
        parts.append(("model", model, declaration.model))
    for what, blob, bound in parts:
        if len(blob) > bound.max_bytes:
            raise OutputRefused(f"{what} is {len(blob)} bytes, over the {bound.max_bytes} its image declares")
        if bound.schema is None and (declaration.raw_rows or rows is None):
            continue
        try:
            value = codec.decode(blob)
        except codec.CodecError as exc:
            raise OutputRefused(f"{what} is not a payload of the codec: {exc}") from None
        if bound.schema is not None and (problem := schema_problem(value, bound.schema, what)) is not None:
            raise OutputRefused(f"{what} breaks its image's declaration: {problem}")
        if not declaration.raw_rows and rows is not None and (found := rows.find(value, what)) is not None:
            raise OutputRefused(f"{found}; its image declares that raw rows never leave")
