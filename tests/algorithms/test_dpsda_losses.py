"""Online losses: gradients against finite differences, numerical stability."""

import numpy as np
import pytest

from algorithms.dpsda.losses import LogisticLoss, SquaredLoss, get_loss


def _numeric_gradient(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("loss", [SquaredLoss(), LogisticLoss()])
@pytest.mark.parametrize("batch", [1, 5])
def test_gradient_matches_finite_differences(loss, batch):
    rng = np.random.default_rng(batch)
    a = rng.normal(size=(batch, 6))
    b = rng.choice([-1.0, 1.0], size=batch)
    x = rng.normal(size=6)
    num = _numeric_gradient(lambda v: loss.value(v, a, b), x)
    np.testing.assert_allclose(loss.gradient(x, a, b), num, rtol=1e-6, atol=1e-8)


def test_squared_loss_value():
    a = np.array([[1.0, 2.0]])
    assert SquaredLoss().value(np.array([1.0, 1.0]), a, np.array([1.0])) == pytest.approx(2.0)


def test_logistic_loss_is_stable_for_large_margins():
    a = np.array([[1000.0], [-1000.0]])
    b = np.array([1.0, 1.0])
    x = np.array([1.0])
    assert LogisticLoss().value(x, a, b) == pytest.approx(500.0)
    g = LogisticLoss().gradient(x, a, b)
    assert np.all(np.isfinite(g)) and g[0] == pytest.approx(500.0)


def test_unknown_loss():
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("hinge")
