"""The sparse Gaussian graphical-model (GGM) mixture of CollabDict (docs/collabdict.md; seed 000 §4, eqs. 7–16).

Pure numerical building blocks, shared by the decentralised step function
(:mod:`algorithms.collabdict.ggm`) and the centralised reference (:func:`fit_centralised`):

* :func:`log_gaussian` — ln N(x | μ_k, Λ_k^{-1}) for all x and k (precision parameterisation);
* :func:`responsibilities` — eq. (12) in the log domain (correcting a typo of the seed: mean μ_k, not m_k);
* :func:`local_statistics` — the unnormalised sufficient statistics N_k^s, m_k^s, C_k^s of eq. (13);
* :func:`update_mixing_weights` — π^s = N^s/ΣN^s (eq. 13) or the exact ℓ0-regularised update (reconstructed, docs/collabdict.md);
* :func:`optimize` — eqs. (14)–(16), with pruning of components whose N̄_k < δ;
* :func:`solve_precision` — eq. (16) through the graphical-lasso reduction (our derivation), with the
  covariance shrinkage of :class:`CovariancePrior` (a Wishart factor in the prior (8); ν = 0 is the seed's
  eq. 16) and a guaranteed positive-definite result;
* :func:`map_objective` — the global MAP objective whose monotonicity EM guarantees;
* :func:`initial_parameters` — the identical initialisation from pooled moments and a common seed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

LOG_2PI = float(np.log(2 * np.pi))


@dataclass(frozen=True)
class MixtureParameters:
    """Global parameters θ = {μ_k, Λ_k} plus the mask of components still in use (not pruned)."""

    means: np.ndarray  # (K, M)   μ_k
    precisions: np.ndarray  # (K, M, M) Λ_k
    active: np.ndarray  # (K,) bool

    @property
    def n_components(self) -> int:
        return int(self.means.shape[0])


@dataclass(frozen=True)
class CovariancePrior:
    """Shrinkage of every component's covariance towards a diagonal target (docs/collabdict.md,
    "Regularised covariance"): a Wishart factor |Λ_k|^{ν/2} exp(−(ν/2) Tr(Λ_k T)) in the prior (8), worth ν
    pseudo-rows of covariance T = diag(t). The M-step (16) then solves the graphical lasso on

        S_k = (N̄_k Σ_k + ν T)/(N̄_k + 1 + ν),   α_k = ρ/(N̄_k + 1 + ν),

    i.e. eq. (16) applied to Σ̃_k = (1 − γ_k) Σ_k + γ_k T with γ_k = ν/(N̄_k + ν) and N̄_k + ν rows. S_k has every
    eigenvalue ≥ ν·min(t)/(N̄_k + 1 + ν) > 0 however few rows the component holds (one row, n < p). ν = 0 is the
    seed's eq. (16) exactly."""

    nu: float
    target: np.ndarray  # (M,) diagonal of T, all > 0

    def __post_init__(self):
        if not self.nu >= 0:
            raise ValueError(f"shrinkage ν must be ≥ 0, got {self.nu}")
        t = np.asarray(self.target, dtype=np.float64)
        if t.ndim != 1 or not np.all(np.isfinite(t)) or (self.nu > 0 and not np.all(t > 0)):
            raise ValueError("the shrinkage target must be a vector of positive variances")


VARIANCE_FLOOR = 1e-6
"""Smallest target variance, relative to the mean variance (a constant feature still gets a proper prior)."""


def diagonal_target(V: np.ndarray) -> np.ndarray:
    """T = diag(V) of the pooled covariance, each variance floored at 1e-6 × their mean (1 if all vanish)."""
    d = np.maximum(np.diagonal(np.asarray(V, dtype=np.float64)), 0.0)
    mean = float(d.mean()) if d.size else 0.0
    if not mean > 0:
        return np.ones_like(d)
    return np.maximum(d, VARIANCE_FLOOR * mean)


def _cholesky_precisions(precisions: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(precisions)
    except np.linalg.LinAlgError:
        raise ValueError("a precision matrix Λ_k is not positive definite") from None


def log_gaussian(X: np.ndarray, means: np.ndarray, precisions: np.ndarray) -> np.ndarray:
    """ln N(x^(n) | μ_k, Λ_k^{-1}) = −(M/2) ln 2π + ½ ln|Λ_k| − ½ (x−μ_k)^T Λ_k (x−μ_k); shape (n, K)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    M = X.shape[1]
    L = _cholesky_precisions(precisions)  # Λ_k = L_k L_k^T
    logdet = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)  # ln|Λ_k|
    diff = X[:, None, :] - means[None, :, :]  # (n, K, M)
    proj = np.einsum("nkm,kml->nkl", diff, L)  # (x−μ)^T L
    quad = np.einsum("nkl,nkl->nk", proj, proj)
    return -0.5 * M * LOG_2PI + 0.5 * logdet[None, :] - 0.5 * quad


def _log_weights(pi: np.ndarray, active: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        lw = np.log(np.asarray(pi, dtype=np.float64))
    return np.where(active, lw, -np.inf)


def responsibilities(
    X: np.ndarray, pi: np.ndarray, params: MixtureParameters
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (12) in the log domain: r_k^{(n)} ∝ π_k N(x^(n)|μ_k,Λ_k^{-1}); also returns ln p(x^(n)) = ln Σ_k π_k N(..)."""
    logp_k = log_gaussian(X, params.means, params.precisions) + _log_weights(pi, params.active)[None, :]
    logp = logsumexp(logp_k, axis=1)
    with np.errstate(invalid="ignore"):
        r = np.exp(logp_k - logp[:, None])
    r = np.nan_to_num(r, nan=0.0)
    return r, logp


def local_statistics(X: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (13): N_k = Σ_n r_k^(n), m_k = Σ_n r_k^(n) x^(n), C_k = Σ_n r_k^(n) x^(n) x^(n)T (sums, not means)."""
    X = np.asarray(X, dtype=np.float64)
    N = r.sum(axis=0)
    m = r.T @ X
    C = np.einsum("nk,ni,nj->kij", r, X, X)
    return N, m, C


def update_mixing_weights(
    N: np.ndarray, active: np.ndarray, tau: float = 0.0, eps: float = 1e-8
) -> np.ndarray:
    """π^s from the local counts N_k^s.

    τ = 0: π_k = N_k / Σ_l N_l (eq. 13). τ > 0: the cardinality-regularised update (reconstructed; docs/collabdict.md)
        π = argmax_{π∈Δ, π_k ≥ ε} Σ_k N_k ln π_k − τ Σ_k 1[π_k > ε],
    solved exactly: for support size a the best support is the a largest N_k, with π_k = ε off the support
    and π_k = (1 − (K_act − a)ε) N_k / Σ_{l∈A} N_l on it; the best a is kept. Pruned components get π_k = 0.
    """
    N = np.where(active, np.maximum(np.asarray(N, dtype=np.float64), 0.0), 0.0)
    pi = np.zeros_like(N)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        raise ValueError("no active mixture component left")
    total = N[idx].sum()
    if total <= 0:
        pi[idx] = 1.0 / idx.size
        return pi
    if tau == 0:
        pi[idx] = N[idx] / total
        return pi
    if tau < 0 or not 0 < eps < 1.0 / idx.size:
        raise ValueError(f"need tau ≥ 0 and 0 < eps < 1/K, got tau={tau}, eps={eps}")
    order = idx[np.argsort(-N[idx], kind="stable")]
    K = idx.size
    best_val, best_a = -np.inf, 1
    for a in range(1, K + 1):
        if N[order[a - 1]] <= 0:
            break
        on = order[:a]
        mass = 1.0 - (K - a) * eps
        val = float(np.sum(N[on] * np.log(mass * N[on] / N[on].sum())))
        val += float(np.sum(N[order[a:]]) * np.log(eps)) - tau * a
        if val > best_val + 1e-12:
            best_val, best_a = val, a
    on, off = order[:best_a], order[best_a:]
    pi[off] = eps
    pi[on] = (1.0 - (K - best_a) * eps) * N[on] / N[on].sum()
    return pi


TAU_UNITS = ("bic", "nats")
ILL_CONDITIONED = 1e10
"""cond(S + αI) above which eq. (16) goes straight to ADMM (coordinate descent would fail or crawl)."""


def l0_penalty(tau: float, n_features: int, n_local: float, units: str = "bic") -> float:
    """The per-component cost in nats that the ℓ0 update of π^s charges (docs/collabdict.md, "ℓ0 update of π").

    ``units="nats"``: τ itself, the literal form of the objective (docs/collabdict.md, "ℓ0 update of π").
    With the floor ε_π = 1e-8, switching off a component of N_k local samples loses ≈ N_k·ln(π_k/ε_π) ≈ 18·N_k in Σ_k N_k ln π_k, so τ = 2 only removes
    components with N_k ≲ 0.1 — nothing on real data: automatic K never happens.
    ``units="bic"`` (default): τ multiplies the Bayesian-information-criterion cost of one component as seen by
    this organisation, τ·(d/2)·ln N^s with d = M + M(M+1)/2 + 1 free parameters (mean, precision, weight);
    τ = 1 is BIC's own per-component charge. On shuttle (M = 9, d = 55) τ = 2 switches off components that
    hold fewer than about 10–35 of an organisation's samples.
    """
    if units == "nats":
        return float(tau)
    if units != "bic":
        raise ValueError(f"tau units must be one of {TAU_UNITS}, got {units!r}")
    d = n_features + n_features * (n_features + 1) / 2 + 1
    return float(tau) * 0.5 * d * float(np.log(max(float(n_local), 1.0)))


def solve_precision(
    Sigma: np.ndarray,
    N_bar: float,
    rho: float,
    *,
    tol: float = 1e-6,
    max_iter: int = 100,
    enet_tol: float = 1e-10,
    warm: np.ndarray | None = None,
    prior: CovariancePrior | None = None,
) -> np.ndarray:
    """Eq. (16): Λ = argmax_{Λ≻0} b ln|Λ| − Tr(ΛΣ) − (ρ/N̄)||Λ||_1 with b = (N̄+1)/N̄ (ℓ1 over all entries).

    Graphical-lasso reduction: dividing by b, Λ = argmax ln|Λ| − Tr(Λ S) − α||Λ||_1 with
    S = N̄Σ/(N̄+1) and α = ρ/(N̄+1). Because ||Λ||_1 = Σ_{i≠j}|Λ_ij| + Tr Λ for Λ ≻ 0, this equals the
    off-diagonal-penalised glasso on S + αI (scikit-learn's ``graphical_lasso``). ρ = 0: Λ = b Σ^{-1} = S^{-1}.
    With a :class:`CovariancePrior` (ν > 0): S = (N̄Σ + νT)/(N̄+1+ν), α = ρ/(N̄+1+ν), positive definite for
    any Σ (one row, n < p).

    Coordinate descent fails on ill-conditioned S + αI (components on a handful of integer-valued rows) and
    crawls on badly scaled ones (each of its sweeps is a Python loop over the M columns; ~80 ms per call when
    it runs to 1000 sweeps, which was most of the time of small organisations' fits). So it gets ``max_iter``
    = 100 sweeps; if it fails, does not reach the dual gap ``tol`` in them, or cond(S + αI) > 1e10 (then it
    is not tried), :func:`glasso_admm` solves the same problem, warm-started from where coordinate descent
    stopped (if positive definite) or from ``warm`` (the previous EM iteration's Λ_k).
    """
    if N_bar <= 0:
        raise ValueError(f"N̄_k must be positive to solve eq. (16), got {N_bar}")
    if rho < 0:
        raise ValueError(f"rho must be ≥ 0, got {rho}")
    S, alpha = shrunk_scatter(Sigma, N_bar, rho, prior)
    if rho == 0:
        try:
            np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            raise ValueError(
                "Σ_k is singular; use rho > 0, a covariance shrinkage ν > 0 or a larger pruning threshold δ"
            ) from None
        Lam = np.linalg.inv(S)
        return 0.5 * (Lam + Lam.T)
    from sklearn.covariance import graphical_lasso  # local import: sklearn is slow to import

    if warm is not None and not _is_positive_definite(warm):
        warm = None
    emp = S + alpha * np.eye(S.shape[0])
    ev = np.linalg.eigvalsh(emp)
    if ev[0] <= 0 or ev[-1] > ILL_CONDITIONED * ev[0]:
        return _positive_definite(glasso_admm(S, alpha, warm=warm), S, alpha)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, Lam, n_iter = graphical_lasso(
                emp, alpha=alpha, tol=tol, enet_tol=enet_tol, max_iter=max_iter, return_n_iter=True
            )
    except FloatingPointError:  # coordinate descent gave up on an ill-conditioned Σ: use ADMM
        return _positive_definite(glasso_admm(S, alpha, warm=warm), S, alpha)
    Lam = 0.5 * (Lam + Lam.T)
    if n_iter >= max_iter or not _is_positive_definite(Lam):  # not converged: finish with ADMM
        Lam = glasso_admm(S, alpha, warm=Lam if _is_positive_definite(Lam) else warm)
    return _positive_definite(Lam, S, alpha)


def shrunk_scatter(
    Sigma: np.ndarray, N_bar: float, rho: float, prior: CovariancePrior | None = None
) -> tuple[np.ndarray, float]:
    """The graphical-lasso problem of eq. (16): (S, α) with S = (N̄Σ + νT)/(N̄+1+ν), α = ρ/(N̄+1+ν)
    (ν = 0 without a prior: S = N̄Σ/(N̄+1), α = ρ/(N̄+1))."""
    Sigma = 0.5 * (np.asarray(Sigma, dtype=np.float64) + np.asarray(Sigma, dtype=np.float64).T)
    S = N_bar * Sigma
    nu = 0.0
    if prior is not None and prior.nu > 0:
        nu = float(prior.nu)
        S = S + nu * np.diag(np.asarray(prior.target, dtype=np.float64))
    return S / (N_bar + 1.0 + nu), rho / (N_bar + 1.0 + nu)


def _is_positive_definite(A: np.ndarray | None) -> bool:
    if A is None or not np.all(np.isfinite(A)):
        return False
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return False
    return True


def _positive_definite(Lam: np.ndarray, S: np.ndarray, alpha: float) -> np.ndarray:
    """The solver's Λ if it is positive definite (Cholesky succeeds); else a cold-started ADMM solution; else
    (S + αI)^{-1}, the ρ-free estimate on the same loaded scatter, which is positive definite whenever S + αI
    is. Raises if even that fails (S + αI singular: only possible with ν = 0)."""
    Lam = 0.5 * (Lam + Lam.T)
    if _is_positive_definite(Lam):
        return Lam
    Lam = glasso_admm(S, alpha)
    if _is_positive_definite(Lam):
        return Lam
    emp = S + alpha * np.eye(S.shape[0])
    if _is_positive_definite(emp):
        Lam = np.linalg.inv(emp)
        Lam = 0.5 * (Lam + Lam.T)
        if _is_positive_definite(Lam):
            return Lam
    raise ValueError(
        "eq. (16) has no positive-definite solution for this component (singular scatter); "
        "use a covariance shrinkage ν > 0"
    )


def glasso_admm(
    S: np.ndarray,
    alpha: float,
    *,
    warm: np.ndarray | None = None,
    rel_tol: float = 1e-9,
    max_iter: int = 5000,
) -> np.ndarray:
    """argmax_{Λ≻0} ln|Λ| − Tr(ΛS) − α||Λ||_1 (all entries penalised) by ADMM: one problem of
    :func:`glasso_admm_batch`. Robust for ill-conditioned S (e.g. components fitted to a handful of
    integer-valued rows): every iterate Θ is positive definite."""
    S = np.asarray(S, dtype=np.float64)
    return glasso_admm_batch(
        S[None],
        np.array([float(alpha)]),
        None if warm is None else np.asarray(warm)[None],
        rel_tol=rel_tol,
        max_iter=max_iter,
    )[0]


def glasso_admm_batch(
    S: np.ndarray,
    alpha: np.ndarray,
    warm: np.ndarray | None = None,
    *,
    rel_tol: float = 1e-9,
    max_iter: int = 5000,
    return_iterations: bool = False,
):
    """K independent problems argmax_{Λ_k≻0} ln|Λ_k| − Tr(Λ_k S_k) − α_k||Λ_k||_1 by ADMM (Boyd et al. 2011,
    §6.5, with residual balancing of the penalty, §3.4.1), vectorised over k (one batched symmetric
    eigen-decomposition per iteration for all components still running).

    ``warm`` (K, M, M): the previous EM iteration's Λ_k. The primal variable starts there, the scaled dual at
    the KKT estimate clip(Λ_k^{-1} − S_k, ±α_k)/p, and the penalty at p = 1/mean(diag Λ_k)² (the scale that
    balances the log-det and quadratic terms). EM moves Λ_k little between iterations, so a warm start
    needs a few dozen iterations instead of hundreds. Each problem stops on its own residuals, so its
    result does not depend on the other problems in the batch. Stops when ||Θ_k − Z_k|| and the step of Z_k are
    both ≤ rel_tol·||Θ_k||. Returns (K, M, M) positive definite Θ_k (and the iterations each took).
    """
    S = np.asarray(S, dtype=np.float64)
    K, M, _ = S.shape
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (K,)).copy()
    if warm is None:
        Z = np.repeat(np.eye(M)[None], K, axis=0)
        pen = 1.0 / np.maximum(np.abs(S).max(axis=(1, 2)), 1e-12)
        U = np.zeros((K, M, M))  # scaled dual variable
    else:
        Z = 0.5 * (np.asarray(warm, dtype=np.float64) + np.swapaxes(warm, 1, 2))
        diag = np.abs(np.diagonal(Z, axis1=1, axis2=2)).mean(axis=1)
        pen = 1.0 / np.maximum(diag, 1e-150) ** 2
        G = np.linalg.inv(Z) - S
        U = np.clip(G, -alpha[:, None, None], alpha[:, None, None]) / pen[:, None, None]
    Theta = Z.copy()
    live = np.ones(K, dtype=bool)
    iterations = np.zeros(K, dtype=np.int64)
    for _ in range(max_iter):
        idx = np.flatnonzero(live)
        if idx.size == 0:
            break
        p = pen[idx]
        e, Q = np.linalg.eigh(p[:, None, None] * (Z[idx] - U[idx]) - S[idx])
        root = np.sqrt(e * e + 4 * p[:, None])
        # θ = (e + √(e²+4p))/(2p), written without cancellation for e ≪ 0 (very ill-conditioned S)
        theta = np.where(e >= 0, (e + root) / (2 * p[:, None]), 2.0 / np.maximum(root - e, 1e-300))
        T = (Q * theta[:, None, :]) @ np.swapaxes(Q, 1, 2)
        A = T + U[idx]
        Zn = np.sign(A) * np.maximum(np.abs(A) - (alpha[idx] / p)[:, None, None], 0.0)
        Un = U[idx] + T - Zn
        r = np.linalg.norm(T - Zn, axis=(1, 2))  # primal residual
        d = p * np.linalg.norm(Zn - Z[idx], axis=(1, 2))  # dual residual
        scale = np.maximum(
            np.maximum(np.linalg.norm(T, axis=(1, 2)), np.linalg.norm(Zn, axis=(1, 2))), 1e-300
        )
        Theta[idx], Z[idx], U[idx] = T, Zn, Un
        iterations[idx] += 1
        done = (r <= rel_tol * scale) & (d <= rel_tol * scale * p)  # ||Θ − Z||, ||ΔZ|| ≤ tol·||Θ||
        live[idx[done]] = False
        up = idx[(r > 10 * d) & ~done]
        down = idx[(d > 10 * r) & ~done]
        pen[up] *= 2.0
        U[up] /= 2.0
        pen[down] /= 2.0
        U[down] *= 2.0
    Theta = 0.5 * (Theta + np.swapaxes(Theta, 1, 2))
    return (Theta, iterations) if return_iterations else Theta


def precision_objective(
    Lam: np.ndarray, Sigma: np.ndarray, N_bar: float, rho: float, prior: CovariancePrior | None = None
) -> float:
    """The function maximised in eq. (16) (with the Wishart term of ``prior``, divided by N̄), for checking
    solutions: ((N̄+1+ν)/N̄) ln|Λ| − Tr(Λ(Σ + (ν/N̄)T)) − (ρ/N̄)||Λ||_1."""
    sign, logdet = np.linalg.slogdet(Lam)
    if sign <= 0:
        return -np.inf
    S, alpha = shrunk_scatter(Sigma, N_bar, rho, prior)
    c = (N_bar + 1.0 + (0.0 if prior is None else prior.nu)) / N_bar
    return float(c * (logdet - np.trace(Lam @ S) - alpha * np.abs(Lam).sum()))


def optimize(
    N_bar: np.ndarray,
    m_sum: np.ndarray,
    C_sum: np.ndarray,
    previous: MixtureParameters,
    m0: np.ndarray,
    lam0: float,
    rho: float,
    delta: float = 1.0,
    prior: CovariancePrior | None = None,
) -> MixtureParameters:
    """Eqs. (14)–(16) from the aggregated sums Σ_s N_k^s, Σ_s m_k^s, Σ_s C_k^s (with ``prior``: the
    regularised covariance of :class:`CovariancePrior` in (16)).

    Components with N̄_k < δ are pruned (Theorem 1's assumption) and keep their previous values.
        m̄_k = m_sum/N̄_k,  C̄_k = C_sum/N̄_k                                         (14)
        μ_k = (λ_0 m_0 + N̄_k m̄_k)/(λ_0 + N̄_k)                                      (15)
        Σ_k = C̄_k − m̄_k m̄_k^T + λ_0/(λ_0+N̄_k) (m̄_k − m_0)(m̄_k − m_0)^T,  Λ_k by (16)
    The previous Λ_k warm-starts the ADMM fallback of (16) (:func:`solve_precisions`).
    """
    active = previous.active & (np.asarray(N_bar) >= delta) & (np.asarray(N_bar) > 0)
    if not active.any():
        raise ValueError(f"every mixture component has N̄_k < δ = {delta}")
    means = previous.means.copy()
    precisions = previous.precisions.copy()
    ks = np.flatnonzero(active)
    sigmas = []
    for k in ks:
        n = float(N_bar[k])
        mbar = m_sum[k] / n
        Cbar = C_sum[k] / n
        means[k] = (lam0 * m0 + n * mbar) / (lam0 + n)
        d = mbar - m0
        sigmas.append(Cbar - np.outer(mbar, mbar) + lam0 / (lam0 + n) * np.outer(d, d))
    precisions[ks] = solve_precisions(
        np.stack(sigmas),
        np.asarray(N_bar, dtype=np.float64)[ks],
        rho,
        warm=previous.precisions[ks],
        prior=prior,
    )
    return MixtureParameters(means=means, precisions=precisions, active=active)


def solve_precisions(
    Sigmas: np.ndarray,
    N_bars: np.ndarray,
    rho: float,
    warm: np.ndarray | None = None,
    prior: CovariancePrior | None = None,
) -> np.ndarray:
    """Eq. (16) for several components: :func:`solve_precision` for each, with the previous Λ_k (``warm``) as
    the warm start of the ADMM fallback."""
    return np.stack(
        [
            solve_precision(Sg, float(n), rho, warm=None if warm is None else warm[i], prior=prior)
            for i, (Sg, n) in enumerate(zip(Sigmas, np.asarray(N_bars, dtype=np.float64)))
        ]
    )


def log_prior(
    params: MixtureParameters, m0: np.ndarray, lam0: float, rho: float, prior: CovariancePrior | None = None
) -> float:
    """Σ_k [ln N(μ_k | m_0, (λ_0 Λ_k)^{-1}) − (ρ/2)||Λ_k||_1] over active components (eqs. 8–9), plus the
    Wishart term (ν/2)(ln|Λ_k| − Tr(Λ_k T)) of the covariance ``prior`` (up to a constant)."""
    total = 0.0
    for k in np.flatnonzero(params.active):
        lg = log_gaussian(m0[None, :], params.means[k : k + 1], lam0 * params.precisions[k : k + 1])[0, 0]
        total += float(lg) - 0.5 * rho * float(np.abs(params.precisions[k]).sum())
        if prior is not None and prior.nu > 0:
            _, logdet = np.linalg.slogdet(params.precisions[k])
            trace = float(np.diagonal(params.precisions[k]) @ np.asarray(prior.target))
            total += 0.5 * prior.nu * (float(logdet) - trace)
    return total


def map_objective(
    loglik_total: float,
    params: MixtureParameters,
    m0: np.ndarray,
    lam0: float,
    rho: float,
    prior: CovariancePrior | None = None,
) -> float:
    """Global MAP objective Σ_s Σ_n ln Σ_k π_k^s N(x|μ_k,Λ_k^{-1}) + log prior (non-decreasing under EM when τ = 0)."""
    return float(loglik_total) + log_prior(params, m0, lam0, rho, prior)


def pooled_moments(n: float, sum_x: np.ndarray, sum_xx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pooled mean x̄ and covariance V from aggregated (N, Σx, Σxx^T)."""
    if n <= 1:
        raise ValueError(f"need more than one sample in total, got {n}")
    xbar = sum_x / n
    V = sum_xx / n - np.outer(xbar, xbar)
    return xbar, 0.5 * (V + V.T)


def initial_parameters(
    xbar: np.ndarray,
    V: np.ndarray,
    K: int,
    rng: np.random.Generator,
    precision: str = "pooled",
    shrinkage: tuple[float, float] | None = None,
) -> MixtureParameters:
    """Identical initialisation at all participants (our choice): μ_k = x̄ + chol(V) ζ_k, ζ_k ~ N(0, I)
    from a common seed; Λ_k = V^{-1} (``precision="pooled"``) or I_M (``"identity"``).

    ``shrinkage=(n, ν)``: V is first shrunk like a component's covariance (:class:`CovariancePrior`),
    V ← (nV + ν diag_target(V))/(n + ν), so that a pooled V of fewer rows than features (a member alone)
    still gives a finite, positive-definite Λ_k (otherwise ≈ 1e9 in V's null space)."""
    if K < 1:
        raise ValueError(f"number of components must be ≥ 1, got {K}")
    M = xbar.shape[0]
    if shrinkage is not None and shrinkage[1] > 0:
        n, nu = shrinkage
        V = (n * V + nu * np.diag(diagonal_target(V))) / (n + nu)
    jitter = 1e-9 * max(float(np.trace(V)) / M, 1e-12)
    Vj = V + jitter * np.eye(M)
    Lc = np.linalg.cholesky(Vj)
    zeta = rng.standard_normal((K, M))
    means = xbar[None, :] + zeta @ Lc.T
    if precision == "pooled":
        P = np.linalg.inv(Vj)
        P = 0.5 * (P + P.T)
    elif precision == "identity":
        P = np.eye(M)
    else:
        raise ValueError(f"initial precision must be 'pooled' or 'identity', got {precision!r}")
    return MixtureParameters(means=means, precisions=np.repeat(P[None], K, axis=0), active=np.ones(K, bool))
