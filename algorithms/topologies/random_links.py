"""Random time-varying topology (seed 003 §VI, Fig. 3 (iii); docs/collab_rf.md).

At every iteration each node draws one link uniformly among the S−1 others; links are
undirected, so a node's degree in an iteration is 1 + the number of nodes that drew it.
Iteration t covers rounds (t−1)·period+1 .. t·period (``period = 3`` makes one graph per
(FIT, SHARE, GET) iteration). The graph of iteration t depends only on (seed, t).
"""

from __future__ import annotations

import numpy as np


class RandomLinks:
    """One random undirected link per node per iteration, seeded."""

    def __init__(self, size: int, seed: int, period: int = 1):
        if size < 2:
            raise ValueError(f"a random-link topology needs at least 2 nodes, got {size}")
        if seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        self.size = int(size)
        self.seed = int(seed)
        self.period = int(period)
        self.name = f"random_links({size}, seed={seed}, period={period})"
        self._cache: dict[int, np.ndarray] = {}

    def iteration(self, round: int) -> int:
        if round < 1:
            raise ValueError(f"rounds are 1-based, got {round}")
        return (round - 1) // self.period + 1

    def draws(self, iteration: int) -> np.ndarray:
        """The partner each node drew in ``iteration`` (never itself)."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, iteration, 0x11AC])))
        r = rng.integers(0, self.size - 1, size=self.size)
        return r + (r >= np.arange(self.size))  # uniform over the others

    def adjacency(self, round: int) -> np.ndarray:
        t = self.iteration(round)
        a = self._cache.get(t)
        if a is None:
            partner = self.draws(t)
            a = np.zeros((self.size, self.size), dtype=np.int8)
            idx = np.arange(self.size)
            a[idx, partner] = 1
            a[partner, idx] = 1
            a.setflags(write=False)
            self._cache[t] = a
        return a
