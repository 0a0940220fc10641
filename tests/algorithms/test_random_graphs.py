"""Tests for algorithms.topologies.random_graphs."""

import numpy as np
import pytest

from algorithms.consensus import algebraic_connectivity, consensus_iterate
from algorithms.topologies.random_graphs import ErdosRenyiTopology, RandomLinkTopology


def test_random_link_graph_is_undirected_deterministic_and_time_varying():
    t = RandomLinkTopology(20, seed=3)
    A1, A2 = t.adjacency(1), t.adjacency(2)
    assert (A1 == A1.T).all() and not A1.diagonal().any()
    assert (A1.sum(axis=1) >= 1).all()
    assert (RandomLinkTopology(20, seed=3).adjacency(1) == A1).all()
    assert not (A1 == A2).all()
    assert not (RandomLinkTopology(20, seed=4).adjacency(1) == A1).all()


def test_random_link_degree_statistics_match_one_draw_per_node():
    t = RandomLinkTopology(20, seed=0)
    degs = np.concatenate([t.adjacency(r).sum(axis=1) for r in range(1, 200)])
    # each node draws one partner and is drawn by Binomial(19, 1/19) others, minus mutual draws: mean ≈ 1.95
    assert 1.85 < degs.mean() < 2.05


def test_union_over_rounds_is_connected_and_consensus_converges():
    S = 20
    t = RandomLinkTopology(S, seed=1)
    union = sum(t.adjacency(r) for r in range(1, 6)).clip(0, 1)
    assert algebraic_connectivity(union) > 0
    x = np.random.default_rng(0).standard_normal(S)
    for r in range(1, 200):
        A = t.adjacency(r)
        x = consensus_iterate(x, A, 1.0 / (A.sum(axis=1).max() + 1), 1)
    assert np.abs(x - x.mean()).max() < 1e-6


def test_erdos_renyi():
    t = ErdosRenyiTopology(30, seed=0, p=0.2)
    A = t.adjacency(5)
    assert (A == A.T).all() and not A.diagonal().any()
    dens = np.mean([t.adjacency(r).sum() / (30 * 29) for r in range(1, 50)])
    assert 0.17 < dens < 0.23


def test_validation():
    with pytest.raises(ValueError):
        RandomLinkTopology(1, 0)
    with pytest.raises(ValueError):
        RandomLinkTopology(5, 0, links=5)
    with pytest.raises(ValueError):
        ErdosRenyiTopology(5, 0, p=0.0)
