"""The container runtime through the Docker API (Podman + runc, started by the fixtures)."""

from __future__ import annotations

import pytest

from algorithms.task_runtime import save_dataset
from algorithms.task_spec import TaskSpec
from executor.errors import RuntimeUnavailable
from executor.runtimes.base import Limits, TaskMounts
from executor.runtimes.container import ContainerRuntime
from executor.task_keys import TaskKey, destroy_key_dir
from executor.tasks import run_isolated_task
from tests.executor.conftest import make_dataset
from tests.executor.probes import PROBE, assert_isolated, parse

pytestmark = pytest.mark.container
ORGS = ("Org1MSP", "Org2MSP")


@pytest.fixture(scope="module")
def runtime(engine):
    rt = ContainerRuntime(client=engine)
    assert rt.available()
    return rt


def _mounts(tmp_path, runtime):
    m = TaskMounts(task_dir=tmp_path / "task", data_dir=tmp_path / "org1-data", key_dir=tmp_path / "key")
    m.data_dir.mkdir()
    save_dataset(m.data_dir / "dataset.npz", make_dataset(1))
    m.prepare(runtime.task_uid)
    TaskKey.generate().hand_over(m.key_dir, uid=runtime.task_uid)
    other = tmp_path / "org2-data"
    other.mkdir()
    save_dataset(other / "dataset.npz", make_dataset(2))
    return m, other / "dataset.npz"


def test_isolation_options_requested():
    m = TaskMounts(
        task_dir=__import__("pathlib").Path("/t"),
        data_dir=__import__("pathlib").Path("/d"),
        key_dir=__import__("pathlib").Path("/k"),
    )
    o = ContainerRuntime(client=object()).container_options(
        m, Limits(memory_bytes=512 << 20, cpus=0.5, pids=64)
    )
    assert o["network_mode"] == "none" and o["read_only"] is True and o["cap_drop"] == ["ALL"]
    assert o["security_opt"] == ["no-new-privileges"] and o["user"] == "10001:10001"
    assert o["mem_limit"] == 512 << 20 == o["memswap_limit"] and o["nano_cpus"] == 500_000_000
    assert o["pids_limit"] == 64
    modes = {v["bind"]: v["mode"] for v in o["volumes"].values()}
    assert modes == {"/task/in": "ro", "/task/out": "rw", "/data": "ro", "/run/task-key": "ro"}


def test_hostile_task_is_isolated(tmp_path, runtime, container_image):
    m, other = _mounts(tmp_path, runtime)
    try:
        out = runtime.run(container_image.digest, m, Limits(), command=["python3", "-c", PROBE, str(other)])
    finally:
        destroy_key_dir(m.key_dir)
    assert out.exit_code == 0, out.logs
    assert out.runtime == "container"
    assert_isolated(parse(out.logs))
    assert (m.outputs / "probe").exists() and not (tmp_path / "org1-data" / "probe").exists()


def test_memory_limit_holds(tmp_path, runtime, container_image):
    m, _ = _mounts(tmp_path, runtime)
    hog = "b = bytearray(900 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('allocated')"
    out = runtime.run(
        container_image.digest, m, Limits(memory_bytes=128 << 20), command=["python3", "-c", hog]
    )
    assert out.exit_code != 0 and "allocated" not in out.logs


def test_unknown_image_is_not_run(tmp_path, runtime):
    m, _ = _mounts(tmp_path, runtime)
    with pytest.raises(RuntimeUnavailable):
        runtime.run("sha256:" + "0" * 64, m)


def test_real_task_in_a_container_matches_the_sandbox(tmp_path, runtime, container_image, bundle, recipe):
    from executor.runtimes.sandbox import SandboxRuntime

    data = tmp_path / "data"
    data.mkdir()
    save_dataset(data / "dataset.npz", make_dataset(1))
    outputs = {}
    for rt, image, bdir in ((runtime, container_image, None), (SandboxRuntime(), bundle, bundle.location)):
        spec = TaskSpec(
            process_id="p1",
            round=1,
            rounds=1,
            organisation="Org1MSP",
            consortium=ORGS,
            process_seed=1,
            algorithm=recipe.algorithm,
            params={"eps": 0.5, "noise": 0.2},
            image_digest=image.digest,
            runtime=rt.name,
            topology={"kind": "complete", "seed": 0},
            data_salt="ab",
        )
        out = run_isolated_task(
            rt, spec, TaskKey.generate(), tmp_path / rt.name, data, None, {}, bundle_dir=bdir
        )
        outputs[rt.name] = (out.manifest["outputs"], out.manifest["inputs"])
    assert outputs["container"] == outputs["sandbox"]  # same pinned numpy, same bytes


def test_finished_task_containers_are_removed(tmp_path, runtime, container_image, engine):
    m, _ = _mounts(tmp_path, runtime)
    before = {c.id for c in engine.containers.list(all=True)}
    out = runtime.run(container_image.digest, m, Limits(), command=["python3", "-c", "print('hi')"])
    assert out.exit_code == 0 and "hi" in out.logs
    ContainerRuntime.flush_removals()
    assert {c.id for c in engine.containers.list(all=True)} <= before


def test_a_container_computes_under_its_images_numeric_profile(tmp_path, runtime, container_image, engine):
    """The image's configuration carries the profile's environment and label (so its digest covers
    them); inside, every library reports the pinned kernels on the image's own glibc."""
    import json

    from algorithms.numeric_profile import PROFILE

    image = engine.images.get(container_image.digest)
    env = dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert {k: env[k] for k in PROFILE.environ()} == PROFILE.environ()
    assert image.labels["org.consortia.numeric_profile"] == PROFILE.id
    assert image.labels["org.consortia.numeric_profile_digest"] == PROFILE.digest
    m, _ = _mounts(tmp_path, runtime)
    try:
        out = runtime.run(
            container_image.digest,
            m,
            Limits(),
            command=["python3", "-m", "algorithms.numeric_profile", "check"],
        )
    finally:
        destroy_key_dir(m.key_dir)
    report = json.loads(out.logs[out.logs.index("{") :])
    assert out.exit_code == 0 and report["problems"] == [], out.logs
    assert report["facts"]["runtimes"][0]["architecture"] == "Nehalem"
    assert report["facts"]["libc"].startswith("glibc") and report["facts"]["glibc_active"]["FMA"] is False
