"""The warm path goes through the TaskRuntime interface only: any runtime with ``start_worker`` works."""

from __future__ import annotations

from executor.node.workers import WorkerPool
from executor.runtimes.base import Limits, TaskRuntime, Worker
from executor.runtimes.container import ContainerRuntime
from executor.runtimes.sandbox import SandboxRuntime
from executor.runtimes.warm import IN_ROOT, OUT_ROOT, WarmWorker


class FakeWorker:
    bell = None  # no doorbell: polled

    def __init__(self):
        self.running, self.ended = True, []

    def ring(self) -> None:
        pass

    def alive(self, max_age: float = 0.0) -> bool:
        return self.running

    def end(self, grace: float) -> None:
        self.running = False
        self.ended.append(grace)


class FakeRuntime:
    name = "fake"
    task_uid = None

    def __init__(self):
        self.started = []

    def available(self) -> bool:
        return True

    def check(self) -> None:
        pass

    def local_digest(self, reference: str) -> str | None:
        return None

    def run(self, image_digest, mounts, limits=Limits(), command=None, bundle_dir=None):
        raise AssertionError("the warm path never calls run")

    def start_worker(self, spec):
        w = FakeWorker()
        binds = [(b[1], b[2]) for b in spec.binds]
        self.started.append((spec.image_digest, binds, list(spec.args), spec.name, spec.one_shot, w))
        return w


def test_both_runtimes_implement_the_interface():
    assert isinstance(SandboxRuntime(bwrap="/bin/true"), TaskRuntime)
    assert isinstance(ContainerRuntime(client=object()), TaskRuntime)
    assert isinstance(FakeWorker(), Worker)


def test_warm_and_one_shot_workers_start_through_the_interface(tmp_path):
    rt = FakeRuntime()
    assert isinstance(rt, TaskRuntime)
    data = tmp_path / "data"
    data.mkdir()
    pool = WorkerPool(rt, Limits(), tmp_path / "warm", "Org1MSP", warm=True)
    w = pool.worker("p/1", "sha256:" + "a" * 64, data, None, tmp_path / "unused")
    assert pool.worker("p/1", "sha256:" + "a" * 64, data, None, tmp_path / "unused") is w  # reused
    assert pool.live("p/1", "sha256:" + "a" * 64) and not pool.live("p/1", "sha256:" + "b" * 64)
    digest, binds, args, name, one_shot, handle = rt.started[0]
    assert binds == [(IN_ROOT, "ro"), (OUT_ROOT, "rw"), ("/data", "ro")]
    assert args == ["--serve"] and name == "consortia-warm-Org1MSP-p-1" and not one_shot
    pool.stop()
    assert pool.workers == {} and not w.alive()
    one = WarmWorker(rt, "sha256:" + "a" * 64, tmp_path / "one", data, one_shot=True).start()
    assert rt.started[-1][2] == ["--serve-once"] and rt.started[-1][4]
    one.stop(wait=True)
    assert rt.started[-1][5].ended == [2.0]
