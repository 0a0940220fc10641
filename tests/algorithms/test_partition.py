"""The held-out split: a common test set and label-skewed Dirichlet shares of the rest."""

import numpy as np
import pytest

from algorithms.datasets.partition import dirichlet_label_shares, heldout_split


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
