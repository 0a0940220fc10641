"""Where an organisation's task directories live on its node (docs/executor.md "Task directories").

While a task runs, its task directory holds it in the clear: its previous state and the messages
addressed to it (opened), its key, and its outputs until the agent has verified them. On a memory
filesystem none of it reaches a disk, and the ~150 files a task's inputs and outputs make are created
and removed for a fraction of a disk filesystem's kernel time (docs/audited-process.md). The base is:

1. ``$CONSORTIA_TASK_SCRATCH`` if set (``state``: the agent's state directory, as before);
2. else ``$XDG_RUNTIME_DIR`` (per user; a tmpfs on systemd machines), else ``/dev/shm``, the first
   that is a writable directory with at least :data:`MIN_FREE_BYTES` free;
3. else ``<state dir>/warm``.

Under a chosen base the directory is ``<base>/consortia-<uid>/<16 hex of sha256(state dir)>``: one per
agent state directory, so two homes of one user never share it and a restarted agent finds its own
(and clears what a killed one left). Both levels are made 0700, and a level that is not a directory
owned by this user (a symlink, another user's) is refused: with a default base the agent falls back
to its state directory (logged), with an explicit one it raises. When the agent ends it removes its
own directory (:func:`release_scratch`); the per-user level stays (other agents of the user may be
using it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

from wire.env import environment

log = logging.getLogger(__name__)

MIN_FREE_BYTES = 1 << 30  #: a memory filesystem with less free is not used by default


def task_scratch(state_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Path:
    """The directory for the task directories of the agent whose state directory is ``state_dir``
    (created, 0700, this user's; see the module doc)."""
    state_dir = Path(state_dir)
    fallback = state_dir / "warm"
    setting = environment(environ).task_scratch
    if setting == "state":
        return fallback
    base = Path(setting) if setting else memory_base(environ)
    if base is None:
        return fallback
    tag = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
    d = user_dir(base) / tag
    try:
        _private_dir(d.parent)
        _private_dir(d)
    except OSError as exc:
        if setting:
            raise
        log.warning("task directories stay in %s: %s", fallback, exc)
        return fallback
    return d


def release_scratch(scratch: Path, state_dir: str | os.PathLike[str]) -> None:
    """Remove ``scratch``, the task directories' base :func:`task_scratch` gave the agent of ``state_dir``,
    when that agent ends: its own directory under a memory filesystem, with whatever a killed task left
    in it (the state directory's fallback ``warm`` stays with the state). Never follows a link: a path
    that is not a directory of this user is left alone."""
    if Path(scratch) == Path(state_dir) / "warm":
        return
    try:
        st = os.lstat(scratch)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        log.warning("not removing %s: not a directory of this user", scratch)
        return
    shutil.rmtree(scratch, ignore_errors=True)


def user_dir(base: Path) -> Path:
    """``<base>/consortia-<uid>``: this user's level under a base, holding one directory per agent."""
    return base / f"consortia-{os.getuid()}"


def memory_base(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$XDG_RUNTIME_DIR`` or ``/dev/shm``: the first writable directory with room, or None."""
    for candidate in (environment(environ).xdg_runtime_dir, "/dev/shm"):
        if not candidate or not os.path.isdir(candidate) or not os.access(candidate, os.W_OK | os.X_OK):
            continue
        try:
            fs = os.statvfs(candidate)
        except OSError:
            continue
        if fs.f_bavail * fs.f_frsize >= MIN_FREE_BYTES:
            return Path(candidate)
    return None


def _private_dir(d: Path) -> None:
    """``d`` exists as a directory of this user, mode 0700 (raises PermissionError otherwise)."""
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise PermissionError(f"{d} is not a directory of this user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(d, 0o700)
