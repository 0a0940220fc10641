"""Tests for algorithms.collabdict.privacy (Theorem 1 eq. 46, App. B, eqs. 47–48 of seed 000)."""

import math

import numpy as np
import pytest

from algorithms.collabdict import privacy as pv
from algorithms.collabdict.ggm import GGMHyperParameters, fit_centralised
from algorithms.collabdict.mixture import MixtureParameters, local_statistics, responsibilities
from tests.algorithms.conftest import make_mixture


@pytest.fixture(scope="module")
def fitted():
    Xs = make_mixture(S=4, M=3, K=3, seed=11)
    h = GGMHyperParameters(n_components=3, tau=0.0)
    fit = fit_centralised(Xs, 8, seed=3, hyper=h)
    return Xs, fit, h


def test_epsilon_formula_and_validation():
    assert pv.renyi_dp_epsilon(3, 2.0, 1.5, 0.5) == pytest.approx(3 * 2.0 * 2.25 / 1.0)
    with pytest.raises(ValueError, match="λ_0"):
        pv.renyi_dp_epsilon(3, 1.0, 1.0, 0.0)


def test_dp_bound_holds_for_single_sample_perturbations(fitted):
    Xs, fit, h = fitted
    params = fit.params[-1]
    pooled = np.concatenate(Xs)
    r, _ = responsibilities(pooled, fit.pis[-1][0], params)
    N_bar = r.sum(0)
    R = 2.0
    B = pv.empirical_precision_bound(params)
    eps = pv.renyi_dp_epsilon(int(params.active.sum()), B, R, h.lam0)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(500):
        n = rng.integers(len(pooled))
        d = rng.standard_normal(3)
        d *= R * rng.uniform(0.5, 1.0) / np.linalg.norm(d)
        # KL of the posterior pair (eqs. 43–44) computed from the definition of w_k
        kl = pv.release_divergence(r[n], pooled[n], pooled[n] + d, N_bar, params, h.lam0)
        w = (h.lam0 * fit.m0 + r.T @ pooled) / (h.lam0 + N_bar)[:, None]
        pert = pooled.copy()
        pert[n] += d
        w2 = (h.lam0 * fit.m0 + r.T @ pert) / (h.lam0 + N_bar)[:, None]
        direct = sum(
            0.5 * (h.lam0 + N_bar[k]) * (w[k] - w2[k]) @ params.precisions[k] @ (w[k] - w2[k])
            for k in range(3)
        )
        assert kl == pytest.approx(direct, rel=1e-9, abs=1e-15)
        assert kl <= eps
        worst = max(worst, kl)
    assert worst > 0


def test_appendix_b_bound_dominates_empirical_b(fitted):
    Xs, fit, h = fitted
    params = fit.params[-1]
    pooled = np.concatenate(Xs)
    N_max = max(len(X) for X in Xs)
    bounds = []
    for k in range(3):
        # Σ_k from the final statistics, as in eq. (16)
        r, _ = responsibilities(pooled, fit.pis[-2][0], fit.params[-2])
        N, m, C = local_statistics(pooled, r)
        mbar, Cbar = m[k] / N[k], C[k] / N[k]
        d = mbar - fit.m0
        Sigma = Cbar - np.outer(mbar, mbar) + h.lam0 / (h.lam0 + N[k]) * np.outer(d, d)
        bounds.append(pv.appendix_b_precision_bound(Sigma, N[k], 3, h.delta, fit.rho, 4, N_max))
    assert max(bounds) >= pv.empirical_precision_bound(params)
    with pytest.raises(ValueError):
        pv.appendix_b_precision_bound(np.eye(3), 10.0, 3, 1.0, 0.0, 4, 100)


def test_l_diversity_is_within_bounds(fitted):
    Xs, fit, _ = fitted
    params = fit.params[-1]
    for s, X in enumerate(Xs):
        for variant in ("density", "responsibility"):
            e_max = pv.entropy_l_diversity(X, params, fit.pis[-1][s], "max", variant)
            e_min = pv.entropy_l_diversity(X, params, fit.pis[-1][s], "min", variant)
            assert -1e-12 <= e_min <= e_max <= math.log(len(X)) + 1e-12


def test_l_diversity_extremes():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 2))
    same = np.repeat(X[:1], 25, axis=0)
    p = MixtureParameters(np.zeros((2, 2)), np.stack([np.eye(2)] * 2), np.ones(2, bool))
    assert pv.entropy_l_diversity(same, p) == pytest.approx(math.log(25), abs=1e-12)
    # every component concentrated on one sample: Λ_k → ∞·I centred on samples
    sharp = MixtureParameters(X[:2].copy(), np.stack([1e6 * np.eye(2)] * 2), np.ones(2, bool))
    assert pv.entropy_l_diversity(X, sharp, reduce="max") < 1e-6
    # one concentrated component: max stays high, the conservative min catches it
    mixed = MixtureParameters(X[:2].copy(), np.stack([1e6 * np.eye(2), 1e-2 * np.eye(2)]), np.ones(2, bool))
    assert pv.entropy_l_diversity(X, mixed, reduce="max") > 3.0
    assert pv.entropy_l_diversity(X, mixed, reduce="min") < 1e-6
    with pytest.raises(ValueError):
        pv.entropy_l_diversity(X, mixed, reduce="mean")
