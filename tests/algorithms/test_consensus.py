"""Tests for algorithms.consensus (seed 000 eqs. (2)–(6); docs/collabdict.md)."""

import numpy as np
import pytest
from scipy import sparse

from algorithms import consensus as c
from algorithms.topologies.static import cic_adjacency, empty, ring


def test_mixing_matrix_is_symmetric_doubly_stochastic_and_nonnegative():
    A = cic_adjacency(31)
    for step in ("degree", "seed"):
        W = c.mixing_matrix(A, step).toarray()
        assert np.allclose(W, W.T)
        assert np.allclose(W.sum(axis=0), 1.0) and np.allclose(W.sum(axis=1), 1.0)
        assert W.min() >= 0
    assert c.step_size(A, "degree") == pytest.approx(0.25)
    assert c.step_size(A, "seed") == pytest.approx(1 / 31)


@pytest.mark.parametrize("S,rho", [(11, 0.8536), (31, 0.9435), (61, 0.9531)])
def test_mixing_rate_matches_spec_table(S, rho):
    assert c.mixing_rate(cic_adjacency(S), "degree") == pytest.approx(rho, abs=1e-3)


def test_mean_is_invariant_and_error_obeys_spectral_bound():
    S = 31
    A = cic_adjacency(S)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((S, 4))
    mean = X.mean(axis=0)
    rho = c.mixing_rate(A)
    dev0 = np.abs(X - mean).max()
    x = X
    for k in range(1, 120):
        x = c.consensus_iterate(x, A, "degree", 1)
        assert np.allclose(x.mean(axis=0), mean, rtol=1e-12, atol=1e-12 * np.abs(mean).max())
        assert np.abs(x - mean).max() <= rho**k * np.sqrt(S) * dev0 + 1e-15


def test_consensus_reaches_average_and_sum():
    A = cic_adjacency(13)
    X = np.random.default_rng(0).normal(size=(13, 2, 3))
    est = c.consensus_sum(X, A)
    assert est.shape == X.shape
    assert np.allclose(est, X.sum(axis=0)[None], atol=1e-6)


def test_local_update_equals_vectorised_step():
    A = cic_adjacency(11)
    X = np.random.default_rng(1).normal(size=(11, 5))
    eps = c.step_size(A)
    vec = c.consensus_iterate(X, A, "degree", 1)
    for s in range(11):
        nb = np.flatnonzero(A[s])
        assert np.allclose(c.local_consensus_update(X[s], [X[j] for j in nb], eps), vec[s], atol=1e-14)


def test_iteration_counts_ln_S_scaling_and_seed_step_is_slower():
    rng = np.random.default_rng(0)
    x31 = rng.standard_normal(31)
    k_deg = c.iterations_to_tolerance(x31, cic_adjacency(31), "degree")
    k_seed = c.iterations_to_tolerance(x31, cic_adjacency(31), "seed")
    k_ring = c.iterations_to_tolerance(x31, ring(31).adjacency(1), "degree")
    assert k_deg < k_seed and k_deg < k_ring
    assert 150 < k_deg < 260  # spec table: 204
    x = np.random.default_rng(1).standard_normal(4099)
    k_big = c.iterations_to_tolerance(x, cic_adjacency(4099), "degree")
    assert k_big < 600 and k_big <= 3 * k_deg  # ln S, not S


def test_iterations_to_tolerance_fails_on_disconnected_graph():
    with pytest.raises(RuntimeError):
        c.iterations_to_tolerance(np.arange(5.0), empty(5).adjacency(1), max_iterations=50)


def test_rounds_for_tolerance_default_is_347_for_S31():
    assert c.rounds_for_tolerance(0.9435, 31, 1e-8) == 347
    with pytest.raises(ValueError):
        c.rounds_for_tolerance(1.0, 31)


def test_rejects_bad_inputs():
    with pytest.raises(ValueError, match="symmetric"):
        c.laplacian(np.triu(np.ones((3, 3)), 1))
    with pytest.raises(ValueError, match="consensus step"):
        c.step_size(cic_adjacency(5), "fast")
    with pytest.raises(ValueError):
        c.random_chunks(np.ones(3), 0, np.random.default_rng(0))


@pytest.mark.parametrize("C", [1, 2, 5])
def test_chunks_sum_to_value_and_hide_it(C):
    xi = np.random.default_rng(0).normal(size=(3, 2))
    parts = c.random_chunks(xi, C, np.random.default_rng(1))
    assert parts.shape == (C, 3, 2)
    assert np.allclose(parts.sum(axis=0), xi, atol=1e-12)
    if C > 1:
        assert not np.allclose(parts[0], xi)


@pytest.mark.parametrize("C", [1, 2, 5])
def test_chunked_consensus_sum_equals_unchunked(C):
    S = 11
    A = cic_adjacency(S)
    X = np.random.default_rng(5).normal(size=(S, 4))
    rngs = [np.random.default_rng(100 + s) for s in range(S)]
    total = c.chunked_consensus_sum(X, A, C, rngs, relabel_rng=np.random.default_rng(9), iterations=900)
    assert np.allclose(total, X.sum(axis=0)[None], rtol=1e-10, atol=1e-10)


def test_relabellings_are_permutations_and_differ_between_sessions():
    perms = c.session_relabellings(31, 4, np.random.default_rng(0))
    assert all(sorted(p) == list(range(31)) for p in perms)
    assert len({tuple(p) for p in perms}) == 4


def test_one_shot_sum_is_exact_and_messages_hide_values():
    S = 7
    X = np.random.default_rng(2).normal(size=(S, 3, 3))
    total, partials = c.one_shot_sum(X, [np.random.default_rng(s) for s in range(S)])
    assert np.allclose(total, X.sum(axis=0), rtol=1e-12, atol=1e-12)
    for s in range(S):  # no published partial sum equals a participant's value
        assert not np.allclose(partials[s], X[s])


def test_share_recipients_are_distinct_and_include_self():
    rng = np.random.default_rng(0)
    r = c.share_recipients(10, 3, 4, rng)
    assert len(set(r.tolist())) == 4 and 3 in r
    with pytest.raises(ValueError):
        c.share_recipients(10, 3, 11, rng)


def test_sparse_input_accepted():
    A = sparse.csr_matrix(cic_adjacency(5))
    assert c.algebraic_connectivity(A) > 0


def test_segment_scales_follow_each_statistic():
    xi = np.array([2.0, -1.0, 300.0, 0.0, 0.0, 5e-4])
    k = c.segment_scales(xi, [2, 1, 2, 1])
    assert np.allclose(k, [20, 20, 3000, 3000, 3000, 5e-3])  # the all-zero segment borrows the largest scale
    assert np.allclose(c.segment_scales(xi), 3000)
    assert np.allclose(c.segment_scales(np.zeros(3)), 1.0)
    assert np.allclose(c.segment_scales(np.array([np.nan, 2.0, np.inf]), [1, 1, 1]), [20, 20, 20])
    with pytest.raises(ValueError, match="segments"):
        c.segment_scales(xi, [2, 2])
    parts = c.random_chunks(xi, 3, np.random.default_rng(0), k)
    assert np.allclose(parts.sum(axis=0), xi, rtol=1e-12, atol=0)  # small entries survive the chunking


def test_chunked_kmax_accounts_for_the_chunk_scale():
    rho = c.mixing_rate(cic_adjacency(31))
    assert c.chunked_rounds_for_tolerance(rho, 31, 1) == c.rounds_for_tolerance(rho, 31, 1e-8)
    assert c.chunked_rounds_for_tolerance(rho, 31, 3) == c.rounds_for_tolerance(rho, 31, 1e-8 / (31 * 10 * 3))
    # with it, a chunked sum of statistics spanning eight orders of magnitude is exact to 1e-9 relative each
    S = 31
    X = np.random.default_rng(1).lognormal(size=(S, 4)) * np.array([1e-3, 1.0, 1e3, 1e5])
    rngs = [np.random.default_rng(200 + s) for s in range(S)]
    kappas = [c.segment_scales(x, [1, 1, 1, 1]) for x in X]
    parts = np.stack([c.random_chunks(X[s], 3, rngs[s], kappas[s]) for s in range(S)], axis=1)
    k = c.chunked_rounds_for_tolerance(rho, S, 3)
    total = sum(S * c.consensus_iterate(parts[l], cic_adjacency(S), "degree", k) for l in range(3))
    assert np.all(np.abs(total - X.sum(0)) <= 1e-9 * X.sum(0))
