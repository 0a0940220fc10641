"""The command line of an algorithm image (its ``entrypoint.py`` calls :func:`main` with the image's
algorithm): one task, or a warm worker serving task after task (docs/executor.md "Task runtime file
contract", "Warm mode").

This module imports only :mod:`algorithms` (it runs inside images).
"""

from __future__ import annotations

import sys

from algorithms.numeric_profile import PROFILE, named
from algorithms.task_runtime import run_and_report
from algorithms.task_worker import serve


def main(
    argv: list[str] | None = None, only_algorithm: str | None = None, numeric_profile: str | None = None
) -> int:
    """``entrypoint.py [TASK_DIR [DATA_DIR [KEY_FILE]]]``: one task per the file contract
    (:func:`algorithms.task_runtime.run_and_report`; defaults /task, /data,
    /run/task-key/task_key.pem -- the image layout), or ``entrypoint.py --serve [IN_ROOT OUT_ROOT
    DATA_DIR]`` for a warm worker (``--serve-once``: one task, for a worker started early;
    :func:`algorithms.task_worker.serve`). ``only_algorithm`` and ``numeric_profile`` are what the
    image declares (its ``image.json``)."""
    profile = PROFILE if numeric_profile is None else named(numeric_profile)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--serve", "--serve-once"):
        rest = argv[1:] + ["/task/in-root", "/task/out-root", "/data"][len(argv) - 1 :]
        once = argv[0] == "--serve-once"
        return serve(
            rest[0],
            rest[1],
            rest[2],
            only_algorithm,
            max_tasks=1 if once else None,
            idle_exit_s=600.0 if once else 3600.0,
            profile=profile,
        )
    task_dir = argv[0] if len(argv) > 0 else "/task"
    data_dir = argv[1] if len(argv) > 1 else "/data"
    key_path = argv[2] if len(argv) > 2 else "/run/task-key/task_key.pem"
    return run_and_report(task_dir, data_dir, key_path, only_algorithm, profile=profile)


if __name__ == "__main__":
    raise SystemExit(main())
