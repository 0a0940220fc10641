"""P-greedy selection on a Gram matrix (seed 003 §III-D; docs/collab_rf.md).

De Marchi–Schaback–Wendland 2005 / Santin–Haasdonk 2017, in Newton-basis form:

    P_0(D)^2 = k(D, D)
    D_n      = argmax_{D not selected} P_{n-1}(D)
    v_n(D)   = [k(D, D_n) - Σ_{j<n} v_j(D) v_j(D_n)] / P_{n-1}(D_n)
    P_n(D)^2 = P_{n-1}(D)^2 - v_n(D)^2

P_n(D)^2 is the posterior variance of a zero-mean GP with covariance k given the selected
trees. Cost O(n0 k^2). [OURS] Stop when max P^2 <= tol · max_D k(D, D) (duplicated or
linearly dependent trees); the remaining slots are filled in candidate order. Ties go to
the lowest index (candidates are ordered by estimator id by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PGreedyTrace:
    order: list[int]  # selected indices, in selection order (length k)
    n_greedy: int  # how many were chosen greedily before the tolerance stop
    power: np.ndarray  # (n_greedy+1, n0): P_n(D)^2 for n = 0..n_greedy


def p_greedy(K: np.ndarray, k: int, tol: float = 1e-12) -> PGreedyTrace:
    """Select ``k`` of the ``n0`` candidates of Gram matrix ``K`` by P-greedy."""
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"Gram matrix must be square, got shape {K.shape}")
    n0 = K.shape[0]
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    k = min(k, n0)
    p2 = np.diag(K).copy()
    scale = float(p2.max()) if n0 else 0.0
    V = np.zeros((n0, k))
    selected = np.zeros(n0, dtype=bool)
    order: list[int] = []
    powers = [p2.copy()]
    for m in range(k):
        cand = np.where(selected, -np.inf, p2)
        i = int(np.argmax(cand))  # first index among ties
        if not (cand[i] > tol * scale) or cand[i] <= 0:
            break
        v = (K[:, i] - V[:, :m] @ V[i, :m]) / np.sqrt(p2[i])
        V[:, m] = v
        p2 = p2 - v * v
        p2[i] = 0.0
        selected[i] = True
        order.append(i)
        powers.append(p2.copy())
    n_greedy = len(order)
    order.extend(int(j) for j in np.flatnonzero(~selected)[: k - n_greedy])
    return PGreedyTrace(order=order, n_greedy=n_greedy, power=np.array(powers))
