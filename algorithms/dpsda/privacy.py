"""Privacy of DPSDA: Laplace perturbation, sensitivity and ε accounting (ALGORITHMS.md §1.4, §4.5).

Mechanism (eq. (4)/(11)/(20)): before a node releases its dual z_i(t) it adds η_i(t) ~ Lap(0, σ)
i.i.d. per coordinate (density (1/2σ)·exp(−|x|/σ), variance 2σ²); σ = 0 is the non-private run.

Sensitivity [RECON, Lemma 1/4]: for adjacent function sequences F ~ F′ (differing in one f_{t0}),
what one node releases changes by Δ(t) = sup ‖z_i(t) − z′_i(t)‖₁ ≤ 2 n L̂ √d, where L̂ bounds
‖ĝ_i(t)‖₂ (enforced by clipping ĝ, see :class:`~algorithms.dpsda.framework.DPSDAConfig`) and d is
the block size (‖v‖₁ ≤ √d ‖v‖₂ on a d-block; the difference of two gradients is at most 2L̂).

Per-step ε (Theorem 2/4): the Laplace mechanism with scale σ(t) is ε(t)-DP with ε(t) = Δ(t)/σ(t).
Horizon (basic composition): ε̂(T) = Σ_{t≤T} Δ(t)/σ(t) over the steps at which a message is released.

The authors' experiments normalise Δ to 1, so σ = 1/ε (σ ∈ {0, 1, 2, 5} ↔ non-private, ε = 1, 0.5,
0.2); :data:`NORMALISED_SENSITIVITY` is that convention. The rigorous Δ from :func:`sensitivity_bound`
is far larger for high-dimensional data (see docs/dpsda.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NORMALISED_SENSITIVITY = 1.0


def laplace_noise(rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    """η ~ Lap(0, scale) i.i.d. (§1.4); exactly zero (no draw) when ``scale == 0``."""
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"the Laplace scale must be finite and ≥ 0, got {scale}")
    if scale == 0:
        return np.zeros(size)
    return rng.laplace(0.0, scale, size)


def sensitivity_bound(n_nodes: int, gradient_bound: float, block_size: int) -> float:
    """Δ ≤ 2 n L̂ √d (Lemma 1/4 and Remark 5 [RECON]) for one node's released dual, in ℓ1."""
    if n_nodes < 1 or block_size < 1:
        raise ValueError(f"need n ≥ 1 and d ≥ 1, got n = {n_nodes}, d = {block_size}")
    if not (gradient_bound > 0 and math.isfinite(gradient_bound)):
        raise ValueError(f"the gradient bound L̂ must be positive and finite, got {gradient_bound}")
    return 2.0 * n_nodes * gradient_bound * math.sqrt(block_size)


def laplace_scale_for(epsilon: float, sensitivity: float) -> float:
    """σ = Δ / ε: the smallest Laplace scale that makes one step ε-DP (Theorem 2/4)."""
    if not (epsilon > 0):
        raise ValueError(f"ε must be positive, got {epsilon}")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"the sensitivity Δ must be positive and finite, got {sensitivity}")
    return sensitivity / epsilon


def epsilon_per_step(sensitivity: float, scale: float) -> float:
    """ε(t) = Δ(t)/σ(t); infinite (no guarantee) for σ = 0."""
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"the sensitivity Δ must be positive and finite, got {sensitivity}")
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"the Laplace scale must be finite and ≥ 0, got {scale}")
    return math.inf if scale == 0 else sensitivity / scale


@dataclass
class PrivacyAccountant:
    """Basic composition of per-step Laplace releases: ε̂ = Σ_t Δ(t)/σ(t) (Theorem 2/4)."""

    sensitivity: float
    scale: float
    spent: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.per_step = epsilon_per_step(self.sensitivity, self.scale)

    def release(self) -> float:
        """Record one released message; return this step's ε."""
        self.spent.append(self.per_step)
        return self.per_step

    @property
    def total(self) -> float:
        return math.fsum(self.spent) if all(math.isfinite(e) for e in self.spent) else math.inf

    def horizon_total(self, releases: int) -> float:
        """ε̂ after ``releases`` steps (= releases · ε for a constant scale)."""
        if releases < 0:
            raise ValueError(f"the number of releases must be ≥ 0, got {releases}")
        return 0.0 if releases == 0 else releases * self.per_step
