"""Measure what each algorithm image sends: the structure of its messages and models and their
largest encoded size, in the simulator (the same step functions and codec as the platform), on the
end-to-end cases and on larger configurations; what ``algorithm-images/*/image.json`` declare under
``outputs`` is checked against it (docs/consent.md "What an image may send").

``python -m benchmarks.message_sizes`` prints one row per (image, configuration) and, last, one JSON
line: per image the largest message and model seen, the declared bounds, and whether every payload
seen matched its declaration.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from algorithms import codec
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from executor.images.outputs import read, schema_problem
from executor.images.recipe import IMAGES_DIR


def _classification(seed: int, n: int, d: int) -> LocalDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.normal(size=n) > 0.4).astype(np.int64)
    return LocalDataset(x, y, name=f"cls-{seed}")


def _mixture(seed: int, n: int, d: int) -> LocalDataset:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(3, d))
    return LocalDataset(centres[rng.integers(0, 3, n)] + rng.standard_normal((n, d)), name=f"mix-{seed}")


def _configs() -> dict[str, list[tuple[str, Callable[[], tuple[Any, dict, int, dict]]]]]:
    """image -> [(label, () -> (algorithm, datasets, rounds, topology))]"""
    from algorithms.collab_rf.algorithm import CollaborativeRandomForest
    from algorithms.collabdict.ggm import CollabDictGGM
    from algorithms.collabdict.ggm import rounds_for as ggm_rounds
    from algorithms.collabdict.vae import CollabDictVAE
    from algorithms.collabdict.vae import rounds_for as vae_rounds
    from algorithms.dpsda import DPSDA
    from algorithms.dpsda.experiments import synthetic_olr
    from executor.images.declarations import algorithm_class, declaration

    orgs3 = [f"Org{i}MSP" for i in range(1, 4)]
    orgs5 = [f"Org{i}MSP" for i in range(1, 6)]

    def avg(n_orgs: list[str], d: int, rounds: int):
        cls = algorithm_class(declaration("average_consensus:AverageConsensus"))
        data = {o: _mixture(i, 64, d) for i, o in enumerate(n_orgs)}
        return cls(eps=0.3, noise=0.1), data, rounds, {"kind": "ring", "seed": 11}

    def rf(n_orgs: list[str], d: int, n: int, depth: int, n_new: int, n_max: int):
        schedule = ["FIT", "SHARE", "GET"] * 2
        algo = CollaborativeRandomForest(
            n_new=n_new, n_share=n_new, n_max=n_max, max_depth=depth, n_rep=2, schedule=schedule
        )
        data = {o: _classification(20 + i, n, d) for i, o in enumerate(n_orgs)}
        return algo, data, len(schedule), {"kind": "complete", "seed": 5}

    def ggm(n_orgs: list[str], d: int, k: int):
        algo = CollabDictGGM(n_components=k, aggregation={"mode": "exact"})
        data = {o: _mixture(30 + i, 120, d) for i, o in enumerate(n_orgs)}
        return algo, data, ggm_rounds(1, len(n_orgs), algo.agg), {"kind": "complete", "seed": 3}

    def vae(n_orgs: list[str], d: int, hidden: int):
        params = {"hidden": hidden, "optimizer": "sgd", "normalise": False, "mc_score": 4}
        algo = CollabDictVAE(**params, aggregation={"mode": "exact"})
        data = {o: _mixture(40 + i, 48, d) for i, o in enumerate(n_orgs)}
        return algo, data, vae_rounds(1, len(n_orgs), algo.agg), {"kind": "complete", "seed": 4}

    def olr(n_orgs: list[str], d: int, rounds: int):
        algo = DPSDA(variant="C", n_nodes=len(n_orgs), dimension=d, laplace_scale=2.0, weights="metropolis")
        stream = synthetic_olr(4, dimension=d, horizon=rounds)
        data = {o: LocalDataset(stream.features, stream.labels, name=o) for o in n_orgs}
        return algo, data, rounds, {"kind": "ring", "seed": 9}

    return {
        "average-consensus": [
            ("3 orgs, d=3", lambda: avg(orgs3, 3, 4)),
            ("5 orgs, d=64", lambda: avg(orgs5, 64, 4)),
        ],
        "collab-rf": [
            ("e2e: d=4, depth 3", lambda: rf(orgs3, 4, 60, 3, 3, 6)),
            ("d=30, depth 8, 10 new, 40 max", lambda: rf(orgs3, 30, 600, 8, 10, 40)),
        ],
        "collabdict-ggm": [
            ("d=3, K=2", lambda: ggm(orgs3, 3, 2)),
            ("d=12, K=4, 5 orgs", lambda: ggm(orgs5, 12, 4)),
        ],
        "collabdict-vae": [
            ("d=3, hidden 8", lambda: vae(orgs3, 3, 8)),
            ("d=12, hidden 32", lambda: vae(orgs3, 12, 32)),
        ],
        "dpsda": [("d=6, 4 rounds", lambda: olr(orgs3, 6, 4)), ("d=60, 5 orgs", lambda: olr(orgs5, 60, 4))],
    }


def measure(image: str, make: Callable[[], tuple[Any, dict, int, dict]]) -> dict[str, Any]:
    algo, data, rounds, topology = make()
    seen: dict[str, Any] = {"message": 0, "model": 0, "problems": []}
    declared = read(IMAGES_DIR / image)

    def on_round(rnd: int, results: dict[str, Any]) -> None:
        for org, res in results.items():
            parts = [("message", p) for p in res.outbox.values()]
            parts += [("model", res.model)] if res.model is not None else []
            for kind, value in parts:
                blob = codec.encode(value)
                seen[kind] = max(seen[kind], len(blob))
                bound = getattr(declared, kind)
                if len(blob) > bound.max_bytes:
                    seen["problems"].append(f"{kind} of {org} in round {rnd}: {len(blob)} bytes")
                if bound.schema is not None:
                    problem = schema_problem(codec.decode(blob), bound.schema, f"{kind} of {org}")
                    if problem is not None:
                        seen["problems"].append(problem)

    simulate(algo, data, rounds, seed=7, topology=topology, consortium=list(data), on_round=on_round)
    return seen


def main(argv: list[str] | None = None) -> int:
    out: dict[str, Any] = {}
    for image, configs in _configs().items():
        declared = read(IMAGES_DIR / image)
        for label, make in configs:
            seen = measure(image, make)
            entry = out.setdefault(
                image,
                {
                    "message_max": 0,
                    "model_max": 0,
                    "declared_message_bytes": declared.message.max_bytes,
                    "declared_model_bytes": declared.model.max_bytes,
                    "raw_rows": declared.raw_rows,
                    "matches_declaration": True,
                },
            )
            entry["message_max"] = max(entry["message_max"], seen["message"])
            entry["model_max"] = max(entry["model_max"], seen["model"])
            entry["matches_declaration"] &= not seen["problems"]
            print(
                f"{image:18} {label:32} message ≤ {seen['message']:>9} B  model ≤ {seen['model']:>9} B  "
                f"{'ok' if not seen['problems'] else seen['problems'][:2]}",
                flush=True,
            )
    print(json.dumps(out, sort_keys=True))
    return 0 if all(e["matches_declaration"] for e in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
