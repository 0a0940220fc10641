"""Two user algorithm folders in the agreed layout (docs/sdk.md "Your algorithm folder"), written
by the tests into a temporary directory outside the repository: each imports ``consortia_sdk`` only
(plus numpy, scikit-learn, torch and one hash-pinned extra requirement).

* ``ridge-consensus`` (base ``python``): scikit-learn's Ridge fitted locally, its coefficients mixed
  with the in-neighbours' every round (x <- x + eps * sum_j (x_j - x)); the extra requirement
  ``toolz`` (a small pure-Python wheel) maps the inbox;
* ``torch-linear`` (base ``torch``): a linear model trained by one full-batch gradient step a round
  with torch autograd on CPU, then averaged with the neighbours.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from algorithms.step import LocalDataset

#: the real sha256 of PyPI's toolz-1.2.0-py3-none-any.whl
TOOLZ = "toolz==1.2.0"
TOOLZ_SHA256 = "890f820b1cb8152785aaf9386d8707770110809035800985ca65cb24ce1120ef"

RIDGE = '''"""Ridge regression averaged with neighbours (a user algorithm: consortia_sdk only)."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import Ridge
from toolz import valmap

from consortia_sdk import LocalDataset, StepResult, TaskContext


class RidgeConsensus:
    name = "ridge-consensus"

    def __init__(self, alpha: float = 1.0, eps: float = 0.3):
        if alpha < 0 or not 0 < eps <= 1:
            raise ValueError("alpha >= 0 and eps in (0, 1] required")
        self.alpha, self.eps = float(alpha), float(eps)

    def params(self) -> dict:
        return {"alpha": self.alpha, "eps": self.eps}

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        model = Ridge(alpha=self.alpha, solver="cholesky").fit(data.features, data.labels)
        return {"w": np.append(model.coef_, model.intercept_).astype(np.float64)}

    def step(self, state, inbox, data: LocalDataset, ctx: TaskContext) -> StepResult:
        w = np.asarray(state["w"], dtype=np.float64)
        received = valmap(lambda p: np.asarray(p["w"], dtype=np.float64), dict(inbox))
        new = w.copy()
        for sender in sorted(received):
            new += self.eps * (received[sender] - w)
        return StepResult(
            state={"w": new},
            outbox={j: {"w": new} for j in ctx.out_neighbours},
            metrics={"norm": float(np.linalg.norm(new))},
            model={"w": new} if ctx.round == ctx.rounds else None,
        )
'''

TORCH_LINEAR = '''"""A linear model trained with torch on CPU and averaged with neighbours (consortia_sdk only)."""

from __future__ import annotations

import numpy as np
import torch

from consortia_sdk import LocalDataset, StepResult, TaskContext


class TorchLinear:
    name = "torch-linear"

    def __init__(self, lr: float = 0.1):
        if lr <= 0:
            raise ValueError("lr must be > 0")
        self.lr = float(lr)

    def params(self) -> dict:
        return {"lr": self.lr}

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        d = np.asarray(data.features).shape[1]
        return {"w": ctx.shared_rng("init", 0).normal(size=d + 1)}

    def step(self, state, inbox, data: LocalDataset, ctx: TaskContext) -> StepResult:
        torch.set_num_threads(1)
        x = torch.from_numpy(np.asarray(data.features, dtype=np.float64))
        y = torch.from_numpy(np.asarray(data.labels, dtype=np.float64))
        w = torch.tensor(np.asarray(state["w"], dtype=np.float64), requires_grad=True)
        loss = ((x @ w[:-1] + w[-1] - y) ** 2).mean()
        loss.backward()
        local = (w - self.lr * w.grad).detach().numpy()
        models = [local] + [np.asarray(inbox[s]["w"]) for s in sorted(inbox)]
        new = np.sum(models, axis=0) / len(models)
        return StepResult(
            state={"w": new},
            outbox={j: {"w": local} for j in ctx.out_neighbours},
            metrics={"loss": float(loss.detach())},
            model={"w": new} if ctx.round == ctx.rounds else None,
        )
'''


def image_json(name: str, algorithm: str, base: str, parameters: dict) -> dict:
    return {
        "name": name,
        "version": "0.1.0",
        "algorithm": algorithm,
        "sdk": "1.0.0",
        "numeric_profile": "x86-64-v2/1",
        "runtimes": ["sandbox"] if base == "torch" else ["sandbox", "container"],
        "base": base,
        "description": f"{name}: a user algorithm (tests/support/own_algorithm.py)",
        "input": {"features": "numeric", "label": True},
        "parameters": parameters,
    }


def write_folder(root: Path, kind: str, requirements: str | None = None) -> Path:
    """Write the ``kind`` ("sklearn" or "torch") algorithm folder under ``root``; return it."""
    if kind == "sklearn":
        folder, module, source = root / "ridge-consensus", "ridge_consensus", RIDGE
        meta = image_json(
            "ridge-consensus",
            "ridge_consensus:RidgeConsensus",
            "python",
            {
                "alpha": {"type": "number", "default": 1.0, "minimum": 0},
                "eps": {"type": "number", "default": 0.3, "minimum": 0, "maximum": 1},
            },
        )
        if requirements is None:
            requirements = (
                f"# extra requirements, pinned with hashes\n{TOOLZ} \\\n    --hash=sha256:{TOOLZ_SHA256}\n"
            )
    else:
        folder, module, source = root / "torch-linear", "torch_linear", TORCH_LINEAR
        meta = image_json(
            "torch-linear", "torch_linear:TorchLinear", "torch", {"lr": {"type": "number", "default": 0.1}}
        )
        requirements = requirements or ""
    (folder / "tests").mkdir(parents=True)
    (folder / "image.json").write_text(json.dumps(meta, indent=2) + "\n")
    (folder / f"{module}.py").write_text(source)
    (folder / "requirements.txt").write_text(requirements)
    (folder / "README.md").write_text(f"# {meta['name']}\n\nA user algorithm written with consortia_sdk.\n")
    (folder / "tests" / f"test_{module}.py").write_text(
        f"from {module} import {meta['algorithm'].split(':')[1]} as A\n\n\n"
        "def test_params_rebuild():\n    a = A()\n    assert type(a)(**a.params()).params() == a.params()\n"
    )
    return folder


def regression_data(orgs, seed: int = 11) -> dict[str, LocalDataset]:
    """A small linear-regression dataset per organisation (different sizes and shifts)."""
    out = {}
    for i, org in enumerate(orgs):
        rng = np.random.default_rng(seed + i)
        n = 30 + 7 * i
        x = rng.normal(size=(n, 3)) + 0.2 * i
        y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.1 * rng.normal(size=n)
        out[org] = LocalDataset(x, y, name=f"reg-{org}")
    return out
