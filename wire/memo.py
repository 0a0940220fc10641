"""Bounded process-wide memo tables: values derived purely from exact bytes (a parsed certificate, a
decoded record's summary) kept so that the same bytes are not parsed again. A table is cleared
whole when it reaches its bound -- the derivation is pure, so a cleared entry is only recomputed."""

from __future__ import annotations

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
