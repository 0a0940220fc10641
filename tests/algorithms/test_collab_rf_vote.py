"""Members holding one class, and the evidence-weighted vote of the rare-positive mode (issue 31 item 5;
docs/collab_rf.md, "Rare positives")."""

import itertools

import numpy as np
import pytest

from algorithms import codec
from algorithms.collab_rf import decision
from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.collab_rf.estimators import (
    ensemble_scores,
    model_predict,
    model_scores,
    predict_trees,
)
from algorithms.collab_rf.protocol import (
    DISCONNECTED_SCHEDULE,
    CollabRFParams,
    final_model,
    run_protocol,
    training_data,
)
from algorithms.collab_rf.synthetic import synthetic_fraud
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from algorithms.topologies.static import complete, empty, ring

SMALL = dict(n_new=2, n_share=2, n_max=4, max_depth=4, schedule=("FIT", "SHARE", "GET") * 2)


@pytest.fixture(scope="module")
def one_class_members():
    """Four organisations: only positives, only negatives, and two with both classes."""
    d = synthetic_fraud(
        n_nodes=4, n_per_node=300, positive_rate=0.1, zero_positive_node=None, n_test=400, seed=5
    )
    nodes = dict(d.nodes)
    a = nodes["Node00"]
    pos = a.labels == 1
    nodes["Node00"] = LocalDataset(a.features[pos], a.labels[pos], name="Node00")  # positives only
    b = nodes["Node01"]
    neg = b.labels == 0
    nodes["Node01"] = LocalDataset(b.features[neg], b.labels[neg], name="Node01")  # negatives only
    assert set(nodes["Node00"].labels) == {1} and set(nodes["Node01"].labels) == {0}
    return nodes, d.X_test, d.y_test


def test_balanced_weight_of_a_one_class_member_is_one():
    # n_neg / n_pos = 0 for a member with positives only: no weight at all (it crashed the run)
    assert decision.resolve_positive_weight("balanced", np.ones(7)) == 1.0
    assert decision.resolve_positive_weight("balanced", np.zeros(7)) == 1.0
    assert decision.resolve_positive_weight("balanced", np.array([1, 0, 0, 0])) == 3.0


@pytest.mark.parametrize(
    "positive_weight, vote, decision_threshold",
    list(itertools.product((1.0, 5.0, "balanced"), decision.VOTES, decision.DECISIONS)),
)
def test_one_class_members_never_crash(one_class_members, positive_weight, vote, decision_threshold):
    nodes, X_test, y_test = one_class_members
    opts = dict(positive_weight=positive_weight, vote=vote, decision_threshold=decision_threshold)
    for schedule, topology in ((SMALL["schedule"], complete(4)), (DISCONNECTED_SCHEDULE, empty(4))):
        alg = CollaborativeRandomForest(**{**SMALL, "schedule": schedule}, **opts)
        res = simulate(alg, nodes, rounds=alg.rounds, seed=3, topology=topology)
        for org in res.consortium:
            model = res.model(org)
            s = model_scores(model, X_test)
            assert s.shape == y_test.shape and np.all((s >= 0) & (s <= 1))
            assert set(np.unique(model_predict(model, X_test))) <= {0, 1}
    # a one-class member's own trees are constant: its label, everywhere
    alone = simulate(
        CollaborativeRandomForest(**{**SMALL, "schedule": DISCONNECTED_SCHEDULE}, **opts),
        nodes,
        rounds=4,
        seed=3,
        topology=empty(4),
    )
    assert np.all(predict_trees(alone.model("Node00")["estimators"], X_test) == 1.0)
    assert np.all(predict_trees(alone.model("Node01")["estimators"], X_test) == 0.0)


def test_evidence_weight():
    assert decision.evidence_weight(3, 1) == 0.75
    assert decision.evidence_weight(1, 535) == pytest.approx(535 / 536)
    assert (
        decision.evidence_weight(0, 9)
        == decision.evidence_weight(9, 0)
        == decision.evidence_weight(0, 0)
        == 0.0
    )
    with pytest.raises(ValueError, match="class counts"):
        decision.evidence_weight(-1, 3)
    with pytest.raises(ValueError, match="vote"):
        CollabRFParams(vote="majority")


def test_weighted_scores(one_class_members):
    nodes, X_test, _ = one_class_members
    p = CollabRFParams(**SMALL, vote="evidence")
    run = run_protocol(nodes, p, seed=1, topology=complete(4))
    E = run.states["Node02"]["ensemble"]
    w = decision.vote_weights(E)
    P = predict_trees(E, X_test)
    np.testing.assert_allclose(
        ensemble_scores(E, X_test, w), (w[:, None] * P).sum(0) / w.sum(), rtol=0, atol=1e-15
    )
    # every weight 0 (no two-class creator): the plain mean
    np.testing.assert_array_equal(ensemble_scores(E, X_test, np.zeros(len(E))), P.mean(0))
    for bad in (np.ones(len(E) + 1), -np.ones(len(E)), np.full(len(E), np.nan)):
        with pytest.raises(ValueError, match="vote weights"):
            ensemble_scores(E, X_test, bad)
    # trees made without vote='evidence' carry no counts: refused, not guessed
    plain = run_protocol(nodes, CollabRFParams(**SMALL), seed=1, topology=complete(4))
    with pytest.raises(ValueError, match="class counts"):
        decision.vote_weights(plain.states["Node02"]["ensemble"])


def test_evidence_vote_records_creator_counts_and_simulator_equals_protocol():
    d = synthetic_fraud(
        n_nodes=4, n_per_node=400, positive_rate=0.05, zero_positive_node=2, n_test=500, seed=9
    )
    kw = dict(SMALL, positive_weight="balanced", vote="evidence", decision_threshold="validation")
    alg = CollaborativeRandomForest(**kw)
    res = simulate(alg, d.nodes, rounds=alg.rounds, seed=4, topology=ring(4))
    p = CollabRFParams(**kw)
    direct = run_protocol(d.nodes, p, seed=4, topology=ring(4))
    counts = {
        org: decision.class_counts(training_data(direct.states[org], data).labels)
        for org, data in d.nodes.items()
    }
    for org, data in d.nodes.items():
        model = final_model(direct.states[org], data, p)
        assert res.models[org] == codec.encode(model)  # bit-identical on the platform's path
        for e in model["estimators"]:
            assert (e["n_pos"], e["n_neg"]) == counts[e["creator"]]
        want = [decision.evidence_weight(*counts[e["creator"]]) for e in model["estimators"]]
        np.testing.assert_array_equal(model["weights"], want)
        decoded = res.model(org)
        np.testing.assert_array_equal(
            model_scores(decoded, d.X_test), ensemble_scores(model["estimators"], d.X_test, np.asarray(want))
        )
    assert counts["Node02"][0] == 0
    assert all(e["creator"] != "Node02" or w == 0.0 for e, w in zip(model["estimators"], model["weights"]))
    # the paper's vote leaves payloads as they were: no counts, no weights
    paper = run_protocol(d.nodes, CollabRFParams(**SMALL), seed=4, topology=ring(4))
    m = final_model(paper.states["Node01"], d.nodes["Node01"], CollabRFParams(**SMALL))
    assert "weights" not in m and all("n_pos" not in e for e in m["estimators"])
