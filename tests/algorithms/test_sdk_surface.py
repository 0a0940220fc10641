"""The public SDK (consortia_sdk): every declared name resolves, importing it loads no platform layer, and
an algorithm written with it alone simulates to the same bytes twice."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

import consortia_sdk as sdk


def test_every_declared_name_resolves_and_the_version_is_semantic() -> None:
    missing = [name for name in sdk.__all__ if not hasattr(sdk, name)]
    assert missing == []
    major, minor, patch = (int(part) for part in sdk.SDK_VERSION.split("."))
    assert major >= 1 and minor >= 0 and patch >= 0


def test_importing_the_sdk_loads_no_platform_layer() -> None:
    code = (
        "import sys, consortia_sdk\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'executor', 'ledger', 'exchange', 'api', 'home', 'network', 'audit', 'chaincode'})\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


class _Average:
    """Average consensus on a local mean, written with the SDK's names only."""

    name = "sdk-average"

    def __init__(self, eps: float = 0.25) -> None:
        self.eps = float(eps)

    def params(self) -> dict[str, Any]:
        return {"eps": self.eps}

    def init(self, data: sdk.LocalDataset, ctx: sdk.TaskContext) -> Any:
        noise = ctx.rng("init").normal(size=data.features.shape[1]) * 1e-3
        return {"x": data.features.mean(axis=0) + noise}

    def step(
        self, state: Any, inbox: Mapping[str, Any], data: sdk.LocalDataset, ctx: sdk.TaskContext
    ) -> sdk.StepResult:
        x = state["x"]
        if inbox:
            x = sdk.local_consensus_update(x, [m["x"] for m in inbox.values()], self.eps)
        return sdk.StepResult(
            state={"x": x}, outbox={o: {"x": x} for o in ctx.out_neighbours}, model={"x": x}
        )


def test_an_sdk_only_algorithm_simulates_to_the_same_bytes_twice() -> None:
    rng = np.random.default_rng(7)
    data = {f"Org{i}MSP": sdk.LocalDataset(features=rng.normal(i, 1.0, size=(20, 3))) for i in range(1, 5)}
    runs = [
        sdk.simulate(_Average(), data, rounds=6, seed=11, topology={"kind": "ring", "seed": 0})
        for _ in range(2)
    ]
    assert runs[0].state_digests == runs[1].state_digests
    assert runs[0].models == runs[1].models
    spread = np.ptp([sdk.decode(m)["x"][0] for m in runs[0].models.values()])
    start = np.ptp([d.features.mean(axis=0)[0] for d in data.values()])
    assert spread < start  # the neighbours' averaging moved the members towards each other
    assert sdk.build_topology({"kind": "ring", "seed": 0}, 4) is not None
