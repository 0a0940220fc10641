"""Regret, running-average regret, comparator and log-log slope."""

import math

import numpy as np
import pytest

from algorithms.dpsda.experiments import synthetic_olr
from algorithms.dpsda.losses import SquaredLoss
from algorithms.dpsda.regret import (
    instantaneous_losses,
    least_squares_comparator,
    loglog_slope,
    olr_regret,
    regret_curve,
    running_average,
)


def test_comparator_is_the_unconstrained_least_squares_minimum():
    s = synthetic_olr(0, horizon=60)
    comp = least_squares_comparator(s.features, s.labels, 60)
    assert np.allclose(comp[:21], 0.0, atol=1e-20 + 1e-12)  # underdetermined: exact fit
    x = np.linalg.solve(s.features.T @ s.features, s.features.T @ s.labels)
    assert comp[-1] == pytest.approx(0.5 * np.sum((s.features @ x - s.labels) ** 2), rel=1e-9)
    assert np.all(np.diff(comp) >= -1e-12)  # adding a term never lowers the minimum
    # any other point does at least as badly
    assert 0.5 * np.sum((s.features @ (x + 0.01) - s.labels) ** 2) > comp[-1]


def test_regret_of_the_comparator_itself_is_zero_at_the_horizon():
    s = synthetic_olr(1, horizon=80)
    x = np.linalg.lstsq(s.features, s.labels, rcond=None)[0]
    decisions = np.tile(x, (80, 1))
    r, r_avg = olr_regret(decisions, s.features, s.labels)
    assert r[-1] == pytest.approx(0.0, abs=1e-10) and r_avg[-1] == pytest.approx(0.0, abs=1e-10)
    assert np.all(r[:-1] >= -1e-10)


def test_running_average():
    d = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]])
    np.testing.assert_allclose(running_average(d), [[1, 0], [2, 1], [3, 2]])


def test_losses_and_curve():
    s = synthetic_olr(2, horizon=5)
    d = np.zeros((5, 21))
    np.testing.assert_allclose(
        instantaneous_losses(SquaredLoss(), d, s.features, s.labels), 0.5 * s.labels**2
    )
    np.testing.assert_allclose(regret_curve(np.ones(3), np.array([0.0, 1.0, 1.0])), [1.0, 1.0, 2.0])
    with pytest.raises(ValueError):
        regret_curve(np.ones(3), np.ones(2))


def test_loglog_slope():
    t = np.arange(1, 501)
    assert loglog_slope(3 * np.sqrt(t)) == pytest.approx(0.5)
    assert loglog_slope(2.0 * t) == pytest.approx(1.0)
    assert math.isnan(loglog_slope(np.zeros(500)))
