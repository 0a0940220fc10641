"""Tests for the fixed graphs of algorithms.topologies.static (seed 000 Fig. 1; docs/collabdict.md)."""

import pytest

from algorithms.consensus import algebraic_connectivity
from algorithms.topologies.static import (
    _is_prime,
    cic_adjacency,
    complete,
    cycle_with_inverse_chord,
    empty,
    ring,
)

LAMBDA2 = {11: 0.5858, 31: 0.2258, 61: 0.1875, 127: 0.1134, 251: 0.1158, 509: 0.0915, 1021: 0.0899}


@pytest.mark.parametrize("S", [5, 11, 31, 61, 127])
def test_cic_is_simple_connected_with_degrees_2_or_3(S):
    A = cic_adjacency(S)
    assert (A == A.T).all() and not A.diagonal().any()
    deg = A.sum(axis=1)
    assert set(deg.tolist()) <= {2, 3}
    assert deg[0] == 2 and deg[1] == 2 and deg[S - 1] == 2
    assert algebraic_connectivity(A) > 1e-9


@pytest.mark.parametrize("S,lam2", sorted(LAMBDA2.items()))
def test_cic_lambda2_matches_spec(S, lam2):
    assert algebraic_connectivity(cic_adjacency(S)) == pytest.approx(lam2, abs=1e-3)


def test_cic_inverse_chords():
    S = 31
    A = cic_adjacency(S)
    for x in range(2, S - 1):
        assert A[x, pow(x, S - 2, S)] == 1


def test_cic_needs_prime():
    assert not _is_prime(1) and _is_prime(2) and not _is_prime(33)
    with pytest.raises(ValueError, match="prime"):
        cycle_with_inverse_chord(30)


def test_ring_complete_empty():
    R = ring(6).adjacency(1)
    assert (R.sum(axis=1) == 2).all() and (R == R.T).all()
    assert ring(2).adjacency(1).sum() == 2
    C = complete(4).adjacency(3)
    assert C.sum() == 12 and not C.diagonal().any()
    assert empty(4).adjacency(1).sum() == 0
    assert cycle_with_inverse_chord(7).size == 7
