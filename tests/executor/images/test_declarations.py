"""What an image declares, and the one check of a learning process against it
(executor.images.declarations)."""

from __future__ import annotations

import json

import pytest

from executor.errors import ExecutorError
from executor.images.declarations import InvalidProcessSpec, build_topology, validate_process

RF = "algorithms.collab_rf.algorithm:CollaborativeRandomForest"


def test_topology_from_ledger_record():
    assert build_topology({"kind": "ring", "seed": 0}, 3).adjacency(1).sum() == 6
    assert build_topology({"kind": "none"}, 3) is None
    with pytest.raises(ExecutorError, match="not known"):
        build_topology({"kind": "hypercube"}, 3)


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


def test_every_image_names_the_sdk_it_was_written_for_and_an_incompatible_one_is_refused(tmp_path):
    """image.json records the consortia_sdk version (issue 29 item 1): every built-in image names this
    platform's; a folder written for another major version, a newer minor version, a malformed version or
    none is refused with the file and the reason; an older minor version of the same major runs."""
    from algorithms.step import SDK_VERSION
    from executor.images.declarations import ImageDeclaration, InvalidDeclaration, declaration, sdk_problem
    from executor.images.recipe import IMAGES_DIR

    for meta in sorted(IMAGES_DIR.glob("*/image.json")):
        assert ImageDeclaration.from_folder(meta.parent).sdk == SDK_VERSION, meta
    assert declaration(RF).sdk == SDK_VERSION
    major, minor, _ = (int(p) for p in SDK_VERSION.split("."))
    assert sdk_problem(SDK_VERSION) is None and sdk_problem(f"{major}.0.0") is None
    assert sdk_problem(f"{major}.{minor}.99") is None
    assert "newer than this platform's" in sdk_problem(f"{major}.{minor + 1}.0")
    assert "a major version this platform" in sdk_problem(f"{major + 1}.0.0")
    assert "a major version this platform" in sdk_problem(f"{major - 1}.9.0") if major else True
    assert "is not MAJOR.MINOR.PATCH" in sdk_problem("1.0") and "is not MAJOR.MINOR.PATCH" in sdk_problem(1)
    base = {"name": "mine", "version": "0.1.0", "algorithm": "mine:Mine"}
    for sdk, message in (
        (None, '"sdk" must name the consortia_sdk version'),
        (f"{major + 1}.0.0", "a major version this platform"),
        (f"{major}.{minor + 1}.0", "newer than this platform's"),
    ):
        (tmp_path / "image.json").write_text(json.dumps(base if sdk is None else {**base, "sdk": sdk}))
        with pytest.raises(InvalidDeclaration, match=message) as err:
            ImageDeclaration.from_folder(tmp_path)
        assert str(tmp_path / "image.json") in str(err.value)
