"""Mixing weights of DPSDA-C and DPSDA-PS (seed 002 Algorithms 1 and 2; docs/dpsda.md).

Adjacency convention (:mod:`algorithms.topologies.base`): ``A[i, j] = 1`` means node i sends to j.
A weight matrix W has ``W[i, j] = a_ij``, the weight node i gives to what it receives from j
(including j = i).

* DPSDA-C (eq. (12)), uniform weighting [CODE]: a_ij = 1/(|N_i|+1) for j ∈ N_i ∪ {i} — row-stochastic.
  The weight depends only on the receiver's degree, so a node can apply it alone.
* DPSDA-PS (eq. (20)–(21a)) [CODE]: a_ij = 1/(d_j^out+1) if j → i or j = i — column-stochastic.
  The weight depends only on the sender's out-degree: the sender scales what it pushes.
* Metropolis (for the circulation test of DPSDA-C): a_ij = 1/(1+max(d_i, d_j)) on edges,
  a_ii = 1 − Σ_{j≠i} a_ij — symmetric and doubly stochastic.

The scalar helpers (:func:`circulation_weight`, :func:`push_sum_weight`, :func:`metropolis_row`) are
what a single organisation evaluates in the step function; the matrix builders call the same helpers,
so both forms use bit-identical weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _adjacency(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be square, got shape {a.shape}")
    if np.any(np.diag(a) != 0):
        raise ValueError("adjacency must have a zero diagonal (self-weights are added by the rule)")
    return a != 0


def circulation_weight(degree: int) -> float:
    """a_ij = 1/(deg_i + 1) (eq. (12), uniform weighting)."""
    if degree < 0:
        raise ValueError(f"degree must be non-negative, got {degree}")
    return 1.0 / (degree + 1)


def push_sum_weight(out_degree: int) -> float:
    """a_ij = 1/(d_j^out + 1) for the sender j (eqs. (20)–(21a))."""
    if out_degree < 0:
        raise ValueError(f"out-degree must be non-negative, got {out_degree}")
    return 1.0 / (out_degree + 1)


def metropolis_row(degree: int, neighbour_degrees: Sequence[int]) -> tuple[float, list[float]]:
    """Metropolis weights of one node: (a_ii, [a_ij for the neighbours in the given order]).

    a_ij = 1/(1 + max(d_i, d_j)); a_ii = 1 − Σ_j a_ij, summed in the given (ascending) order.
    """
    off = [1.0 / (1 + max(degree, dj)) for dj in neighbour_degrees]
    total = 0.0
    for v in off:
        total += v
    return 1.0 - total, off


def circulation_weights(adjacency: np.ndarray) -> np.ndarray:
    """Row-stochastic W of DPSDA-C on an undirected graph (uniform weighting, eq. (12))."""
    a = _adjacency(adjacency)
    if not np.array_equal(a, a.T):
        raise ValueError("DPSDA-C needs an undirected (symmetric) graph")
    n = a.shape[0]
    w = np.zeros((n, n))
    for i in range(n):
        v = circulation_weight(int(a[i].sum()))
        w[i, a[i]] = v
        w[i, i] = v
    return w


def push_sum_weights(adjacency: np.ndarray) -> np.ndarray:
    """Column-stochastic W of DPSDA-PS on a digraph (uniform weighting, eqs. (20)–(21a))."""
    a = _adjacency(adjacency)
    n = a.shape[0]
    w = np.zeros((n, n))
    for j in range(n):
        v = push_sum_weight(int(a[j].sum()))
        w[a[j], j] = v  # j → i
        w[j, j] = v
    return w


def metropolis_weights(adjacency: np.ndarray) -> np.ndarray:
    """Symmetric, doubly-stochastic Metropolis weights on an undirected graph."""
    a = _adjacency(adjacency)
    if not np.array_equal(a, a.T):
        raise ValueError("Metropolis weights need an undirected (symmetric) graph")
    n = a.shape[0]
    deg = a.sum(axis=1)
    w = np.zeros((n, n))
    for i in range(n):
        nbrs = np.flatnonzero(a[i])
        diag, off = metropolis_row(int(deg[i]), [int(deg[j]) for j in nbrs])
        w[i, nbrs] = off
        w[i, i] = diag
    return w


def mix(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Σ_j W[i, j] values[j] for every i, accumulated over j = 0, 1, … in ascending order.

    The fixed left-to-right order (instead of a BLAS product) makes the result bit-identical to a
    node summing the messages it received in ascending sender order (the step function).
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros((weights.shape[0],) + values.shape[1:])
    for j in range(weights.shape[1]):
        col = weights[:, j].reshape((-1,) + (1,) * (values.ndim - 1))
        out += col * values[j]
    return out
