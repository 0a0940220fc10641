"""Warm workers: one isolated container or sandbox per (learning process, organisation) kept
alive across rounds, so a round costs no engine/namespace start-up and no interpreter import.

Isolation is the same as for one-shot tasks (same options, same mounts, except that the inputs
and outputs are directories of rounds): no network, read-only root, read-only inputs and data,
writable outputs only, all capabilities dropped, no new privileges, limits, the task user. Each
round still gets a **fresh task key** (its own ``key/task_key.pem`` under the read-only input root,
destroyed after the round) and a **signed manifest**, verified exactly as for a one-shot task.

Host layout of a worker (``root``)::

    in/<task name>/in/...            inputs (file contract of algorithms.task_runtime)
    in/<task name>/key/task_key.pem  this round's private key (0400)
    in/<task name>/READY             written last: the worker may start
    out/<task name>/...              outputs, then DONE (the task's exit status)
    in/STOP                          ends the worker
    out/STARTED                      made by the worker once started (imports done)

The worker is ``algorithms.task_worker.serve`` (the image entrypoint with ``--serve``), started by the
runtime's :meth:`~executor.runtimes.base.TaskRuntime.start_worker`: this module knows no runtime by name.
Which workers a node keeps (one per process, spares) is the node's: :mod:`executor.node.workers`.
"""

from __future__ import annotations

import os
import select
import shutil
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from algorithms.task_spec import TaskSpec
from executor.errors import RuntimeUnavailable, TaskFailed
from executor.runtimes.base import DATA, Limits, RunOutcome, TaskMounts, TaskRuntime, Worker, WorkerSpec
from executor.task_keys import TASK_GID, TaskKey, destroy_key_dir
from executor.tasks import TaskOutputs, verify_outputs, write_inputs
from wire import timing

IN_ROOT = "/task/in-root"
OUT_ROOT = "/task/out-root"
STARTED = "STARTED"  # made by the worker in its output root once it has started (algorithms.task_worker)


class WarmWorker:
    """A long-lived isolated worker for one organisation's tasks of one learning process."""

    def __init__(
        self,
        runtime: TaskRuntime,
        image_digest: str,
        root: str | os.PathLike[str],
        data_dir: str | os.PathLike[str],
        limits: Limits = Limits(),
        bundle_dir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        one_shot: bool = False,
    ):
        self.runtime = runtime
        self.image_digest = image_digest
        self.root = Path(root)
        self.data_dir = Path(data_dir)
        self.limits = limits
        self.bundle_dir = Path(bundle_dir) if bundle_dir else None
        self.process: Worker | None = None  # the runtime's worker (TaskRuntime.start_worker)
        self._count = 0
        self.name = name  # container name; an older worker of the same name is replaced
        self.one_shot = one_shot  # a fresh container/sandbox for exactly one task, started early

    @property
    def in_root(self) -> Path:
        return self.root / "in"

    @property
    def out_root(self) -> Path:
        return self.root / "out"

    def start(self) -> WarmWorker:
        if self.root.exists():  # left by a killed agent: destroy any handed-over key first
            for key_file in list(self.root.rglob("task_key.pem")):  # list first: the loop deletes dirs
                destroy_key_dir(key_file.parent)
            shutil.rmtree(self.root)
        self.in_root.mkdir(parents=True)
        self.out_root.mkdir(parents=True)
        self.in_root.chmod(0o755)
        uid = self.runtime.task_uid
        if uid is not None and os.geteuid() == 0:
            os.chown(self.out_root, uid, TASK_GID)
        self.out_root.chmod(0o700)
        binds = ((self.in_root, IN_ROOT, "ro"), (self.out_root, OUT_ROOT, "rw"), (self.data_dir, DATA, "ro"))
        self.process = self.runtime.start_worker(
            WorkerSpec(
                self.image_digest,
                binds,
                self.limits,
                (self._mode,),
                bundle_dir=self.bundle_dir,
                name=self.name,
                one_shot=self.one_shot,
            )
        )
        return self

    @property
    def _mode(self) -> str:
        return "--serve-once" if self.one_shot else "--serve"

    def started(self) -> bool:
        """Has the worker finished starting up (its imports) and begun waiting for tasks?"""
        return (self.out_root / STARTED).exists()

    def wait_started(self, timeout: float = 120.0) -> bool:
        """Wait until :meth:`started` (True), the worker ended or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        while not self.started():
            if time.monotonic() > deadline or not self.alive(max_age=0.5):
                return False
            time.sleep(0.01)
        return True

    def alive(self, max_age: float = 0.0) -> bool:
        """Is the worker running? For a container this is an engine API call; an answer younger
        than ``max_age`` seconds is reused."""
        return self.process is not None and self.process.alive(max_age)

    def run(
        self, spec: TaskSpec, task_key: TaskKey, previous_state: bytes | None, inbox: Mapping[str, bytes]
    ) -> TaskOutputs:
        if spec.runtime != self.runtime.name or spec.image_digest != self.image_digest:
            raise ValueError("task is for another runtime or image than this worker")
        if not self.alive(max_age=0.5):
            raise RuntimeUnavailable("warm worker is not running")
        self._count += 1
        name = f"{spec.round:06d}-{self._count}"
        task_dir = self.in_root / name
        mounts = TaskMounts(task_dir=task_dir, data_dir=self.data_dir, key_dir=task_dir / "key")
        write_inputs(mounts, spec, previous_state, inbox)
        for p in [task_dir, *task_dir.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        out = self.out_root / name
        t0 = time.perf_counter()
        try:
            task_key.hand_over(mounts.key_dir, uid=self.runtime.task_uid)
            (task_dir / "READY").touch()
            if self.process is not None:
                self.process.ring()  # the worker sleeps until rung (a container's worker polls)
            deadline = time.monotonic() + self.limits.timeout_s
            # The worker makes ``out`` when it takes the task: until then it is starting up (imports,
            # on its first task) or between polls; timed apart from the task itself.
            with timing.section("worker_start"):
                self._await(out, out, deadline)
            self._await(out / "DONE", out, deadline)
        finally:
            destroy_key_dir(mounts.key_dir)
        code = int((out / "DONE").read_text() or "1")
        outcome = RunOutcome(self.runtime.name, code, time.perf_counter() - t0, "")
        try:
            return verify_outputs(out, spec, task_key.public_key_pem, previous_state, inbox, outcome)
        finally:  # the task's plaintext inputs and outputs: read (or refused) by now, gone from here on
            shutil.rmtree(task_dir, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)

    def _await(self, path: Path, out: Path, deadline: float) -> None:
        """Wait until ``path`` exists; fail if the worker dies first (before it made ``out``: it never
        took the task, retry with a new worker) or at ``deadline``. With the worker's doorbell (a
        sandbox's stdout pipe, rung when it takes and finishes a task) sleep on it; else poll (0.5 ms
        backing off to 10 ms)."""
        bell = self.process.bell if self.process is not None else None
        delay, next_check = 0.0005, time.monotonic() + 0.5
        while not path.exists():
            now = time.monotonic()
            if now > deadline:
                self.stop()
                raise TaskFailed(f"warm {self.runtime.name} task timed out")
            if now > next_check:  # liveness costs an engine API call: not on every poll
                next_check = now + 0.5
                if not self.alive() and not path.exists() and not (out / "DONE").exists():
                    if not out.exists():  # died before taking the task: retry with a new worker
                        raise RuntimeUnavailable(f"{self.runtime.name} worker ended before the task started")
                    raise TaskFailed(f"{self.runtime.name} worker died during the task")
            if bell is not None:
                if select.select([bell], [], [], max(0.0, min(next_check, deadline) - now))[0]:
                    if not os.read(bell, 4096):  # EOF: the worker ended; the check above says how
                        bell, next_check = None, 0.0
                continue
            time.sleep(delay)
            delay = min(delay * 1.5, 0.01)

    def stop(self, wait: bool = False) -> None:
        """End the worker. Its results are already delivered (or it failed), so by default it is
        reaped on a background thread, off the critical path; ``wait=True`` reaps it here."""
        try:
            (self.in_root / "STOP").touch()
        except OSError:
            pass
        process, self.process = self.process, None
        if process is None:
            return
        process.ring()
        if wait:
            process.end(2.0)
        else:
            _reaper().submit(process.end, 5.0)

    def __enter__(self) -> WarmWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_REAPER: ThreadPoolExecutor | None = None


def reaped(timeout: float = 30.0) -> None:
    """Wait until every worker stopped so far has ended and been reaped (its exit report, ``out/CPU``,
    is written; :mod:`algorithms.task_worker`)."""
    _reaper().submit(lambda: None).result(timeout)


def _reaper() -> ThreadPoolExecutor:
    global _REAPER
    if _REAPER is None:
        _REAPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-reaper")
    return _REAPER
