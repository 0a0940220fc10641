"""Laplace perturbation and ε accounting (ALGORITHMS.md §1.4, §4.5, §6.2 item 8)."""

import math

import numpy as np
import pytest

from algorithms.dpsda.privacy import (PrivacyAccountant, epsilon_per_step, laplace_noise, laplace_scale_for,
                                      sensitivity_bound)


def test_laplace_noise_has_the_laplace_moments():
    rng = np.random.default_rng(0)
    x = laplace_noise(rng, 2.0, 200_000)
    assert abs(x.mean()) < 0.03
    assert x.var() == pytest.approx(2 * 2.0 ** 2, rel=0.03)        # variance 2b²
    assert np.mean(np.abs(x)) == pytest.approx(2.0, rel=0.02)      # E|X| = b


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
