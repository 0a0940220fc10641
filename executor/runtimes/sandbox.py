"""Sandbox runtime: tasks in bubblewrap sandboxes, for machines without a container engine -- a worker
sandbox (:meth:`SandboxRuntime.start_worker`, what the node agent uses) or one sandbox per task (``run``).

It runs the same bundle (the image's ``algorithms`` package + algorithm folder, see
:func:`executor.images.bundle.build_bundle`) with the host interpreter, whose pinned packages are part
of the bundle digest. Isolation of every run:

* new user, mount, network, PID, IPC, UTS and cgroup namespaces (``--unshare-all``): no network
  interface but loopback, no view of host processes;
* a file system made only of read-only binds -- ``/usr`` (+ the interpreter's prefix and the
  venv), the bundle at ``/opt/consortia``, ``/task/in``, ``/data``, ``/run/task-key`` -- plus
  the writable ``/task/out`` and a private ``/tmp``; nothing else of the host is visible, so
  another organisation's data cannot even be named;
* all capabilities dropped, ``PR_SET_NO_NEW_PRIVS`` (bubblewrap sets it), a new session, the
  task user id 10001 inside, a cleared environment holding only the Python settings and the
  environment of the numeric profile the bundle declares (:mod:`algorithms.numeric_profile`);
* limits: address space and CPU time (rlimits), processes and memory through cgroup v1
  ``pids``/``memory`` controllers when writable (root), else ``RLIMIT_NPROC``; a wall-clock
  timeout kills the sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from executor.errors import ImageBuildError, RuntimeUnavailable
from executor.images.bundle import BUNDLE_MOUNT
from executor.runtimes.base import (
    DATA,
    KEY_DIR,
    TASK_IN,
    TASK_OUT,
    Limits,
    RunOutcome,
    TaskMounts,
    WorkerSpec,
)
from executor.runtimes.tools import ToolMissing, find_tool
from executor.task_keys import TASK_GID, TASK_UID

CGROUP_V1 = Path("/sys/fs/cgroup")


# sh -c script: write this shell's pid into each cgroup.procs file given before "--", then exec the rest
ENTER_CGROUPS_AND_EXEC = (
    'for f; do [ "$f" = -- ] && break; printf %s "$$" > "$f" || { echo "cannot enter cgroup $f" >&2; '
    'exit 125; }; shift; done; shift; exec "$@"'
)


class _Cgroup:
    """A per-task cgroup v1 under the pids and memory controllers (best effort)."""

    def __init__(self, limits: Limits):
        self.dirs: list[Path] = []
        name = f"consortia-task-{uuid.uuid4().hex[:12]}"
        for controller, files in (
            ("pids", {"pids.max": str(limits.pids)}),
            ("memory", {"memory.limit_in_bytes": str(limits.memory_bytes)}),
        ):
            d = CGROUP_V1 / controller / name
            try:
                d.mkdir()
                for f, v in files.items():
                    (d / f).write_text(v)
                self.dirs.append(d)
            except OSError:
                if d.exists():
                    try:
                        d.rmdir()
                    except OSError:
                        pass
        self.controllers = {d.parent.name for d in self.dirs}

    def close(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


class SandboxRuntime:
    name = "sandbox"
    # Inside the user namespace the task is uid 10001; on the host it is the agent's own uid
    # (bubblewrap maps it), so outputs and key stay owned by the agent's uid.
    task_uid: int | None = None

    def __init__(self, bwrap: str | None = None, python: str | None = None):
        self.bwrap = bwrap or shutil.which("bwrap") or ""
        self.python = python or sys.executable

    def available(self) -> bool:
        try:
            self.check()
        except ToolMissing:
            return False
        return True

    def check(self) -> None:
        """:class:`ToolMissing` (naming bubblewrap and how to install it) if ``bwrap`` is absent."""
        self.bwrap = find_tool("bwrap", "bubblewrap", "the sandbox runtime", self.bwrap or None)

    def local_digest(self, reference: str) -> str | None:
        """``reference`` of a bundle is its directory."""
        from executor.images.bundle import bundle_digest

        d = Path(reference)
        return bundle_digest(d, self.python) if (d / "bundle.json").exists() else None

    def _interpreter_binds(self) -> list[str]:
        args: list[str] = []
        seen: set[str] = set()
        for p in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(self.python))):
            p = os.path.realpath(p)
            if p.startswith("/usr") or p in seen:
                continue
            seen.add(p)
            args += ["--ro-bind", p, p]
        venv = os.path.dirname(os.path.dirname(os.path.abspath(self.python)))
        if os.path.exists(os.path.join(venv, "pyvenv.cfg")) and venv not in seen:
            args += ["--ro-bind", venv, venv]
        return args

    @staticmethod
    def task_binds(mounts: TaskMounts) -> list[tuple[Path, str, str]]:
        return [
            (mounts.inputs, TASK_IN, "ro"),
            (mounts.outputs, TASK_OUT, "rw"),
            (mounts.data_dir, DATA, "ro"),
            (mounts.key_dir, KEY_DIR, "ro"),
        ]

    def command(
        self,
        bundle_dir: Path,
        mounts: TaskMounts | Sequence[tuple[Path, str, str]],
        command: Sequence[str] | None,
    ) -> list[str]:
        """The bubblewrap command line: ``mounts`` is a task's mounts or (host, sandbox, ro|rw) binds.
        The environment is the numeric profile's that the bundle declares, nothing of the host's."""
        from executor.images.bundle import bundle_profile

        try:
            profile_env = bundle_profile(bundle_dir).environ()
        except ImageBuildError as exc:
            raise RuntimeUnavailable(str(exc)) from None
        binds = self.task_binds(mounts) if isinstance(mounts, TaskMounts) else list(mounts)
        bind_args: list[str] = []
        for host, inside, mode in binds:
            bind_args += ["--ro-bind" if mode == "ro" else "--bind", str(Path(host).resolve()), inside]
        python = os.path.abspath(self.python)
        args = [
            self.bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(TASK_UID),
            "--gid",
            str(TASK_GID),
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            *self._interpreter_binds(),
            "--ro-bind",
            str(bundle_dir.resolve()),
            BUNDLE_MOUNT,
            *bind_args,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--remount-ro",
            "/",
            "--cap-drop",
            "ALL",
            "--clearenv",
            "--setenv",
            "PYTHONPATH",
            f"{BUNDLE_MOUNT}:{BUNDLE_MOUNT}/image:{BUNDLE_MOUNT}/site",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            "--setenv",
            "PYTHONHASHSEED",
            "0",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            *[a for k, v in sorted(profile_env.items()) for a in ("--setenv", k, v)],
            "--chdir",
            "/task",
            "--",
        ]
        if command:
            return args + list(command)
        return args + [python, "-s", f"{BUNDLE_MOUNT}/image/entrypoint.py"]

    def run(
        self,
        image_digest: str,
        mounts: TaskMounts,
        limits: Limits = Limits(),
        command: Sequence[str] | None = None,
        bundle_dir: str | os.PathLike[str] | None = None,
    ) -> RunOutcome:
        """Run the bundle at ``bundle_dir`` after checking that its digest is ``image_digest``."""
        bundle = self._verified_bundle(bundle_dir, image_digest)
        t0 = time.perf_counter()
        proc, cg = self.spawn(bundle, mounts, limits, command)
        timed_out = False
        try:
            try:
                out, _ = proc.communicate(timeout=limits.timeout_s)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                timed_out = True
                proc.kill()
                out, _ = proc.communicate()
                code = -9
        finally:
            cg.close()
        return RunOutcome(
            self.name, code, time.perf_counter() - t0, out.decode("utf-8", "replace")[-20000:], timed_out
        )

    def _verified_bundle(self, bundle_dir: str | os.PathLike[str] | None, image_digest: str) -> Path:
        """The bundle directory, after checking that its digest is the pinned ``image_digest``."""
        self.check()
        if bundle_dir is None:
            raise RuntimeUnavailable("the sandbox runtime needs the bundle directory")
        bundle = Path(bundle_dir)
        local = self.local_digest(str(bundle))
        if local != image_digest:
            raise RuntimeUnavailable(f"bundle {bundle} has digest {local}, not {image_digest}")
        return bundle

    def start_worker(self, spec: WorkerSpec) -> SandboxWorker:
        """A sandbox running the bundle's entrypoint with ``args``; its stdin is the lifeline (it exits
        when the agent dies). ``name`` is not needed: a sandbox dies with its agent."""
        bundle = self._verified_bundle(spec.bundle_dir, spec.image_digest)
        cmd = [os.path.abspath(self.python), "-s", f"{BUNDLE_MOUNT}/image/entrypoint.py", *spec.args]
        proc, cg = self.spawn(
            bundle,
            spec.binds,
            spec.limits,
            cmd,
            stdout=subprocess.PIPE,  # the worker's doorbell to the agent (algorithms.task_worker._Lifeline)
            cpu_seconds=None if spec.one_shot else 10**6,
            lifeline=True,
            stderr=subprocess.DEVNULL,
        )
        return SandboxWorker(proc, cg)

    def spawn(
        self,
        bundle: Path,
        mounts: TaskMounts | Sequence[tuple[Path, str, str]],
        limits: Limits,
        command: Sequence[str] | None = None,
        cpu_seconds: int | None = None,
        stdout: int = subprocess.PIPE,
        lifeline: bool = False,
        stderr: int = subprocess.STDOUT,
    ) -> tuple[subprocess.Popen[bytes], _Cgroup]:
        """Start the sandbox (limits applied in the child before exec); caller waits and closes.

        ``lifeline``: the sandbox's stdin is a pipe whose write end only the caller holds; a
        worker exits when it reads EOF, i.e. when the caller dies, however it dies."""
        self.check()  # before anything is created: a clear error, not Popen([''])
        cg = _Cgroup(limits)
        cpu_s = cpu_seconds or max(1, int(limits.timeout_s) + 1)
        as_bytes = max(limits.memory_bytes, 1 << 30) * 4  # address space >> RSS (numpy/BLAS maps)
        use_nproc = "pids" not in cg.controllers and os.geteuid() != 0

        # The limits are applied by the child itself before it becomes bubblewrap: a shell moves
        # itself into the task's cgroups, then `prlimit` sets the rlimits and execs bwrap (same pid).
        # Not a preexec_fn: Python code between fork and exec in this multi-threaded agent is unsafe
        # (CI once saw a forked child segfault there).
        rlimits = [f"--cpu={cpu_s}:{cpu_s}", f"--as={as_bytes}:{as_bytes}", "--core=0:0"]
        if use_nproc:
            rlimits.append(f"--nproc={limits.pids}:{limits.pids}")
        prlimit = find_tool("prlimit", "util-linux", "the sandbox runtime's resource limits")
        launcher = [
            "/bin/sh",
            "-c",
            ENTER_CGROUPS_AND_EXEC,
            "consortia-sandbox",
            *(str(d / "cgroup.procs") for d in cg.dirs),
            "--",
            prlimit,
            *rlimits,
            "--",
        ]
        try:
            proc = subprocess.Popen(
                [*launcher, *self.command(bundle, mounts, command)],
                stdin=subprocess.PIPE if lifeline else subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                close_fds=True,
            )
        except BaseException:
            cg.close()
            raise
        return proc, cg


class SandboxWorker:
    """A worker sandbox (:meth:`SandboxRuntime.start_worker`)."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: _Cgroup):
        self.proc = proc
        self.cgroup = cgroup

    def alive(self, max_age: float = 0.0) -> bool:
        return self.proc.poll() is None

    @property
    def bell(self) -> int | None:
        """The read end of the worker's doorbell: readable when it took or finished a task (EOF: ended)."""
        return None if self.proc.stdout is None else self.proc.stdout.fileno()

    def ring(self) -> None:
        """Wake the worker (it sleeps on its stdin pipe): there is a task or a ``STOP`` to see."""
        if self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(b".")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # ended, or the lifeline closed: the liveness checks report it
            pass

    def end(self, grace: float) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # the worker's lifeline: EOF ends it even if it missed STOP
            except OSError:
                pass
        try:
            self.proc.wait(timeout=grace)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.cgroup.close()
