"""The online losses f_t revealed at each time step (seed 002 §6; docs/dpsda.md).

Each loss sees a batch B_t of rows (a_k, b_k) and is averaged over it:

* OLR (least squares):  f_t(x) = (1/|B_t|) Σ_k ½ (a_k^T x − b_k)²,    ∇f_t = (1/|B_t|) Σ_k (a_k^T x − b_k) a_k
* OBC (logistic):       f_t(x) = (1/|B_t|) Σ_k ln(1 + e^{−b_k a_k^T x}),  b_k ∈ {±1},
                        ∇f_t = −(1/|B_t|) Σ_k b_k a_k σ(−b_k a_k^T x)

Both are convex and nondecomposable over the coordinate blocks that the nodes control. Batch size 1
reproduces the authors' OLR code exactly.

Both are generalised linear: the gradient of one example's loss is ∇ℓ_k(x) = c_k a_k, with c_k = a_k^T x − b_k
(least squares) or c_k = −b_k σ(−b_k a_k^T x) (logistic). :meth:`coefficients` returns the c_k, from which the
Gaussian mode clips every example's block gradient c_k [a_k]_{B_i} (docs/dpsda.md, eq. (G1)).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class OnlineLoss(Protocol):
    name: str

    def value(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float: ...

    def gradient(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray: ...

    def coefficients(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """c_k with ∇ℓ_k(x) = c_k a_k for every row k (the per-example gradients, one scalar each)."""
        ...


def _sigmoid(u: np.ndarray) -> np.ndarray:
    """σ(u) = 1/(1+e^{−u}), stable for large |u|."""
    out = np.empty_like(u, dtype=np.float64)
    pos = u >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-u[pos]))
    e = np.exp(u[~pos])
    out[~pos] = e / (1.0 + e)
    return out


class SquaredLoss:
    """½ (a^T x − b)² averaged over the batch (OLR, seed 002 §6)."""

    name = "squared"

    def value(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float:
        r = features @ x - labels
        return float(0.5 * np.mean(r * r))

    def gradient(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        r = features @ x - labels
        return (r @ features) / features.shape[0]

    def coefficients(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return features @ x - labels


class LogisticLoss:
    """ln(1 + e^{−b a^T x}) averaged over the batch, labels b ∈ {±1} (OBC, seed 002 §6)."""

    name = "logistic"

    def value(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, -labels * (features @ x))))

    def gradient(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        u = labels * (features @ x)
        coef = -labels * _sigmoid(-u)
        return (coef @ features) / features.shape[0]

    def coefficients(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return -labels * _sigmoid(-labels * (features @ x))


LOSSES: dict[str, OnlineLoss] = {"squared": SquaredLoss(), "logistic": LogisticLoss()}


def get_loss(name: str) -> OnlineLoss:
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}") from None
