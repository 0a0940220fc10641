"""Average consensus over a communication topology: the smallest algorithm an image can hold.

Each organisation starts from the mean of its local features and iterates the dynamical
consensus update of the seed (000 §III, eqs. (2)–(5); docs/collabdict.md)

    x_s(t+1) = x_s(t) + eps * sum_{j in N_in(s)} (x_j(t) - x_s(t))

with the neighbours' values of the previous round arriving as messages. It is the executor's
reference workload: trivial to compute, so a benchmark of it measures the platform's overhead,
and deterministic, so the platform's output can be compared bit for bit with the simulator's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.step import LocalDataset, StepResult, TaskContext


class AverageConsensus:
    name = "average-consensus"

    def __init__(self, eps: float = 0.25, noise: float = 0.0):
        if not 0.0 < eps <= 1.0:
            raise ValueError(f"eps must be in (0, 1], got {eps}")
        if noise < 0.0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.eps = float(eps)
        self.noise = float(noise)

    def params(self) -> dict[str, Any]:
        return {"eps": self.eps, "noise": self.noise}

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict[str, Any]:
        x = np.asarray(data.features, dtype=np.float64).mean(axis=0)
        if self.noise:
            x = x + self.noise * ctx.rng("init").standard_normal(x.shape)
        return {"x": x, "n": len(data)}

    def step(
        self, state: Mapping[str, Any], inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext
    ) -> StepResult:
        x = np.asarray(state["x"], dtype=np.float64)
        new = x.copy()
        for sender in sorted(inbox):
            new += self.eps * (np.asarray(inbox[sender]["x"]) - x)
        out = {j: {"x": new} for j in ctx.out_neighbours}
        model = {"x": new} if ctx.round == ctx.rounds else None
        return StepResult(
            state={"x": new, "n": state["n"]},
            outbox=out,
            metrics={"norm": float(np.linalg.norm(new))},
            model=model,
        )
