"""The cases of :mod:`benchmarks.audit_overhead`: per algorithm the data, parameters, organisations, rounds
and topology that the simulator and the audited process both run."""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.step import LocalDataset


def _mixture(seed: int, n: int) -> LocalDataset:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [3.0, -2.0, 1.0]])
    z = rng.integers(0, 2, n)
    return LocalDataset(centres[z] + rng.standard_normal((n, 3)), name=f"mix-{seed}")


def case_collab_rf(quick: bool, orgs_override: int | None) -> dict[str, Any]:
    from algorithms.collab_rf.algorithm import CollaborativeRandomForest
    from algorithms.datasets.creditcard import load_creditcard, split_nodes, subsample_split

    n = orgs_override or (5 if quick else 20)
    X, y = load_creditcard()
    split = subsample_split(split_nodes(X, y, n_agents=n), 0.05 if quick else 0.1, seed=0)
    orgs = [f"Org{i + 1}MSP" for i in range(n)]
    data = {o: LocalDataset(s.X_train, s.y_train, name=o) for o, s in zip(orgs, split.nodes)}
    if quick:
        params = {
            "n_new": 5,
            "n_share": 5,
            "n_max": 20,
            "max_depth": 8,
            "n_rep": 5,
            "schedule": ["FIT", "SHARE", "GET"] * 2,
        }
    else:  # seed-003 defaults (n_new = n_share = 10, n_max = 50, depth 10), 12 rounds
        params = {"schedule": ["FIT", "SHARE", "GET"] * 4}
    return {
        "image": "collab-rf",
        "cls": CollaborativeRandomForest,
        "params": params,
        "orgs": orgs,
        "data": data,
        "rounds": len(params["schedule"]),
        "topology": {"kind": "complete", "seed": 1},
    }


def _collabdict_case(
    image: str, cls: Any, rounds_for: Any, params: dict[str, Any], n: int, quick: bool, seed: int
) -> dict[str, Any]:
    """A CollabDict case: ``n`` organisations with mixture data (seeds ``10 * seed + i``), complete topology."""
    orgs = [f"Org{i + 1}MSP" for i in range(n)]
    return {
        "image": image,
        "cls": cls,
        "params": params,
        "orgs": orgs,
        "data": {o: _mixture(10 * seed + i, 200 + 50 * i) for i, o in enumerate(orgs)},
        "rounds": rounds_for(2 if quick else 5, n, cls(**params).agg),
        "topology": {"kind": "complete", "seed": seed},
    }


def case_ggm(quick: bool, orgs_override: int | None) -> dict[str, Any]:
    from algorithms.collabdict.ggm import CollabDictGGM, rounds_for

    params = {"n_components": 2, "aggregation": {"mode": "exact"}}
    n = orgs_override or (3 if quick else 5)
    return _collabdict_case("collabdict-ggm", CollabDictGGM, rounds_for, params, n, quick, 3)


def case_vae(quick: bool, orgs_override: int | None) -> dict[str, Any]:
    from algorithms.collabdict.vae import CollabDictVAE, rounds_for

    params = {"hidden": 16, "optimizer": "adam", "lr": 1e-2, "mc_score": 8, "aggregation": {"mode": "exact"}}
    case = _collabdict_case("collabdict-vae", CollabDictVAE, rounds_for, params, orgs_override or 3, quick, 4)
    return {**case, "runtimes": ("sandbox",)}


def case_dpsda(quick: bool, orgs_override: int | None) -> dict[str, Any]:
    from algorithms.dpsda import DPSDA
    from algorithms.dpsda.experiments import synthetic_olr

    n = orgs_override or (3 if quick else 7)
    rounds = 10 if quick else 40
    orgs = [f"Org{i + 1}MSP" for i in range(n)]
    stream = synthetic_olr(4, dimension=3 * n, horizon=rounds)
    params = {"variant": "C", "n_nodes": n, "dimension": 3 * n, "laplace_scale": 2.0, "weights": "metropolis"}
    return {
        "image": "dpsda",
        "cls": DPSDA,
        "params": params,
        "orgs": orgs,
        "rounds": rounds,
        "data": {o: LocalDataset(stream.features, stream.labels, name=o) for o in orgs},
        "topology": {"kind": "ring", "seed": 9},
    }


CASES = {
    "collab-rf": case_collab_rf,
    "collabdict-ggm": case_ggm,
    "dpsda": case_dpsda,
    "collabdict-vae": case_vae,
}
