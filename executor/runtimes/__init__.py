"""Runtimes that run one task in isolation: ``container`` (Docker API engine) and ``sandbox``
(bubblewrap). Both mount the same layout: /task/in (ro), /task/out (rw), /data (ro),
/run/task-key (ro), and run the image's entrypoint as the unprivileged task user."""

from executor.runtimes.base import Limits, RunOutcome, TaskMounts, TaskRuntime

__all__ = ["Limits", "RunOutcome", "TaskMounts", "TaskRuntime", "get_runtime"]


def get_runtime(name: str, **kwargs) -> TaskRuntime:
    if name == "container":
        from executor.runtimes.container import ContainerRuntime

        return ContainerRuntime(**kwargs)
    if name == "sandbox":
        from executor.runtimes.sandbox import SandboxRuntime

        return SandboxRuntime(**kwargs)
    raise ValueError(f"unknown runtime {name!r} (expected 'container' or 'sandbox')")
