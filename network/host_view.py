"""A host of its own on one machine: a bubblewrap mount namespace in which a process sees the system
read-only (binaries, interpreters, the project's code) but, of everything an organisation keeps, only
its own files (docs/fabric.md "Isolated hosts").

A consortium's organisations run on separate machines and share nothing but the ledger, signatures and
the bytes they choose to send. On one machine, each organisation's processes (its peer, its chaincode
service, and its node agent, artifact service and gateway) are started inside such a view, listening on
its own loopback address (:mod:`~network.placement`): the folders that hold the other
organisations' keys and stores are not in its mount namespace at all, so no path reaches them.

What is visible: nothing but the system, read-only -- ``/usr``, ``/etc``, ``/opt``, ``/sys``, ``/bin``,
``/lib``, ... as on the machine (:data:`SYSTEM`, :data:`TOP_LEVEL`), the Python environment that runs
the project (:func:`python_paths`) and the project's code (``REPO_ROOT``) -- then ``read_only``
(read-only) and ``own`` (read-write), at the same paths. The view is built on an empty tmpfs root, so
a folder outside those paths is simply absent, wherever it is (``/work``, ``/srv``, ``/root``, ...);
``/tmp``, ``/var/tmp`` and ``/dev/shm`` are empty tmpfs of the view's own (a checkout or Python
environment that lives under one of them is bound into it, nothing else of it). A folder of the organisations
that sits *inside* one of the system paths (e.g. homes in a folder of the checkout) is covered by an
empty tmpfs when it is named in ``hide``, before ``own`` and ``read_only`` are bound again.
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
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from network.config import REPO_ROOT

HIDDEN = ("/tmp", "/var/tmp", "/dev/shm")  #: always an empty tmpfs of the view's own
SYSTEM = ("/usr", "/etc", "/opt", "/sys")  #: bound read-only where they exist
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  #: links into /usr, or bound read-only


class HostViewError(RuntimeError):
    """The view cannot be made (no bubblewrap, or a path to share that does not exist)."""


def bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise HostViewError("bubblewrap (bwrap) is not installed: scripts/install-system-tools installs it")
    return found


def python_paths() -> list[Path]:
    """The Python environment running the project, outside ``/usr``: the interpreter's installation
    (``sys.base_prefix``), the virtual environment (``sys.prefix``) and the executable's folder."""
    out: list[Path] = []
    for p in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = Path(p).resolve()
        if real.is_dir() and not _under(real, [Path("/usr"), *out]):
            out.append(real)
    return out


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


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
    """``argv`` run in a view built on an empty root: the system read-only (module docstring), ``hide``
    covered where the system paths hold it, then ``read_only`` read-only and ``own`` read-write again.
    Every shared path must exist."""
    args = [bwrap(), "--tmpfs", "/"]
    system: list[Path] = []
    for top in TOP_LEVEL:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            system.append(Path(top))
    system += [Path(d) for d in SYSTEM if os.path.isdir(d)]
    for extra in (*python_paths(), REPO_ROOT):
        if not _under(extra, system):
            system.append(extra)
    for path in HIDDEN:  # first: a checkout or environment under /tmp is bound into the empty /tmp
        args += ["--tmpfs", path]
    for shown in system:
        args += ["--ro-bind", str(shown), str(shown)]
    args += ["--dev-bind", "/dev", "/dev"]
    args += ["--bind", "/proc", "/proc"] if host_proc else ["--unshare-pid", "--proc", "/proc"]
    if Path("/sys/fs/cgroup").is_dir():  # a node agent's sandboxes get cgroups of their own
        args += ["--bind", "/sys/fs/cgroup", "/sys/fs/cgroup"]
    for h in hide:  # only where a system path would show it: anywhere else it is absent already
        real = Path(h).resolve()
        if _under(real, system):
            args += ["--tmpfs", str(real)]
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
