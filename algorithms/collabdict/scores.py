"""Anomaly scores of the CollabDict GGM mixture (ALGORITHMS.md §2.3; seed 000 eqs. 17–20)."""

from __future__ import annotations

import numpy as np

from algorithms.collabdict.mixture import MixtureParameters, log_gaussian, responsibilities


def mixture_log_density(X: np.ndarray, pi: np.ndarray, params: MixtureParameters) -> np.ndarray:
    """ln p^s(x) = ln Σ_k π_k^s N(x | μ_k, Λ_k^{-1}) for each row of X."""
    _, logp = responsibilities(X, pi, params)
    return logp


def ggm_anomaly_score(X: np.ndarray, pi: np.ndarray, params: MixtureParameters) -> np.ndarray:
    """Eq. (20): a^s(x) = −Σ_k r_k^s(x) ln N(x | μ_k, Λ_k^{-1}), with r^s(x) from eq. (18) [SEED-FIX μ_k].

    Identity (§2.3): a^s(x) = −ln p^s(x) − KL(r^s(x) || π^s) ≤ −ln p^s(x). Higher = more anomalous.
    """
    r, _ = responsibilities(X, pi, params)
    lg = log_gaussian(X, params.means, params.precisions)
    lg = np.where(params.active[None, :], lg, 0.0)
    return -(r * lg).sum(axis=1)
