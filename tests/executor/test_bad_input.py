"""Bad input fails fast: a process the executor cannot run ends ``failed`` with the reason on the
ledger (none stays ``running``), and ``validate_process`` refuses it before it is created."""

from __future__ import annotations

import json

import numpy as np
import pytest

from algorithms.step import LocalDataset
from algorithms.task_runtime import save_dataset
from executor import images
from executor.declarations import InvalidProcessSpec, declaration, validate_process
from tests.executor.test_node_agent import PARAMS, SEED, platform, run_all  # noqa: F401  (fixture)

RF = "algorithms.collab_rf.algorithm:CollaborativeRandomForest"


def _create(platform, pid, image_id, topology, params=PARAMS, dataset=""):
    spec = {
        "id": pid,
        "image_id": image_id,
        "consortium": platform.orgs,
        "topology": topology,
        "hyperparameters": params,
        "rounds": 2,
    }
    if dataset:
        spec["dataset"] = dataset
    platform.submit(platform.orgs[0], "LearningProcess:create", json.dumps(spec))  # straight to the contract
    platform.submit(platform.orgs[0], "LearningProcess:start", pid)


def _ends_failed(platform, pid, needle):
    run_all(platform, pid, [platform.agent(o) for o in platform.orgs])  # returns: nobody waits for ever
    process = platform.evaluate(platform.orgs[0], "LearningProcess:get", pid)
    assert process["status"] == "failed", process
    assert needle in process["status_reason"]
    failed = [r for r in platform.records(pid) if r["status"] == "failed"]
    assert failed and all(needle in r["failure_reason"] for r in failed)
    assert all(r["public_key"] == "" for r in failed)  # refused before any task key was registered
    assert not [r for r in platform.records(pid) if r["status"] == "running"]
    return failed


def test_unknown_topology_fails_the_process_on_the_ledger(platform, bundle, recipe):
    platform.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    _create(platform, "p-full", "avg:1", {"kind": "full", "seed": SEED})
    failed = _ends_failed(platform, "p-full", "topology kind 'full' is not known")
    assert failed[0]["failure_details"]["code"] == "TASK_PREFLIGHT"


def test_missing_data_folder_fails_the_process_naming_the_path(platform, bundle, recipe):
    platform.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    _create(platform, "p-nodata", "avg:1", {"kind": "ring", "seed": SEED}, dataset="claims2024")
    failed = _ends_failed(platform, "p-nodata", "does not exist")
    paths = {str(platform.root / "data" / r["organisation"] / "claims2024") for r in failed}
    assert all(any(p in r["failure_reason"] for p in paths) for r in failed)


def test_labels_outside_the_declared_classes_fail_the_process(platform):
    recipe = images.ImageRecipe.named("collab-rf")
    bundle = images.build_bundle(recipe)
    assert declaration(recipe.algorithm).classes == (0, 1)
    rng = np.random.default_rng(0)
    for o in platform.orgs:  # labels {1, 2}: every row would be predicted positive
        folder = platform.root / "data" / o / "fraud"
        folder.mkdir(parents=True)
        save_dataset(
            folder / "dataset.npz", LocalDataset(rng.normal(size=(40, 3)), rng.integers(1, 3, size=40))
        )
    platform.register_image("rf:1", recipe, bundle.digest, bundle.reference)
    _create(
        platform,
        "p-labels",
        "rf:1",
        {"kind": "ring", "seed": SEED},
        params={"n_new": 2, "n_share": 1, "n_max": 4, "schedule": ["FIT", "SHARE"]},
        dataset="fraud",
    )
    _ends_failed(platform, "p-labels", "labels [2] of dataset")


def test_validate_process_lists_every_problem():
    with pytest.raises(InvalidProcessSpec) as err:
        validate_process(RF, {"kind": "full", "seed": "x"}, {"n_trees": 5}, dataset="../etc")
    msg = str(err.value)
    assert len(err.value.problems) == 4
    assert "topology kind 'full' is not known" in msg and "seed must be an integer" in msg
    assert "'n_trees' is not accepted" in msg and "n_new" in msg and "dataset name '../etc'" in msg
    with pytest.raises(InvalidProcessSpec, match="n_max"):  # the algorithm's own range checks
        validate_process(RF, {"kind": "ring", "seed": 1}, {"n_new": 10, "n_max": 5})
    with pytest.raises(InvalidProcessSpec, match="eps must be in"):  # an image-local algorithm module
        validate_process("average_consensus:AverageConsensus", {"kind": "ring", "seed": 1}, {"eps": 2.0})
    assert validate_process(RF, {"kind": "complete", "seed": 1}, {"n_new": 2}, "fraud").classes == (0, 1)
    assert validate_process("svm", {"kind": "ring", "seed": 0}, {"c": 1}).classes is None  # undeclared image
