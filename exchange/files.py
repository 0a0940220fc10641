"""Private files of a store: written atomically, 0600, in directories 0700 (docs/executor.md "Artifact
store and messages"), so nothing in a store is readable by other users of the machine and a reader never
sees a half-written file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

FILE_MODE = 0o600
DIR_MODE = 0o700

_MADE: set[Path] = set()  # directories this process made (or found) private: not walked again per file


def make_private_dirs(d: Path, top: Path) -> None:
    """``mkdir -p d`` with every directory from ``top`` down to ``d`` at mode 0700."""
    d.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    p = d
    while True:
        if p.stat().st_mode & 0o777 != DIR_MODE:
            p.chmod(DIR_MODE)
        if p == top or p.parent == p or top not in p.parents:
            break
        p = p.parent
    if len(_MADE) > 100_000:
        _MADE.clear()
    _MADE.add(d)


def write_private_file(path: Path, data: bytes, top: Path) -> None:
    """Write ``data`` to ``path`` atomically, 0600, creating missing directories below ``top`` 0700."""
    write_private_stream(path, lambda f: f.write(data), top)


def write_private_stream(
    path: Path, write: Callable[[BinaryIO], object], top: Path, prefix: str = ".put-"
) -> None:
    """:func:`write_private_file` of whatever ``write`` writes into the (seekable) temporary file beside
    ``path``; if ``write`` raises, nothing is left behind."""
    if path.parent not in _MADE:
        make_private_dirs(path.parent, top)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)  # mkstemp creates 0600
    except FileNotFoundError:  # removed since it was made: make it again
        _MADE.discard(path.parent)
        make_private_dirs(path.parent, top)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(fd, "w+b") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
