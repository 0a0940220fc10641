"""What goes wrong with a Consortia home."""

from __future__ import annotations

from pathlib import Path


class HomeError(Exception):
    """A Consortia home is missing, incomplete or cannot be made."""


class ConfigError(HomeError):
    """A home's ``consortia.toml``, or an environment variable overriding it, holds an unknown key or a
    value of the wrong type (or is not TOML at all). ``file`` is the configuration file; ``keys`` the
    offending keys as ``table.key`` (``CONSORTIA_*`` for an environment variable)."""

    def __init__(self, message: str, file: Path, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.file = file
        self.keys = keys


class NotPrivate(HomeError, PermissionError):
    """A home, or a ledger or audit index file in it, that other users of the machine may read (or
    enter): refused, not repaired (docs/configuration.md "A private home"). ``path`` is the offender."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


class LedgerNotFound(HomeError):
    """The ledger of a home does not exist (and creating it was not asked for): no embedded ledger
    file, or no Fabric connection profile."""


class ConsortiumNotFound(HomeError):
    """No consortium (no identities' manifest) where a home or the command line says it is."""
