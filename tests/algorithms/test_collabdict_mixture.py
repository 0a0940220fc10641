"""Tests for algorithms.collabdict.mixture (seed 000 eqs. 12–16: EM monotonicity, graphical-lasso reduction)."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from algorithms.collabdict import mixture as mx
from algorithms.collabdict.ggm import GGMHyperParameters, fit_centralised
from tests.algorithms.conftest import make_mixture


def _random_spd(M, rng, n=None):
    A = rng.standard_normal((M, n or 3 * M))
    return A @ A.T / A.shape[1] + 0.05 * np.eye(M)


def test_log_gaussian_matches_scipy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3))
    means = rng.standard_normal((2, 3))
    prec = np.stack([_random_spd(3, rng), _random_spd(3, rng)])
    got = mx.log_gaussian(X, means, prec)
    for k in range(2):
        ref = multivariate_normal(means[k], np.linalg.inv(prec[k])).logpdf(X)
        assert np.allclose(got[:, k], ref, atol=1e-10)


def test_responsibilities_and_statistics():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 2))
    p = mx.MixtureParameters(
        rng.standard_normal((3, 2)), np.stack([np.eye(2)] * 3), np.array([True, True, False])
    )
    r, logp = mx.responsibilities(X, np.array([0.5, 0.3, 0.2]), p)
    assert np.allclose(r.sum(axis=1), 1) and np.all(r[:, 2] == 0)
    dens = np.exp(mx.log_gaussian(X, p.means, p.precisions))
    assert np.allclose(np.exp(logp), 0.5 * dens[:, 0] + 0.3 * dens[:, 1])  # pruned component excluded
    N, m, C = mx.local_statistics(X, r)
    assert np.allclose(N, r.sum(0)) and np.allclose(m[1], (r[:, 1:2] * X).sum(0))
    assert np.allclose(C[0], sum(r[n, 0] * np.outer(X[n], X[n]) for n in range(20)))


def test_mixing_weights_plain_and_l0():
    active = np.ones(4, bool)
    N = np.array([10.0, 5.0, 0.5, 0.1])
    assert np.allclose(mx.update_mixing_weights(N, active, tau=0), N / N.sum())
    eps = 1e-8
    pi = mx.update_mixing_weights(N, active, tau=2.0, eps=eps)
    assert pi.sum() == pytest.approx(1.0)
    assert np.all(pi >= eps * (1 - 1e-12))
    # dropping N=0.1 costs 0.1·(ln ε − ln π) ≈ −1.3 > −τ; dropping N=0.5 would cost ≈ −7.5 < −τ
    assert np.count_nonzero(pi > eps) == 3 and pi[3] == pytest.approx(eps)

    def obj(p, tau):
        return float(np.sum(N * np.log(p)) - tau * np.count_nonzero(p > eps * (1 + 1e-9)))

    rng = np.random.default_rng(0)
    best = obj(pi, 2.0)
    for _ in range(2000):  # no feasible point is better
        q = rng.dirichlet(np.ones(4) * 0.3)
        q = np.maximum(q, eps)
        q = q / q.sum()
        if q.min() >= eps:
            assert obj(q, 2.0) <= best + 1e-9
    assert np.count_nonzero(mx.update_mixing_weights(N, active, tau=0.0) > eps) == 4


def test_precision_closed_form_when_rho_zero():
    rng = np.random.default_rng(2)
    Sigma = _random_spd(4, rng)
    Lam = mx.solve_precision(Sigma, 50.0, 0.0)
    assert np.allclose(Lam, 51 / 50 * np.linalg.inv(Sigma))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_glasso_reduction_solves_diagonal_penalised_problem(seed):
    """KKT of (16): b Λ^{-1} − Σ = (ρ/N̄) sign(Λ) where Λ ≠ 0 (diagonal included), |.| ≤ ρ/N̄ elsewhere."""
    rng = np.random.default_rng(seed)
    M, N_bar = 5, 40.0
    Sigma = _random_spd(M, rng, n=8)
    rho = 0.2 * N_bar
    Lam = mx.solve_precision(Sigma, N_bar, rho)
    b, a = (N_bar + 1) / N_bar, rho / N_bar
    G = b * np.linalg.inv(Lam) - Sigma
    nz = np.abs(Lam) > 1e-10
    assert np.allclose(G[nz], a * np.sign(Lam[nz]), atol=1e-5)
    assert np.all(np.abs(G[~nz]) <= a + 1e-5)
    assert (~nz).any()  # the penalty produced sparsity
    f = mx.precision_objective(Lam, Sigma, N_bar, rho)
    for _ in range(50):  # local optimality against symmetric perturbations
        E = rng.standard_normal((M, M)) * 1e-3
        assert mx.precision_objective(Lam + (E + E.T) / 2, Sigma, N_bar, rho) <= f + 1e-9


def test_covariance_shrinkage_is_eq16_on_the_shrunk_scatter():
    """ρ = 0: Λ = S^{-1} with S = (N̄Σ + νT)/(N̄+1+ν), finite and positive definite for a one-row component
    (Σ of rank one in 36 dimensions), where the seed's eq. (16) has no solution; ν = 0 is eq. (16) itself."""
    rng = np.random.default_rng(0)
    M, nu, N = 36, 2.0, 1.0
    x = rng.standard_normal(M)
    Sigma = 0.3 * np.outer(x, x)
    target = np.linspace(0.5, 2.0, M)
    prior = mx.CovariancePrior(nu, target)
    Lam = mx.solve_precision(Sigma, N, 0.0, prior=prior)
    assert np.allclose(Lam, np.linalg.inv((N * Sigma + nu * np.diag(target)) / (N + 1 + nu)))
    assert np.linalg.eigvalsh(Lam).max() <= (N + 1 + nu) / (nu * target.min()) * (1 + 1e-9)
    with pytest.raises(ValueError, match="singular"):
        mx.solve_precision(Sigma, N, 0.0)
    Sg = _random_spd(4, rng)
    plain = mx.solve_precision(Sg, 50.0, 0.0)
    assert np.allclose(mx.solve_precision(Sg, 50.0, 0.0, prior=mx.CovariancePrior(0.0, np.ones(4))), plain)
    with pytest.raises(ValueError, match="positive variances"):
        mx.CovariancePrior(1.0, np.r_[1.0, 0.0, 1.0, 1.0])


@pytest.mark.parametrize("rho", [1e-8, 0.5, 20.0])
def test_shrunk_glasso_is_optimal_and_positive_definite_for_a_one_row_component(rho):
    """ρ > 0 with the covariance prior, on a rank-one Σ in 36 dimensions: the returned Λ is positive definite
    and no symmetric perturbation improves the objective of eq. (16) with the Wishart term."""
    rng = np.random.default_rng(1)
    M, N = 36, 1.0
    x = rng.standard_normal(M)
    Sigma = np.outer(x, x)
    prior = mx.CovariancePrior(1.0, np.ones(M))
    Lam = mx.solve_precision(Sigma, N, rho, prior=prior)
    np.linalg.cholesky(Lam)
    f = mx.precision_objective(Lam, Sigma, N, rho, prior)
    for _ in range(30):
        E = rng.standard_normal((M, M)) * 1e-4
        assert mx.precision_objective(Lam + (E + E.T) / 2, Sigma, N, rho, prior) <= f + 1e-8


def test_optimize_keeps_a_one_row_component_positive_definite():
    """M-step (14)–(16) where one component holds exactly one row of 36 correlated integer features (the
    satellite case) and the other 40 rows: both components stay active with positive-definite Λ_k."""
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, (41, 4))
    X = np.round(20 * (np.repeat(base, 9, axis=1) + 0.15 * rng.standard_normal((41, 36))))
    X = (X - X.mean(0)) / X.std(0)
    r = np.zeros((41, 2))
    r[:40, 0], r[40, 1] = 1.0, 1.0
    N, m, C = mx.local_statistics(X, r)
    V = np.cov(X.T, bias=True)
    prev = mx.initial_parameters(X.mean(0), V, 2, np.random.default_rng(0), shrinkage=(41.0, 1.0))
    prior = mx.CovariancePrior(1.0, mx.diagonal_target(V))
    for rho in (1e-6, 41 * 0.05 / 2):
        new = mx.optimize(N, m, C, prev, X.mean(0), 1.0, rho, delta=1.0, prior=prior)
        assert new.active.all()
        for Lam in new.precisions:
            np.linalg.cholesky(Lam)
        assert np.all(np.isfinite(mx.log_gaussian(X, new.means, new.precisions)))


def test_diagonal_target_floors_constant_features():
    t = mx.diagonal_target(np.diag([4.0, 0.0, 2.0]))
    assert t[1] == pytest.approx(2.0 * mx.VARIANCE_FLOOR) and t[0] == 4.0
    assert np.array_equal(mx.diagonal_target(np.zeros((2, 2))), np.ones(2))


def test_optimize_prunes_small_components_and_keeps_them_fixed():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 2))
    prev = mx.initial_parameters(X.mean(0), np.cov(X.T, bias=True), 2, np.random.default_rng(0))
    r = np.zeros((30, 2))
    r[:, 0] = 1.0
    r[0] = [0.5, 0.5]
    N, m, C = mx.local_statistics(X, r)
    new = mx.optimize(N, m, C, prev, X.mean(0), 1.0, 0.0, delta=1.0)
    assert new.active.tolist() == [True, False]
    assert np.array_equal(new.means[1], prev.means[1])
    # eq. (15) for the kept component
    assert np.allclose(new.means[0], (X.mean(0) + m[0]) / (1 + N[0]))
    with pytest.raises(ValueError):
        mx.optimize(N, m, C, prev, X.mean(0), 1.0, 0.0, delta=1e6)


def test_em_objective_is_non_decreasing_rho_zero():
    Xs = make_mixture(S=5, M=3, K=3, seed=4)
    fit = fit_centralised(
        Xs,
        25,
        seed=1,
        hyper=GGMHyperParameters(n_components=3, rho=0.0, tau=0.0, delta=1.0, weight_prior=0.0),
    )
    obj = np.array(fit.objectives)
    assert np.all(np.diff(obj) >= -1e-6)
    assert obj[-1] > obj[0]


@pytest.mark.parametrize("shrinkage", [0.0, 1.0, 10.0])
def test_em_objective_is_non_decreasing_with_glasso(shrinkage):
    # τ = 0 and β = 0: the π^s update is then eq. (13), and the covariance shrinkage ν is a Wishart term of
    # the prior, so the MAP objective (which includes it) cannot decrease
    Xs = make_mixture(S=3, M=4, K=2, seed=5)
    hyper = GGMHyperParameters(n_components=2, tau=0.0, weight_prior=0.0, shrinkage=shrinkage)
    fit = fit_centralised(Xs, 12, seed=2, hyper=hyper)
    obj = np.array(fit.objectives)
    assert np.all(np.diff(obj) >= -1e-6)


def test_initial_parameters_are_deterministic():
    X = np.random.default_rng(0).standard_normal((50, 3))
    a = mx.initial_parameters(X.mean(0), np.cov(X.T), 4, np.random.default_rng(7))
    b = mx.initial_parameters(X.mean(0), np.cov(X.T), 4, np.random.default_rng(7))
    assert np.array_equal(a.means, b.means) and np.array_equal(a.precisions, b.precisions)
    with pytest.raises(ValueError):
        mx.initial_parameters(X.mean(0), np.cov(X.T), 2, np.random.default_rng(0), precision="bogus")


def test_admm_fallback_agrees_with_coordinate_descent():
    rng = np.random.default_rng(8)
    S = _random_spd(4, rng, n=6)
    alpha = 0.1
    Lam_admm = mx.glasso_admm(S, alpha)
    Lam_cd = mx.solve_precision(S * 41 / 40, 40.0, alpha * 41)  # same problem through the reduction
    assert np.allclose(Lam_admm, Lam_cd, atol=1e-6)
    G = np.linalg.inv(Lam_admm) - S  # KKT of the diagonal-penalised problem
    nz = np.abs(Lam_admm) > 1e-8
    assert np.allclose(G[nz], alpha * np.sign(Lam_admm[nz]), atol=1e-7)
    assert np.all(np.abs(G[~nz]) <= alpha + 1e-7)


def test_ill_conditioned_sigma_still_gives_positive_definite_precision():
    X = np.zeros((6, 5))
    X[:, 0] = [1, 2, 3, 1, 2, 3]  # four constant features: Σ is rank one
    Sigma = np.cov(X.T, bias=True)
    Lam = mx.solve_precision(Sigma, 6.0, 0.5)
    assert np.all(np.linalg.eigvalsh(Lam) > 0)


def test_warm_started_admm_agrees_with_cold_and_coordinate_descent_in_fewer_iterations():
    """The M-step's fallback solver: warm-started from a nearby Λ (the previous EM iteration) it reaches the same
    optimum as cold ADMM and coordinate descent, in fewer iterations; batched problems do not interact."""
    rng = np.random.default_rng(12)
    S1, S2 = _random_spd(5, rng, n=9), _random_spd(5, rng, n=7)
    alpha = np.array([0.05, 0.2])
    cold, it_cold = mx.glasso_admm_batch(np.stack([S1, S2]), alpha, return_iterations=True)
    near = np.stack([mx.glasso_admm(S * 1.02, a) for S, a in zip((S1, S2), alpha)])  # last iteration's Λ
    warm, it_warm = mx.glasso_admm_batch(np.stack([S1, S2]), alpha, near, return_iterations=True)
    assert np.allclose(warm, cold, rtol=1e-6, atol=1e-7)
    assert np.all(it_warm < it_cold)
    for S, a, L in zip((S1, S2), alpha, warm):
        cd = mx.solve_precision(S * 41 / 40, 40.0, a * 41)  # same problem through the reduction
        assert np.allclose(L, cd, atol=1e-5)
    alone = mx.glasso_admm(S2, alpha[1], warm=near[1])
    assert np.array_equal(alone, warm[1])


def test_ill_conditioned_problem_goes_straight_to_admm(monkeypatch):
    X = np.zeros((6, 5))
    X[:, 0] = [1, 2, 3, 1, 2, 3]
    Sigma = np.cov(X.T, bias=True) + 1e-13 * np.eye(5)
    import sklearn.covariance

    monkeypatch.setattr(
        sklearn.covariance, "graphical_lasso", lambda *a, **k: pytest.fail("coordinate descent called")
    )
    Lam = mx.solve_precision(Sigma, 6.0, 1e-11, warm=np.eye(5))  # cond(S + αI) ≈ 5e11
    assert np.all(np.linalg.eigvalsh(Lam) > 0)


def test_coordinate_descent_that_stops_early_is_finished_by_admm():
    rng = np.random.default_rng(13)
    Sigma = _random_spd(5, rng, n=8)
    ref = mx.solve_precision(Sigma, 40.0, 8.0)
    calls = []
    orig = mx.glasso_admm
    mx.glasso_admm = lambda *a, **k: calls.append(k.get("warm")) or orig(*a, **k)
    try:
        Lam = mx.solve_precision(Sigma, 40.0, 8.0, tol=1e-14, max_iter=2)  # 2 sweeps cannot reach the gap
    finally:
        mx.glasso_admm = orig
    assert len(calls) == 1 and calls[0] is not None  # warm-started from the CD iterate
    assert np.allclose(Lam, ref, atol=5e-5)  # both within solver accuracy
    assert mx.precision_objective(Lam, Sigma, 40.0, 8.0) == pytest.approx(
        mx.precision_objective(ref, Sigma, 40.0, 8.0), abs=1e-8
    )
