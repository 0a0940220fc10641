import numpy as np
import pytest

from algorithms.collab_rf.pgreedy import p_greedy


def gram(n, rank, seed):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, rank))
    return F @ F.T


def brute_force(K, k):
    sel = []
    for _ in range(k):
        best, arg = -np.inf, None
        for i in range(len(K)):
            if i in sel:
                continue
            kn = K[np.ix_(sel, [i])][:, 0]
            p2 = K[i, i] - (kn @ np.linalg.solve(K[np.ix_(sel, sel)], kn) if sel else 0.0)
            if p2 > best + 1e-12 * K.diagonal().max():
                best, arg = p2, i
        sel.append(arg)
    return sel


@pytest.mark.parametrize("seed", range(5))
def test_selection_equals_brute_force_and_power_monotone(seed):
    K = gram(25, 25, seed)
    tr = p_greedy(K, 10)
    assert tr.order == brute_force(K, 10)
    assert tr.order[0] == int(np.argmax(np.diag(K)))
    P = tr.power
    assert np.all(np.diff(P, axis=0) <= 1e-9 * np.trace(K))
    assert P.min() >= -1e-12 * np.trace(K)


def test_duplicates_not_selected_twice_before_unique_run_out():
    base = gram(6, 6, 7)
    K = np.block([[base, base], [base, base]])  # candidate i+6 duplicates i
    tr = p_greedy(K, 8)
    first6 = tr.order[:6]
    assert len({i % 6 for i in first6}) == 6
    assert tr.n_greedy == 6  # then P^2 = 0 everywhere: filled in index order
    assert len(tr.order) == 8 and len(set(tr.order)) == 8


def test_k_larger_than_candidates_and_validation():
    K = gram(4, 4, 1)
    assert sorted(p_greedy(K, 10).order) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="square"):
        p_greedy(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="k must"):
        p_greedy(K, -1)
