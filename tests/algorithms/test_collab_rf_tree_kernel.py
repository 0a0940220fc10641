import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestRegressor

from algorithms.collab_rf.estimators import from_sklearn_tree
from algorithms.collab_rf.tree_kernel import KernelOverflow, explicit_kernel, gram_matrix


def trees(n, depth, seed=0, n_samples=1500, d=6):
    X, y = make_classification(
        n_samples=n_samples, n_features=d, n_informative=min(4, d - 1), n_redundant=0, random_state=seed
    )
    rf = RandomForestRegressor(n_estimators=n, max_depth=depth, random_state=seed).fit(X, y)
    return [
        from_sklearn_tree(t, f"org{i % 3}", i, np.zeros(d), np.ones(d)) for i, t in enumerate(rf.estimators_)
    ]


def test_gram_symmetric_psd_on_40_random_trees():
    ests = trees(40, 6, seed=1)
    K = gram_matrix(ests)
    assert np.allclose(K, K.T, rtol=0, atol=0)
    lam = np.linalg.eigvalsh(K)
    assert lam.min() >= -1e-9 * np.trace(K)
    assert np.all(np.diag(K) > 0)


def test_kernel_equals_explicit_feature_map_on_small_trees():
    ests = trees(8, 3, seed=2, d=3) + trees(4, 2, seed=3, d=3)
    K = gram_matrix(ests)
    E = np.array([[explicit_kernel(a, b) for b in ests] for a in ests])
    assert np.any(E != np.diag(np.diag(E)))  # some cross terms are non-zero
    assert np.allclose(K, E, rtol=1e-12, atol=1e-12 * np.abs(E).max())


def test_kernel_counts_common_subtrees_on_a_hand_made_tree():
    # root splits on feature 0 at 2.0; left child is a pre-terminal split on feature 1 at 3.0
    t = {
        "creator": "a",
        "counter": 0,
        "left": np.array([1, 3, -1, -1, -1]),
        "right": np.array([2, 4, -1, -1, -1]),
        "feature": np.array([0, 1, -2, -2, -2]),
        "threshold": np.array([2.0, 3.0, -2, -2, -2]),
        "value": np.zeros(5),
        "scaler_mean": np.zeros(2),
        "scaler_scale": np.ones(2),
    }
    # fragments at root: (0, stub1, ⊥), (0, (1,⊥,⊥), ⊥) -> C(root, root) = 2; C(n1, n1) = 1; cross = 0
    assert gram_matrix([t])[0, 0] == pytest.approx(2 * 2.0**2 + 1 * 3.0**2)
    assert explicit_kernel(t, t) == pytest.approx(17.0)


def test_zero_thresholds_give_zero_kernel_and_decay_validated():
    e = trees(1, 3)[0]
    z = dict(e)
    z["threshold"] = np.zeros_like(e["threshold"])
    assert gram_matrix([z])[0, 0] == 0.0
    with pytest.raises(ValueError, match="decay"):
        gram_matrix([e], decay=0.0)


def test_decay_prevents_overflow_on_deep_repetitive_trees():
    # a complete tree of height 12 splitting on feature 0 everywhere: C(root, root) ~ 1e360
    h = 12
    n = 2 ** (h + 1) - 1
    idx = np.arange(n)
    left = np.where(idx < 2**h - 1, 2 * idx + 1, -1)
    right = np.where(idx < 2**h - 1, 2 * idx + 2, -1)
    t = {
        "creator": "a",
        "counter": 0,
        "left": left,
        "right": right,
        "feature": np.where(left >= 0, 0, -2),
        "threshold": np.where(left >= 0, 1.0, -2.0),
        "value": np.zeros(n),
        "scaler_mean": np.zeros(1),
        "scaler_scale": np.ones(1),
    }
    with pytest.raises(KernelOverflow):
        gram_matrix([t])
    assert np.isfinite(gram_matrix([t], decay=0.1)[0, 0])


def test_missing_vs_present_splits_weigh_zero_and_stay_finite():
    """sklearn stores a split of present vs missing values with threshold +inf: x(v) = 0 there
    (the paper's kernel would be infinite and raise a misleading KernelOverflow)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 5))
    y = (X[:, 0] + X[:, 1] > 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    rf = RandomForestRegressor(n_estimators=12, max_depth=6, random_state=0).fit(X, y)
    ests = [from_sklearn_tree(t, "a", i, np.zeros(5), np.ones(5)) for i, t in enumerate(rf.estimators_)]
    assert any(np.isinf(e["threshold"]).any() for e in ests)
    K = gram_matrix(ests)
    assert np.all(np.isfinite(K)) and np.linalg.eigvalsh(K).min() >= -1e-9 * np.trace(K)
    finite = [dict(e, threshold=np.where(np.isinf(e["threshold"]), 0.0, e["threshold"])) for e in ests]
    assert np.array_equal(K, gram_matrix(finite))
