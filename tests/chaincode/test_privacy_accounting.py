"""The ledger's Gaussian accountant (chaincode/privacy.py, standard library only) against the images'
accountant (algorithms/dpsda/privacy.py, numpy/scipy): the same figures where both compute the same
bound, and never below the images' tighter ones (docs/dpsda.md "The Gaussian mode on the ledger")."""

from __future__ import annotations

import math

import pytest
from scipy import special

from algorithms.dpsda import privacy as image
from chaincode.privacy import (
    RDP_ORDERS,
    gaussian_epsilon,
    gdp_delta,
    gdp_epsilon,
    log_ndtr,
    sampled_gaussian_rdp,
)


@pytest.mark.parametrize("x", [-80.0, -45.5, -30.0, -29.9, -12.0, -1.0, 0.0, 0.7, 6.0, 40.0])
def test_log_ndtr_matches_scipy_on_both_sides_of_the_asymptotic_switch(x):
    assert log_ndtr(x) == pytest.approx(float(special.log_ndtr(x)), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 2.0, 4.0, 10.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_exact_gaussian_epsilon_matches_the_images_and_is_on_the_safe_side(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert eps == pytest.approx(image.gaussian_epsilon(mu, delta), rel=1e-9, abs=1e-12)
    assert gdp_delta(mu, eps) <= delta  # the returned ε meets δ
    if eps > 0:
        assert gdp_delta(mu, eps * (1 - 1e-9)) > delta  # and is tight


@pytest.mark.parametrize("q, z", [(0.02, 0.636), (0.02, 2.17), (0.1, 1.5), (0.5, 0.8), (0.001, 10.0)])
def test_integer_order_rdp_matches_the_images(q, z):
    ours = sampled_gaussian_rdp(q, z)
    theirs = [image.sampled_gaussian_rdp(float(a), q, z) for a in RDP_ORDERS]
    assert ours == pytest.approx(theirs, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize(
    "q, z, releases",
    [(0.02, 0.636, 499), (0.02, 2.17, 499), (0.01, 4.0, 10_000), (0.1, 1.5, 4), (0.5, 0.8, 2)],
)
def test_the_ledgers_epsilon_is_never_below_the_images(q, z, releases):
    """The image searches fractional orders as well: where the best order is an integer the two agree,
    elsewhere the ledger's bound is the looser (sound) one."""
    accounting, rho, eps = gaussian_epsilon(z, q, False, releases, 1e-5)
    tight = image.GaussianComposition(z, releases, q).epsilon(1e-5)
    assert accounting == "rdp" and rho == pytest.approx(releases / (2 * z * z))
    assert tight * (1 - 1e-9) <= eps <= 1.15 * tight


def test_known_figures():
    # the benchmark's Poisson runs (q = 0.02, 499 releases): ε = 1 agrees, ε = 10 is 11.2 on the ledger
    assert gaussian_epsilon(2.17, 0.02, False, 499, 1e-5)[2] == pytest.approx(0.91328, abs=1e-5)
    assert gaussian_epsilon(0.636, 0.02, False, 499, 1e-5)[2] == pytest.approx(11.2198, abs=1e-4)
    # Abadi et al. 2016 §3.1 (q = 0.01, σ = 4, 10,000 steps, δ = 1e-5): 1.26 with their conversion
    assert gaussian_epsilon(4.0, 0.01, False, 10_000, 1e-5)[2] == pytest.approx(1.0355, abs=1e-4)
    # a stream is one release whatever the number of rounds (parallel composition), q = 1 composes exactly
    one = gaussian_epsilon(0.5, 1.0, True, 1, 1e-5)
    assert one == gaussian_epsilon(0.5, 1.0, True, 499, 1e-5) and one[0] == "gdp"
    assert one[2] == pytest.approx(9.99726, abs=1e-5)
    assert gaussian_epsilon(2.0, 1.0, False, 4, 1e-5)[2] == pytest.approx(gdp_epsilon(1.0, 1e-5))
    assert gaussian_epsilon(2.0, 0.3, False, 0, 1e-5) == ("rdp", 0.0, 0.0)
    assert math.isfinite(gaussian_epsilon(0.3, 0.9, False, 100, 1e-5)[2])
