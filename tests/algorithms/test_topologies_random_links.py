import numpy as np
import pytest

from algorithms.topologies.base import Topology, out_neighbours
from algorithms.topologies.random_links import RandomLinks


def test_structure_and_determinism():
    t = RandomLinks(20, seed=3)
    assert isinstance(t, Topology)
    for r in range(1, 30):
        A = t.adjacency(r)
        assert A.shape == (20, 20) and A.dtype == np.int8
        assert np.array_equal(A, A.T) and np.all(np.diag(A) == 0)
        deg = A.sum(axis=1)
        assert deg.min() >= 1 and A.sum() // 2 <= 20  # one drawn link per node
        partner = t.draws(t.iteration(r))
        assert np.all(A[np.arange(20), partner] == 1)
    assert np.array_equal(RandomLinks(20, seed=3).adjacency(7), t.adjacency(7))
    assert not np.array_equal(RandomLinks(20, seed=4).adjacency(7), t.adjacency(7))
    assert not all(np.array_equal(t.adjacency(1), t.adjacency(r)) for r in range(2, 6))


def test_period_keeps_graph_within_iteration():
    t = RandomLinks(10, seed=1, period=3)
    assert np.array_equal(t.adjacency(1), t.adjacency(3))
    assert t.iteration(4) == 2 and t.iteration(3) == 1
    assert out_neighbours(t, 2, 0) == tuple(np.flatnonzero(t.adjacency(1)[0]))


def test_draws_uniform_over_the_others():
    t = RandomLinks(5, seed=0)
    counts = np.zeros((5, 5))
    for it in range(1, 2001):
        counts[np.arange(5), t.draws(it)] += 1
    assert np.all(np.diag(counts) == 0)
    off = counts[~np.eye(5, dtype=bool)]
    assert np.all(np.abs(off / 2000 - 0.25) < 0.04)


def test_aggregated_degree_over_four_iterations_is_about_seven():
    # paper Fig. 3c: average degree 7 (min 6, max 8) after 4 iterations with 20 nodes
    means = []
    for seed in range(30):
        t = RandomLinks(20, seed=seed)
        agg = np.zeros((20, 20), dtype=int)
        for r in range(1, 5):
            agg |= t.adjacency(r)
        means.append(agg.sum(axis=1).mean())
    assert 6.0 <= np.mean(means) <= 8.0


def test_validation():
    with pytest.raises(ValueError, match="at least 2"):
        RandomLinks(1, seed=0)
    with pytest.raises(ValueError, match="period"):
        RandomLinks(3, seed=0, period=0)
    with pytest.raises(ValueError, match="1-based"):
        RandomLinks(3, seed=0).adjacency(0)
