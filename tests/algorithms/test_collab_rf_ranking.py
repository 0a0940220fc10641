import time

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from algorithms.collab_rf.estimators import estimator_id, from_sklearn_tree
from algorithms.collab_rf.pgreedy import p_greedy
from algorithms.collab_rf.ranking import LinRegBootstrapRanking, PGreedyTreeKernelRanking, make_ranking
from algorithms.collab_rf.tree_kernel import gram_matrix


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(800, 4))
    y = (X[:, 0] > 0.8).astype(float)
    return X, y


def forest(X, y, n, seed, creator, depth=4):
    rf = RandomForestRegressor(n_estimators=n, max_depth=depth, random_state=seed).fit(X, y)
    return [
        from_sklearn_tree(t, creator, i, np.zeros(X.shape[1]), np.ones(X.shape[1]))
        for i, t in enumerate(rf.estimators_)
    ]


def test_pgreedy_ranking_is_independent_of_input_order(data):
    X, y = data
    ests = forest(X, y, 6, 0, "b") + forest(X, y, 6, 1, "a")
    rk = PGreedyTreeKernelRanking()
    top = [estimator_id(ests[i]) for i in rk.top(ests, 5)]
    rev = ests[::-1]
    assert [estimator_id(rev[i]) for i in rk.top(rev, 5)] == top
    by_id = sorted(ests, key=estimator_id)
    assert top == [estimator_id(by_id[i]) for i in p_greedy(gram_matrix(by_id), 5).order]
    assert rk.top(ests, 20) == list(range(12))


def test_linreg_prefers_informative_trees(data):
    X, y = data
    good = forest(X, y, 1, 0, "good")
    noise = forest(X, np.random.default_rng(5).random(len(y)), 4, 1, "noise")
    rk = LinRegBootstrapRanking(n_rep=5, val_size=0.3)
    top = rk.top(noise + good, 2, X=X, y=y, rng=np.random.default_rng(0))
    assert top[0] == 4
    # deterministic given the RNG seed
    assert rk.top(noise + good, 2, X=X, y=y, rng=np.random.default_rng(0)) == top


def test_linreg_with_constant_labels_keeps_insertion_order(data):
    X, _ = data
    ests = forest(X, (X[:, 1] > 0).astype(float), 5, 0, "a")
    rk = LinRegBootstrapRanking(n_rep=2)
    assert rk.top(ests, 3, X=X, y=np.zeros(len(X)), rng=np.random.default_rng(0)) == [0, 1, 2]


def test_validation():
    with pytest.raises(ValueError, match="n_rep"):
        LinRegBootstrapRanking(n_rep=0)
    with pytest.raises(ValueError, match="val_size"):
        LinRegBootstrapRanking(val_size=1.0)
    with pytest.raises(ValueError, match="unknown ranking"):
        make_ranking("oracle")
    with pytest.raises(ValueError, match="needs local"):
        LinRegBootstrapRanking().top([{}, {}], 1)


def test_get_top_on_60_depth10_trees_within_one_second():
    from sklearn.datasets import make_classification

    from algorithms.collab_rf.ensemble import get_top
    from algorithms.collab_rf.estimators import depth_of

    X, y = make_classification(n_samples=1500, n_features=29, n_informative=12, random_state=0)
    ests = forest(X, y, 60, 0, "org00", depth=10)
    assert min(depth_of(e) for e in ests) == 10
    rk = PGreedyTreeKernelRanking()
    for k in (10, 50):
        t0 = time.perf_counter()
        top = get_top(ests, k, rk)
        assert time.perf_counter() - t0 <= 1.0
        assert len({estimator_id(e) for e in top}) == k
