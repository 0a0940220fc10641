"""The task runtime signs a member's validation figures (algorithms.validation) in the last round's result
only, equal to the simulator's. Here, not in tests/algorithms: the task runtime refuses to compute where the
image's numeric profile is not in effect, and tests/algorithms also runs on the machine's own kernels."""

from __future__ import annotations

from algorithms import codec
from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.simulator import simulate
from algorithms.task_runtime import run_task, save_dataset
from algorithms.task_spec import TaskSpec
from tests.algorithms.test_validation import RF, labelled


def _key(path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.write_bytes(pem)
    return path


def test_the_task_runtime_signs_the_figures_in_the_last_round_only(tmp_path):
    """Every task of a small process run through the task runtime's file contract, in-process: the last
    round's signed result carries exactly the simulator's figures, no earlier round carries any."""
    orgs = ("A", "B")
    data = {o: labelled(20 + i, 40) for i, o in enumerate(orgs)}
    alg = CollaborativeRandomForest(**RF)
    topo = {"kind": "ring", "seed": 9}
    states: dict[str, bytes | None] = {o: None for o in orgs}
    inboxes: dict[str, dict[str, bytes]] = {o: {} for o in orgs}
    manifests: dict[str, list[dict]] = {o: [] for o in orgs}
    for o in orgs:
        (tmp_path / "data" / o).mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "dataset.npz", data[o])
    for rnd in range(1, alg.rounds + 1):
        sent: dict[str, dict[str, bytes]] = {o: {} for o in orgs}
        for o in orgs:
            task = tmp_path / f"{o}-{rnd}"
            (task / "in" / "inbox").mkdir(parents=True)
            s = TaskSpec(
                "p", rnd, alg.rounds, o, orgs, 9, "algorithms.collab_rf.algorithm:CollaborativeRandomForest",
                alg.params(), "sha256:" + "ab" * 32, "sandbox", topo, validation_fraction=0.2,
            )  # fmt: skip
            (task / "in" / "task.json").write_bytes(s.to_json())
            if states[o] is not None:
                (task / "in" / "state.bin").write_bytes(states[o])
            for sender, blob in inboxes[o].items():
                (task / "in" / "inbox" / f"{sender}.bin").write_bytes(blob)
            manifests[o].append(run_task(task, tmp_path / "data" / o, _key(task / "key.pem")))
            states[o] = (task / "out" / "state.bin").read_bytes()
            for f in (task / "out" / "outbox").glob("*.bin"):
                sent[f.stem][o] = f.read_bytes()
        inboxes = sent
    sim = simulate(alg, data, alg.rounds, 9, topo, validation_fraction=0.2)
    for o in orgs:
        assert all("validation" not in m for m in manifests[o][:-1])
        assert manifests[o][-1]["validation"] == sim.validation[o]
        assert manifests[o][-1]["outputs"]["model"]["digest"] == codec.digest(sim.models[o])
