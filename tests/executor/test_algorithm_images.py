"""Every algorithm image recipe, and a real algorithm (CollabDict GGM, one EM iteration) run audited
end to end: the platform's digests equal the simulator's, in warm sandboxes and warm containers
(cold one-task-per-run execution is covered with the reference workload in test_node_agent)."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.collabdict.ggm import CollabDictGGM, rounds_for
from algorithms.simulator import simulate
from algorithms.step import Algorithm, LocalDataset
from algorithms.task_runtime import load_algorithm, save_dataset
from exchange.service import HostedServices
from executor import images
from executor.node_agent import NodeAgent
from executor.runtimes.sandbox import SandboxRuntime
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger

GGM = {"n_components": 2, "tau": 0.0, "aggregation": {"mode": "exact"}}


def test_every_recipe_names_an_importable_algorithm():
    folders = sorted(p.parent for p in images.IMAGES_DIR.glob("*/image.json"))
    assert {f.name for f in folders} >= {"average-consensus", "collabdict-ggm", "collab-rf", "dpsda"}
    for folder in folders:
        recipe = images.ImageRecipe.load(folder)
        assert len(recipe.algorithm) <= 64  # the Image contract's limit
        if recipe.name == "average-consensus":
            continue  # its module lives in its folder (conftest imports it)
        spec = type("S", (), {"algorithm": recipe.algorithm, "params": {}})
        assert isinstance(load_algorithm(spec), Algorithm), recipe.name


def _mixture(S=3, M=2, K=2, seed=1):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3.0, (K, M))
    out = []
    for s in range(S):
        z = rng.integers(0, K, 30 + 10 * s)
        out.append(centres[z] + rng.standard_normal((len(z), M)))
    return out


def _run_ggm(tmp_path, consortium, runtime, image, warm):
    orgs = list(consortium.msp_ids)
    data = {o: LocalDataset(X, name=o) for o, X in zip(orgs, _mixture())}
    for o in orgs:
        (tmp_path / "data" / o / "default").mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "default" / "dataset.npz", data[o])
    algo = CollabDictGGM(**GGM)
    rounds = rounds_for(1, len(orgs), algo.agg)
    hosted = HostedServices()  # the agents of this process reach each other's stores here
    with EmbeddedLedger(tmp_path / "ledger.sqlite", consortium) as ledger:
        client = ConsortiaClient(ledger, consortium.identity(orgs[0]))
        recipe = images.ImageRecipe.named("collabdict-ggm")
        images.register(client, recipe, image, image_id="ggm:1")
        client.create_process("p-ggm", "ggm:1", orgs, {"kind": "none"}, rounds, hyperparameters=GGM)
        client.start_process("p-ggm")
        agents = [
            NodeAgent(
                ledger,
                consortium.identity(o),
                consortium,
                runtime,
                tmp_path / "data" / o,
                tmp_path / "store",
                tmp_path / "state",
                warm=warm,
                hosted=hosted,
            )
            for o in orgs
        ]
        try:
            for _ in range(rounds + 1):
                for a in agents:
                    a.run_process_round("p-ggm")
        finally:
            for a in agents:
                a.close()
        records = client.query_executions("p-ggm")
        models = {o: client.get_model(f"p-ggm:{o}").digest for o in orgs}
        status = client.get_process("p-ggm").status
    sim = simulate(algo, data, rounds, seed=0, topology={"kind": "none"}, consortium=orgs)
    assert status == "completed"
    assert len(records) == rounds * len(orgs)
    for r in records:
        assert r.status == "completed", (r.round, r.organisation, r.failure_reason)
        assert r.result["outputs"]["state"] == sim.state_digests[r.round][r.organisation]
    for o in orgs:
        assert models[o] == images.hashlib.sha256(sim.models[o]).hexdigest().join(["sha256:", ""])


def test_collabdict_ggm_in_warm_sandboxes_equals_the_simulator(tmp_path, consortium):
    bundle = images.build_bundle(images.ImageRecipe.named("collabdict-ggm"))
    _run_ggm(tmp_path, consortium, SandboxRuntime(), bundle, warm=True)


@pytest.mark.container
def test_collabdict_ggm_in_warm_containers_equals_the_simulator(tmp_path, consortium, engine):
    from executor.runtimes.container import ContainerRuntime

    built = images.build_image(engine, images.ImageRecipe.named("collabdict-ggm"))
    _run_ggm(tmp_path, consortium, ContainerRuntime(client=engine), built, warm=True)
