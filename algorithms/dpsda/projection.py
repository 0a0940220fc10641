"""The ψ-projection of dual averaging (seed 002 Protocol 1, eq. (7)).

    Π^ψ_X(z, α) = argmin_{x ∈ X} { ⟨z, x⟩ + (1/α) ψ(x) }                                   (7)

With the proximal function ψ(x) = ½‖x‖², completing the square gives
Π(z, α) = argmin_{x∈X} ‖x + α z‖² = P_X(−α z), the Euclidean projection of −αz onto X. For a box
X = [lb, ub]^m that is ``clip(−α z, lb, ub)`` (eq. (13), the authors' code); for a Euclidean ball of
radius r it is −αz rescaled to norm ≤ r. Any closed convex X with a cheap Euclidean projection can
be added by implementing :class:`Projection`.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Projection(Protocol):
    """Π^ψ_X(z, α) for ψ(x) = ½‖x‖² and a closed convex set X."""

    def __call__(self, z: np.ndarray, alpha: float) -> np.ndarray: ...

    def contains(self, x: np.ndarray, tol: float = 0.0) -> bool: ...

    def radius(self) -> float:
        """sup_{x∈X} ‖x‖₂ for the whole vector dimension it was built for (R_X of Assumption 1)."""
        ...


def _check_alpha(alpha: float) -> None:
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"the step size α must be positive and finite, got {alpha}")


class BoxProjection:
    """X = [lb, ub]^m: Π(z, α) = clip(−α z, lb, ub)  (eq. (13))."""

    def __init__(self, lower: float, upper: float, dimension: int | None = None):
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise ValueError(f"box bounds must be finite, got [{lower}, {upper}]")
        if lower > upper:
            raise ValueError(f"box lower bound {lower} exceeds upper bound {upper}")
        self.lower = float(lower)
        self.upper = float(upper)
        self.dimension = dimension

    def __call__(self, z: np.ndarray, alpha: float) -> np.ndarray:
        _check_alpha(alpha)
        return np.clip(-alpha * np.asarray(z, dtype=np.float64), self.lower, self.upper)

    def contains(self, x: np.ndarray, tol: float = 0.0) -> bool:
        x = np.asarray(x)
        return bool(np.all(x >= self.lower - tol) and np.all(x <= self.upper + tol))

    def radius(self) -> float:
        if self.dimension is None:
            raise ValueError("the radius of a box needs its dimension")
        return math.sqrt(self.dimension) * max(abs(self.lower), abs(self.upper))


class BallProjection:
    """X = {x : ‖x‖₂ ≤ r}: Π(z, α) = −αz · min(1, r / ‖αz‖₂)."""

    def __init__(self, radius: float):
        if not (radius > 0 and math.isfinite(radius)):
            raise ValueError(f"the ball radius must be positive and finite, got {radius}")
        self._radius = float(radius)

    def __call__(self, z: np.ndarray, alpha: float) -> np.ndarray:
        _check_alpha(alpha)
        y = -alpha * np.asarray(z, dtype=np.float64)
        norm = float(np.linalg.norm(y))
        return y if norm <= self._radius else y * (self._radius / norm)

    def contains(self, x: np.ndarray, tol: float = 0.0) -> bool:
        return float(np.linalg.norm(x)) <= self._radius + tol

    def radius(self) -> float:
        return self._radius


class BlockBallProjection:
    """X = X_1 × … × X_n with X_i = {x^i ∈ R^d : ‖x^i‖₂ ≤ r}: the ball projection applied block by block.

    DPSDA needs a product set (seed 002 §2.2), because the played decision stacks blocks taken from different
    nodes' estimates; a product of per-block balls is one, a single ball over R^m is not.
    """

    def __init__(self, radius: float, block_size: int):
        if not (isinstance(block_size, int) and block_size >= 1):
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
        self._ball = BallProjection(radius)
        self.block_size = block_size

    def _blocks(self, v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 1 or v.size % self.block_size:
            raise ValueError(f"a vector of length {v.size} does not split into blocks of {self.block_size}")
        return v.reshape(-1, self.block_size)

    def __call__(self, z: np.ndarray, alpha: float) -> np.ndarray:
        _check_alpha(alpha)
        return np.concatenate([self._ball(b, alpha) for b in self._blocks(z)])

    def contains(self, x: np.ndarray, tol: float = 0.0) -> bool:
        return all(self._ball.contains(b, tol) for b in self._blocks(x))

    def radius(self) -> float:
        raise ValueError(
            "the radius of a product of balls depends on the number of blocks; use radius_for(m)"
        )

    def radius_for(self, dimension: int) -> float:
        return math.sqrt(dimension // self.block_size) * self._ball.radius()


def dual_averaging_objective(x: np.ndarray, z: np.ndarray, alpha: float) -> float:
    """⟨z, x⟩ + ‖x‖² / (2α), the objective minimised in eq. (7) with ψ = ½‖·‖²."""
    return float(np.dot(z, x) + np.dot(x, x) / (2.0 * alpha))
