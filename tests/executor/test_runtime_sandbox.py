"""The bubblewrap sandbox runtime: real runs of a real task and of a hostile probe."""

from __future__ import annotations

import sys

import pytest

from algorithms.task_runtime import save_dataset
from algorithms.task_spec import TaskSpec
from executor.errors import RuntimeUnavailable
from executor.runtimes.base import Limits, TaskMounts
from executor.runtimes.sandbox import SandboxRuntime
from executor.task_keys import TaskKey, destroy_key_dir
from executor.tasks import run_isolated_task
from tests.executor.conftest import make_dataset
from tests.executor.probes import PROBE, assert_isolated, parse

ORGS = ("Org1MSP", "Org2MSP")


@pytest.fixture(scope="module")
def sandbox():
    rt = SandboxRuntime()
    rt.check()  # ToolMissing names bubblewrap and how to install it (scripts/setup does)
    return rt


def _mounts(tmp_path, sandbox):
    m = TaskMounts(task_dir=tmp_path / "task", data_dir=tmp_path / "org1-data", key_dir=tmp_path / "key")
    m.data_dir.mkdir()
    save_dataset(m.data_dir / "dataset.npz", make_dataset(1))
    m.prepare(sandbox.task_uid)
    TaskKey.generate().hand_over(m.key_dir, uid=sandbox.task_uid)
    other = tmp_path / "org2-data"
    other.mkdir()
    save_dataset(other / "dataset.npz", make_dataset(2))
    return m, other / "dataset.npz"


def test_hostile_task_is_isolated(tmp_path, sandbox, bundle):
    m, other = _mounts(tmp_path, sandbox)
    try:
        out = sandbox.run(
            bundle.digest,
            m,
            Limits(),
            command=[sys.executable, "-c", PROBE, str(other)],
            bundle_dir=bundle.location,
        )
    finally:
        destroy_key_dir(m.key_dir)
    assert out.exit_code == 0, out.logs
    assert out.runtime == "sandbox"
    assert_isolated(parse(out.logs))
    assert (m.outputs / "probe").exists() and not (tmp_path / "org1-data" / "probe").exists()


def test_memory_and_process_limits_hold(tmp_path, sandbox, bundle):
    m, _ = _mounts(tmp_path, sandbox)
    hog = "b = bytearray(900 * 1024 * 1024); print('allocated')"
    out = sandbox.run(
        bundle.digest,
        m,
        Limits(memory_bytes=256 << 20),
        command=[sys.executable, "-c", hog],
        bundle_dir=bundle.location,
    )
    assert out.exit_code != 0 and "allocated" not in out.logs
    fork = (
        "import os, sys\nn = 0\ntry:\n    for _ in range(200):\n        if os.fork() == 0:\n"
        "            import time; time.sleep(2); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
        "print('forked', n)"
    )
    out = sandbox.run(
        bundle.digest, m, Limits(pids=16), command=[sys.executable, "-c", fork], bundle_dir=bundle.location
    )
    forked = int(out.logs.split("forked")[1].split()[0])
    assert forked < 16, out.logs


def test_rlimits_and_cgroups_are_set_before_the_task_starts(tmp_path, sandbox, bundle):
    # applied by the child itself (a shell entering the cgroups, prlimit, then bwrap), not by Python
    # code between fork and exec in the multi-threaded agent
    m, _ = _mounts(tmp_path, sandbox)
    probe = (
        "import resource\n"
        "print('cpu', *resource.getrlimit(resource.RLIMIT_CPU))\n"
        "print('as', *resource.getrlimit(resource.RLIMIT_AS))\n"
        "print('core', *resource.getrlimit(resource.RLIMIT_CORE))"
    )
    out = sandbox.run(
        bundle.digest,
        m,
        Limits(timeout_s=30, memory_bytes=512 << 20),
        command=[sys.executable, "-c", probe],
        bundle_dir=bundle.location,
    )
    assert out.exit_code == 0, out.logs
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.logs.splitlines() if ln.strip()}
    assert lines["cpu"] == ["31", "31"] and lines["core"] == ["0", "0"]
    assert lines["as"] == [str(4 << 30)] * 2  # max(memory, 1 GiB) x 4
    # (the cgroups cannot be seen from inside: bwrap unshares the cgroup namespace; the memory and
    # pids limits they carry are what test_memory_and_process_limits_hold proves)


def test_timeout_kills_the_task(tmp_path, sandbox, bundle):
    m, _ = _mounts(tmp_path, sandbox)
    out = sandbox.run(
        bundle.digest,
        m,
        Limits(timeout_s=0.5),
        command=[sys.executable, "-c", "while True: pass"],
        bundle_dir=bundle.location,
    )
    assert out.timed_out and out.exit_code != 0 and out.wall_s < 5


def test_runs_only_the_bundle_with_the_verified_digest(tmp_path, sandbox, bundle):
    m, _ = _mounts(tmp_path, sandbox)
    with pytest.raises(RuntimeUnavailable, match="has digest"):
        sandbox.run("sha256:" + "0" * 64, m, bundle_dir=bundle.location)


def test_real_task_in_the_sandbox(tmp_path, sandbox, bundle, recipe):
    data = tmp_path / "data"
    data.mkdir()
    save_dataset(data / "dataset.npz", make_dataset(1))
    spec = TaskSpec(
        process_id="p1",
        round=1,
        rounds=1,
        organisation="Org1MSP",
        consortium=ORGS,
        process_seed=1,
        algorithm=recipe.algorithm,
        params={"eps": 0.5},
        image_digest=bundle.digest,
        runtime="sandbox",
        topology={"kind": "complete", "seed": 0},
        data_salt="ab",
    )
    key = TaskKey.generate()
    out = run_isolated_task(sandbox, spec, key, tmp_path / "work", data, None, {}, bundle_dir=bundle.location)
    assert out.outcome.exit_code == 0
    assert out.manifest["outputs"]["model"] is not None and set(out.outbox) == {"Org2MSP"}
    assert not (tmp_path / "work" / "key").exists()  # key destroyed after the run


def test_a_sandbox_computes_under_the_bundles_numeric_profile(tmp_path, sandbox, bundle, monkeypatch):
    """The sandbox's environment is the profile the bundle declares, whatever the host's: a host
    OPENBLAS_CORETYPE does not get in, and inside every library reports the pinned kernels."""
    import json

    from algorithms.numeric_profile import PROFILE

    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "X86_V4")
    m, _ = _mounts(tmp_path, sandbox)
    show = "import json, os; print(json.dumps(dict(os.environ)))"
    try:
        env = sandbox.run(bundle.digest, m, command=[sys.executable, "-c", show], bundle_dir=bundle.location)
        check = sandbox.run(
            bundle.digest,
            m,
            command=[sys.executable, "-m", "algorithms.numeric_profile", "check"],
            bundle_dir=bundle.location,
        )
    finally:
        destroy_key_dir(m.key_dir)
    inside = json.loads(env.logs)
    assert {k: inside[k] for k in PROFILE.environ()} == PROFILE.environ()
    assert "NPY_DISABLE_CPU_FEATURES" not in inside
    python = {"PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PATH"}
    assert set(inside) - set(PROFILE.environ()) <= python | {"PWD", "LC_CTYPE"}  # bwrap's, Python's
    report = json.loads(check.logs[check.logs.index("{") :])
    assert check.exit_code == 0 and report["problems"] == [], check.logs
    assert report["facts"]["runtimes"][0]["architecture"] == "Nehalem"
    assert report["facts"]["numpy"]["enabled"] == [] and report["facts"]["glibc_active"]["FMA"] is False
