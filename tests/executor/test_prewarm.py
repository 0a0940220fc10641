"""Spare workers (executor.prewarm, WorkerPool.prewarm): started before a process, verified first,
bound once to exactly one process of the same image and dataset, never leaked."""

from __future__ import annotations

import pytest

from executor import images
from executor.errors import ImageDigestMismatch
from executor.node_agent import NodeAgent
from executor.prewarm import parse_entry, prewarm_image
from executor.runtimes.base import Limits, WorkerSpec
from executor.runtimes.sandbox import SandboxRuntime
from executor.runtimes.warm import WorkerPool, reaped
from tests.executor.test_images import _altered_recipe
from tests.executor.test_node_agent import assert_matches_simulation, platform, run_all  # noqa: F401


class _FakeProcess:
    bell = None  # no doorbell (as a container's worker)

    def __init__(self) -> None:
        self.running = True

    def ring(self) -> None:
        pass

    def alive(self, max_age: float = 0.0) -> bool:
        return self.running

    def end(self, grace: float) -> None:
        self.running = False


class _FakeRuntime:
    """Starts no process: records the specs of the workers it was asked for."""

    name = "fake"
    task_uid = None

    def __init__(self) -> None:
        self.started: list[tuple[WorkerSpec, _FakeProcess]] = []

    def start_worker(self, spec: WorkerSpec) -> _FakeProcess:
        proc = _FakeProcess()
        self.started.append((spec, proc))
        return proc


def _pool(tmp_path, warm=True):
    rt = _FakeRuntime()
    return rt, WorkerPool(rt, Limits(), tmp_path / "warm", "Org1MSP", warm=warm)


def test_a_spare_is_bound_once_to_one_process(tmp_path):
    rt, pool = _pool(tmp_path)
    data = tmp_path / "data" / "default"
    spare = pool.prewarm("sha256:a", data, None, keep=True)
    assert pool.prewarm("sha256:a", data, None) is spare  # one spare per image and dataset
    w1 = pool.worker("p1", "sha256:a", data, None, tmp_path / "w1")
    assert w1 is spare and pool.workers["p1"] is spare
    refill = pool.spares[("sha256:a", data)]  # keep: another spare started for the next process
    assert refill is not spare
    assert pool.worker("p1", "sha256:a", data, None, tmp_path / "w") is spare  # p1 keeps its worker
    w2 = pool.worker("p2", "sha256:a", data, None, tmp_path / "w2")
    assert w2 is refill and w2 is not spare  # p2 never gets p1's worker
    # the spare mounts exactly its dataset folder read-only, like the process's own worker would
    binds = {inside: (host, mode) for host, inside, mode in rt.started[0][0].binds}
    assert binds["/data"] == (data, "ro")


def test_a_spare_of_image_a_or_dataset_a_is_not_used_for_b(tmp_path):
    rt, pool = _pool(tmp_path)
    data_a, data_b = tmp_path / "data" / "a", tmp_path / "data" / "b"
    spare = pool.prewarm("sha256:a", data_a, None)
    other_image = pool.worker("p1", "sha256:b", data_a, None, tmp_path / "w1")
    other_data = pool.worker("p2", "sha256:a", data_b, None, tmp_path / "w2")
    assert spare not in (other_image, other_data)
    assert other_image.image_digest == "sha256:b" and other_data.data_dir == data_b
    assert pool.spares == {("sha256:a", data_a): spare}  # still waiting for its own kind
    assert len(rt.started) == 3


def test_no_spares_without_warm_and_none_left_at_stop(tmp_path):
    _, cold = _pool(tmp_path / "cold", warm=False)
    assert cold.prewarm("sha256:a", tmp_path, None) is None and not cold.spares
    rt, pool = _pool(tmp_path)
    pool.prewarm("sha256:a", tmp_path / "d", None, keep=True)
    pool.worker("p1", "sha256:a", tmp_path / "d", None, tmp_path / "w")
    pool.stop()
    reaped()
    assert not pool.spares and not pool.workers and not pool.keep
    assert len(rt.started) == 2 and not any(p.running for _, p in rt.started)


def test_parse_entry():
    assert parse_entry("sha256:ab") == ("sha256:ab", "default")
    assert parse_entry("sha256:ab=train") == ("sha256:ab", "train")
    assert parse_entry(("sha256:ab", "x")) == ("sha256:ab", "x")


def _agent(platform, org, prewarm=()):  # noqa: F811
    return NodeAgent(
        platform.ledger,
        platform.consortium.identity(org),
        platform.consortium,
        SandboxRuntime(),
        platform.root / "data" / org,
        platform.root / "store",
        platform.root / "state",
        warm=True,
        prewarm=prewarm,
        hosted=platform.hosted,  # the agents of this process reach each other's stores here
    )


def test_agent_spare_runs_the_first_task_and_stops_with_the_agent(
    platform,  # noqa: F811
    bundle,
    recipe,
    average_consensus,
):
    platform.register_image("avg:s", recipe, bundle.digest, bundle.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    first = _agent(platform, orgs[0], prewarm=[bundle.digest])
    spare = first.pool.spares[(bundle.digest, platform.root / "data" / orgs[0] / "default")]
    assert spare.wait_started(120)
    platform.launch("p-spare", "avg:s", rounds=2, orgs=orgs)
    agents = [first, _agent(platform, orgs[1])]
    assert first.run_process_round("p-spare").status == "completed"
    assert first.pool.workers["p-spare"] is spare
    proc = spare.process.proc
    run_all(platform, "p-spare", agents)
    assert_matches_simulation(platform, "p-spare", 2, average_consensus, orgs)
    assert len({r["public_key"] for r in platform.records("p-spare")}) == 4  # fresh key per task
    refill = list(first.pool.spares.values())
    assert len(refill) == 1 and refill[0] is not spare  # the next process gets a new one
    refill_proc = refill[0].process.proc
    for a in agents:
        a.close()
    reaped()
    assert proc.poll() is not None and refill_proc.poll() is not None  # nothing leaked


def test_a_spare_whose_image_fails_verification_is_refused(tmp_path, platform, bundle, recipe):  # noqa: F811
    tampered = images.build_bundle(_altered_recipe(tmp_path, recipe))
    platform.register_image("avg:t", recipe, bundle.digest, tampered.reference)  # local bytes differ
    agent = _agent(platform, "Org1MSP", prewarm=[bundle.digest])  # refused: logged, nothing started
    assert not agent.pool.spares
    with pytest.raises(ImageDigestMismatch):
        prewarm_image(agent, bundle.digest)
    assert not agent.pool.spares
    agent.close()
