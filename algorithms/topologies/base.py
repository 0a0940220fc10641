"""Communication topologies: which organisation may send to which, round by round.

A topology is a deterministic function of (round, seed) to a directed adjacency matrix
``A`` of shape (S, S) with ``A[i, j] = 1`` meaning i sends to j in that round. Undirected
graphs are symmetric. Nodes are consortium positions 0..S-1; the simulator and platform map
them to organisations in consortium order.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Topology(Protocol):
    size: int

    def adjacency(self, round: int) -> np.ndarray:
        """Directed 0/1 adjacency (int8, zero diagonal) used in ``round`` (1-based)."""
        ...


def out_neighbours(topology: Topology, round: int, i: int) -> tuple[int, ...]:
    return tuple(int(j) for j in np.flatnonzero(topology.adjacency(round)[i]))


def in_neighbours(topology: Topology, round: int, j: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(topology.adjacency(round)[:, j]))


class StaticTopology:
    """A fixed graph given by its adjacency matrix."""

    def __init__(self, adjacency: np.ndarray, name: str = "static"):
        a = np.asarray(adjacency)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError("adjacency must be a square matrix")
        a = (a != 0).astype(np.int8)
        np.fill_diagonal(a, 0)
        self._a: np.ndarray = a
        self._a.setflags(write=False)
        self.size = a.shape[0]
        self.name = name

    def adjacency(self, round: int) -> np.ndarray:
        return self._a
