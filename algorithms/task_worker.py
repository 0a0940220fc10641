"""Warm workers inside an image: run task after task of one organisation in one isolated process
(``--serve`` / ``--serve-once`` of the image's command line, :mod:`algorithms.task_command`; the
executor side is :mod:`executor.runtimes.warm`).

This module imports only the standard library and :mod:`algorithms` (it runs inside images).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from algorithms.numeric_profile import PROFILE, NumericProfile
from algorithms.task_runtime import run_and_report


class _Lifeline:
    """If stdin is a pipe (the sandbox runtime passes one whose write end only the executor holds),
    EOF on it means the executor is gone: the worker must not outlive it. The executor also writes a
    byte to it whenever there is something to look at (a task's ``READY``, ``STOP``): the doorbell an
    idle worker sleeps on, instead of polling its folder.

    If stdout is a pipe too, it is the worker's own doorbell to the executor: one byte when it takes a
    task and one when the task is done. Whatever the task prints goes to stderr instead (fd 1 is
    pointed there), so it can neither fill that pipe nor ring it."""

    def __init__(self) -> None:
        import stat

        try:
            self.fd = sys.stdin.fileno()
            self.active = stat.S_ISFIFO(os.fstat(self.fd).st_mode)
        except (OSError, ValueError, AttributeError):
            self.active = False
        self.bell: int | None = None
        try:
            if stat.S_ISFIFO(os.fstat(1).st_mode):
                sys.stdout.flush()
                self.bell = os.dup(1)
                os.dup2(2, 1)
        except (OSError, ValueError):
            self.bell = None

    def cut(self) -> bool:
        if not self.active:
            return False
        return self.wait(0) is False

    def wait(self, timeout: float) -> bool | None:
        """Sleep until the executor rings or ``timeout`` passes: True if it rang, None if not, False if
        the executor is gone (EOF). Without a pipe: just sleep ``timeout``."""
        if not self.active:
            time.sleep(timeout)
            return None
        import select

        readable, _, _ = select.select([self.fd], [], [], timeout)
        if not readable:
            return None
        return os.read(self.fd, 4096) != b""

    def close(self) -> None:
        """Give fd 1 back to the doorbell pipe it was (serving is over: the caller's stdout again)."""
        if self.bell is not None:
            sys.stdout.flush()
            os.dup2(self.bell, 1)
            os.close(self.bell)
            self.bell = None

    def ring(self) -> None:
        """Tell the executor to look (a task taken, a task done); no-op without a stdout pipe."""
        if self.bell is not None:
            try:
                os.write(self.bell, b".")
            except OSError:  # the executor is gone or stopped reading: the files still say it
                self.bell = None


NOT_IN_IMAGE = ("pandas", "pyarrow", "polars", "rich")


class _NotInImage:
    """A meta path finder that refuses the packages of ``names``: ``import pandas`` raises
    ModuleNotFoundError, as in the image. (Not ``sys.modules[name] = None``: scikit-learn reads
    ``sys.modules["pandas"]`` when the key is present and would get None.)"""

    def __init__(self, names: tuple[str, ...]):
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (not in the image)", name=fullname)
        return None


@contextmanager
def packages_hidden(names: tuple[str, ...] = NOT_IN_IMAGE) -> Iterator[None]:
    """While inside, ``import name`` fails (ModuleNotFoundError) for the packages of ``names``; a module
    already imported stays."""
    finder = _NotInImage(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _preload(only_algorithm: str | None) -> None:
    """Import the signing code, the image's algorithm module and the modules its class lists in
    ``warm_imports`` (imported lazily by the algorithm: inside a round otherwise) ahead of the first
    task."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: F401
    from cryptography.hazmat.primitives.asymmetric import ec, utils  # noqa: F401

    if only_algorithm:
        module_name, _, class_name = only_algorithm.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name, None)
            for name in getattr(cls, "warm_imports", ()):
                importlib.import_module(name)
        except ImportError:
            pass  # reported by the task that needs it


def serve(
    in_root: str | os.PathLike = "/task/in-root",
    out_root: str | os.PathLike = "/task/out-root",
    data_dir: str | os.PathLike = "/data",
    only_algorithm: str | None = None,
    idle_exit_s: float = 3600.0,
    max_tasks: int | None = None,
    profile: NumericProfile = PROFILE,
) -> int:
    """Warm worker: run task after task in one isolated process (one organisation, one process).

    The executor writes each task as ``<in_root>/<name>/{in/..., key/task_key.pem}`` and then the
    empty file ``<in_root>/<name>/READY``; the worker runs it with outputs in ``<out_root>/<name>/``
    and then writes ``<out_root>/<name>/DONE`` (exit status). ``<in_root>/STOP`` ends the worker;
    so does EOF on a stdin pipe (the executor died), ``idle_exit_s`` without a task, or ``max_tasks`` tasks (``--serve-once``: a one-shot
    worker started while the executor registers the task key). Everything a task needs is imported
    before waiting (without the packages of :data:`NOT_IN_IMAGE`, which the image does not contain).
    With a stdin pipe (the sandbox runtime) it sleeps until the executor rings it (a byte written after
    ``READY`` or ``STOP``; at most 1 s, a safety net) and rings back on a stdout pipe when it takes a task
    and when the task is done (:class:`_Lifeline`); without one (a container) it polls every 1-2 ms,
    backing off to 50 ms after 2 s idle. Every task computes under ``profile`` (the image's numeric
    profile, :func:`algorithms.task_runtime.run_task`)."""
    with packages_hidden():
        _preload(only_algorithm)
    # the numeric profile's first look at the loaded libraries (each task checks it again, and fails if
    # it is not in effect), outside the hidden packages: torch's deterministic switch imports its
    # compiler, which asks importlib.util.find_spec whether pandas exists and expects None, not the
    # hider's ModuleNotFoundError (the image has no pandas either, so nothing differs)
    profile.apply()
    profile.problems()
    lifeline = _Lifeline()
    in_root, out_root = Path(in_root), Path(out_root)
    _report_cpu(out_root / "STARTED")  # the executor may hand over a task now
    try:
        return _serve_tasks(
            in_root, out_root, Path(data_dir), only_algorithm, idle_exit_s, max_tasks, lifeline, profile
        )
    finally:
        _report_cpu(out_root / "CPU")
        lifeline.close()


def _report_cpu(path: Path) -> None:
    """Write this worker's user+system CPU seconds so far to ``path`` (``STARTED``: after start-up;
    ``CPU``: at exit). A sandbox worker's CPU time does not show in the executor's ``RUSAGE_CHILDREN``
    (measured), and a container is not its child at all: the benchmarks read these reports."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    try:
        path.write_text(f"{r.ru_utime + r.ru_stime:.4f}")
    except OSError:
        pass


def _serve_tasks(
    in_root: Path,
    out_root: Path,
    data_dir: Path,
    only_algorithm: str | None,
    idle_exit_s: float,
    max_tasks: int | None,
    lifeline: _Lifeline,
    profile: NumericProfile,
) -> int:
    done: set[str] = set()
    delay, idle_since = 0.001, time.monotonic()
    while True:
        if (in_root / "STOP").exists() or lifeline.cut():
            return 0
        ready = sorted(p.parent.name for p in in_root.glob("*/READY") if p.parent.name not in done)
        for name in ready:
            out = out_root / name
            out.mkdir(parents=True, exist_ok=True)
            lifeline.ring()  # taken
            code = run_and_report(
                in_root / name,
                data_dir,
                in_root / name / "key" / "task_key.pem",
                only_algorithm,
                out_dir=out,
                profile=profile,
            )
            (out / "DONE").write_text(str(code))
            lifeline.ring()  # done
            done.add(name)
            if max_tasks is not None and len(done) >= max_tasks:
                return 0
        if ready:
            delay, idle_since = 0.001, time.monotonic()
            continue
        idle = time.monotonic() - idle_since
        if idle > idle_exit_s:
            return 0
        if lifeline.active:  # sleep until the executor rings (a byte after READY or STOP), at most 1 s
            if lifeline.wait(min(1.0, idle_exit_s - idle + 0.01)) is False:
                return 0  # EOF: the executor is gone
            continue
        # no doorbell (a container's worker): poll, backing off (20 workers polling every 2 ms cost
        # ~1/4 core)
        time.sleep(delay)
        delay = min(delay * 1.5, 0.01 if idle < 2.0 else 0.05)
