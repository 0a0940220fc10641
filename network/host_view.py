"""A host of its own on one machine: a bubblewrap mount namespace in which a process sees the system
read-only (binaries, interpreters, the project's code) but, of everything an organisation keeps, only
its own files (docs/fabric.md "Isolated hosts").

A consortium's organisations run on separate machines and share nothing but the ledger, signatures and
the bytes they choose to send. On one machine, each organisation's processes (its peer, its chaincode
service, and its node agent, artifact service and gateway) are started inside such a view, listening on
its own loopback address (:mod:`~network.placement`): the folders that hold the other
organisations' keys and stores are not in its mount namespace at all, so no path reaches them.

What is hidden: ``/tmp``, ``/var/tmp``, ``/dev/shm`` and every path in ``hide`` (empty tmpfs in their
place); what is then visible again: ``own`` (read-write) and ``read_only`` (read-only), at the same paths.
The process keeps the machine's network namespace (loopback addresses are the hosts' network).

``/proc``: by default the view has a process namespace of its own with its own ``/proc`` (other hosts'
processes are not visible, so ``/proc/<pid>/root`` leads nowhere). A node agent runs its tasks in
bubblewrap sandboxes of its own, which mount a fresh ``/proc`` inside a user namespace; the kernel allows
that only where the host's ``/proc`` is fully visible, so the agent's view (``host_proc=True``) binds the
machine's ``/proc``. That is this model's one difference from a separate machine, written down in
docs/fabric.md: a process of that view running as root could still reach another process's files
through ``/proc/<pid>/root``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

HIDDEN = ("/tmp", "/var/tmp", "/dev/shm")  #: always replaced by an empty tmpfs


class HostViewError(RuntimeError):
    """The view cannot be made (no bubblewrap, or a path to share that does not exist)."""


def bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise HostViewError("bubblewrap (bwrap) is not installed: scripts/install-system-tools installs it")
    return found


def view_command(
    argv: Iterable[str],
    own: Iterable[str | os.PathLike[str]],
    *,
    read_only: Iterable[str | os.PathLike[str]] = (),
    hide: Iterable[str | os.PathLike[str]] = (),
    host_proc: bool = False,
    cwd: str | os.PathLike[str] = "/",
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """``argv`` run in a view that shows the system read-only, hides :data:`HIDDEN` and ``hide``, and
    shows ``own`` read-write and ``read_only`` read-only again. Every shared path must exist."""
    args = [bwrap(), "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    args += ["--bind", "/proc", "/proc"] if host_proc else ["--unshare-pid", "--proc", "/proc"]
    if Path("/sys/fs/cgroup").is_dir():  # a node agent's sandboxes get cgroups of their own
        args += ["--bind", "/sys/fs/cgroup", "/sys/fs/cgroup"]
    for path in (*HIDDEN, *(str(Path(h).resolve()) for h in hide)):
        args += ["--tmpfs", path]
    for mode, paths in (("--ro-bind", read_only), ("--bind", own)):
        for p in paths:
            real = Path(p).resolve()
            if not real.exists():
                raise HostViewError(f"{real} does not exist: nothing to share with the view")
            args += [mode, str(real), str(real)]
    args += ["--chdir", str(Path(cwd).resolve())]
    for k, v in (env or {}).items():
        args += ["--setenv", k, v]
    return [*args, "--", *argv]
