"""JSON that comes from outside, decoded with a bounded depth (docs/limits.md "JSON read from
outside").

A checkpoint file, an audit bundle, an attestation, another organisation's message index entry, a
task's manifest, a connection profile: whoever made them may have nested them thousands of levels
deep. Python's decoder recurses once per level and gives up with a ``RecursionError`` (a traceback,
not an answer), and a value that does decode but is deeper than the code that reads it expects breaks
that code later. :func:`loads` decodes such a document and refuses one nested deeper than its limit
with :class:`JSONTooDeep` (a ``ValueError``: every caller that refuses malformed JSON refuses it the
same way, with the depth and the limit in the message). :func:`json_depth` measures a decoded value
without recursion.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

MAX_DOCUMENT_DEPTH = 128
"""Containers nested in one document read from outside: far above what any Consortia document holds
(a contract argument is at most 32 levels, ``chaincode.limits.MAX_JSON_DEPTH``; a record or a bundle
wraps it in a few more) and far below the interpreter's recursion limit."""


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than its limit (``depth`` None: deeper than the decoder goes)."""

    def __init__(self, what: str, limit: int, depth: int | None = None) -> None:
        deep = f"nested {depth} levels deep" if depth is not None else "nested deeper than the decoder goes"
        super().__init__(f"{what} is {deep}, over the limit of {limit} levels")
        self.what, self.limit, self.depth = what, limit, depth


def json_depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, ``[]`` and ``{}`` are 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
        stack.extend((c, depth) for c in children if isinstance(c, (dict, list, tuple)))
    return deepest


def loads(
    data: str | bytes | bytearray,
    what: str,
    max_depth: int = MAX_DOCUMENT_DEPTH,
    *,
    parse_constant: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
) -> Any:
    """``json.loads(data)``, refusing a document nested more than ``max_depth`` levels
    (:class:`JSONTooDeep`, naming ``what``); malformed JSON is the decoder's ``ValueError``."""
    try:
        value = json.loads(data, parse_constant=parse_constant, parse_float=parse_float)
    except RecursionError:
        raise JSONTooDeep(what, max_depth) from None
    depth = json_depth(value)
    if depth > max_depth:
        raise JSONTooDeep(what, max_depth, depth)
    return value
