"""A member's validation slice and what collaboration bought it (algorithms.validation): the slice is
deterministic, stratified, its own, disjoint from the training rows; a slice the data cannot hold is
refused with a clear error; the simulator trains on the rest and reports the figures a task signs (that the
task runtime signs them: tests/executor/test_task_validation.py)."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import validation
from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.collabdict.ggm import CollabDictGGM, rounds_for
from algorithms.dpsda import DPSDA
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from algorithms.task_spec import TaskInputError, TaskSpec

RF = {"n_new": 3, "n_share": 2, "n_max": 6, "max_depth": 3, "n_rep": 2}


def labelled(seed: int, n: int) -> LocalDataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0.4).astype(np.int64)
    return LocalDataset(X, y, name=f"d{seed}", extras={"order": np.arange(n)})


def test_the_slice_is_deterministic_stratified_and_each_organisations_own():
    data = labelled(1, 101)
    rows = validation.slice_rows(data, 0.2, 7, "Org1MSP")
    assert np.array_equal(rows, validation.slice_rows(data, 0.2, 7, "Org1MSP"))  # same seed, same rows
    assert not np.array_equal(rows, validation.slice_rows(data, 0.2, 7, "Org2MSP"))  # per organisation
    assert not np.array_equal(rows, validation.slice_rows(data, 0.2, 8, "Org1MSP"))  # per process seed
    y = data.labels
    for c in (0, 1):  # stratified: round(f · n_c) rows of every label
        assert int((y[rows] == c).sum()) == round(0.2 * int((y == c).sum()))
    assert np.all(np.diff(rows) > 0)


def test_training_part_and_slice_are_disjoint_and_cover_every_row():
    data = labelled(2, 60)
    train, held = validation.split(data, 0.25, 3, "OrgA")
    rows = validation.slice_rows(data, 0.25, 3, "OrgA")
    assert len(train) + len(held) == 60
    assert np.array_equal(held.features, data.features[rows])
    assert np.array_equal(held.labels, data.labels[rows])
    assert set(train.extras["order"]).isdisjoint(held.extras["order"])  # row-aligned extras follow
    assert set(train.extras["order"]) | set(held.extras["order"]) == set(range(60))


@pytest.mark.parametrize(
    "fraction, n, message",
    [(0.2, 2, "holds no row"), (0.4, 1, "holds no row"), (0.96, 10, "leaves no row to train on")],
)
def test_a_slice_the_data_cannot_hold_is_refused_with_a_clear_error(fraction, n, message):
    data = LocalDataset(np.zeros((n, 2)))
    with pytest.raises(validation.ValidationSliceError, match=message):
        validation.split(data, fraction, 1, "OrgA")


@pytest.mark.parametrize("fraction", [1.0, -0.1, float("nan"), True, "0.2"])
def test_a_fraction_outside_0_1_is_refused(fraction):
    with pytest.raises(ValueError, match="validation fraction"):
        validation.check_fraction(fraction)
    with pytest.raises(TaskInputError, match="validation fraction"):
        TaskSpec(
            "p",
            1,
            1,
            "A",
            ("A",),
            0,
            "m:C",
            {},
            "sha256:" + "0" * 64,
            "sandbox",
            validation_fraction=fraction,
        )


def test_the_simulator_trains_on_the_rest_and_reports_what_each_member_gained():
    orgs = ("A", "B", "C")
    data = {o: labelled(10 + i, 50 + 10 * i) for i, o in enumerate(orgs)}
    alg = CollaborativeRandomForest(**RF)
    topo = {"kind": "ring", "seed": 5}
    sim = simulate(alg, data, alg.rounds, 5, topo, validation_fraction=0.2)
    assert set(sim.validation) == set(orgs)
    for o in orgs:
        train, held = validation.split(data[o], 0.2, 5, o)
        v = sim.validation[o]
        assert v["metric"] == "balanced_accuracy" and v["rows"] == len(held)
        # collaborative: the member's final model on its slice; isolated: trained alone on its training rows
        assert v["collaborative"] == alg.validation_score(sim.model(o), held, 5)[1]
        alone = validation.train_alone(alg, train, 5, alg.rounds, o)
        assert v["isolated"] == alg.validation_score(alone, held, 5)[1]
    # the states are those of training on the rest: the same run on the training parts alone
    parts = {o: validation.split(data[o], 0.2, 5, o)[0] for o in orgs}
    assert simulate(alg, parts, alg.rounds, 5, topo).models == sim.models
    assert simulate(alg, data, alg.rounds, 5, topo).validation == {}  # no slice declared, none reported


def test_collabdict_scores_auc_with_both_classes_else_the_held_out_likelihood():
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(60, 3)), rng.normal(4.0, 1.0, size=(12, 3))])
    y = np.r_[np.zeros(60), np.ones(12)].astype(np.int64)
    alg = CollabDictGGM(n_components=2, aggregation={"mode": "exact"})
    rounds = rounds_for(2, 1, alg.agg)
    assessed = validation.assess(
        alg, validation.train_alone(alg, LocalDataset(X[::2]), 3, rounds, "A"), LocalDataset(X[::2]),
        LocalDataset(X[1::2], y[1::2]), 3, rounds, "A",
    )  # fmt: skip
    assert assessed.metric == "roc_auc" and assessed.gain == 0.0  # the same model both ways: no gain
    assert 0.5 < assessed.collaborative <= 1.0
    metric, value = alg.validation_score(
        validation.train_alone(alg, LocalDataset(X), 3, rounds, "A"), LocalDataset(X[:10]), 3
    )
    assert metric == "mean_log_likelihood" and np.isfinite(value) and value < 0


def test_an_algorithm_that_cannot_score_a_slice_is_refused():
    from tests.e2e.conftest import dpsda_case

    case = dpsda_case()
    assert not validation.supports(DPSDA) and validation.supports(CollaborativeRandomForest)
    with pytest.raises(validation.ValidationUnsupported, match="cannot score a validation slice"):
        simulate(
            DPSDA(**case.params),
            case.datasets,
            case.rounds,
            case.topology["seed"],
            case.topology,
            validation_fraction=0.2,
        )
