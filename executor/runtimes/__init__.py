"""Runtimes that run tasks in isolation: ``container`` (Docker API engine) and ``sandbox``
(bubblewrap), behind one interface (:class:`~executor.runtimes.base.TaskRuntime`). The node agent runs
every task through a worker the runtime starts (``start_worker``: /task/in-root (ro), /task/out-root
(rw), /data (ro); :mod:`executor.runtimes.warm`); ``run`` runs one task in a fresh container/sandbox
with /task/in (ro), /task/out (rw), /data (ro), /run/task-key (ro). Either way the image's entrypoint
runs as the unprivileged task user."""

from typing import Any

from executor.runtimes.base import Limits, RunOutcome, TaskMounts, TaskRuntime

__all__ = ["Limits", "RunOutcome", "TaskMounts", "TaskRuntime", "get_runtime"]


def get_runtime(name: str, **kwargs: Any) -> TaskRuntime:
    if name == "container":
        from executor.runtimes.container import ContainerRuntime

        return ContainerRuntime(**kwargs)
    if name == "sandbox":
        from executor.runtimes.sandbox import SandboxRuntime

        return SandboxRuntime(**kwargs)
    raise ValueError(f"unknown runtime {name!r} (expected 'container' or 'sandbox')")
