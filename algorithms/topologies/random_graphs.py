"""Random time-varying undirected graphs (CollabDict consensus on changing links; cf. seed 003 §VI, Fig. 3 (iii)).

Both graphs are a deterministic function of (seed, round): every participant can rebuild the graph of
any round from the process seed alone, which is what the step functions need for relabelled consensus
sessions, and the simulator and platform see the same graphs.

* :class:`RandomLinkTopology` — at each round every node draws ``links`` partners uniformly among the
  S − 1 others; the union is made undirected (seed 003 Fig. 3 (iii): one link each, average degree ≈ 2).
* :class:`ErdosRenyiTopology` — at each round every unordered pair is linked with probability p.

Neither graph is guaranteed connected in a given round; consensus over them converges when the union
over a window of rounds is connected (which happens with high probability after a few rounds).
"""

from __future__ import annotations

import numpy as np


def _round_rng(seed: int, round: int, tag: str) -> np.random.Generator:
    if seed < 0 or round < 0:
        raise ValueError("seed and round must be non-negative")
    words = [int(seed), int(round)] + [ord(c) for c in tag]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


class RandomLinkTopology:
    """Each round, every node links to ``links`` distinct partners drawn uniformly; undirected union."""

    def __init__(self, size: int, seed: int, links: int = 1):
        if size < 2:
            raise ValueError(f"a random link graph needs at least 2 nodes, got {size}")
        if not 1 <= links <= size - 1:
            raise ValueError(f"links per node must be in [1, {size - 1}], got {links}")
        self.size = int(size)
        self.seed = int(seed)
        self.links = int(links)
        self.name = f"random-link({size},{links})"

    def adjacency(self, round: int) -> np.ndarray:
        rng = _round_rng(self.seed, round, "random-link")
        S = self.size
        A = np.zeros((S, S), dtype=np.int8)
        for i in range(S):
            draws = rng.choice(S - 1, size=self.links, replace=False)
            partners = draws + (draws >= i)  # uniform among the others
            A[i, partners] = 1
        A = np.maximum(A, A.T)
        np.fill_diagonal(A, 0)
        return A


class ErdosRenyiTopology:
    """Each round, a fresh G(S, p): every unordered pair linked independently with probability p."""

    def __init__(self, size: int, seed: int, p: float):
        if size < 2:
            raise ValueError(f"an Erdős–Rényi graph needs at least 2 nodes, got {size}")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"edge probability must be in (0, 1], got {p}")
        self.size = int(size)
        self.seed = int(seed)
        self.p = float(p)
        self.name = f"erdos-renyi({size},{p})"

    def adjacency(self, round: int) -> np.ndarray:
        rng = _round_rng(self.seed, round, "erdos-renyi")
        S = self.size
        upper = np.triu(rng.random((S, S)) < self.p, k=1)
        A = (upper | upper.T).astype(np.int8)
        return A
