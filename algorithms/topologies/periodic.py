"""Periodic time-varying graphs, and the 7-node graphs of the DPSDA experiments (seed 002 §6; docs/dpsda.md).

A :class:`PeriodicTopology` cycles through a fixed list of graphs: round r (1-based) uses
``graphs[(r − 1) mod period]``, so with the four DPSDA graphs G(t) = G_{((t−1) mod 4)+1} (the authors' MATLAB code).

Adjacency convention (:mod:`algorithms.topologies.base`): ``A[i, j] = 1`` means i sends to j.
The authors' MATLAB graph generators write edges 1-based as "j→i" (j pushes to i); edge ``3→6`` is therefore
``A[2, 5] = 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# From the authors' MATLAB Directed_graph_generator.m / Undirected_graph_generator.m, 1-based.
DPSDA_DIRECTED_EDGES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((3, 6), (3, 7), (4, 3), (5, 3), (5, 6), (6, 4), (7, 5)),  # G1 (nodes 1, 2 isolated)
    ((1, 2), (3, 2)),  # G2
    ((1, 3), (2, 3), (4, 5), (4, 7), (5, 6), (6, 4), (7, 5)),  # G3
    ((2, 1),),  # G4
)
DPSDA_UNDIRECTED_EDGES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((3, 4), (3, 5), (3, 6), (3, 7), (4, 6), (5, 6), (5, 7)),  # G1
    ((1, 2), (2, 3)),  # G2
    ((1, 3), (2, 3), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7)),  # G3
    ((1, 2),),  # G4
)
DPSDA_NODES = 7


class PeriodicTopology:
    """Cycle through ``graphs`` (each an (S, S) 0/1 adjacency) with period ``len(graphs)``."""

    def __init__(self, graphs: Sequence[np.ndarray], name: str = "periodic"):
        if len(graphs) == 0:
            raise ValueError("a periodic topology needs at least one graph")
        mats: list[np.ndarray] = []
        for k, g in enumerate(graphs):
            a = np.asarray(g)
            if a.ndim != 2 or a.shape[0] != a.shape[1]:
                raise ValueError(f"graph {k + 1} is not a square matrix (shape {a.shape})")
            if mats and a.shape != mats[0].shape:
                raise ValueError(f"graph {k + 1} has shape {a.shape}, graph 1 has {mats[0].shape}")
            if np.any(np.diag(a) != 0):
                raise ValueError(
                    f"graph {k + 1} has self-loops; a node always keeps its own value implicitly"
                )
            a = (a != 0).astype(np.int8)
            a.setflags(write=False)
            mats.append(a)
        self._graphs = tuple(mats)
        self.size = mats[0].shape[0]
        self.period = len(mats)
        self.name = name

    def adjacency(self, round: int) -> np.ndarray:
        if round < 1:
            raise ValueError(f"rounds are 1-based, got {round}")
        return self._graphs[(round - 1) % self.period]

    @property
    def graphs(self) -> tuple[np.ndarray, ...]:
        return self._graphs

    def union(self) -> np.ndarray:
        """Adjacency of the union graph over one period (B-strong connectivity, B = period)."""
        union: np.ndarray = (np.sum(self._graphs, axis=0) > 0).astype(np.int8)
        return union


def _from_edges(edges: Sequence[tuple[int, int]], size: int, directed: bool) -> np.ndarray:
    a = np.zeros((size, size), dtype=np.int8)
    for src, dst in edges:
        if not (1 <= src <= size and 1 <= dst <= size) or src == dst:
            raise ValueError(f"edge {src}→{dst} is not between two distinct nodes 1..{size}")
        a[src - 1, dst - 1] = 1
        if not directed:
            a[dst - 1, src - 1] = 1
    return a


def dpsda_digraphs() -> PeriodicTopology:
    """The 4-strongly-connected time-varying digraph on 7 nodes used by DPSDA-PS (seed 002 §6)."""
    return PeriodicTopology(
        [_from_edges(e, DPSDA_NODES, True) for e in DPSDA_DIRECTED_EDGES], name="dpsda-digraphs(7)"
    )


def dpsda_graphs() -> PeriodicTopology:
    """The same graphs with directions deleted, used by DPSDA-C (seed 002 §6)."""
    return PeriodicTopology(
        [_from_edges(e, DPSDA_NODES, False) for e in DPSDA_UNDIRECTED_EDGES], name="dpsda-graphs(7)"
    )


def is_strongly_connected(adjacency: np.ndarray) -> bool:
    """Every node reaches every other node along directed edges (``A[i, j] = 1``: i → j)."""
    a = np.asarray(adjacency) != 0
    n = a.shape[0]
    for start in range(n):
        seen = np.zeros(n, dtype=bool)
        seen[start] = True
        frontier = [start]
        while frontier:
            nxt = []
            for i in frontier:
                for j in np.flatnonzero(a[i] & ~seen):
                    seen[j] = True
                    nxt.append(int(j))
            frontier = nxt
        if not seen.all():
            return False
    return True
