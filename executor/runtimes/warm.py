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
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from algorithms.task_runtime import TaskSpec
from executor import timing
from executor.errors import RuntimeUnavailable, TaskFailed
from executor.runtimes.base import DATA, Limits, RunOutcome, TaskMounts, TaskRuntime, Worker, WorkerSpec
from executor.task_keys import TASK_GID, TaskKey, destroy_key_dir
from executor.tasks import TaskOutputs, verify_outputs, write_inputs

IN_ROOT = "/task/in-root"
OUT_ROOT = "/task/out-root"
STARTED = "STARTED"  # made by the worker in its output root once it has started (algorithms.task_worker)


class WarmWorker:
    """A long-lived isolated worker for one organisation's tasks of one learning process."""

    def __init__(
        self,
        runtime: TaskRuntime,
        image_digest: str,
        root: str | os.PathLike,
        data_dir: str | os.PathLike,
        limits: Limits = Limits(),
        bundle_dir: str | os.PathLike | None = None,
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


class WorkerPool:
    """An agent's workers: one warm worker per learning process kept across rounds (``warm``), or a
    fresh one-shot worker per task, started while the task key is being registered.

    **Spares** (``warm`` only): a worker started before any process needs it (:meth:`prewarm`), keyed
    by (image digest, dataset folder). A process's first task takes the spare of exactly its image and
    its dataset folder, which is then that process's worker for good (never handed to another process);
    the spare mounts that one folder, as the process's own worker would, so it sees nothing the task may
    not. The caller verifies the image before a spare starts and again before one is bound."""

    def __init__(self, runtime: TaskRuntime, limits: Limits, root: Path, org: str, warm: bool = False):
        self.runtime, self.limits, self.root, self.org, self.warm = runtime, limits, Path(root), org, warm
        self.workers: dict[str, WarmWorker] = {}  # process id -> its warm worker
        self.spares: dict[tuple[str, Path], WarmWorker] = {}  # (image digest, data dir) -> a spare
        self.keep: dict[tuple[str, Path], Path | None] = {}  # spares started again once taken -> bundle

    def live(self, pid: str, image_digest: str) -> bool:
        """Is a warm worker of this image running for ``pid`` (verified when it started)?"""
        w = self.workers.get(pid)
        return self.warm and w is not None and w.image_digest == image_digest and w.alive(max_age=2.0)

    def prewarm(
        self, image_digest: str, data_dir: Path, bundle_dir: Path | None, keep: bool = False
    ) -> WarmWorker | None:
        """Start a spare worker of ``image_digest`` mounting ``data_dir`` (unless one runs); ``keep``: start
        another each time one is taken. None without ``warm`` (one-shot workers are per task)."""
        if not self.warm:
            return None
        key = (image_digest, Path(data_dir))
        if keep:
            self.keep[key] = bundle_dir
        w = self.spares.get(key)
        if w is not None and w.alive(max_age=2.0):
            return w
        if w is not None:
            w.stop()
        w = self.spares[key] = self._start(
            f"spare-{secrets.token_hex(4)}", image_digest, data_dir, bundle_dir
        )
        return w

    def _start(self, label: str, image_digest: str, data_dir: Path, bundle_dir: Path | None) -> WarmWorker:
        """A new warm worker under ``<root>/<org>-<label>`` (also its container's name)."""
        name = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{self.org}-{label}")
        return WarmWorker(
            self.runtime,
            image_digest,
            self.root / name,
            data_dir,
            self.limits,
            bundle_dir,
            name=f"consortia-warm-{name}"[:120],
        ).start()

    def _take_spare(
        self, pid: str, image_digest: str, data_dir: Path, bundle_dir: Path | None
    ) -> WarmWorker | None:
        key = (image_digest, Path(data_dir))
        spare = self.spares.pop(key, None)
        if spare is None:
            return None
        if spare.bundle_dir != (Path(bundle_dir) if bundle_dir else None) or not spare.alive(max_age=2.0):
            spare.stop()
            return None
        self.workers[pid] = spare  # bound: this process's worker until it ends
        if key in self.keep:
            self.prewarm(image_digest, data_dir, self.keep[key])
        return spare

    def worker(
        self, pid: str, image_digest: str, data_dir: Path, bundle_dir: Path | None, work_dir: Path
    ) -> WarmWorker:
        """The worker for one task of ``pid``: its live warm worker, a spare of this image and dataset
        (bound to ``pid``), a new warm one, or a one-shot one under ``work_dir``."""
        if not self.warm:
            return WarmWorker(
                self.runtime, image_digest, work_dir, data_dir, self.limits, bundle_dir, one_shot=True
            ).start()
        w = self.workers.get(pid)
        if w is not None and w.alive(max_age=2.0):
            return w
        if w is not None:
            w.stop()
        spare = self._take_spare(pid, image_digest, data_dir, bundle_dir)
        if spare is not None:
            return spare
        w = self.workers[pid] = self._start(pid, image_digest, data_dir, bundle_dir)
        return w

    def stop(self, pid: str | None = None) -> None:
        """Stop the warm worker of ``pid`` (all, and the spares: None)."""
        for k in [k for k in self.workers if pid is None or k == pid]:
            self.workers.pop(k).stop()
        if pid is None:
            self.keep.clear()
            for key in list(self.spares):
                self.spares.pop(key).stop()


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
