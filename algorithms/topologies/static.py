"""Fixed graphs: cycle with inverse chord (seed 000 Fig. 1; docs/collabdict.md), ring, complete, empty."""

from __future__ import annotations

import numpy as np

from algorithms.topologies.base import StaticTopology


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def cic_adjacency(S: int) -> np.ndarray:
    """Simple adjacency of the cycle with inverse chord on Z_S, S prime (seed 000 Fig. 1; our convention):
    x ~ x±1 and x ~ x^{-1} = x^{S-2} mod S for x ≠ 0; symmetrised, no self-loops, no multi-edges."""
    if not _is_prime(S):
        raise ValueError(f"the cycle with inverse chord needs a prime number of nodes, got {S}")
    A = np.zeros((S, S), dtype=np.int8)
    x = np.arange(S)
    A[x, (x + 1) % S] = 1
    A[(x + 1) % S, x] = 1
    inv = np.array([pow(int(v), S - 2, S) for v in range(1, S)])
    A[np.arange(1, S), inv] = 1
    A[inv, np.arange(1, S)] = 1
    np.fill_diagonal(A, 0)
    return A


def cycle_with_inverse_chord(S: int) -> StaticTopology:
    return StaticTopology(cic_adjacency(S), name=f"cic({S})")


def ring(S: int) -> StaticTopology:
    """Pairwise ring: node i talks to i-1 and i+1 (2-regular; a single edge when S = 2)."""
    A = np.zeros((S, S), dtype=np.int8)
    if S > 1:
        x = np.arange(S)
        A[x, (x + 1) % S] = 1
        A[(x + 1) % S, x] = 1
    return StaticTopology(A, name=f"ring({S})")


def complete(S: int) -> StaticTopology:
    return StaticTopology(np.ones((S, S), dtype=np.int8), name=f"complete({S})")


def empty(S: int) -> StaticTopology:
    """The disconnected graph (every organisation learns alone)."""
    return StaticTopology(np.zeros((S, S), dtype=np.int8), name=f"empty({S})")
