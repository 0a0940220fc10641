"""Fixtures of the end-to-end tests: a consortium on the embedded ledger, small synthetic datasets
per algorithm, and a helper that runs the same work in the simulator for comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from algorithms.step import LocalDataset

ORGS3 = ("Org1MSP", "Org2MSP", "Org3MSP")


@pytest.fixture(scope="session")
def consortium(tmp_path_factory):
    from ledger.identity import Consortium

    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])


@pytest.fixture
def platform(tmp_path, consortium):
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger

    path = tmp_path / "ledger.sqlite"
    p = Platform(EmbeddedLedger(path, consortium), consortium, tmp_path, ledger_path=path)
    yield p
    p.ledger.close()


@dataclass(frozen=True)
class Case:
    """One algorithm's small end-to-end case: image folder, hyper-parameters, rounds, topology, data."""

    image: str
    algorithm: Any  # class
    params: dict
    rounds: int
    topology: dict
    datasets: dict  # org -> LocalDataset
    privacy_budget: dict | None = None


def _classification(seed: int, n: int, d: int = 4) -> LocalDataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0.4).astype(np.int64)
    return LocalDataset(X, y, name=f"cls-{seed}")


def _mixture(seed: int, n: int) -> LocalDataset:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [3.0, -2.0, 1.0]])
    z = rng.integers(0, 2, n)
    return LocalDataset(centres[z] + rng.standard_normal((n, 3)), name=f"mix-{seed}")


def collab_rf_case(orgs=ORGS3) -> Case:
    from algorithms.collab_rf.algorithm import CollaborativeRandomForest

    params = {
        "n_new": 3,
        "n_share": 2,
        "n_max": 6,
        "max_depth": 3,
        "n_rep": 2,
        "schedule": ["FIT", "SHARE", "GET", "FIT", "SHARE", "GET"],
    }
    return Case(
        "collab-rf",
        CollaborativeRandomForest,
        params,
        6,
        {"kind": "ring", "seed": 5},
        {o: _classification(20 + i, 40 + 15 * i) for i, o in enumerate(orgs)},
    )


def ggm_case(orgs=ORGS3) -> Case:
    from algorithms.collabdict.ggm import CollabDictGGM, rounds_for

    algo = CollabDictGGM(n_components=2, aggregation={"mode": "exact"})
    return Case(
        "collabdict-ggm",
        CollabDictGGM,
        {"n_components": 2, "aggregation": {"mode": "exact"}},
        rounds_for(1, len(orgs), algo.agg),
        {"kind": "complete", "seed": 3},
        {o: _mixture(30 + i, 30 + 10 * i) for i, o in enumerate(orgs)},
    )


def vae_case(orgs=ORGS3) -> Case:
    from algorithms.collabdict.vae import CollabDictVAE, rounds_for

    params = {
        "hidden": 8,
        "optimizer": "sgd",
        "normalise": False,
        "mc_score": 4,
        "aggregation": {"mode": "exact"},
    }
    algo = CollabDictVAE(**params)
    return Case(
        "collabdict-vae",
        CollabDictVAE,
        params,
        rounds_for(1, len(orgs), algo.agg),
        {"kind": "complete", "seed": 4},
        {o: _mixture(40 + i, 24 + 8 * i) for i, o in enumerate(orgs)},
    )


def dpsda_case(orgs=ORGS3, budget: float | None = None, rounds: int = 4) -> Case:
    from algorithms.dpsda import DPSDA
    from algorithms.dpsda.experiments import synthetic_olr

    params = {
        "variant": "C",
        "n_nodes": len(orgs),
        "dimension": 6,
        "laplace_scale": 2.0,
        "weights": "metropolis",
    }
    if budget is not None:
        # a private process must clip: L̂ = 1/(2n√d) makes the proven sensitivity 2nL̂√d = 1, so ε0 = Δ/σ = 0.5
        params["gradient_clip"] = 1.0 / (2 * len(orgs) * (6 // len(orgs)) ** 0.5)
    stream = synthetic_olr(4, dimension=6, horizon=rounds)
    data = {o: LocalDataset(stream.features, stream.labels, name=o) for o in orgs}
    return Case(
        "dpsda",
        DPSDA,
        params,
        rounds,
        {"kind": "ring", "seed": 9},
        data,
        None if budget is None else {"mechanism": "laplace", "epsilon": budget},
    )


def dpsda_gaussian_case(orgs=ORGS3, budget: float = 10.0, rounds: int = 5) -> Case:
    """DPSDA's Gaussian mode with Poisson sampling (each organisation's secret sampling key is a dataset
    extra) and a privacy budget at δ = 1e-5 (docs/dpsda.md "The Gaussian mode")."""
    from algorithms.dpsda import DPSDA
    from algorithms.dpsda.framework import SAMPLING_KEY

    params = {
        "variant": "C",
        "n_nodes": len(orgs),
        "dimension": 6,
        "lower": -1.0,
        "upper": 1.0,
        "loss": "logistic",
        "mechanism": "gaussian",
        "gradient_clip": 0.5,
        "noise_multiplier": 1.5,
        "sampling": "poisson",
        "sampling_rate": 0.1,
        "batch_size": 6,
        "privacy_delta": 1e-5,
    }
    rng = np.random.default_rng(6)
    features = rng.normal(size=(60, 6))
    labels = np.where(features[:, 0] - features[:, 3] > 0, 1.0, -1.0)
    key = np.array([7, 11, 13, 17], dtype=np.uint32)
    data = {o: LocalDataset(features, labels, name=o, extras={SAMPLING_KEY: key}) for o in orgs}
    budget_spec = {"mechanism": "gaussian", "epsilon": budget, "delta": 1e-5}
    return Case("dpsda", DPSDA, params, rounds, {"kind": "ring", "seed": 9}, data, budget_spec)


from tests.executor.conftest import engine, engine_url  # noqa: E402,F401  (Podman fixtures, shared)
from tests.executor.images.conftest import registry_addr  # noqa: E402,F401  (the tests' own registry, shared)
