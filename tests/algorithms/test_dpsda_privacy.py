"""Laplace perturbation and ε accounting (seed 002; docs/dpsda.md "Privacy accounting"), and the Gaussian mode's
RDP / GDP accountant (docs/dpsda.md "The Gaussian mode")."""

import math

import numpy as np
import pytest

from algorithms.dpsda import DPSDAConfig
from algorithms.dpsda.privacy import (
    GAUSSIAN_RDP_ORDERS,
    GaussianComposition,
    LaplaceComposition,
    PrivacyAccountant,
    epsilon_per_step,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_rdp,
    gaussian_sensitivity,
    laplace_noise,
    laplace_rdp,
    laplace_scale_for,
    noise_multiplier_for,
    rdp_epsilon,
    rdp_to_epsilon,
    run_privacy,
    sampled_gaussian_rdp,
    sensitivity_bound,
    zcdp_epsilon,
    zcdp_of_laplace,
)


def test_laplace_noise_has_the_laplace_moments():
    rng = np.random.default_rng(0)
    x = laplace_noise(rng, 2.0, 200_000)
    assert abs(x.mean()) < 0.03
    assert x.var() == pytest.approx(2 * 2.0**2, rel=0.03)  # variance 2b²
    assert np.mean(np.abs(x)) == pytest.approx(2.0, rel=0.02)  # E|X| = b


def test_zero_scale_is_non_private_and_draws_nothing():
    rng = np.random.default_rng(0)
    assert np.array_equal(laplace_noise(rng, 0.0, 5), np.zeros(5))
    assert rng.random() == np.random.default_rng(0).random()
    assert epsilon_per_step(1.0, 0.0) == math.inf


def test_sensitivity_bound_and_scale():
    assert sensitivity_bound(7, 1.0, 3) == pytest.approx(2 * 7 * math.sqrt(3))
    assert laplace_scale_for(0.5, 1.0) == 2.0
    assert epsilon_per_step(1.0, laplace_scale_for(0.2, 1.0)) == pytest.approx(0.2)


def test_basic_composition_over_the_horizon():
    acc = PrivacyAccountant(sensitivity=3.0, scale=6.0)
    for _ in range(499):
        assert acc.release() == 0.5
    assert acc.total == pytest.approx(499 * 0.5)
    assert acc.horizon_total(499) == pytest.approx(acc.total)
    assert acc.horizon_total(0) == 0.0
    assert PrivacyAccountant(1.0, 0.0).horizon_total(3) == math.inf


def test_validation():
    with pytest.raises(ValueError):
        laplace_noise(np.random.default_rng(0), -1.0, 3)
    with pytest.raises(ValueError):
        sensitivity_bound(0, 1.0, 3)
    with pytest.raises(ValueError):
        sensitivity_bound(7, 0.0, 3)
    with pytest.raises(ValueError):
        laplace_scale_for(0.0, 1.0)
    with pytest.raises(ValueError):
        epsilon_per_step(0.0, 1.0)


def _renyi_laplace_numeric(order: float, shift: float) -> float:
    """D_α(Lap(0, 1) ‖ Lap(shift, 1)) by quadrature, independent of Mironov's closed form."""
    x = np.linspace(-60.0, 60.0 + shift, 2_400_001)
    log_p, log_q = -np.abs(x) - math.log(2), -np.abs(x - shift) - math.log(2)
    integrand = np.exp(order * log_p + (1 - order) * log_q)
    return math.log(np.trapezoid(integrand, x)) / (order - 1)


@pytest.mark.parametrize("order, eps0", [(1.5, 0.1), (2.0, 0.5), (8.0, 1.0), (32.0, 0.05), (3.0, 4.0)])
def test_laplace_rdp_matches_the_renyi_divergence(order, eps0):
    assert laplace_rdp(order, eps0) == pytest.approx(_renyi_laplace_numeric(order, eps0), rel=1e-5, abs=1e-9)


def test_laplace_rdp_bounds_and_superadditivity():
    for order in (1.01, 2.0, 10.0, 1000.0):
        assert laplace_rdp(order, 0.0) == 0.0
        prev = 0.0
        for eps0 in (0.01, 0.1, 1.0, 10.0, 3000.0):
            v = laplace_rdp(order, eps0)
            assert prev <= v <= eps0 + 1e-12  # monotone, never above pure ε0
            assert v <= order * zcdp_of_laplace(eps0) + 1e-12  # ε0-DP ⇒ ε0²/2-zCDP (Bun–Steinke 1.4)
            prev = v
        # convex with f(0) = 0 ⇒ splitting an ℓ1 shift over coordinates never costs more than one coordinate
        for a, b in ((0.3, 0.7), (1.0, 2.0), (0.01, 5.0)):
            assert laplace_rdp(order, a) + laplace_rdp(order, b) <= laplace_rdp(order, a + b) + 1e-12


def test_zcdp_conversion():
    assert zcdp_of_laplace(0.2) == pytest.approx(0.02)
    assert zcdp_epsilon(0.02, 1e-5) == pytest.approx(0.02 + 2 * math.sqrt(0.02 * math.log(1e5)))
    assert zcdp_epsilon(0.0, 1e-5) == 0.0
    with pytest.raises(ValueError):
        zcdp_epsilon(0.1, 0.0)
    with pytest.raises(ValueError):
        zcdp_epsilon(0.1, 1.0)


def test_composition_over_many_releases_is_sublinear_and_takes_the_tightest_bound():
    few = LaplaceComposition(1.0, 2)
    assert few.epsilon(1e-5) == few.basic == 2.0  # basic wins for a few large releases
    many = LaplaceComposition(0.01, 3493)  # 7 nodes × 499 releases of ε0 = 0.01
    assert many.basic == pytest.approx(34.93)
    assert many.rho == pytest.approx(3493 * 0.5e-4)
    assert many.zcdp(1e-5) == pytest.approx(zcdp_epsilon(3493 * 0.5e-4, 1e-5))
    assert many.rdp(1e-5) <= many.zcdp(1e-5) + 1e-9 and many.epsilon(1e-5) == many.rdp(1e-5)
    assert many.epsilon(1e-5) < many.basic / 10  # √R, not R
    eps, order = rdp_epsilon(0.01, 3493, 1e-5)
    assert eps == many.rdp(1e-5) and order > 1
    assert LaplaceComposition(0.3, 0).epsilon(1e-5) == 0.0


def test_network_composition_counts_every_node_release():
    runs = run_privacy(sensitivity=2.0, scale=4.0, n_nodes=7, horizon=500)
    assert runs["node"].releases == 499 and runs["network"].releases == 7 * 499
    assert runs["node"].epsilon0 == runs["network"].epsilon0 == 0.5
    assert runs["network"].basic == pytest.approx(7 * runs["node"].basic)
    assert runs["network"].epsilon(1e-5) > runs["node"].epsilon(1e-5)


def test_mnist_500_round_run_spends_far_more_than_its_nominal_epsilon():
    """n = 7, d = 112, L̂ = √d (centred pixels in [−1, 1], logistic loss): Δ = 2nL̂√d = 2·7·112 = 1568."""
    delta_l1 = sensitivity_bound(7, math.sqrt(112), 112)
    assert delta_l1 == pytest.approx(1568.0)
    nominal = run_privacy(1.0, 1.0, 7, 500)["node"]
    rigorous = run_privacy(delta_l1, 1.0, 7, 500)
    assert nominal.basic == 499.0
    assert rigorous["node"].epsilon(1e-5) > 1000 * nominal.epsilon(1e-5)


def test_clipped_configuration_accounts_with_the_proven_bound():
    clipped = DPSDAConfig(laplace_scale=2.0, gradient_clip=0.5)
    assert clipped.rigorous_privacy and clipped.accounting_sensitivity == sensitivity_bound(7, 0.5, 3)
    nominal = DPSDAConfig(laplace_scale=2.0)
    assert not nominal.rigorous_privacy and nominal.accounting_sensitivity == 1.0
    assert DPSDAConfig(gradient_clip=0.5, sensitivity=100.0).accounting_sensitivity == 100.0
    with pytest.raises(ValueError, match="below the proven bound"):
        DPSDAConfig(gradient_clip=0.5, sensitivity=1.0)


# -- the Gaussian mode's accountant (docs/dpsda.md "The Gaussian mode") -------------------------------


def _log_a_numeric(q: float, z: float, order: float, reverse: bool = False) -> float:
    """ln E_{μ0}[(μ/μ0)^α] (or, ``reverse``, ln E_μ[(μ0/μ)^α]) by adaptive quadrature of the defining
    integral, independent of the binomial expansions: μ0 = N(0, z²), μ = (1−q)μ0 + q N(1, z²)."""
    from scipy import integrate

    def log_ratio(x: float) -> float:
        return float(np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / (2 * z * z)))

    def integrand(x: float) -> float:
        log_p0 = -x * x / (2 * z * z) - math.log(z * math.sqrt(2 * math.pi))
        lr = log_ratio(x)
        return math.exp(log_p0 + (1 - order) * lr if reverse else log_p0 + order * lr)

    value, _ = integrate.quad(
        integrand,
        -60 * z - order,
        order + 60 * z + 2,
        points=[0.0, 0.5, 1.0, order],
        limit=2000,
        epsabs=0,
        epsrel=1e-13,
    )
    return math.log(value)


@pytest.mark.parametrize(
    "q, z, order",
    [
        (0.01, 1.0, 1.5),
        (0.01, 4.0, 20.7),
        (0.05, 0.8, 3.7),
        (0.2, 2.0, 5.25),
        (0.02, 0.6, 2.5),
        (0.3, 0.5, 1.05),
        (0.01, 1.0, 2.0),
        (0.05, 0.8, 7.0),
        (0.2, 2.0, 32.0),
    ],
)
def test_sampled_gaussian_rdp_matches_the_renyi_divergence(q, z, order):
    numeric = _log_a_numeric(q, z, order) / (order - 1)
    assert sampled_gaussian_rdp(order, q, z) == pytest.approx(numeric, rel=1e-8, abs=1e-13)
    # the other direction, D_α(μ0 ‖ μ), is never the larger one (Mironov, Talwar & Zhang 2019, Thm. 5)
    assert _log_a_numeric(q, z, order, reverse=True) / (order - 1) <= sampled_gaussian_rdp(order, q, z)


def test_sampled_gaussian_rdp_limits_and_amplification():
    for order in (1.5, 2.0, 7.3, 64.0):
        assert sampled_gaussian_rdp(order, 1.0, 1.7) == pytest.approx(order / (2 * 1.7**2))
        assert gaussian_rdp(order, 1.7) == pytest.approx(order / (2 * 1.7**2))
        assert sampled_gaussian_rdp(order, 0.0, 1.0) == 0.0
        assert sampled_gaussian_rdp(order, 0.1, 0.0) == math.inf
        previous = 0.0
        for q in (1e-4, 1e-3, 0.01, 0.1, 0.5, 1.0):  # grows with q, never above the unsampled mechanism
            value = sampled_gaussian_rdp(order, q, 1.0)
            assert previous < value <= gaussian_rdp(order, 1.0) * (1 + 1e-12)
            previous = value
    # amplification: at small q the RDP falls like q² (2q²α/z² for moderate α, Mironov et al. 2019 §3.3)
    assert sampled_gaussian_rdp(2.0, 1e-3, 4.0) == pytest.approx(1e-6 * (math.exp(1 / 16) - 1), rel=1e-3)
    with pytest.raises(ValueError):
        sampled_gaussian_rdp(1.0, 0.1, 1.0)
    with pytest.raises(ValueError):
        sampled_gaussian_rdp(2.0, 1.1, 1.0)


def test_moments_accountant_reproduces_abadi_et_al_2016():
    """Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, §3.1: q = 0.01, σ = 4, δ = 1e-5 and
    T = 10,000 steps give ε ≈ 1.26 with the moments accountant (≈ 9.34 by the strong composition theorem).
    Their accountant used the moments λ ≤ 32 and the tail bound δ = e^{α(λ) − λε}, which is the standard
    RDP conversion at orders λ + 1; the quoted two decimals must come out."""
    orders = [float(a) for a in range(2, 34)]
    rdp = [10_000 * sampled_gaussian_rdp(a, 0.01, 4.0) for a in orders]
    eps, order = rdp_to_epsilon(orders, rdp, 1e-5, conversion="standard")
    assert round(eps, 2) == 1.26 and order == 20.0
    improved, _ = rdp_to_epsilon(orders, rdp, 1e-5)
    assert improved < eps  # the improved conversion is never looser (its extra terms are ≤ 0 at α ≥ 2)
    assert GaussianComposition(4.0, 10_000, 0.01).epsilon(1e-5) <= improved + 1e-12  # the denser grid


def _gaussian_delta_numeric(mu: float, eps: float) -> float:
    """δ(ε) = ∫ max(0, p − e^ε q) for p = N(μ, 1), q = N(0, 1): the hockey-stick divergence by quadrature."""
    from scipy import integrate, stats

    def integrand(x: float) -> float:
        return max(0.0, stats.norm.pdf(x, mu) - math.exp(eps) * stats.norm.pdf(x))

    cross = eps / mu + mu / 2  # p > e^ε q exactly right of this point
    value, _ = integrate.quad(integrand, cross, cross + 40, epsabs=1e-17, epsrel=1e-10, limit=500)
    return value


@pytest.mark.parametrize("mu", [0.2, 1.0, 2.0, 4.0])
def test_exact_gaussian_epsilon_and_the_order_of_the_bounds(mu):
    for eps in (0.1, 1.0, 3.0):
        assert gaussian_delta(mu, eps) == pytest.approx(_gaussian_delta_numeric(mu, eps), rel=1e-6, abs=1e-15)
    exact = gaussian_epsilon(mu, 1e-5)
    assert gaussian_delta(mu, exact) <= 1e-5 < gaussian_delta(mu, exact * (1 - 1e-6))
    rdp, _ = rdp_to_epsilon(GAUSSIAN_RDP_ORDERS, [a * mu * mu / 2 for a in GAUSSIAN_RDP_ORDERS], 1e-5)
    zcdp = zcdp_epsilon(mu * mu / 2, 1e-5)
    assert exact < rdp < zcdp  # every conversion is sound, so none may be below the exact value
    assert rdp < 1.15 * exact


def test_gaussian_composition():
    # Gaussian releases compose exactly: R releases of multiplier z and one μ_a release are √(R/z² + μ_a²)-GDP
    comp = GaussianComposition(2.0, 9, 1.0, additional_mu=0.5)
    assert comp.mu == pytest.approx(math.sqrt(9 / 4 + 0.25))
    assert comp.epsilon(1e-5) == gaussian_epsilon(comp.mu, 1e-5)
    assert comp.rho == pytest.approx(9 / 8 + 0.125)
    assert comp.epsilon(1e-5) < comp.rdp(1e-5)[0] < comp.zcdp(1e-5)
    # sampling: the RDP curve adds up over releases and is far below the unsampled composition
    sampled = GaussianComposition(1.0, 499, 0.02)
    assert sampled.rdp_curve((2.0, 8.0)) == pytest.approx(
        [499 * sampled_gaussian_rdp(2.0, 0.02, 1.0), 499 * sampled_gaussian_rdp(8.0, 0.02, 1.0)]
    )
    assert 2.5 < sampled.epsilon(1e-5) < 4.0
    assert GaussianComposition(1.0, 499, 1.0).epsilon(1e-5) > 25 * sampled.epsilon(1e-5)
    assert GaussianComposition(1.0, 0, 0.02).epsilon(1e-5) == 0.0
    assert GaussianComposition(1.0, 5, 0.0).epsilon(1e-5) == 0.0
    assert GaussianComposition(0.0, 5, 0.3).epsilon(1e-5) == math.inf
    with pytest.raises(ValueError):
        GaussianComposition(1.0, -1)


@pytest.mark.parametrize(
    "releases, q, mu", [(1, 1.0, 0.0), (1, 1.0, 0.1), (499, 0.02, 0.0), (499, 0.02, 0.1)]
)
def test_noise_multiplier_for_is_on_the_safe_side(releases, q, mu):
    for target in (1.0, 10.0):
        z = noise_multiplier_for(target, 1e-5, releases, q, mu, tolerance=1e-7)
        assert GaussianComposition(z, releases, q, mu).epsilon(1e-5) <= target
        assert GaussianComposition(z * (1 - 1e-5), releases, q, mu).epsilon(1e-5) > target
    with pytest.raises(ValueError, match="alone"):
        noise_multiplier_for(0.1, 1e-5, 1, 1.0, additional_mu=5.0)


def test_gaussian_sensitivity():
    # one example moves each of the n clipped block means by ≤ c·L̂/b: √n·c·L̂/b over the concatenation
    assert gaussian_sensitivity(7, 1.0, 236, "poisson") == pytest.approx(math.sqrt(7) / 236)
    assert gaussian_sensitivity(7, 0.5, 10, "stream") == pytest.approx(math.sqrt(7) * 2 * 0.5 / 10)
    with pytest.raises(ValueError):
        gaussian_sensitivity(7, 1.0, 10, "shuffle")
    with pytest.raises(ValueError):
        gaussian_sensitivity(7, 0.0, 10, "stream")
