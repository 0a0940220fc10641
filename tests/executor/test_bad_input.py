"""Bad input fails fast: a process the executor cannot run ends ``failed`` with the reason on the
ledger (none stays ``running``); ``validate_process`` refuses it before it is created
(tests/executor/images/test_declarations.py)."""

from __future__ import annotations

import json

import numpy as np

from algorithms.step import LocalDataset
from algorithms.task_runtime import save_dataset
from executor.consent import give_consent
from executor.images.bundle import build_bundle
from executor.images.declarations import declaration
from executor.images.recipe import ImageRecipe
from ledger.client import ConsortiaClient, creation_endorsers, private_terms_transient
from tests.executor.node.test_agent import PARAMS, SEED, platform, run_all  # noqa: F401  (fixture)


def _create(platform, pid, image_id, topology, params=PARAMS, dataset="", **terms):
    budget = terms.pop("privacy_budget", None)
    spec = {
        **terms,
        "id": pid,
        "image_id": image_id,
        "consortium": platform.orgs,
        "topology": topology,
        "rounds": 2,
    }
    if dataset:
        spec["dataset"] = dataset
    platform.submit(  # straight to the contract
        platform.orgs[0],
        "LearningProcess:create",
        json.dumps(spec),
        transient=private_terms_transient(params, budget),
        endorsing_organisations=creation_endorsers(platform.orgs),
    )
    admins = {
        o: ConsortiaClient(platform.ledger, platform.consortium.identity(o, "Admin")) for o in platform.orgs
    }
    give_consent(admins, pid)  # each member's admin approves the image and accepts (docs/consent.md)
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
    recipe = ImageRecipe.named("collab-rf")
    bundle = build_bundle(recipe)
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


def test_a_validation_slice_larger_than_a_members_data_fails_the_process_with_the_reason(platform):
    """The ledger cannot see a member's data: its own agent refuses a slice that would leave it no row to
    train on, before any task key is registered, and the process ends failed saying so."""
    recipe = ImageRecipe.named("collab-rf")
    bundle = build_bundle(recipe)
    rng = np.random.default_rng(1)
    for o in platform.orgs:  # three rows each: a 0.9 slice is round(2.7) = 3 rows, all of them
        folder = platform.root / "data" / o / "tiny"
        folder.mkdir(parents=True)
        save_dataset(
            folder / "dataset.npz", LocalDataset(rng.normal(size=(3, 2)), np.zeros(3, dtype=np.int64))
        )
    platform.register_image("rf:1", recipe, bundle.digest, bundle.reference)
    _create(
        platform,
        "p-slice",
        "rf:1",
        {"kind": "ring", "seed": SEED},
        {},
        dataset="tiny",
        validation_fraction=0.9,
    )
    failed = _ends_failed(platform, "p-slice", "leaves no row to train on")
    assert all("validation fraction 0.9 declared by the process" in r["failure_reason"] for r in failed)
    assert failed[0]["failure_details"]["code"] == "TASK_PREFLIGHT"
