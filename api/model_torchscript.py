"""The TorchScript form of an exported CollabDict VAE, written beside ``model.pt`` (the state_dict).

:class:`VAEScorer` holds the shared decoder θ and the owner's encoder φ (float64 buffers) and
computes, in plain PyTorch operations that ``torch.jit.script`` compiles (docs/collabdict.md;
seed 000 §5):

* ``encode(x)``: g = ReLU(V1 x + c1), m(x) = V2 g + c2, h(x) = softplus(V3 g + c3)       (27)
* ``decode(z)``: g = ReLU(W1 z + b1), μ_θ(z) = W2 g + b2, σ_θ(z) = softplus(W3 g + b3)   (21–24)
* ``forward(x, v)``: the anomaly score a(x) = −(1/J) Σ_j ln N(x | μ_θ(z_j), Σ_θ(z_j)) with
  z_j = h(x) ⊙ v_j + m(x), for standard-normal draws ``v`` of shape (J, N, d)           (37)–(40)

Given the same draws it equals :func:`algorithms.collabdict.vae_model.reconstruction_score`; the
export checks that on probe rows and records the largest difference. ``torch.jit.load`` loads the
file without this module or any Consortia package.
"""

# no `from __future__ import annotations`: torch.jit.script reads the buffer annotations below
import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

TOLERANCE = 1e-9  # relative, float64
DECODER = ("W1", "b1", "W2", "b2", "W3", "b3")
ENCODER = ("V1", "c1", "V2", "c2", "V3", "c3")


class VAEScorer(torch.nn.Module):
    W1: torch.Tensor
    b1: torch.Tensor
    W2: torch.Tensor
    b2: torch.Tensor
    W3: torch.Tensor
    b3: torch.Tensor
    V1: torch.Tensor
    c1: torch.Tensor
    V2: torch.Tensor
    c2: torch.Tensor
    V3: torch.Tensor
    c3: torch.Tensor

    def __init__(self, theta: Mapping[str, Any], phi: Mapping[str, Any]):
        super().__init__()
        for k in DECODER:
            self.register_buffer(k, torch.tensor(np.asarray(theta[k], dtype=np.float64)))
        for k in ENCODER:
            self.register_buffer(k, torch.tensor(np.asarray(phi[k], dtype=np.float64)))
        self.log_2pi = math.log(2 * math.pi)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = F.relu(x @ self.V1.T + self.c1)
        return g @ self.V2.T + self.c2, F.softplus(g @ self.V3.T + self.c3)

    def decode(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = F.relu(z @ self.W1.T + self.b1)
        return g @ self.W2.T + self.b2, F.softplus(g @ self.W3.T + self.b3)

    def forward(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        m, h = self.encode(x)
        mu, sigma = self.decode(h.unsqueeze(0) * v + m.unsqueeze(0))
        xs = x.unsqueeze(0)
        M = x.shape[-1]
        loglik = -0.5 * (
            M * self.log_2pi + 2.0 * torch.log(sigma).sum(-1) + (((xs - mu) / sigma) ** 2).sum(-1)
        )
        return -loglik.mean(0)


def write_vae_torchscript(
    model: Mapping[str, Any],
    path: Path,
    versions: Callable[..., dict[str, str]],
    sha256: Callable[[Path], str],
) -> dict[str, Any]:
    """Script the model to ``path``, check it against the platform's score; its manifest entry."""
    from algorithms.collabdict.vae_model import reconstruction_score

    missing = [k for k in DECODER if k not in model["theta"]] + [k for k in ENCODER if k not in model["phi"]]
    if missing:
        return {"format": "torchscript", "skipped": f"not a CollabDict VAE: no parameters {missing}"}
    with warnings.catch_warnings():  # torch >= 2.9 marks torch.jit deprecated; it still writes the format
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(VAEScorer(model["theta"], model["phi"])), str(path))
        loaded = torch.jit.load(str(path))
    features = int(np.asarray(model["phi"]["V1"]).shape[1])
    latent = int(np.asarray(model["phi"]["c2"]).shape[0])
    draws = int(model.get("mc_score", 64))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, features)) * 2.0
    want = reconstruction_score(model["theta"], model["phi"], X, draws, np.random.default_rng(1))
    V = np.random.default_rng(1).standard_normal((draws, len(X), latent))  # the draws the score took
    with torch.no_grad():
        got = loaded(torch.from_numpy(X), torch.from_numpy(V)).numpy()
    diff = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
    return {
        "file": path.name,
        "format": "torchscript",
        "input": {"x": ["N", features], "v": ["J", "N", latent], "type": "float64"},
        "output": "anomaly score per row (eq. 39), higher = more anomalous",
        "methods": ["forward(x, v)", "encode(x)", "decode(z)"],
        "load": (
            "import torch; m = torch.jit.load('model.torchscript.pt'); "
            f"scores = m(X, torch.randn({draws}, len(X), {latent}, dtype=torch.float64))"
        ),
        "check": {
            "rows": len(X),
            "draws": draws,
            "max_rel_diff": diff,
            "tolerance": TOLERANCE,
            "ok": diff <= TOLERANCE,
        },
        "versions": versions("torch", "numpy"),
        "sha256": sha256(path),
    }
