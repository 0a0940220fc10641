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

The worker is ``algorithms.task_runtime.serve`` (the image entrypoint with ``--serve``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from algorithms.task_runtime import TaskSpec
from executor.errors import RuntimeUnavailable, TaskFailed
from executor.runtimes.base import DATA, Limits, RunOutcome, TaskMounts, TaskRuntime
from executor.task_keys import TASK_GID, TaskKey, destroy_key_dir
from executor.tasks import TaskOutputs, verify_outputs, write_inputs

IN_ROOT = "/task/in-root"
OUT_ROOT = "/task/out-root"


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
        self._proc = None
        self._cgroup = None
        self._container = None
        self._count = 0
        self._alive_at = 0.0
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
        if self.runtime.name == "sandbox":
            if self.bundle_dir is None:
                raise RuntimeUnavailable("a warm sandbox needs the bundle directory")
            local = self.runtime.local_digest(str(self.bundle_dir))
            if local != self.image_digest:
                raise RuntimeUnavailable(
                    f"bundle {self.bundle_dir} has digest {local}, not {self.image_digest}"
                )
            from executor.runtimes.sandbox import BUNDLE_MOUNT

            binds = [
                (self.in_root, IN_ROOT, "ro"),
                (self.out_root, OUT_ROOT, "rw"),
                (self.data_dir, DATA, "ro"),
            ]
            cmd = [
                os.path.abspath(self.runtime.python),
                "-s",
                f"{BUNDLE_MOUNT}/image/entrypoint.py",
                self._mode,
            ]
            self._proc, self._cgroup = self.runtime.spawn(
                self.bundle_dir,
                binds,
                self.limits,
                cmd,
                stdout=subprocess_devnull(),
                cpu_seconds=None if self.one_shot else 10**6,
                lifeline=True,
            )
        elif self.runtime.name == "container":
            volumes = {
                str(self.in_root.resolve()): {"bind": IN_ROOT, "mode": "ro"},
                str(self.out_root.resolve()): {"bind": OUT_ROOT, "mode": "rw"},
                str(self.data_dir.resolve()): {"bind": DATA, "mode": "ro"},
            }
            opts = self.runtime.container_options(volumes, self.limits)
            if self.one_shot:
                opts["auto_remove"] = True  # gone once it exits, even if its agent was killed
            if self.name:
                opts["name"] = self.name
                try:  # a worker left by a killed agent: replace it
                    self.runtime.client.containers.get(self.name).remove(force=True)
                except Exception:
                    pass
            try:
                self._container = self.runtime.client.containers.run(
                    self.image_digest, command=[self._mode], detach=True, **opts
                )
            except Exception as exc:
                raise RuntimeUnavailable(f"cannot start warm container: {exc}") from None
        else:
            raise RuntimeUnavailable(f"runtime {self.runtime.name} has no warm mode")
        return self

    @property
    def _mode(self) -> str:
        return "--serve-once" if self.one_shot else "--serve"

    def alive(self, max_age: float = 0.0) -> bool:
        """Is the worker running? For a container this is an engine API call; an answer younger
        than ``max_age`` seconds is reused."""
        if self._proc is not None:
            return self._proc.poll() is None
        if self._container is not None:
            now = time.monotonic()
            if max_age and now - self._alive_at <= max_age:
                return True
            try:
                self._container.reload()
                ok = self._container.status == "running"
            except Exception:
                ok = False
            self._alive_at = now if ok else 0.0
            return ok
        return False

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
            deadline = time.monotonic() + self.limits.timeout_s
            delay, next_check = 0.0005, time.monotonic() + 0.5
            while not (out / "DONE").exists():
                now = time.monotonic()
                if now > deadline:
                    self.stop()
                    raise TaskFailed(f"warm {self.runtime.name} task timed out")
                if now > next_check:  # liveness costs an engine API call: not on every poll
                    next_check = now + 0.5
                    if not self.alive() and not (out / "DONE").exists():
                        if not out.exists():  # died before taking the task: retry with a new worker
                            raise RuntimeUnavailable(
                                f"{self.runtime.name} worker ended before the task started"
                            )
                        raise TaskFailed(f"{self.runtime.name} worker died during the task")
                time.sleep(delay)
                delay = min(delay * 1.5, 0.01)
        finally:
            destroy_key_dir(mounts.key_dir)
        code = int((out / "DONE").read_text() or "1")
        outcome = RunOutcome(self.runtime.name, code, time.perf_counter() - t0, "")
        try:
            return verify_outputs(out, spec, task_key.public_key_pem, previous_state, inbox, outcome)
        finally:
            shutil.rmtree(task_dir, ignore_errors=True)

    def stop(self, wait: bool = False) -> None:
        """End the worker. Its results are already delivered (or it failed), so by default it is
        reaped on a background thread, off the critical path; ``wait=True`` reaps it here."""
        try:
            (self.in_root / "STOP").touch()
        except OSError:
            pass
        proc, cgroup, container = self._proc, self._cgroup, self._container
        self._proc = self._cgroup = self._container = None
        if wait:
            _reap(proc, cgroup, container, 2.0)
        else:
            _reaper().submit(_reap, proc, cgroup, container, 5.0)

    def __enter__(self) -> WarmWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_REAPER = None


def _reaper():
    global _REAPER
    if _REAPER is None:
        from concurrent.futures import ThreadPoolExecutor

        _REAPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-reaper")
    return _REAPER


def flush_reaper() -> None:
    """Wait until every stopped worker has exited and been cleaned up."""
    global _REAPER
    if _REAPER is not None:
        _REAPER.shutdown(wait=True)
        _REAPER = None


def _reap(proc, cgroup, container, grace: float) -> None:
    if proc is not None and proc.stdin is not None:
        try:
            proc.stdin.close()  # the worker's lifeline: EOF ends it even if it missed STOP
        except OSError:
            pass
    if proc is not None:
        try:
            proc.wait(timeout=grace)
        except Exception:
            proc.kill()
            proc.wait()
    if cgroup is not None:
        cgroup.close()
    if container is not None:
        from executor.runtimes.container import _remove

        _remove(container)


def subprocess_devnull() -> int:
    import subprocess

    return subprocess.DEVNULL
