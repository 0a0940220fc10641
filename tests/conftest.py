"""Suite-wide: the session computes under the numeric profile the algorithm images compute under
(``algorithms.numeric_profile``), so the simulator's digests can equal the tasks'; and the task
directories that node agents made on a memory filesystem during the run (``executor.node.scratch``,
one per agent state directory, i.e. per temporary home here) are removed at the end, so repeated runs
do not leave them in memory."""

from __future__ import annotations

import os
import shutil

import pytest

from algorithms import numeric_profile
from executor.node.scratch import memory_base, user_dir


def pytest_configure(config):
    """A session started without the profile's environment (``python -m pytest`` rather than
    ``scripts/test``, which exports it) re-executes itself once under it, before any test is
    collected: the libraries chose their kernels when they were loaded, and glibc when the process
    started. ``CONSORTIA_NUMERIC_PROFILE=host`` runs the suite with this machine's own kernels (the
    algorithm tests' second profile in CI; the simulator-versus-platform tests then fail)."""
    numeric_profile.reexec_selected()


@pytest.fixture(scope="session", autouse=True)
def _task_scratch_cleared():
    base = memory_base()
    mine = user_dir(base) if base is not None else None
    before = set(os.listdir(mine)) if mine is not None and mine.is_dir() else set()
    yield
    if mine is not None and mine.is_dir():
        for name in set(os.listdir(mine)) - before:
            shutil.rmtree(mine / name, ignore_errors=True)
