"""Bounded process-wide memo tables: values derived purely from exact bytes (a parsed certificate, a
decoded record's summary) kept so that the same bytes are not parsed again. A table is cleared
whole when it reaches its bound -- the derivation is pure, so a cleared entry is only recomputed.

:func:`read_file` keeps small files' bytes the same way, keyed by what ``stat`` says of the file, so a
file read on every call (a certificate that may be replaced) costs one ``stat`` while it is unchanged."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class Memo(dict[_K, _V]):
    """``dict`` holding at most ``bound`` entries (cleared whole when full)."""

    def __init__(self, bound: int):
        super().__init__()
        self.bound = bound

    def remember(self, key: _K, value: _V) -> _V:
        """Store ``value`` under ``key`` (clearing the table first when full); returns ``value``."""
        if len(self) >= self.bound:
            self.clear()
        self[key] = value
        return value

    def get_or_make(self, key: _K, make: Callable[[], _V]) -> _V:
        """The value under ``key``, made by ``make()`` and remembered if absent."""
        try:
            return self[key]
        except KeyError:
            return self.remember(key, make())


_FILES: Memo[str, tuple[tuple[int, int, int, int], bytes]] = Memo(1024)


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path``, read again whenever its device, inode, size or modification time
    changed (a replaced or rewritten file is seen at once); raises what ``open`` raises."""
    st = os.stat(path)
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    key = os.fspath(path)
    hit = _FILES.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    with open(path, "rb") as f:
        data = f.read()
    _FILES.remember(key, (stamp, data))  # a change during the read: the next stat differs, read again
    return data
