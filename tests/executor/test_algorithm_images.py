"""Every algorithm image recipe, and a real algorithm (CollabDict GGM, one EM iteration) run audited
end to end: the platform's digests equal the simulator's, in warm sandboxes and warm containers
(cold one-task-per-run execution is covered with the reference workload in node/test_agent.py)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from algorithms.collabdict.ggm import CollabDictGGM, rounds_for
from algorithms.simulator import simulate
from algorithms.step import Algorithm, LocalDataset
from algorithms.task_runtime import load_algorithm, save_dataset
from exchange.service import HostedServices, node_store
from executor.consent import give_consent
from executor.images.build import register
from executor.images.bundle import build_bundle
from executor.images.engine import build_image
from executor.images.recipe import IMAGES_DIR, ImageRecipe
from executor.node.agent import NodeAgent
from executor.runtimes.sandbox import SandboxRuntime
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger

GGM = {"n_components": 2, "tau": 0.0, "aggregation": {"mode": "exact"}}


def test_every_recipe_names_an_importable_algorithm():
    folders = sorted(p.parent for p in IMAGES_DIR.glob("*/image.json"))
    assert {f.name for f in folders} >= {"average-consensus", "collabdict-ggm", "collab-rf", "dpsda"}
    for folder in folders:
        recipe = ImageRecipe.load(folder)
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
        recipe = ImageRecipe.named("collabdict-ggm")
        register(client, recipe, image, image_id="ggm:1")
        client.create_process("p-ggm", "ggm:1", orgs, {"kind": "none"}, rounds, hyperparameters=GGM)
        give_consent({o: ConsortiaClient(ledger, consortium.identity(o, "Admin")) for o in orgs}, "p-ggm")
        client.start_process("p-ggm")
        clients = {o: ConsortiaClient(ledger, consortium.identity(o)) for o in orgs}
        agents = [
            NodeAgent(
                clients[o],
                consortium,
                runtime,
                node_store(clients[o], consortium, tmp_path / "store", hosted=hosted),
                tmp_path / "data" / o,
                tmp_path / "state" / o,
                warm=warm,
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
        assert r.result.outputs.state == sim.state_digests[r.round][r.organisation]
    for o in orgs:
        assert models[o] == "sha256:" + hashlib.sha256(sim.models[o]).hexdigest()


def test_collabdict_ggm_in_warm_sandboxes_equals_the_simulator(tmp_path, consortium):
    bundle = build_bundle(ImageRecipe.named("collabdict-ggm"))
    _run_ggm(tmp_path, consortium, SandboxRuntime(), bundle, warm=True)


@pytest.mark.container
def test_collabdict_ggm_in_warm_containers_equals_the_simulator(tmp_path, consortium, engine):
    from executor.runtimes.container import ContainerRuntime

    built = build_image(engine, ImageRecipe.named("collabdict-ggm"))
    _run_ggm(tmp_path, consortium, ContainerRuntime(client=engine), built, warm=True)
