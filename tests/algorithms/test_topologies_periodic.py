"""The periodic 7-node graphs of the DPSDA experiments (seed 002 §6; docs/dpsda.md)."""

import numpy as np
import pytest

from algorithms.topologies.base import Topology, in_neighbours, out_neighbours
from algorithms.topologies.periodic import (
    DPSDA_DIRECTED_EDGES,
    PeriodicTopology,
    dpsda_digraphs,
    dpsda_graphs,
    is_strongly_connected,
)


def test_period_four_and_round_mapping():
    g = dpsda_digraphs()
    assert isinstance(g, Topology)
    assert g.size == 7 and g.period == 4
    for r in range(1, 13):
        assert g.adjacency(r) is g.graphs[(r - 1) % 4]
    with pytest.raises(ValueError):
        g.adjacency(0)


def test_edges_follow_the_table_one_based_j_pushes_to_i():
    g = dpsda_digraphs()
    # G1: 3→6 means node index 2 sends to node index 5
    assert g.adjacency(1)[2, 5] == 1 and g.adjacency(1)[5, 2] == 0
    assert out_neighbours(g, 1, 2) == (5, 6)  # 3→6, 3→7
    assert in_neighbours(g, 1, 2) == (3, 4)  # 4→3, 5→3
    assert g.adjacency(1)[:2].sum() == 0 and g.adjacency(1)[:, :2].sum() == 0  # nodes 1, 2 isolated
    assert g.adjacency(4).sum() == 1 and g.adjacency(4)[1, 0] == 1  # G4: 2→1 only
    assert [int(a.sum()) for a in g.graphs] == [len(e) for e in DPSDA_DIRECTED_EDGES]


def test_undirected_graphs_are_the_digraphs_without_directions():
    d, u = dpsda_digraphs(), dpsda_graphs()
    for r in range(1, 5):
        a = u.adjacency(r)
        assert np.array_equal(a, a.T)
        assert np.array_equal(a, ((d.adjacency(r) + d.adjacency(r).T) > 0).astype(np.int8))


def test_union_over_one_period_is_strongly_connected_but_no_single_graph_is():
    for topo in (dpsda_digraphs(), dpsda_graphs()):
        assert is_strongly_connected(topo.union())  # B = 4
        assert not any(is_strongly_connected(a) for a in topo.graphs)
    # three consecutive graphs of the digraph do not suffice from every start
    d = dpsda_digraphs()
    assert not is_strongly_connected(np.sum(d.graphs[:3], axis=0))


def test_is_strongly_connected_on_known_graphs():
    ring = np.roll(np.eye(5, dtype=int), 1, axis=1)  # directed cycle 0→1→…→4→0
    assert is_strongly_connected(ring)
    path = np.triu(ring)
    assert not is_strongly_connected(path)


def test_validation():
    with pytest.raises(ValueError, match="at least one graph"):
        PeriodicTopology([])
    with pytest.raises(ValueError, match="self-loops"):
        PeriodicTopology([np.eye(3)])
    with pytest.raises(ValueError, match="shape"):
        PeriodicTopology([np.zeros((3, 3)), np.zeros((4, 4))])
