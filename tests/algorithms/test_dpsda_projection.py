"""Π^ψ_X(z, α) of eq. (7) is the QP solution (seed 002; docs/dpsda.md), checked by the QP's optimality
conditions."""

import numpy as np
import pytest
from scipy.optimize import Bounds, minimize

from algorithms.dpsda.projection import (
    BallProjection,
    BlockBallProjection,
    BoxProjection,
    Projection,
    dual_averaging_objective,
)


def _no_feasible_point_does_better(proj, x, z, alpha, rng, scale, n=300):
    """The variational inequality of eq. (7)'s minimiser over sampled feasible points y:
    ⟨∇f(x), y − x⟩ ≥ 0 and, f being (1/α)-strongly convex, f(y) ≥ f(x) + ‖y − x‖²/(2α)."""
    grad = z + x / alpha
    fx = dual_averaging_objective(x, z, alpha)
    for _ in range(n):
        y = proj(-(x + rng.normal(0, scale, x.size)) / alpha, alpha)  # a random feasible point
        assert proj.contains(y, 1e-12)
        assert grad @ (y - x) >= -1e-9
        assert dual_averaging_objective(y, z, alpha) >= fx + (y - x) @ (y - x) / (2 * alpha) - 1e-9


@pytest.mark.parametrize("seed", range(5))
def test_box_projection_is_the_qp_solution(seed):
    """Checked by the QP's optimality conditions, not by a reference solver's exit status (which
    depends on the BLAS kernel the solver's line search runs on, docs/reproducibility.md); the
    reference solver's point, whatever its status, is never better."""
    rng = np.random.default_rng(seed)
    m = 21
    z = rng.normal(0, 10, m)
    alpha = float(rng.uniform(0.05, 2.0))
    box = BoxProjection(-5.0, 5.0, m)
    x = box(z, alpha)
    assert box.contains(x)
    # KKT: ∇f = z + x/α vanishes on free coordinates, pushes outwards on active ones
    grad = z + x / alpha
    free = (x > -5.0) & (x < 5.0)
    np.testing.assert_allclose(grad[free], 0.0, atol=1e-12)
    assert np.all(grad[x == -5.0] >= 0) and np.all(grad[x == 5.0] <= 0)
    _no_feasible_point_does_better(box, x, z, alpha, rng, 2.0)
    reference = minimize(
        lambda v: dual_averaging_objective(v, z, alpha),
        np.zeros(m),
        jac=lambda v: z + v / alpha,
        method="L-BFGS-B",
        bounds=Bounds(-5.0, 5.0),
    )
    assert dual_averaging_objective(x, z, alpha) <= reference.fun + 1e-12
    # some coordinates must be active for the check to mean anything
    assert np.any(np.abs(x) == 5.0) and np.any(np.abs(x) < 5.0)


def test_box_projection_satisfies_kkt_conditions():
    rng = np.random.default_rng(7)
    z, alpha = rng.normal(0, 10, 50), 0.3
    x = BoxProjection(-1.0, 2.0)(z, alpha)
    grad = z + x / alpha
    interior = (x > -1.0) & (x < 2.0)
    assert np.allclose(grad[interior], 0.0, atol=1e-12)
    assert np.all(grad[x == -1.0] >= 0) and np.all(grad[x == 2.0] <= 0)


@pytest.mark.parametrize("seed", range(20))
def test_ball_projection_equals_constrained_solution(seed):
    """min ⟨z, x⟩ + ‖x‖²/(2α) s.t. g(x) = ‖x‖² − r² ≤ 0, a convex problem with a Slater point (0), so
    its KKT conditions certify the minimiser. Checked with tolerances: feasibility g(x) ≤ tol,
    stationarity ∇f(x) + μ∇g(x) = 0 for the multiplier μ that best fits it, μ ≥ 0, complementary
    slackness μ·g(x) = 0; and the variational inequality and strong-convexity bound over sampled
    feasible points. Never a reference solver's success flag: SciPy's SLSQP stops with "Positive
    directional derivative for linesearch" on some BLAS kernels (issue 28, docs/reproducibility.md)."""
    rng = np.random.default_rng(seed)
    z, alpha = rng.normal(0, 3, 8), float(rng.uniform(0.2, 2.0))
    r = float(rng.uniform(0.1, 0.95)) * float(np.linalg.norm(alpha * z))  # the constraint binds
    ball = BallProjection(r)
    x = ball(z, alpha)
    scale = np.linalg.norm(z)  # ∇f(x) and μ∇g(x) are of this size
    # feasibility
    assert x @ x - r * r <= 1e-12 * r * r
    # stationarity: z + x/α + 2μx = 0 with the least-squares multiplier
    grad = z + x / alpha
    mu = -(grad @ x) / (2 * (x @ x))
    assert mu > 0  # dual feasibility (strictly: the constraint binds)
    np.testing.assert_allclose(grad + 2 * mu * x, 0.0, atol=1e-12 * scale)
    # complementary slackness: the multiplier is positive, so the constraint is active
    assert abs(mu * (x @ x - r * r)) <= 1e-12 * mu * r * r
    # the closed form's multiplier: μ = (‖αz‖/r − 1)/(2α)
    assert mu == pytest.approx((np.linalg.norm(alpha * z) / r - 1) / (2 * alpha), rel=1e-12)
    _no_feasible_point_does_better(ball, x, z, alpha, rng, 0.5)
    # inside the ball the constraint is slack: μ = 0, x = −αz and ∇f(x) = 0
    inside = BallProjection(100.0)(z, alpha)
    np.testing.assert_array_equal(inside, -alpha * z)
    np.testing.assert_allclose(z + inside / alpha, 0.0, atol=1e-12 * scale)


def test_protocol_and_radius():
    assert isinstance(BoxProjection(-5, 5, 21), Projection)
    assert isinstance(BallProjection(1.0), Projection)
    assert BoxProjection(-5, 5, 4).radius() == pytest.approx(10.0)
    assert BoxProjection(-1, 1, 4).contains(np.array([1.0, -1.0, 0.0, 0.5]))
    assert not BoxProjection(-1, 1, 4).contains(np.array([1.1, 0, 0, 0]))
    with pytest.raises(ValueError, match="dimension"):
        BoxProjection(-1, 1).radius()


def test_validation():
    with pytest.raises(ValueError, match="exceeds"):
        BoxProjection(1.0, -1.0)
    with pytest.raises(ValueError, match="finite"):
        BoxProjection(-np.inf, 1.0)
    with pytest.raises(ValueError, match="step size"):
        BoxProjection(-1, 1)(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="radius"):
        BallProjection(0.0)


def test_block_ball_projection_is_the_product_of_ball_projections():
    rng = np.random.default_rng(3)
    z, alpha = rng.normal(0, 4, 12), 0.5
    proj = BlockBallProjection(1.0, 3)
    x = proj(z, alpha)
    for k in range(4):
        np.testing.assert_array_equal(x[3 * k : 3 * k + 3], BallProjection(1.0)(z[3 * k : 3 * k + 3], alpha))
    assert proj.contains(x, 1e-12)
    assert proj.radius_for(12) == pytest.approx(2.0)
    # the product projection minimises the separable objective: no feasible perturbation does better
    best = dual_averaging_objective(x, z, alpha)
    for _ in range(200):
        y = proj(-(x + rng.normal(0, 0.3, 12)) / alpha, alpha)  # a random feasible point
        assert dual_averaging_objective(y, z, alpha) >= best - 1e-12
    with pytest.raises(ValueError, match="blocks"):
        proj(np.zeros(10), 1.0)
