"""Privacy analysis of the CollabDict GGM (docs/collabdict.md; seed 000 §6, eqs. 41–48, App. A–B).

External privacy: the released posterior q(μ_k | Λ_k) = N(μ_k | w_k, (λ_k Λ_k)^{-1}), λ_k = λ_0 + N̄_k (eq. 42),
is (1, ε)-Rényi differentially private with ε = K B R² / (2 λ_0) (Theorem 1, eq. 46), B ≥ max_k ||Λ_k||_2.
Internal privacy: the entropy ℓ-diversity monitor E^s (eqs. 47–48).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import logsumexp

from algorithms.collabdict.mixture import MixtureParameters, log_gaussian, responsibilities


def renyi_dp_epsilon(n_components: int, B: float, R: float, lam0: float) -> float:
    """Theorem 1, eq. (46): ε = K B R² / (2 λ_0) for order-1 Rényi DP (KL) of the released posteriors."""
    if n_components < 1:
        raise ValueError(f"K must be ≥ 1, got {n_components}")
    if B < 0 or R < 0:
        raise ValueError("B and R must be non-negative")
    if lam0 <= 0:
        raise ValueError(f"Theorem 1 needs λ_0 > 0, got {lam0}")
    return n_components * B * R * R / (2.0 * lam0)


def empirical_precision_bound(params: MixtureParameters) -> float:
    """B_emp = max_k ||Λ_k||_2 over active components (spectral norm)."""
    return float(max(np.linalg.eigvalsh(params.precisions[k])[-1] for k in np.flatnonzero(params.active)))


def appendix_b_precision_bound(
    Sigma: np.ndarray, N_bar: float, M: int, delta: float, rho: float, S: int, N_max: int
) -> float:
    """Appendix B (Theorem 2) bound on ||Λ_k||_2 for one component (seed 000; (B.7)
    prints 1 + d/c, the surrounding text shows it must be 1 + h/c).

    The largest root t ≥ (1 + h/c) b of g(t) = t − (1 + h/c) b ln t − (1 + h/c) f(I_M), with
    b = M(1 + 1/δ), c = ρ/(S max_s N^s), h = max_ij |[Σ_k − I_M]_ij|, f(I_M) = Tr(Σ_k) + ρ M / N̄_k.
    """
    if rho <= 0 or delta <= 0 or N_bar <= 0:
        raise ValueError("the Appendix-B bound needs rho > 0, delta > 0 and N̄_k > 0")
    b = M * (1.0 + 1.0 / delta)
    c = rho / (S * N_max)
    h = float(np.abs(Sigma - np.eye(M)).max())
    a = (1.0 + h / c) * b
    fI = float(np.trace(Sigma)) + rho * M / N_bar
    coef = (1.0 + h / c) * fI

    def g(t: float) -> float:
        return t - a * math.log(t) - coef

    if g(a) >= 0:  # g is convex with minimum at t = a: no root beyond a, the bound is a itself
        return a
    hi = 2.0 * a
    while g(hi) < 0:
        hi *= 2.0
    return float(brentq(g, a, hi, xtol=1e-12 * hi, rtol=1e-14, maxiter=500))


def release_divergence(
    r_changed: np.ndarray,
    x: np.ndarray,
    x_tilde: np.ndarray,
    N_bar: np.ndarray,
    params: MixtureParameters,
    lam0: float,
) -> float:
    """KL between the released posteriors for D and D̃ differing in one sample x → x̃ (eqs. 43–44),
    with responsibilities r_k of that sample and Λ_k held fixed:
        Σ_k ½ λ_k (w_k − w̃_k)^T Λ_k (w_k − w̃_k),  w_k − w̃_k = r_k (x − x̃) / λ_k,  λ_k = λ_0 + N̄_k."""
    total = 0.0
    d = np.asarray(x, float) - np.asarray(x_tilde, float)
    for k in np.flatnonzero(params.active):
        lam_k = lam0 + float(N_bar[k])
        dw = r_changed[k] * d / lam_k
        total += 0.5 * lam_k * float(dw @ params.precisions[k] @ dw)
    return total


def entropy_l_diversity(
    X: np.ndarray,
    params: MixtureParameters,
    pi: np.ndarray | None = None,
    reduce: str = "max",
    variant: str = "density",
) -> float:
    """The entropy ℓ-diversity monitor E^s (eqs. 47–48), in the log domain.

    ``variant="density"`` (eq. 47 as printed, SEED-FIX μ_k): g_k(n) = N(x^(n)|μ_k,Λ_k^{-1}) / Σ_m N(x^(m)|μ_k,Λ_k^{-1}).
    ``variant="responsibility"``: g_k(n) = r_k^(n)/N_k, the weights that actually enter m_k (needs ``pi``).
    E^s = max_k H(g_k) (eq. 48, ``reduce="max"``) or the conservative min_k (``reduce="min"``); 0 ≤ E^s ≤ ln N^s.
    An alarm is due when E^s < ln ℓ_0.
    """
    if reduce not in ("max", "min"):
        raise ValueError(f"reduce must be 'max' or 'min', got {reduce!r}")
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if variant == "density":
        logw = log_gaussian(X, params.means, params.precisions)
    elif variant == "responsibility":
        if pi is None:
            raise ValueError("the responsibility variant needs the mixing weights pi")
        r, _ = responsibilities(X, pi, params)
        with np.errstate(divide="ignore"):
            logw = np.log(r)
    else:
        raise ValueError(f"variant must be 'density' or 'responsibility', got {variant!r}")
    entropies = []
    for k in np.flatnonzero(params.active):
        lw = logw[:, k]
        if not np.isfinite(lw).any():
            continue
        logg = lw - logsumexp(lw)
        g = np.exp(logg)
        h = -float(np.sum(np.where(g > 0, g * logg, 0.0)))
        entropies.append(h)
    if not entropies:
        return 0.0
    return max(entropies) if reduce == "max" else min(entropies)
