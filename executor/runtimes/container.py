"""Container runtime: tasks in containers through the Docker SDK (Podman or Docker) -- a worker container
(:meth:`ContainerRuntime.start_worker`, what the node agent uses) or one container per task (``run``).

Isolation of every run: no network (``network_mode="none"``), read-only root file system, the
task's inputs, dataset and key mounted read-only, only ``/task/out`` (and a small ``/tmp`` tmpfs)
writable, all capabilities dropped, ``no-new-privileges``, memory (no swap), CPU and process
limits, the unprivileged task user 10001 (a worker: ``/task/in-root`` read-only, ``/task/out-root``
writable, the same options). The container is started by **image id** (the verified digest), never by
a tag that could be re-pointed between verification and run.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.errors import RuntimeUnavailable
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
from executor.runtimes.tools import ToolMissing
from executor.task_keys import TASK_GID, TASK_UID
from wire.env import environment

if TYPE_CHECKING:
    import docker
    import docker.models.containers


class ContainerRuntime:
    name = "container"

    def __init__(self, client: docker.DockerClient | None = None, base_url: str | None = None) -> None:
        self._client = client
        self._base_url = base_url

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            from executor.images.engine import engine_client

            self._client = engine_client(self._base_url)
        return self._client

    def available(self) -> bool:
        try:
            self.check()
        except RuntimeUnavailable:
            return False
        return True

    def check(self) -> None:
        """:class:`RuntimeUnavailable` naming what to install or start if no engine answers."""
        try:
            if self.client.ping():
                return
        except Exception:
            pass
        from executor.images.engine import DEFAULT_SOCKET

        url = self._base_url or environment().engine_url or DEFAULT_SOCKET
        if shutil.which("podman") is None and shutil.which("docker") is None:
            raise ToolMissing("podman", "podman runc", "the container runtime")
        raise RuntimeUnavailable(
            f"the container runtime found no container engine at {url}: run "
            "scripts/install-container-engine (installs Podman and starts its socket) "
            "and export CONSORTIA_DOCKER_HOST=<the URL it prints>"
        )

    def local_digest(self, reference: str) -> str | None:
        """The engine's id of the image tagged ``reference`` (None: absent, or a bundle directory)."""
        from executor.images.engine import local_image_digest

        if reference.startswith("/"):  # a sandbox bundle's directory names no engine image
            return None
        return local_image_digest(self.client, reference)

    @staticmethod
    def task_volumes(mounts: TaskMounts) -> dict[str, dict[str, str]]:
        return {
            str(mounts.inputs.resolve()): {"bind": TASK_IN, "mode": "ro"},
            str(mounts.outputs.resolve()): {"bind": TASK_OUT, "mode": "rw"},
            str(mounts.data_dir.resolve()): {"bind": DATA, "mode": "ro"},
            str(mounts.key_dir.resolve()): {"bind": KEY_DIR, "mode": "ro"},
        }

    def container_options(
        self, mounts: TaskMounts | dict[str, dict[str, str]], limits: Limits
    ) -> dict[str, Any]:
        """The isolation options (also used by tests to assert what a run asks for);
        ``mounts`` is a task's mounts or a docker ``volumes`` mapping."""
        volumes = self.task_volumes(mounts) if isinstance(mounts, TaskMounts) else dict(mounts)
        return dict(
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            user=f"{TASK_UID}:{TASK_GID}",
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            volumes=volumes,
            tmpfs={"/tmp": "rw,noexec,nosuid,size=64m"},
            environment={},  # the image's own: its numeric profile (executor.images.recipe.containerfile)
            working_dir="/task",
        )

    task_uid: int | None = TASK_UID  # outputs and key are handed to this host uid

    def run(
        self,
        image_digest: str,
        mounts: TaskMounts,
        limits: Limits = Limits(),
        command: Sequence[str] | None = None,
        bundle_dir: str | os.PathLike[str] | None = None,
    ) -> RunOutcome:
        import docker.errors
        import requests

        t0 = time.perf_counter()
        try:
            extra = {"entrypoint": [command[0]], "command": list(command[1:])} if command else {}
            container = self.client.containers.create(
                image_digest, **extra, **self.container_options(mounts, limits)
            )
        except docker.errors.ImageNotFound:
            raise RuntimeUnavailable(f"image {image_digest} is not present in the engine") from None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise RuntimeUnavailable(f"container engine refused the task: {exc}") from None
        timed_out = False
        try:
            container.start()
            try:
                status = container.wait(timeout=limits.timeout_s)
                code = int(status.get("StatusCode", -1))
            except requests.exceptions.ReadTimeout:
                timed_out, code = True, -9
                container.kill()
            logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        finally:
            # The exited container holds nothing the result depends on (outputs are in the bind
            # mount): remove it off the critical path, in order, on one background thread.
            self._remover().submit(_remove, container)
        return RunOutcome(self.name, code, time.perf_counter() - t0, logs[-20000:], timed_out)

    def start_worker(self, spec: WorkerSpec) -> ContainerWorker:
        """A detached container running the image's entrypoint with ``args``, isolated as a task."""
        volumes = {str(Path(h).resolve()): {"bind": inside, "mode": mode} for h, inside, mode in spec.binds}
        opts = self.container_options(volumes, spec.limits)
        if spec.one_shot:
            opts["auto_remove"] = True  # gone once it exits, even if its agent was killed
        if spec.name:
            opts["name"] = spec.name
            try:  # a worker left by a killed agent: replace it
                self.client.containers.get(spec.name).remove(force=True)
            except Exception:
                pass
        try:
            container = self.client.containers.create(spec.image_digest, command=list(spec.args), **opts)
        except Exception as exc:
            raise RuntimeUnavailable(f"cannot start warm container: {exc}") from None
        try:
            container.start()
        except Exception as exc:  # never leave a created container behind: each holds an engine lock
            _remove(container)
            raise RuntimeUnavailable(f"cannot start warm container: {exc}") from None
        return ContainerWorker(container)

    _removals: ThreadPoolExecutor | None = None

    @classmethod
    def _remover(cls) -> ThreadPoolExecutor:
        if cls._removals is None:
            cls._removals = ThreadPoolExecutor(max_workers=1, thread_name_prefix="container-remove")
        return cls._removals

    @classmethod
    def flush_removals(cls) -> None:
        """Wait until every finished task container has been removed."""
        if cls._removals is not None:
            cls._removals.shutdown(wait=True)
            cls._removals = None


class ContainerWorker:
    """A worker container (:meth:`ContainerRuntime.start_worker`)."""

    def __init__(self, container: docker.models.containers.Container) -> None:
        self.container = container
        self._alive_at = 0.0

    def alive(self, max_age: float = 0.0) -> bool:
        now = time.monotonic()
        if max_age and now - self._alive_at <= max_age:
            return True
        try:
            self.container.reload()
            ok: bool = self.container.status == "running"
        except Exception:
            ok = False
        self._alive_at = now if ok else 0.0
        return ok

    bell: int | None = None  # no doorbell: WarmWorker polls the container's output folder

    def ring(self) -> None:
        """No doorbell into a container: its worker polls its task folder."""

    def end(self, grace: float) -> None:
        _remove(self.container)


def _remove(container: docker.models.containers.Container) -> None:
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.DockerException:
        pass
