"""Anomaly scores of the CollabDict GGM mixture (docs/collabdict.md; seed 000 eqs. 17–20).

Two scores, reported side by side:

* ``"eq20"`` — the seed's a^s(x) = −Σ_k r_k^s(x) ln N(x | μ_k, Λ_k^{-1}) (eq. 20), the paper's score;
* ``"nll"`` — the negative log-likelihood −ln p^s(x) = −ln Σ_k π_k^s N(x | μ_k, Λ_k^{-1}).

They differ by the KL term: a^s(x) = −ln p^s(x) − KL(r^s(x) ‖ π^s), so eq. (20) drops the ln π_k^s penalty.
A point captured by a component with a small weight π_k (e.g. a component fitted to the anomalies
themselves) gets a small eq.-20 score — it is well explained by *its* Gaussian — while −ln p^s(x) still
charges it −ln π_k.
"""

from __future__ import annotations

import numpy as np

from algorithms.collabdict.mixture import MixtureParameters, log_gaussian, responsibilities


def mixture_log_density(X: np.ndarray, pi: np.ndarray, params: MixtureParameters) -> np.ndarray:
    """ln p^s(x) = ln Σ_k π_k^s N(x | μ_k, Λ_k^{-1}) for each row of X."""
    _, logp = responsibilities(X, pi, params)
    return logp


SCORES = ("eq20", "nll")


def negative_log_likelihood_score(X: np.ndarray, pi: np.ndarray, params: MixtureParameters) -> np.ndarray:
    """−ln p^s(x): the mixture's negative log density (the score eq. 20 lower-bounds). Higher = more anomalous."""
    return -mixture_log_density(X, pi, params)


def anomaly_score(X: np.ndarray, pi: np.ndarray, params: MixtureParameters, kind: str = "eq20") -> np.ndarray:
    """The score named ``kind``: ``"eq20"`` (:func:`ggm_anomaly_score`) or ``"nll"`` (−ln p^s(x))."""
    if kind == "eq20":
        return ggm_anomaly_score(X, pi, params)
    if kind == "nll":
        return negative_log_likelihood_score(X, pi, params)
    raise ValueError(f"unknown anomaly score {kind!r}; expected one of {SCORES}")


def ggm_anomaly_score(X: np.ndarray, pi: np.ndarray, params: MixtureParameters) -> np.ndarray:
    """Eq. (20): a^s(x) = −Σ_k r_k^s(x) ln N(x | μ_k, Λ_k^{-1}), with r^s(x) from eq. (18) (with μ_k, correcting a typo of the seed).

    Identity (seed 000 eqs. 17–20): a^s(x) = −ln p^s(x) − KL(r^s(x) || π^s) ≤ −ln p^s(x). Higher = more anomalous.
    """
    r, _ = responsibilities(X, pi, params)
    lg = log_gaussian(X, params.means, params.precisions)
    lg = np.where(params.active[None, :], lg, 0.0)
    return -(r * lg).sum(axis=1)


def roc_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """ROC-AUC of an anomaly score (higher = more anomalous) against labels y (1 = anomaly); a non-finite
    score is an error, not a number. The metric of the held-out evaluation and of a member's validation
    slice (docs/heldout.md, docs/models.md)."""
    from sklearn.metrics import roc_auc_score

    scores = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise FloatingPointError(f"{int((~np.isfinite(scores)).sum())} non-finite anomaly scores")
    return float(roc_auc_score(y, scores))


def has_both_classes(labels: np.ndarray | None) -> bool:
    """Whether ``labels`` (1 = anomaly) hold normal rows and anomalies: then a ROC-AUC is defined."""
    return labels is not None and np.unique(np.asarray(labels)).size == 2
