"""The held-out split: a common test set and label-skewed Dirichlet shares of the rest."""

import numpy as np
import pytest

from algorithms.datasets.partition import dirichlet_label_shares, dirichlet_shares, heldout_split


def test_label_shares_are_a_disjoint_deterministic_cover_with_skewed_labels():
    y = np.array([1] * 60 + [0] * 940)
    rng = np.random.default_rng(0)
    y = y[rng.permutation(y.size)]
    split = heldout_split(y, seed=3)
    shares = dirichlet_label_shares(y, split.pool, 10, 0.5, seed=3, min_rows=5)
    assert len(shares) == 10 and all(len(s) >= 5 and np.all(np.diff(s) > 0) for s in shares)
    joined = np.concatenate(shares)
    assert len(np.unique(joined)) == len(joined) and set(joined) == set(split.pool)  # disjoint, all pool rows
    again = dirichlet_label_shares(y, split.pool, 10, 0.5, seed=3, min_rows=5)
    assert all(np.array_equal(a, b) for a, b in zip(shares, again))
    # label skew: the positive rate differs wildly across members (Dirichlet(0.5) per class)
    rates = [y[s].mean() for s in shares]
    assert max(rates) - min(rates) > 0.2
    other = dirichlet_label_shares(y, split.pool, 10, 0.5, seed=4, min_rows=5)
    assert not all(np.array_equal(a, b) for a, b in zip(shares, other))


def test_label_shares_can_give_a_member_one_class_and_refuse_impossible_requests():
    y = np.array([0, 1] * 50)
    one_class = 0
    for seed in range(20):
        for s in dirichlet_label_shares(y, np.arange(100), 5, 0.3, seed=seed, min_rows=2):
            one_class += len(np.unique(y[s])) == 1
    assert one_class > 0
    with pytest.raises(ValueError, match="rows"):
        dirichlet_label_shares(y, np.arange(10), 5, 0.5, seed=0, min_rows=3)
    with pytest.raises(ValueError, match="concentration"):
        dirichlet_label_shares(y, np.arange(100), 5, 0.0, seed=0)
    with pytest.raises(ValueError, match="no Dirichlet"):
        dirichlet_label_shares(y, np.arange(100), 10, 0.01, seed=0, min_rows=10, max_draws=3)


def test_heldout_split_is_stratified_and_disjoint():
    y = np.r_[np.zeros(700, int), np.ones(300, int)]
    split = heldout_split(y, seed=3, test_fraction=0.3)
    assert np.intersect1d(split.test, split.pool).size == 0
    assert split.test.size + split.pool.size == y.size
    assert y[split.test].sum() == 90 and (y[split.test] == 0).sum() == 210
    small = heldout_split(y, seed=3, max_rows=100)
    assert small.test.size + small.pool.size == 100 and y[small.test].sum() == 9
    with pytest.raises(ValueError, match="test_fraction"):
        heldout_split(y, seed=0, test_fraction=1.0)


def test_dirichlet_shares_are_skewed_disjoint_and_complete():
    rows = np.arange(1000, 3000)
    shares = dirichlet_shares(rows, 10, 0.5, seed=1, min_rows=5)
    sizes = np.array([s.size for s in shares])
    assert sizes.sum() == rows.size and sizes.min() >= 5
    assert np.array_equal(np.sort(np.concatenate(shares)), rows)
    assert sizes.max() > 10 * sizes.min()  # α = 0.5: a few large and several small organisations
    again = dirichlet_shares(rows, 10, 0.5, seed=1, min_rows=5)
    assert all(np.array_equal(a, b) for a, b in zip(shares, again))
    even = np.array([s.size for s in dirichlet_shares(rows, 10, 1e4, seed=1)])
    assert even.max() - even.min() <= 10
    with pytest.raises(ValueError, match="cannot give"):
        dirichlet_shares(np.arange(20), 10, 0.5, seed=0, min_rows=3)
