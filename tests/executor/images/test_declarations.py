"""What an image declares, and the one check of a learning process against it
(executor.images.declarations)."""

from __future__ import annotations

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
