"""Suite-wide: the session computes under the numeric profile the algorithm images compute under
(``algorithms.numeric_profile``), so the simulator's digests can equal the tasks'. A node agent removes
its task directories' base on a memory filesystem when it ends (``executor.node.scratch.release_scratch``);
one killed by a test cannot, so at the end of the run the bases of the agents whose state directories
lie in this run's temporary folders are removed -- only those: another run of the suite on the same
machine (another checkout, another user of the same uid) keeps its own."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from algorithms import numeric_profile
from executor.node.scratch import memory_base, user_dir


def _own_tags(base: Path) -> set[str]:
    """The scratch tags (``task_scratch``: 16 hex of sha256 of the state directory) of every directory
    under ``base``, this run's temporary folders (a state directory is one of them)."""
    tags = set()
    for parent, dirs, _ in os.walk(base):
        for d in dirs:
            path = str(Path(parent, d).resolve())
            tags.add(hashlib.sha256(path.encode()).hexdigest()[:16])
    return tags


def pytest_configure(config):
    """A session started without the profile's environment (``python -m pytest`` rather than
    ``scripts/test``, which exports it) re-executes itself once under it, before any test is
    collected: the libraries chose their kernels when they were loaded, and glibc when the process
    started. ``CONSORTIA_NUMERIC_PROFILE=host`` runs the suite with this machine's own kernels (the
    algorithm tests' second profile in CI; the simulator-versus-platform tests then fail)."""
    numeric_profile.reexec_selected()


@pytest.fixture(scope="session", autouse=True)
def _task_scratch_cleared(tmp_path_factory):
    yield
    base = memory_base()
    mine = user_dir(base) if base is not None else None
    if mine is None or not mine.is_dir():
        return
    left = set(os.listdir(mine))
    if left:
        for name in left & _own_tags(tmp_path_factory.getbasetemp()):
            shutil.rmtree(mine / name, ignore_errors=True)
