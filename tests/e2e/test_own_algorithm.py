"""A user's own algorithm, from a folder outside the repository to an audited process (issue 29):
the folder (tests/support/own_algorithm.py: consortia_sdk only, one hash-pinned extra requirement)
built by two organisations with their own caches gets one digest; registered and run by three
organisations on the embedded ledger (sandbox runtime) its every state, message and model digest
equals ``consortia_sdk.simulate``'s; for the torch base as well; a bundle whose installed wheels
were swapped is refused by digest at run and at pull, the digest named. Item 5's whole chain: a folder
made by ``algorithm new`` (both templates) outside the repository is checked, simulated by ``consortia
simulate`` on CSV files, built, registered and run audited by three organisations: the final model
digests are those ``consortia simulate`` printed."""

from __future__ import annotations

import importlib
import json
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import consortia_sdk
from algorithms import codec
from api.algorithm_kit.folder import declaration
from api.algorithm_kit.local_run import read_organisations
from api.algorithm_kit.scaffold import new_folder
from executor.images.bundle import build_bundle, bundle_digest
from executor.images.recipe import PROJECT_ROOT, ImageRecipe
from executor.images.reference import ImageTampered
from executor.node.supervisor import run_process
from executor.process import ProcessSpec, collect_models, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from tests.api.test_cli_algorithm import consortia
from tests.ci import require_module
from tests.e2e.conftest import ORGS3
from tests.e2e.test_process import assert_bit_identical
from tests.executor.images.conftest import registry_addr  # noqa: F401  (the registry fixture, shared)
from tests.support.own_algorithm import regression_data, write_folder

PARAMS = {"sklearn": {"alpha": 0.5, "eps": 0.3}, "torch": {"lr": 0.05}}
TOPOLOGY = {"kind": "ring", "seed": 5}
ROUNDS = 3


def algorithm_class(folder: Path, bundle: Path, monkeypatch):
    """The user's class as a data scientist imports it: from the folder, its extra requirements
    from the installed wheels of the bundle (the same files the sandbox runs)."""
    monkeypatch.syspath_prepend(str(folder))
    if (bundle / "site").is_dir():
        monkeypatch.syspath_prepend(str(bundle / "site"))
    meta = ImageRecipe.load(folder)
    module, _, name = meta.algorithm.partition(":")
    # the module is forgotten after the test, as the folder leaves sys.path (monkeypatch records that the
    # name was absent and removes it at undo): a later `algorithm new` of the same name would otherwise be
    # refused for hiding an installed module
    monkeypatch.setitem(sys.modules, module, None)
    del sys.modules[module]
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class MadeAlgorithm:
    """A folder made by ``algorithm new``, checked and simulated by the CLI on CSV files (item 5)."""

    folder: Path
    params: dict
    datasets: dict
    simulated: dict  # `consortia simulate -o json`


def classification_csvs(data: Path, orgs) -> None:
    """Each organisation's rows as ``<MSP id>.csv``: 24 rows, 3 features, labels 0/1 from a shared
    hyperplane with a little noise (small, so the runs are fast)."""
    data.mkdir(parents=True)
    for i, org in enumerate(orgs):
        rng = np.random.default_rng(100 + i)
        X = rng.normal(size=(24, 3))
        frame = pd.DataFrame(X, columns=["amount", "age", "score"])
        frame["label"] = (X @ np.array([1.5, -2.0, 1.0]) + 0.3 * rng.normal(size=24) > 0).astype(int)
        frame.to_csv(data / f"{org}.csv", index=False)


def made_checked_simulated(work: Path, template: str, orgs, topology: dict, rounds: int) -> MadeAlgorithm:
    """``algorithm new`` in ``work`` (outside the repository), ``consortia algorithm check`` on the CSV
    files (must pass), ``consortia simulate`` on them with the schema's defaults and no validation slice
    (a process of an image whose class the launching host cannot import records none by default): what a
    user does before building."""
    work.mkdir(parents=True, exist_ok=True)
    assert PROJECT_ROOT not in work.resolve().parents
    made = new_folder(f"own-{template}", template, work)
    classification_csvs(work / "data", orgs)
    checked = consortia(
        "algorithm", "check", str(made.folder), "--data", "data", "--rounds", "2", "-o", "json", cwd=work
    )
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["ok"], (report, checked.stderr)
    args = ["simulate", str(made.folder), "--data", "data", "--topology", topology["kind"]]
    args += ["--rounds", str(rounds), "--seed", str(topology["seed"])]
    ran = consortia(*args, "-o", "json", cwd=work)
    assert ran.returncode == 0, ran.stderr
    simulated = json.loads(ran.stdout)
    assert simulated["consortium"] == list(orgs) and set(simulated["models"]) == set(orgs)
    decl = declaration(made.folder)
    params = {k: v["default"] for k, v in decl.parameters.items()}
    # the arrays a task reads: each file read as `consortia data import` reads it
    return MadeAlgorithm(made.folder, params, read_organisations(work / "data", "label", decl), simulated)


def assert_models_are_the_simulated(platform, pid: str, made: MadeAlgorithm, orgs) -> None:
    """The audited final models' digests are those `consortia simulate` printed."""
    models = collect_models(platform, pid, orgs)
    assert {o: codec.digest(b) for o, b in models.items()} == made.simulated["models"]


def run_audited(platform, client, image, datasets, params, pid, warm=False):
    for o in ORGS3:
        map_dataset(platform.data_root, o, "train", datasets[o])
    launch(
        client,
        ProcessSpec(pid, image.record.id, ORGS3, TOPOLOGY, params, ROUNDS, "train"),
        consent=platform.admins(ORGS3),
    )
    return run_process(platform, pid, SandboxRuntime, warm=warm)


@pytest.mark.parametrize("template", ["sklearn", "torch"])
def test_a_new_folder_checked_simulated_built_and_run_audited_gives_the_digests_consortia_simulate_printed(
    platform, tmp_path, monkeypatch, template
):
    if template == "torch":
        require_module("torch")
    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))
    made = made_checked_simulated(tmp_path / "work", template, ORGS3, TOPOLOGY, ROUNDS)
    client = platform.client(ORGS3[0])
    image = prepare_image(client, str(made.folder), "sandbox")
    out = run_audited(platform, client, image, made.datasets, made.params, "p-new", warm=True)
    assert out.status == "completed", (out.reason, out.agent_errors)
    process = client.get_process("p-new")
    assert process.validation_fraction == 0.0 and dict(process.hyperparameters) == made.params
    assert_models_are_the_simulated(platform, "p-new", made, ORGS3)
    bundle = tmp_path / "cache" / "bundles" / image.reference.split(":", 1)[1]
    cls = algorithm_class(made.folder, bundle, monkeypatch)
    sim = consortia_sdk.simulate(
        cls(**made.params),
        made.datasets,
        ROUNDS,
        TOPOLOGY["seed"],
        consortia_sdk.ring(3),
        ORGS3,
        validation_fraction=process.validation_fraction,
    )
    assert_bit_identical(platform, client, "p-new", sim)


@pytest.mark.parametrize("kind", ["sklearn", "torch"])
def test_own_algorithm_builds_to_one_digest_and_runs_audited_as_the_simulator(
    platform, tmp_path, monkeypatch, kind
):
    if kind == "torch":
        require_module("torch")
    folder = write_folder(tmp_path / "outside", kind)
    assert PROJECT_ROOT not in folder.parents
    # two organisations build the same folder, each in its own cache: the same digest
    builds = {}
    for org in ORGS3[:2]:
        monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / f"cache-{org}"))
        builds[org] = build_bundle(ImageRecipe.load(folder))
    one, two = builds[ORGS3[0]], builds[ORGS3[1]]
    assert one.digest == two.digest and one.location != two.location
    assert ((Path(two.location) / "site" / "toolz").is_dir()) == (kind == "sklearn")
    # Org1 registers it (the one build-check-register step of `consortia image build PATH`)
    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / f"cache-{ORGS3[0]}"))
    client = platform.client(ORGS3[0])
    image = prepare_image(client, str(folder), "sandbox")
    assert image.digest == one.digest and image.record.algorithm == ImageRecipe.load(folder).algorithm
    # Org2 runs the bundle it built itself; Org1 and Org3 the one in Org1's cache
    platform.bundles_roots[ORGS3[1]] = Path(two.location).parent
    datasets = regression_data(ORGS3)
    # warm workers (one sandbox per organisation, a fresh key per round): sklearn and torch import once
    out = run_audited(platform, client, image, datasets, PARAMS[kind], "p-own", warm=True)
    assert out.status == "completed", (out.reason, out.agent_errors)
    cls = algorithm_class(folder, Path(two.location), monkeypatch)
    process = client.get_process("p-own")
    sim = consortia_sdk.simulate(
        cls(**PARAMS[kind]),
        datasets,
        ROUNDS,
        TOPOLOGY["seed"],
        consortia_sdk.ring(3),
        ORGS3,
        validation_fraction=process.validation_fraction,
    )
    assert_bit_identical(platform, client, "p-own", sim)


def test_own_algorithm_in_a_container_runs_audited_as_the_simulator(platform, tmp_path, monkeypatch, engine):
    """The python-base folder as a container image (its requirement installed offline in the build)."""
    from executor.runtimes.container import ContainerRuntime

    folder = write_folder(tmp_path / "outside", "sklearn")
    client = platform.client(ORGS3[0])
    image = prepare_image(client, str(folder), "container", engine=engine)
    datasets = regression_data(ORGS3)
    for o in ORGS3:
        map_dataset(platform.data_root, o, "train", datasets[o])
    spec = ProcessSpec("p-own-ctr", image.record.id, ORGS3, TOPOLOGY, PARAMS["sklearn"], 1, "train")
    launch(client, spec, consent=platform.admins(ORGS3))
    out = run_process(platform, "p-own-ctr", lambda: ContainerRuntime(client=engine))
    assert out.status == "completed", (out.reason, out.agent_errors)
    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))  # the same requirement, as a bundle
    cls = algorithm_class(folder, Path(build_bundle(ImageRecipe.load(folder)).location), monkeypatch)
    fraction = client.get_process("p-own-ctr").validation_fraction
    sim = consortia_sdk.simulate(
        cls(**PARAMS["sklearn"]), datasets, 1, 5, consortia_sdk.ring(3), ORGS3, validation_fraction=fraction
    )
    assert_bit_identical(platform, client, "p-own-ctr", sim)
    assert {r.runtime for r in client.query_executions("p-own-ctr")} == {"container"}


def _swapped_site(tmp_path: Path, genuine: Path) -> Path:
    """A copy of the bundle ``genuine`` whose installed toolz 1.2.0 is replaced by PyPI's toolz 1.1.0
    wheel, installed the same way: what a swapped wheel leaves in a bundle."""
    wheels = tmp_path / "other-wheels"
    for args in (
        ["download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), "toolz==1.1.0"],
        ["install", "--no-index", "--find-links", str(wheels), "--no-deps", "--no-compile"]
        + ["--target", str(tmp_path / "other-site"), "toolz==1.1.0"],
    ):
        proc = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-1500:]
    local = tmp_path / "swapped" / genuine.name
    shutil.copytree(genuine, local)
    for p in [local, *local.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(local / "site")
    shutil.copytree(tmp_path / "other-site", local / "site")
    return local


def test_a_bundle_whose_wheels_were_swapped_is_refused_by_digest_at_run_and_at_pull(
    platform,
    tmp_path,
    monkeypatch,
    registry_addr,  # noqa: F811
):
    from executor.images.bundle_archive import push_bundle
    from executor.images.resolver import pull_record

    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))
    folder = write_folder(tmp_path / "outside", "sklearn")
    client = platform.client(ORGS3[0])
    image = prepare_image(client, str(folder), "sandbox")
    genuine = tmp_path / "cache" / "bundles" / image.reference.split(":", 1)[1]
    swapped = _swapped_site(tmp_path, genuine)
    local = bundle_digest(swapped, fresh=True)
    assert local != image.digest
    # at run: Org3's copy is the swapped one; it refuses the task, naming both digests
    platform.bundles_roots[ORGS3[2]] = swapped.parent
    out = run_audited(platform, client, image, regression_data(ORGS3), PARAMS["sklearn"], "p-swap")
    assert out.status == "failed" and "image refused" in out.reason and ORGS3[2] in out.reason
    rec = client.get_execution("p-swap", 1, ORGS3[2])
    assert rec.status == "failed" and rec.result is None
    assert rec.failure_details["pinned"] == image.digest and rec.failure_details["local"] == local
    # at pull: a registry reference that serves the swapped bundle for the genuine digest is refused
    ref = push_bundle(swapped, registry_addr, f"own-{secrets.token_hex(3)}", "1")
    record = client.register_image("own-swapped", "1", image.record.algorithm, image.digest, reference=ref)
    with pytest.raises(ImageTampered) as caught:
        pull_record(record, bundles_root=tmp_path / "pulled")
    assert image.digest in str(caught.value) and local in str(caught.value)
    assert not any((tmp_path / "pulled").glob("registry-*"))


def test_a_requirement_without_a_hash_or_with_a_wrong_one_is_refused_naming_it(tmp_path, monkeypatch):
    from executor.errors import ImageBuildError
    from executor.images.requirements import RequirementRefused

    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))
    no_hash = write_folder(tmp_path / "a", "sklearn", requirements="toolz==1.2.0\n")
    with pytest.raises(RequirementRefused, match=r"requirements.txt:1: 'toolz==1.2.0' has no --hash"):
        build_bundle(ImageRecipe.load(no_hash))
    unpinned = write_folder(tmp_path / "b", "sklearn", requirements="toolz>=1 --hash=sha256:" + "0" * 64)
    with pytest.raises(RequirementRefused, match="is not pinned as name==version"):
        build_bundle(ImageRecipe.load(unpinned))
    wrong = write_folder(tmp_path / "c", "sklearn", requirements="toolz==1.2.0 --hash=sha256:" + "ab" * 32)
    with pytest.raises(
        RequirementRefused, match=r"toolz==1.2.0: the wheel downloaded does not match its --hash"
    ):
        build_bundle(ImageRecipe.load(wrong))
    assert not (tmp_path / "cache" / "bundles").exists() or not any(
        (tmp_path / "cache" / "bundles").iterdir()
    )
    # the torch base has no container image: refused with the reason, before any engine is asked
    from executor.images.engine import build_image

    torch_folder = write_folder(tmp_path / "d", "torch")
    with pytest.raises(ImageBuildError, match="torch base runs with the sandbox runtime only"):
        build_image(None, ImageRecipe.load(torch_folder))
