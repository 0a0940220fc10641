import numpy as np
import pytest

from algorithms import codec
from algorithms.collab_rf import decision
from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.collab_rf.estimators import ensemble_scores, model_predict
from algorithms.collab_rf.metrics import detection_scores
from algorithms.collab_rf.protocol import CollabRFParams, final_model, run_protocol, training_data
from algorithms.collab_rf.synthetic import synthetic_fraud
from algorithms.collab_rf.training import Scaler, fit_seed, fit_trees
from algorithms.simulator import simulate
from algorithms.topologies.static import complete, ring


def test_bacc_threshold_on_a_hand_made_case():
    s = np.array([0.05, 0.1, 0.2, 0.3, 0.35, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    t = decision.balanced_accuracy_threshold(s, y)
    assert 0.2 < t < 0.3  # the cut that separates the classes
    assert detection_scores(y, (s > t).astype(int))["bacc"] == 1.0
    assert decision.balanced_accuracy_threshold(s, np.zeros(6)) == 0.5  # one class: keep the paper's
    # ties are broken towards 0.5: every cut between 0.35 and 0.9 is equally good here
    assert decision.balanced_accuracy_threshold(np.array([0.1, 0.9]), np.array([0, 1])) == 0.5


def test_validation_rows_are_stratified_and_deterministic():
    y = np.array([0] * 90 + [1] * 10 + [0] * 100)
    a = decision.validation_rows(y, 0.2, seed=3)
    assert np.array_equal(a, decision.validation_rows(y, 0.2, seed=3))
    assert int(y[a].sum()) == 2 and len(a) == 40 and np.all(np.diff(a) > 0)
    assert (
        len(decision.validation_rows(np.array([0, 0, 0, 1]), 0.2, seed=0)) == 1
    )  # a lone positive stays in training
    with pytest.raises(ValueError, match="validation_size"):
        decision.validation_rows(y, 1.0, seed=0)


def test_positive_weight_balanced_and_validation():
    assert decision.resolve_positive_weight("balanced", np.array([0, 0, 0, 1])) == 3.0
    assert decision.resolve_positive_weight("balanced", np.zeros(5)) == 1.0
    for bad in (0.0, -1.0, "heavy", True, float("nan")):
        with pytest.raises(ValueError, match="positive_weight"):
            CollabRFParams(positive_weight=bad)
    with pytest.raises(ValueError, match="decision_threshold"):
        CollabRFParams(decision_threshold="oracle")
    with pytest.raises(ValueError, match="validation_size"):
        CollabRFParams(validation_size=0.0)
    with pytest.raises(ValueError, match="tree_seed"):
        CollabRFParams(tree_seed=-1)


def test_positive_weight_is_sample_weight_of_the_positive_rows():
    from sklearn.ensemble import RandomForestRegressor

    d = synthetic_fraud(
        n_nodes=1, n_per_node=800, positive_rate=0.03, zero_positive_node=None, n_test=10, seed=1
    )
    X, y = d.nodes["Node00"].features, d.nodes["Node00"].labels
    s = Scaler.fit(X)
    ours = fit_trees(X, y, s, 3, 6, 5, "a", 0, positive_weight=7.0)
    ref = RandomForestRegressor(n_estimators=3, max_depth=6, max_features=1.0, random_state=5)
    ref.fit(s.transform(X), y, sample_weight=np.where(y == 1, 7.0, 1.0))
    assert all(np.array_equal(e["value"], t.tree_.value[:, 0, 0]) for e, t in zip(ours, ref.estimators_))
    plain = fit_trees(X, y, s, 3, 6, 5, "a", 0)
    assert not all(np.array_equal(a["value"], b["value"]) for a, b in zip(ours, plain))


def test_tree_seed_is_the_authors_rs_plus_one_per_fit():
    d = synthetic_fraud(
        n_nodes=2, n_per_node=300, positive_rate=0.05, zero_positive_node=None, n_test=10, seed=2
    )
    p = CollabRFParams(n_new=2, n_share=2, n_max=4, max_depth=4, schedule=("FIT", "FIT"), tree_seed=42)
    run = run_protocol(d.nodes, p, seed=9)
    for org, st in run.states.items():
        data = d.nodes[org]
        sc = Scaler(st["scaler_mean"], st["scaler_scale"])
        want = [
            e["value"]
            for k in range(2)
            for e in fit_trees(data.features, data.labels, sc, 2, 4, 42 + k, org, 2 * k)
        ]
        assert all(np.array_equal(a["value"], b) for a, b in zip(st["ensemble"], want))
    small = dict(n_new=2, n_share=2, n_max=4, max_depth=4, schedule=("FIT",))
    earlier = run_protocol(d.nodes, CollabRFParams(**small, tree_seed=None), seed=9)
    sc = Scaler.fit(d.nodes["Node01"].features)
    want = fit_trees(
        d.nodes["Node01"].features, d.nodes["Node01"].labels, sc, 2, 4, fit_seed(9, 1, 0), "Node01", 0
    )
    assert np.array_equal(earlier.states["Node01"]["ensemble"][0]["value"], want[0]["value"])
    # the reproduction default is the authors' seeding from r = 42
    assert CollabRFParams().tree_seed == 42 and CollaborativeRandomForest().params()["tree_seed"] == 42
    default = run_protocol(d.nodes, CollabRFParams(**small), seed=9)
    want = fit_trees(d.nodes["Node01"].features, d.nodes["Node01"].labels, sc, 2, 4, 42, "Node01", 0)
    assert np.array_equal(default.states["Node01"]["ensemble"][0]["value"], want[0]["value"])


@pytest.fixture(scope="module")
def rare():
    return synthetic_fraud(
        n_nodes=4, n_per_node=600, positive_rate=0.04, n_test=2000, zero_positive_node=None, seed=11
    )


def test_validation_threshold_held_out_and_identical_in_simulator(rare):
    kw = dict(
        n_new=3,
        n_share=2,
        n_max=6,
        max_depth=5,
        decision_threshold="validation",
        validation_size=0.25,
        positive_weight="balanced",
    )
    alg = CollaborativeRandomForest(**kw)
    res = simulate(alg, rare.nodes, rounds=alg.rounds, seed=4, topology=ring(4))
    direct = run_protocol(rare.nodes, CollabRFParams(**kw), seed=4, topology=ring(4))
    for org, data in rare.nodes.items():
        st = direct.states[org]
        val = st["validation_rows"]
        assert len(val) == round(0.25 * (len(data) - data.labels.sum())) + round(0.25 * data.labels.sum())
        train = training_data(st, data)
        assert len(train) == len(data) - len(val)
        sc = Scaler.fit(train.features)  # the scaler saw only training rows
        assert np.array_equal(st["scaler_mean"], sc.mean)
        model = final_model(st, data, CollabRFParams(**kw))
        assert res.models[org] == codec.encode(model)
        t = model["threshold"]
        s = ensemble_scores(model["estimators"], data.features[val])
        best = detection_scores(data.labels[val], (s > t).astype(int))["bacc"]
        for other in np.linspace(0, 1, 41):
            assert detection_scores(data.labels[val], (s > other).astype(int))["bacc"] <= best + 1e-12
    assert res.model("Node00")["threshold"] == codec.decode(res.models["Node00"])["threshold"]


def test_default_model_keeps_the_papers_cut(rare):
    alg = CollaborativeRandomForest(n_new=3, n_share=2, n_max=6, max_depth=5)
    res = simulate(alg, rare.nodes, rounds=alg.rounds, seed=4, topology=complete(4))
    m = res.model("Node01")
    assert m["threshold"] == 0.5
    assert np.array_equal(
        model_predict(m, rare.X_test), (ensemble_scores(m["estimators"], rare.X_test) > 0.5).astype(int)
    )
    assert len(codec.decode(res.states["Node01"])["validation_rows"]) == 0
