"""Laplace perturbation and ε accounting (seed 002; docs/dpsda.md "Privacy accounting")."""

import math

import numpy as np
import pytest

from algorithms.dpsda import DPSDAConfig
from algorithms.dpsda.privacy import (
    LaplaceComposition,
    PrivacyAccountant,
    epsilon_per_step,
    laplace_noise,
    laplace_rdp,
    laplace_scale_for,
    rdp_epsilon,
    run_privacy,
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
