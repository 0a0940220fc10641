"""Weight matrices of DPSDA-C / DPSDA-PS (seed 002; docs/dpsda.md) and the fixed-order mixing."""

import numpy as np
import pytest

from algorithms.dpsda.weights import (
    circulation_weight,
    circulation_weights,
    metropolis_weights,
    mix,
    push_sum_weight,
    push_sum_weights,
)
from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs
from algorithms.topologies.static import ring


def test_eight_dpsda_weight_matrices_are_stochastic_as_required():
    for a in dpsda_graphs().graphs:
        w = circulation_weights(a)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-15)  # row-stochastic
        assert np.all(w >= 0) and np.all(np.diag(w) > 0)
        assert np.array_equal(w > 0, (a + np.eye(7)) > 0)
    for a in dpsda_digraphs().graphs:
        w = push_sum_weights(a)
        np.testing.assert_allclose(w.sum(axis=0), 1.0, rtol=0, atol=1e-15)  # column-stochastic
        assert np.all(w >= 0) and np.all(np.diag(w) > 0)
        assert np.array_equal(w > 0, (a.T + np.eye(7)) > 0)  # w_ij > 0 iff j → i


def test_uniform_weights_match_the_code_formulas():
    g1u = dpsda_graphs().adjacency(1)
    w = circulation_weights(g1u)
    assert w[2, 2] == w[2, 3] == pytest.approx(1 / 5)  # node 3 has 4 neighbours
    assert w[0, 0] == 1.0  # isolated node 1 keeps its value
    g1d = dpsda_digraphs().adjacency(1)
    p = push_sum_weights(g1d)
    assert p[5, 2] == p[6, 2] == p[2, 2] == pytest.approx(1 / 3)  # node 3 pushes to 6 and 7
    assert circulation_weight(4) == 0.2 and push_sum_weight(2) == pytest.approx(1 / 3)


def test_uniform_circulation_weights_are_not_column_stochastic():
    # DPSDA-C's uniform weights are row-stochastic but not doubly stochastic on the DPSDA graphs
    w = circulation_weights(dpsda_graphs().adjacency(1))
    assert not np.allclose(w.sum(axis=0), 1.0)


def test_metropolis_weights_are_symmetric_and_doubly_stochastic():
    for a in list(dpsda_graphs().graphs) + [ring(7).adjacency(1)]:
        w = metropolis_weights(a)
        np.testing.assert_allclose(w, w.T, atol=0)
        np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=1e-15)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-15)
        assert np.all(w >= 0)


def test_mix_equals_matrix_product():
    rng = np.random.default_rng(0)
    w = push_sum_weights(dpsda_digraphs().adjacency(3))
    h = rng.normal(size=(7, 21))
    np.testing.assert_allclose(mix(w, h), w @ h, rtol=1e-14, atol=1e-14)
    v = rng.normal(size=7)
    np.testing.assert_allclose(mix(w, v), w @ v, rtol=1e-14, atol=1e-14)


def test_validation():
    with pytest.raises(ValueError, match="undirected"):
        circulation_weights(dpsda_digraphs().adjacency(1))
    with pytest.raises(ValueError, match="zero diagonal"):
        push_sum_weights(np.ones((3, 3)))
    with pytest.raises(ValueError, match="square"):
        push_sum_weights(np.ones((3, 2)))
