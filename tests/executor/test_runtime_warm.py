"""Warm workers: same isolation, a fresh key and a signed manifest per round, same bytes as cold runs."""

from __future__ import annotations

import os
import threading

import pytest

from algorithms.task_runtime import save_dataset
from algorithms.task_spec import TaskSpec
from executor.runtimes.sandbox import SandboxRuntime
from executor.runtimes.warm import WarmWorker
from executor.task_keys import TaskKey
from executor.tasks import run_isolated_task
from tests.executor.conftest import make_dataset

ORGS = ("Org1MSP", "Org2MSP")


def _spec(rnd, image, runtime, algorithm):
    return TaskSpec(
        process_id="p-warm",
        round=rnd,
        rounds=3,
        organisation="Org1MSP",
        consortium=ORGS,
        process_seed=4,
        algorithm=algorithm,
        params={"eps": 0.5, "noise": 0.3},
        image_digest=image.digest,
        runtime=runtime,
        topology={"kind": "complete", "seed": 0},
        data_salt="aa",
    )


def _rounds(tmp_path, runtime, image, recipe, worker=None):
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    save_dataset(data / "dataset.npz", make_dataset(7))
    state, keys, manifests = None, [], []
    for rnd in (1, 2, 3):
        key = TaskKey.generate()
        keys.append(key.public_key_pem)
        spec = _spec(rnd, image, runtime.name, recipe.algorithm)
        if worker is None:
            out = run_isolated_task(
                runtime,
                spec,
                key,
                tmp_path / f"cold{rnd}",
                data,
                state,
                {},
                bundle_dir=image.location or None,
            )
        else:
            out = worker.run(spec, key, state, {})
            assert not list(worker.in_root.rglob("task_key.pem"))  # key destroyed after the round
            # nothing of the task stays in the worker's directories: not its inputs, not its plaintext
            # outputs (the new state, its messages), only the worker's own start-up and exit reports
            assert not [p for p in worker.in_root.iterdir() if p.name != "STOP"]
            assert sorted(p.name for p in worker.out_root.iterdir()) == ["STARTED"]
        state = out.state
        manifests.append(out.manifest)
    assert len(set(keys)) == 3
    return [(m["inputs"], m["outputs"]) for m in manifests]


def test_warm_sandbox_equals_cold_runs_and_is_isolated(tmp_path, bundle, recipe):
    rt = SandboxRuntime()
    cold = _rounds(tmp_path / "c", rt, bundle, recipe)
    data = tmp_path / "w" / "data"
    data.mkdir(parents=True)
    with WarmWorker(rt, bundle.digest, tmp_path / "w" / "warm", data, bundle_dir=bundle.location) as worker:
        warm = _rounds(tmp_path / "w", rt, bundle, recipe, worker)
        pid = worker.process.proc.pid
        # the worker (bwrap's child) lives in other namespaces than ours: no shared network stack
        children = [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
        assert children
        assert all(os.readlink(f"/proc/{c}/ns/net") != os.readlink("/proc/self/ns/net") for c in children)
    assert warm == cold
    assert not worker.alive()


def test_warm_worker_refuses_other_images_and_reports_dead_workers(tmp_path, bundle, recipe):
    rt = SandboxRuntime()
    data = tmp_path / "data"
    data.mkdir()
    save_dataset(data / "dataset.npz", make_dataset(7))
    worker = WarmWorker(rt, bundle.digest, tmp_path / "warm", data, bundle_dir=bundle.location).start()
    with pytest.raises(ValueError):
        worker.run(
            _spec(
                1,
                type(bundle)(bundle.reference, "sha256:" + "0" * 64, "", "sandbox"),
                "sandbox",
                recipe.algorithm,
            ),
            TaskKey.generate(),
            None,
            {},
        )
    worker.process.proc.kill()
    worker.process.proc.wait()
    with pytest.raises(Exception, match="not running"):
        worker.run(_spec(1, bundle, "sandbox", recipe.algorithm), TaskKey.generate(), None, {})
    worker.stop()


@pytest.mark.container
def test_warm_container_equals_cold_runs_with_the_same_isolation(tmp_path, engine, container_image, recipe):
    from executor.runtimes.container import ContainerRuntime

    rt = ContainerRuntime(client=engine)
    cold = _rounds(tmp_path / "c", rt, container_image, recipe)
    data = tmp_path / "w" / "data"
    data.mkdir(parents=True)
    with WarmWorker(
        rt, container_image.digest, tmp_path / "w" / "warm", data, name="consortia-warm-test"
    ) as worker:
        warm = _rounds(tmp_path / "w", rt, container_image, recipe, worker)
        hc = engine.api.inspect_container(worker.process.container.id)["HostConfig"]
        assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
        assert hc["SecurityOpt"] and "no-new-privileges" in hc["SecurityOpt"][0]
        assert hc["PidsLimit"] == 256 and hc["Memory"] == 2 << 30
        assert engine.api.inspect_container(worker.process.container.id)["Config"]["User"] == "10001:10001"
    assert warm == cold


def test_worker_does_not_outlive_its_executor(tmp_path, bundle):
    """A sandbox worker whose executor process is SIGKILLed exits (stdin lifeline), even though
    nobody touches STOP."""
    import signal
    import subprocess
    import sys
    import time

    from tests.executor.conftest import ROOT

    data = tmp_path / "data"
    data.mkdir()
    script = (
        f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
        "from executor.runtimes.sandbox import SandboxRuntime\n"
        "from executor.runtimes.warm import WarmWorker\n"
        f"w = WarmWorker(SandboxRuntime(), {bundle.digest!r}, {str(tmp_path / 'warm')!r}, {str(data)!r},"
        f" bundle_dir={bundle.location!r}).start()\n"
        "print(w.process.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    agent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    bwrap_pid = int(agent.stdout.readline())
    time.sleep(1.0)
    children = [int(c) for c in open(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read().split()]
    assert children
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait()
    deadline = time.monotonic() + 10
    while any(
        os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read().lower()
        for p in [bwrap_pid, *children]
    ):
        assert time.monotonic() < deadline, "worker outlived its executor"
        time.sleep(0.1)


def test_warm_worker_start_up_is_timed_apart_from_the_task(tmp_path, bundle, recipe):
    """The agent's profile separates a warm worker's start-up (its first task waits for the imports)
    from the task itself: ``worker_start`` then ``task``."""
    from wire import timing

    rt = SandboxRuntime()
    data = tmp_path / "data"
    data.mkdir()
    save_dataset(data / "dataset.npz", make_dataset(7))
    with WarmWorker(rt, bundle.digest, tmp_path / "warm", data, bundle_dir=bundle.location) as worker:
        with timing.recording() as prof:
            with timing.section("task"):
                worker.run(_spec(1, bundle, rt.name, recipe.algorithm), TaskKey.generate(), None, {})
            first = dict(prof.per_thread()[threading.current_thread().name])
    assert first["worker_start"] > 0
    assert first["task"] > 0


def _tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants."""
    tick, total, todo = os.sysconf("SC_CLK_TCK"), 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                todo.extend(int(c) for c in open(f"/proc/{p}/task/{task}/children").read().split())
        except (OSError, ValueError):
            continue
    return total


def test_an_idle_warm_sandbox_sleeps_on_its_doorbell(tmp_path, bundle, recipe):
    """Between tasks a sandbox worker sleeps until the agent rings (a byte on its stdin pipe after
    READY/STOP) instead of polling its folder every 1-10 ms: over 3 s idle its whole process tree uses
    almost no CPU (the polling worker it replaces spent ~2-6 % of a core; 20 of them, a third of a
    core), and a task handed over after the idle spell still runs at once; STOP ends it promptly."""
    import time

    rt = SandboxRuntime()
    data = tmp_path / "data"
    data.mkdir()
    save_dataset(data / "dataset.npz", make_dataset(7))
    with WarmWorker(rt, bundle.digest, tmp_path / "warm", data, bundle_dir=bundle.location) as worker:
        assert worker.wait_started(120)
        pid = worker.process.proc.pid
        out = worker.run(_spec(1, bundle, rt.name, recipe.algorithm), TaskKey.generate(), None, {})
        before = _tree_cpu(pid)  # right after a task: when the polling worker polled fastest
        time.sleep(3.0)
        idle_cpu = _tree_cpu(pid) - before
        assert idle_cpu < 0.025, f"idle worker used {idle_cpu:.3f} CPU s in 3 s"
        t0 = time.perf_counter()
        out = worker.run(_spec(2, bundle, rt.name, recipe.algorithm), TaskKey.generate(), out.state, {})
        assert out.manifest["round"] == 2
        assert time.perf_counter() - t0 < 30
        proc = worker.process.proc
        t1 = time.perf_counter()
        worker.stop(wait=True)
        assert proc.poll() is not None and time.perf_counter() - t1 < 2.0


def test_worker_doorbell_keeps_prints_off_the_pipe(tmp_path):
    """Inside the worker, fd 1 is the doorbell to the agent only: what a task prints goes to stderr,
    so a chatty algorithm can neither fill the pipe nor ring it; ring() writes one byte."""
    import subprocess
    import sys

    code = (
        "import sys, os\n"
        "from algorithms.task_worker import _Lifeline\n"
        "life = _Lifeline()\n"
        "print('x' * 200000, flush=True)\n"
        "life.ring()\n"
        "os.write(1, b'y' * 100)\n"
        "life.ring()\n"
        "sys.stderr.write('to stderr\\n')\n"
    )
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    res = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, capture_output=True, timeout=60, env=env
    )
    assert res.returncode == 0, res.stderr[-500:]
    assert res.stdout == b".."
    assert res.stderr.count(b"x") == 200000 and b"y" * 100 in res.stderr
