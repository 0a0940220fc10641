"""What a runtime is given and what it returns."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from executor.task_keys import TASK_GID, TASK_UID  # noqa: F401

# Paths inside the container / sandbox.
TASK_IN = "/task/in"
TASK_OUT = "/task/out"
DATA = "/data"
KEY_DIR = "/run/task-key"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one task."""

    memory_bytes: int = 2 << 30
    cpus: float = 1.0
    pids: int = 256
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.memory_bytes < 64 << 20:
            raise ValueError(f"memory limit must be at least 64 MiB, got {self.memory_bytes}")
        if not 0 < self.cpus <= 64:
            raise ValueError(f"cpus must be in (0, 64], got {self.cpus}")
        if not 8 <= self.pids <= 65536:
            raise ValueError(f"pids limit must be in [8, 65536], got {self.pids}")
        if self.timeout_s <= 0:
            raise ValueError("timeout must be positive")


@dataclass(frozen=True)
class TaskMounts:
    """Host directories of one task. ``task_dir`` holds ``in/`` and ``out/``."""

    task_dir: Path
    data_dir: Path
    key_dir: Path

    @property
    def inputs(self) -> Path:
        return self.task_dir / "in"

    @property
    def outputs(self) -> Path:
        return self.task_dir / "out"

    def prepare(self, task_uid: int | None = TASK_UID) -> None:
        """Create ``out/`` writable only by the task's host uid (chown needs root)."""
        self.inputs.mkdir(parents=True, exist_ok=True)
        self.outputs.mkdir(parents=True, exist_ok=True)
        if task_uid is not None and os.geteuid() == 0:
            os.chown(self.outputs, task_uid, TASK_GID)
        self.outputs.chmod(0o700)
        for p in [self.inputs, *self.inputs.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


@dataclass(frozen=True)
class RunOutcome:
    runtime: str
    exit_code: int
    wall_s: float
    logs: str
    timed_out: bool = False


Bind = tuple[Path, str, str]  #: (host path, path inside the container / sandbox, "ro" | "rw")


@dataclass(frozen=True)
class WorkerSpec:
    """A worker to start: the image (by digest; the sandbox also needs its bundle directory) runs its
    entrypoint with ``args`` (``--serve`` / ``--serve-once``), with ``binds`` mounted and ``limits``.
    ``name`` names it (an older worker of that name is replaced); ``one_shot``: it serves one task
    only and cleans up after itself."""

    image_digest: str
    binds: tuple[Bind, ...]
    limits: Limits
    args: tuple[str, ...]
    bundle_dir: Path | None = None
    name: str | None = None
    one_shot: bool = False


@runtime_checkable
class Worker(Protocol):
    """A long-lived isolated process started by :meth:`TaskRuntime.start_worker`."""

    def alive(self, max_age: float = 0.0) -> bool:
        """Is it running? An answer younger than ``max_age`` seconds may be reused (an engine call)."""
        ...

    def end(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for it to exit (then kill it) and release what it holds."""
        ...

    @property
    def bell(self) -> int | None:
        """A file descriptor readable when the worker took or finished a task (None: poll the files)."""
        ...

    def ring(self) -> None:
        """Tell the worker there is something to look at (a task's ``READY``, ``STOP``); may do nothing."""
        ...


@runtime_checkable
class TaskRuntime(Protocol):
    """How one runtime runs the image of a learning process in isolation.

    The node agent runs every task through :meth:`start_worker` (a warm worker kept across rounds, or
    a one-shot worker started while the task key is registered; :class:`executor.runtimes.warm.WarmWorker`
    hands each task to it). :meth:`run` runs one task to completion in a fresh container/sandbox
    (tests, tools and the bit-identity checks); both apply the same isolation and limits."""

    name: str
    task_uid: int | None  # host uid that owns the task's outputs and key (None: the agent's)

    def available(self) -> bool: ...

    def check(self) -> None:
        """Raise ``RuntimeUnavailable`` (``ToolMissing`` for a missing program) saying what to
        install or start; called before any task is set up."""
        ...

    def local_digest(self, reference: str) -> str | None:
        """Digest of the local image/bundle named ``reference`` (None if absent)."""
        ...

    def run(
        self,
        image_digest: str,
        mounts: TaskMounts,
        limits: Limits = Limits(),
        command: Sequence[str] | None = None,
        bundle_dir: str | os.PathLike[str] | None = None,
    ) -> RunOutcome:
        """Run the image with digest ``image_digest`` (its entrypoint, or ``command``) on one task's
        mounts until it exits; the sandbox runtime also needs the bundle directory and re-checks its
        digest."""
        ...

    def start_worker(self, spec: WorkerSpec) -> Worker:
        """Start a long-lived isolated worker (:class:`WorkerSpec`); it must not outlive the agent.
        :class:`RuntimeUnavailable` if it cannot be started."""
        ...
