"""Suite-wide: the task directories that node agents made on a memory filesystem during the run
(``executor.node.scratch``, one per agent state directory, i.e. per temporary home here) are removed at
the end, so repeated runs do not leave them in memory."""

from __future__ import annotations

import os
import shutil

import pytest

from executor.node.scratch import memory_base, user_dir


@pytest.fixture(scope="session", autouse=True)
def _task_scratch_cleared():
    base = memory_base()
    mine = user_dir(base) if base is not None else None
    before = set(os.listdir(mine)) if mine is not None and mine.is_dir() else set()
    yield
    if mine is not None and mine.is_dir():
        for name in set(os.listdir(mine)) - before:
            shutil.rmtree(mine / name, ignore_errors=True)
