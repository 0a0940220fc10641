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
from functools import lru_cache

import numpy as np
from scipy import special

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


# -- the Gaussian mode: example-level adjacency, ℓ2 sensitivity, RDP / GDP accounting ---------------
#
# docs/dpsda.md "The Gaussian mode". One mechanism invocation is one time step of the whole network: the
# n nodes' noisy clipped block gradients (ĝ_1 + ξ_1, …, ĝ_n + ξ_n) ∈ R^m, ξ_i ~ N(0, s² I_d), with ℓ2
# sensitivity Δ₂ over the concatenation; its noise multiplier is z = s/Δ₂. With Poisson sampling at
# rate q it is the sampled Gaussian mechanism (SGM) of Mironov, Talwar & Zhang 2019.

# Rényi orders of the SGM accountant: fractional ones near 1 (large ε), integers up to 256 (small ε).
GAUSSIAN_RDP_ORDERS = tuple(
    sorted(
        {1.0 + x / 10.0 for x in range(1, 50)} | {float(a) for a in range(6, 65)} | {80.0, 96.0, 128.0, 256.0}
    )
)
_SERIES_CHUNK = 256
_SERIES_MAX_TERMS = 1 << 18
_SERIES_TOLERANCE = -30.0  # stop when a chunk's largest term is below e^-30 times the largest term so far


def gaussian_noise(rng: np.random.Generator, std: float, size: int) -> np.ndarray:
    """ξ ~ N(0, std² I); exactly zero (no draw) when ``std == 0``."""
    if not (std >= 0 and math.isfinite(std)):
        raise ValueError(f"the Gaussian noise std must be finite and ≥ 0, got {std}")
    if std == 0:
        return np.zeros(size)
    return std * rng.standard_normal(size)


def gaussian_sensitivity(n_nodes: int, gradient_bound: float, batch_size: int, sampling: str) -> float:
    """Δ₂ of one network step: the ℓ2 change of the n concatenated clipped block means when one example
    changes (docs/dpsda.md, eq. (G2)). Each node clips every example's block gradient to ‖·‖₂ ≤ L̂ and
    divides the sum by the public b = ``batch_size``; one example then moves each block by ≤ c·L̂/b and
    the concatenation by ≤ √n·c·L̂/b, with c = 2 for a stream (one row replaced) and c = 1 for Poisson
    sampling (one example added or removed)."""
    if n_nodes < 1 or batch_size < 1:
        raise ValueError(f"need n ≥ 1 and b ≥ 1, got n = {n_nodes}, b = {batch_size}")
    if not (gradient_bound > 0 and math.isfinite(gradient_bound)):
        raise ValueError(f"the gradient bound L̂ must be positive and finite, got {gradient_bound}")
    factors = {"stream": 2.0, "poisson": 1.0}
    if sampling not in factors:
        raise ValueError(f"sampling must be one of {tuple(factors)}, got {sampling!r}")
    return math.sqrt(n_nodes) * factors[sampling] * gradient_bound / batch_size


def _check_gaussian(order: float, sampling_rate: float, noise_multiplier: float) -> None:
    if not (order > 1 and math.isfinite(order)):
        raise ValueError(f"the Rényi order must be finite and > 1, got {order}")
    if not (0 <= sampling_rate <= 1):
        raise ValueError(f"the sampling rate q must lie in [0, 1], got {sampling_rate}")
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"the noise multiplier must be finite and ≥ 0, got {noise_multiplier}")


def gaussian_rdp(order: float, noise_multiplier: float) -> float:
    """ε_α = α/(2z²) of the Gaussian mechanism with noise multiplier z (Mironov 2017, Prop. 7)."""
    _check_gaussian(order, 1.0, noise_multiplier)
    return math.inf if noise_multiplier == 0 else order / (2.0 * noise_multiplier**2)


def _log_a_integer(q: float, z: float, order: int) -> float:
    """log A_α for an integer α: A_α = Σ_k C(α,k) (1−q)^{α−k} q^k e^{(k²−k)/(2z²)} (binomial expansion of
    E_{x~N(0,z²)}[((1−q) + q e^{(2x−1)/(2z²)})^α]; every term positive)."""
    k = np.arange(order + 1, dtype=np.float64)
    log_binom = special.gammaln(order + 1.0) - special.gammaln(k + 1.0) - special.gammaln(order - k + 1.0)
    terms = log_binom + (order - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2.0 * z * z)
    return float(special.logsumexp(terms))


def _log_a_fractional(q: float, z: float, order: float) -> float:
    """log A_α for a fractional α (Mironov, Talwar & Zhang 2019, §3.3): split the expectation at
    x₀ = z² ln(1/q − 1) + ½, where q e^{(2x−1)/(2z²)} = 1 − q, and expand ((1−q) + q r)^α on each side
    in the binomial series of its smaller term:

        A_α = Σ_i C(α,i) (1−q)^{α−i} q^i e^{(i²−i)/(2z²)} Φ((x₀ − i)/z)
            + Σ_i C(α,i) q^{α−i} (1−q)^i e^{((α−i)²−(α−i))/(2z²)} Φ((α − i − x₀)/z).

    The generalised binomial coefficients alternate in sign beyond i > α; positive and negative terms
    are summed separately in log space. Returns +inf (no bound, never chosen) if the series has not
    converged after 2^18 terms."""
    s2 = 2.0 * z * z
    x0 = z * z * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1q = math.log(q), math.log1p(-q)
    log_gamma_a = special.gammaln(order + 1.0)
    positive: list[np.ndarray] = []
    negative: list[np.ndarray] = []
    largest = -math.inf
    for start in range(0, _SERIES_MAX_TERMS, _SERIES_CHUNK):
        i = np.arange(start, start + _SERIES_CHUNK, dtype=np.float64)
        j = order - i
        log_coef = log_gamma_a - special.gammaln(i + 1.0) - special.gammaln(j + 1.0)
        sign = special.gammasgn(j + 1.0)
        t1 = log_coef + j * log_1q + i * log_q + (i * i - i) / s2 + special.log_ndtr((x0 - i) / z)
        t2 = log_coef + j * log_q + i * log_1q + (j * j - j) / s2 + special.log_ndtr((j - x0) / z)
        terms = np.concatenate([t1, t2])
        signs = np.concatenate([sign, sign])
        positive.append(terms[signs > 0])
        negative.append(terms[signs < 0])
        chunk_max = float(np.max(terms))
        largest = max(largest, chunk_max)
        if start > order and chunk_max < largest + _SERIES_TOLERANCE:
            pos = float(special.logsumexp(np.concatenate(positive)))
            neg = (
                float(special.logsumexp(np.concatenate(negative)))
                if any(a.size for a in negative)
                else -math.inf
            )
            if neg >= pos:
                return math.inf
            return pos + math.log1p(-math.exp(neg - pos))
    return math.inf


def sampled_gaussian_rdp(order: float, sampling_rate: float, noise_multiplier: float) -> float:
    """ε_α of the sampled Gaussian mechanism (Poisson rate q, noise multiplier z) under add/remove-one
    adjacency: ε_α = ln(A_α)/(α−1), A_α = E_{x~μ0}[(μ(x)/μ0(x))^α], μ0 = N(0, z²), μ = (1−q)μ0 + q N(1, z²)
    (Mironov, Talwar & Zhang 2019, §3; the other direction D_α(μ0‖μ) is never larger, their Theorem 5).
    q = 1 is the Gaussian mechanism α/(2z²); q = 0 releases nothing about the data."""
    _check_gaussian(order, sampling_rate, noise_multiplier)
    if sampling_rate == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    if sampling_rate == 1:
        return gaussian_rdp(order, noise_multiplier)
    if float(order).is_integer():
        log_a = _log_a_integer(sampling_rate, noise_multiplier, int(order))
    else:
        log_a = _log_a_fractional(sampling_rate, noise_multiplier, order)
    return max(0.0, log_a / (order - 1.0))


@lru_cache(maxsize=256)
def _one_release_curve(
    sampling_rate: float, noise_multiplier: float, orders: tuple[float, ...]
) -> tuple[float, ...]:
    return tuple(sampled_gaussian_rdp(a, sampling_rate, noise_multiplier) for a in orders)


def rdp_to_epsilon(
    orders: tuple[float, ...] | list[float],
    rdp: tuple[float, ...] | list[float],
    delta: float,
    conversion: str = "improved",
) -> tuple[float, float]:
    """(ε, best α) of a mechanism that is (α, rdp[α])-RDP for every given order.

    * ``"improved"`` (default): ε = ε_α + ln((α−1)/α) − (ln δ + ln α)/(α−1)  (Balle, Barthe, Gaboardi,
      Hsu & Sato 2020, Thm. 21; Canonne, Kamath & Steinke 2020, Prop. 12);
    * ``"standard"``: ε = ε_α + ln(1/δ)/(α−1)  (Mironov 2017, Prop. 3; what Abadi et al.'s moments
      accountant computes).

    Both are sound for every order; the minimum over the orders is reported (clipped at 0)."""
    _check_delta(delta)
    if len(orders) != len(rdp) or not orders:
        raise ValueError("need one RDP value per order, and at least one order")
    if conversion not in ("improved", "standard"):
        raise ValueError(f"conversion must be 'improved' or 'standard', got {conversion!r}")
    best = (math.inf, math.nan)
    for a, e in zip(orders, rdp):
        if not (a > 1):
            raise ValueError(f"Rényi orders must be > 1, got {a}")
        if not math.isfinite(e):
            continue
        if conversion == "improved":
            eps = e + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        else:
            eps = e + math.log(1.0 / delta) / (a - 1.0)
        if eps < best[0]:
            best = (eps, a)
    return (max(0.0, best[0]), best[1])


def gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of a μ-GDP mechanism, exact: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm. 8;
    Dong, Roth & Su 2022, Cor. 2.13)."""
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"μ must be positive and finite, got {mu}")
    if not (epsilon >= 0):
        raise ValueError(f"ε must be ≥ 0, got {epsilon}")
    first = special.log_ndtr(-epsilon / mu + mu / 2.0)
    second = epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0)
    if second >= first:
        return 0.0
    return float(math.exp(first) * -math.expm1(second - first))


@lru_cache(maxsize=256)
def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact ε at which a μ-GDP mechanism is (ε, δ)-DP (bisection of :func:`gaussian_delta`, to 1e-10
    relative, rounded up so that the result is never below the exact value)."""
    _check_delta(delta)
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gaussian_delta(mu, hi) > delta:
        hi *= 2.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class GaussianComposition:
    """``releases`` adaptive invocations of the (sampled) Gaussian mechanism that can each involve one
    individual, with noise multiplier z and Poisson rate q (1 = no sampling), plus optionally one more
    unsampled Gaussian release of the same data, ``additional_mu``-GDP (e.g. a private preprocessing
    statistic such as a noisy pixel mean).

    ε(δ) is the tightest sound bound: for q = 1 the exact one (Gaussian releases compose exactly:
    R releases of multiplier z and one μ_a-GDP release are √(R/z² + μ_a²)-GDP; Dong, Roth & Su 2022,
    Cor. 3.3); for q < 1 the RDP curve R·ε_α(q, z) + α μ_a²/2 over :data:`GAUSSIAN_RDP_ORDERS`, converted
    with the improved conversion. ρ = R/(2z²) + μ_a²/2 is a zCDP bound in both cases (subsampling never
    raises the Rényi divergence)."""

    noise_multiplier: float
    releases: int
    sampling_rate: float = 1.0
    additional_mu: float = 0.0

    def __post_init__(self) -> None:
        _check_gaussian(2.0, self.sampling_rate, self.noise_multiplier)
        if not (isinstance(self.releases, int) and self.releases >= 0):
            raise ValueError(f"the number of releases must be an integer ≥ 0, got {self.releases!r}")
        if not (self.additional_mu >= 0 and math.isfinite(self.additional_mu)):
            raise ValueError(f"additional_mu must be finite and ≥ 0, got {self.additional_mu}")

    @property
    def sampled_releases(self) -> int:
        """Releases that touch the data at all (none when q = 0)."""
        return 0 if self.sampling_rate == 0 else self.releases

    @property
    def mu(self) -> float:
        """μ of the composition as GDP (q = 1 only): √(R/z² + μ_a²)."""
        if self.sampling_rate != 1:
            raise ValueError("only an unsampled composition is exactly Gaussian")
        if self.releases and self.noise_multiplier == 0:
            return math.inf
        steps = self.releases / self.noise_multiplier**2 if self.releases else 0.0
        return math.sqrt(steps + self.additional_mu**2)

    @property
    def rho(self) -> float:
        if self.sampled_releases and self.noise_multiplier == 0:
            return math.inf
        steps = self.sampled_releases / (2.0 * self.noise_multiplier**2) if self.sampled_releases else 0.0
        return steps + self.additional_mu**2 / 2.0

    def rdp_curve(self, orders: tuple[float, ...] = GAUSSIAN_RDP_ORDERS) -> list[float]:
        """R·ε_α + α μ_a²/2 for every order (the one-release curve is computed once per (q, z, orders)
        and cached)."""
        extra = [a * self.additional_mu**2 / 2.0 for a in orders]
        if not self.sampled_releases:
            return extra
        one = _one_release_curve(self.sampling_rate, self.noise_multiplier, tuple(orders))
        return [self.releases * e + x for e, x in zip(one, extra)]

    def rdp(self, delta: float, orders: tuple[float, ...] = GAUSSIAN_RDP_ORDERS) -> tuple[float, float]:
        """(ε, α) from the RDP curve with the improved conversion."""
        if self.rho == 0:
            _check_delta(delta)
            return (0.0, math.nan)
        return rdp_to_epsilon(orders, self.rdp_curve(orders), delta)

    def zcdp(self, delta: float) -> float:
        return zcdp_epsilon(self.rho, delta) if math.isfinite(self.rho) else math.inf

    def epsilon(self, delta: float) -> float:
        """The tightest of the bounds above at this δ (+inf for an unprotected release, 0 for none)."""
        _check_delta(delta)
        if self.rho == 0:
            return 0.0
        if not math.isfinite(self.rho):
            return math.inf
        if self.sampling_rate == 1:
            return gaussian_epsilon(self.mu, delta)
        return min(self.rdp(delta)[0], self.zcdp(delta))

    def summary(self, delta: float) -> dict[str, float]:
        eps_rdp, order = self.rdp(delta)
        return {
            "releases": self.releases,
            "noise_multiplier": self.noise_multiplier,
            "sampling_rate": self.sampling_rate,
            "additional_mu": self.additional_mu,
            "rho": self.rho,
            "zcdp": self.zcdp(delta),
            "rdp": eps_rdp,
            "rdp_order": order,
            "epsilon": self.epsilon(delta),
            "delta": delta,
        }


def noise_multiplier_for(
    epsilon: float,
    delta: float,
    releases: int,
    sampling_rate: float = 1.0,
    additional_mu: float = 0.0,
    tolerance: float = 1e-6,
) -> float:
    """The smallest z (to ``tolerance`` relative, on the safe side: the returned z meets the target) with
    GaussianComposition(z, releases, sampling_rate, additional_mu).epsilon(delta) ≤ ε."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"ε must be positive and finite, got {epsilon}")
    if releases < 1:
        raise ValueError(f"need at least one release, got {releases}")

    def spent(z: float) -> float:
        return GaussianComposition(z, releases, sampling_rate, additional_mu).epsilon(delta)

    if GaussianComposition(1.0, 0, sampling_rate, additional_mu).epsilon(delta) >= epsilon:
        raise ValueError(f"the additional release alone spends ε ≥ {epsilon}")
    lo, hi = 1e-3, 1.0
    while spent(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e8:
            raise ValueError(f"no noise multiplier ≤ 1e8 reaches ε = {epsilon}")
    while spent(lo) <= epsilon and lo > 1e-6:
        hi, lo = lo, lo / 2.0
    while hi - lo > tolerance * hi:
        mid = 0.5 * (lo + hi)
        if spent(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi
