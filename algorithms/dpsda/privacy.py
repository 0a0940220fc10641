"""Privacy of DPSDA: Laplace perturbation, sensitivity and ε accounting (seed 002; docs/dpsda.md "Privacy accounting").

Mechanism (eq. (4)/(11)/(20)): before a node releases its dual z_i(t) it adds η_i(t) ~ Lap(0, σ)
i.i.d. per coordinate (density (1/2σ)·exp(−|x|/σ), variance 2σ²); σ = 0 is the non-private run.

Sensitivity [RECON, Lemma 1/4 and Remark 5]: for adjacent function sequences F ~ F′ (differing in one
f_{t0}), what one node releases changes by Δ(t) = sup ‖z_i(t) − z′_i(t)‖₁ ≤ 2 n L̂ √d, where L̂ bounds
‖ĝ_i(t)‖₂ (enforced by clipping ĝ, see :class:`~algorithms.dpsda.framework.DPSDAConfig`) and d is the
block size (‖v‖₁ ≤ √d ‖v‖₂ on a d-block; two clipped gradients differ by at most 2L̂; eq. (5) scales by n).
Given the released history, z_i(t+1) = Σ_j a_ij h_j(t) + n E_i ĝ_i(t) differs between F and F′ only
through n E_i ĝ_i(t), so the bound holds for *every* release from t0 on, not only the first one:
a run is an adaptive composition of T−1 releases per node, each ε0-DP with ε0 = Δ/σ.

Two observers (docs/dpsda.md "Privacy accounting"):

* **node** — sees the messages of one node: T−1 releases of ε0 each;
* **network** — sees every link (the paper's eavesdropper). f_t is shared by all nodes, so one changed
  f_{t0} moves all n releases of a step, each by ≤ Δ in its own block: n(T−1) releases of ε0 each
  (n·ε0 per step).

Composition of R releases of an ε0-DP Laplace mechanism, all sound, the smallest is reported:

* basic (Theorem 2/4 of the paper): ε = R·ε0, δ = 0;
* zCDP (Bun & Steinke 2016, Prop. 1.4 and 1.3): ε0-DP ⇒ ρ = ε0²/2-zCDP, ρ adds up over releases,
  ε(δ) = ρ + 2√(ρ ln(1/δ));
* RDP (Mironov 2017, Prop. 1, 3 and Table II): the Laplace mechanism of ℓ1 sensitivity Δ and scale σ
  has Rényi divergence of order α > 1
  ε_α(ε0) = 1/(α−1) · ln[ α/(2α−1) e^{(α−1)ε0} + (α−1)/(2α−1) e^{−αε0} ],  ε0 = Δ/σ,
  which holds for a d-dimensional release too (Rényi divergence adds over coordinates and ε_α is
  convex with ε_α(0) = 0, hence superadditive: the worst ℓ1-bounded shift sits on one coordinate);
  R releases give R·ε_α, and ε(δ) = min_α R·ε_α + ln(1/δ)/(α−1).

The authors' experiments normalise Δ to 1, so σ = 1/ε (σ ∈ {0, 1, 2, 5} ↔ non-private, ε = 1, 0.5,
0.2); :data:`NORMALISED_SENSITIVITY` is that convention — a *nominal* ε, not a guarantee. The rigorous
Δ from :func:`sensitivity_bound` is far larger for high-dimensional data (see docs/dpsda.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NORMALISED_SENSITIVITY = 1.0
# Rényi orders searched by the RDP conversion (any order gives a valid bound; the grid only decides
# how close to the optimum the reported ε is)
RDP_ORDERS = tuple(float(1.0 + 10.0**k) for k in np.linspace(-4.0, 6.0, 401))


def laplace_noise(rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    """η ~ Lap(0, scale) i.i.d. (as the authors' rand_laplace.m); exactly zero (no draw) when ``scale == 0``."""
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


def _check_delta(delta: float) -> None:
    if not (0 < delta < 1):
        raise ValueError(f"δ must lie in (0, 1), got {delta}")


def zcdp_of_laplace(epsilon0: float) -> float:
    """ρ = ε0²/2: an ε0-DP mechanism is ρ-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    if not (epsilon0 >= 0):
        raise ValueError(f"ε0 must be ≥ 0, got {epsilon0}")
    return 0.5 * epsilon0 * epsilon0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) = ρ + 2√(ρ ln(1/δ)) for a ρ-zCDP mechanism (Bun & Steinke 2016, Prop. 1.3)."""
    _check_delta(delta)
    if not (rho >= 0):
        raise ValueError(f"ρ must be ≥ 0, got {rho}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def laplace_rdp(order: float, epsilon0: float) -> float:
    """ε_α of the Laplace mechanism with Δ/σ = ε0 (Mironov 2017, Table II), computed in log space."""
    if not (order > 1):
        raise ValueError(f"the Rényi order must be > 1, got {order}")
    if not (epsilon0 >= 0 and math.isfinite(epsilon0)):
        raise ValueError(f"ε0 must be finite and ≥ 0, got {epsilon0}")
    if epsilon0 == 0:
        return 0.0
    a = order
    log_sum = np.logaddexp(
        math.log(a / (2 * a - 1)) + (a - 1) * epsilon0, math.log((a - 1) / (2 * a - 1)) - a * epsilon0
    )
    return max(0.0, float(log_sum) / (a - 1))


def rdp_epsilon(
    epsilon0: float, releases: int, delta: float, orders: tuple[float, ...] = RDP_ORDERS
) -> tuple[float, float]:
    """(ε, best α): ε(δ) = min_α R·ε_α(ε0) + ln(1/δ)/(α−1) for R releases (Mironov 2017, Prop. 3)."""
    _check_delta(delta)
    best = (math.inf, math.nan)
    for a in orders:
        eps = float(releases * laplace_rdp(a, epsilon0) + math.log(1.0 / delta) / (a - 1))
        if eps < best[0]:
            best = (eps, a)
    return best


@dataclass(frozen=True)
class LaplaceComposition:
    """``releases`` adaptive releases, each an ε0-DP Laplace mechanism (ε0 = Δ/σ)."""

    epsilon0: float
    releases: int

    def __post_init__(self) -> None:
        if not (self.epsilon0 >= 0):
            raise ValueError(f"ε0 must be ≥ 0, got {self.epsilon0}")
        if not (isinstance(self.releases, int) and self.releases >= 0):
            raise ValueError(f"the number of releases must be an integer ≥ 0, got {self.releases!r}")

    @property
    def basic(self) -> float:
        """Pure ε = R·ε0 (δ = 0), the paper's ε̂ (Theorem 2/4)."""
        return 0.0 if self.releases == 0 else self.releases * self.epsilon0

    @property
    def rho(self) -> float:
        return self.releases * zcdp_of_laplace(self.epsilon0) if math.isfinite(self.epsilon0) else math.inf

    def zcdp(self, delta: float) -> float:
        return zcdp_epsilon(self.rho, delta) if math.isfinite(self.rho) else math.inf

    def rdp(self, delta: float) -> float:
        return (
            rdp_epsilon(self.epsilon0, self.releases, delta)[0] if math.isfinite(self.epsilon0) else math.inf
        )

    def epsilon(self, delta: float) -> float:
        """The tightest of the three sound bounds at this δ."""
        return min(self.basic, self.zcdp(delta), self.rdp(delta))

    def summary(self, delta: float) -> dict[str, float]:
        return {
            "releases": self.releases,
            "epsilon_per_release": self.epsilon0,
            "basic": self.basic,
            "rho": self.rho,
            "zcdp": self.zcdp(delta),
            "rdp": self.rdp(delta),
            "epsilon": self.epsilon(delta),
            "delta": delta,
        }


def run_privacy(
    sensitivity: float, scale: float, n_nodes: int, horizon: int
) -> dict[str, LaplaceComposition]:
    """Node and network compositions of a T = ``horizon`` step run (T−1 releases per node)."""
    if n_nodes < 1 or horizon < 1:
        raise ValueError(f"need n ≥ 1 and T ≥ 1, got n = {n_nodes}, T = {horizon}")
    eps0 = epsilon_per_step(sensitivity, scale)
    return {
        "node": LaplaceComposition(eps0, horizon - 1),
        "network": LaplaceComposition(eps0, n_nodes * (horizon - 1)),
    }


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
