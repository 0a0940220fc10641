"""The task runtime's file contract (algorithms.task_spec, task_manifest, task_runtime, task_command), run
in-process (no isolation needed to test the contract)."""

from __future__ import annotations

import json
import shutil

import pytest

from algorithms import codec
from algorithms.numeric_profile import PROFILE, NumericProfile, NumericProfileError
from algorithms.simulator import simulate
from algorithms.step import SDK_VERSION
from algorithms.task_command import main
from algorithms.task_manifest import data_commitment
from algorithms.task_runtime import load_dataset, run_task, save_dataset
from algorithms.task_spec import TaskInputError, TaskSpec
from algorithms.topologies.static import ring
from executor.task_keys import TaskKey, verify_task_signature
from tests.executor.conftest import make_dataset
from wire.canonical import canonical_json

ORGS = ("Org1MSP", "Org2MSP", "Org3MSP")
ALGO = "average_consensus:AverageConsensus"
DIGEST = "sha256:" + "ab" * 32


def spec(rnd=1, org="Org1MSP", rounds=2, **kw):
    base = dict(
        process_id="p1",
        round=rnd,
        rounds=rounds,
        organisation=org,
        consortium=ORGS,
        process_seed=5,
        algorithm=ALGO,
        params={"eps": 0.3, "noise": 0.1},
        image_digest=DIGEST,
        runtime="sandbox",
        topology={"kind": "ring", "seed": 0},
        data_salt="0011",
    )
    base.update(kw)
    return TaskSpec(**base)


def prepare(tmp_path, s: TaskSpec, state=None, inbox=None, data=None):
    task = tmp_path / "task"
    (task / "in" / "inbox").mkdir(parents=True)
    (task / "in" / "task.json").write_bytes(s.to_json())
    if state is not None:
        (task / "in" / "state.bin").write_bytes(state)
    for sender, b in (inbox or {}).items():
        (task / "in" / "inbox" / f"{sender}.bin").write_bytes(b)
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    save_dataset(d / "dataset.npz", data or make_dataset(1))
    key = TaskKey.generate()
    key_path = tmp_path / "key.pem"
    key_path.write_bytes(key.private_pem())
    return task, d, key_path, key


def test_task_spec_round_trips_and_validates():
    s = spec()
    assert TaskSpec.from_json(s.to_json()) == s
    assert s.to_json() == canonical_json(json.loads(s.to_json()))
    with pytest.raises(TaskInputError, match="round"):
        spec(rnd=3)
    with pytest.raises(TaskInputError, match="not in the consortium"):
        spec(org="Org9MSP")
    with pytest.raises(TaskInputError, match="module:Class"):
        spec(algorithm="nocolon")
    with pytest.raises(TaskInputError, match="image digest"):
        spec(image_digest="md5:x")
    with pytest.raises(TaskInputError, match="hex"):
        spec(data_salt="zz")


def test_dataset_round_trip(tmp_path):
    ds = make_dataset(3)
    save_dataset(tmp_path / "d.npz", ds)
    back = load_dataset(tmp_path / "d.npz")
    assert (back.features == ds.features).all() and back.labels is None and back.name == ds.name


def test_round_one_runs_init_then_step_and_signs_the_manifest(tmp_path, average_consensus):
    s = spec()
    task, d, key_path, key = prepare(tmp_path, s)
    manifest = run_task(task, d, key_path)
    out = task / "out"
    body = (out / "manifest.json").read_bytes()
    assert json.loads(body) == manifest and canonical_json(manifest) == body
    assert verify_task_signature(key.public_key_pem, body, (out / "manifest.sig").read_bytes())
    assert not verify_task_signature(
        TaskKey.generate().public_key_pem, body, (out / "manifest.sig").read_bytes()
    )
    # contract schema
    assert set(manifest) == {
        "process_id",
        "round",
        "organisation",
        "image_digest",
        "runtime",
        "inputs",
        "outputs",
        "metrics",
        "numeric_profile",
        "sdk",
        "started",
        "finished",
    }
    assert manifest["numeric_profile"] == PROFILE.record()  # signed: what the task computed under
    assert manifest["sdk"] == SDK_VERSION  # signed: the SDK version it ran with
    assert manifest["inputs"]["state"] is None and manifest["inputs"]["messages"] == []
    assert manifest["inputs"]["data_commitment"] == data_commitment("0011", (d / "dataset.npz").read_bytes())
    msgs = manifest["outputs"]["messages"]  # the ring's neighbours, built inside the task from its record
    assert [m["recipient"] for m in msgs] == ["Org2MSP", "Org3MSP"]
    for m in msgs:
        assert m["digest"] == codec.digest((out / "outbox" / f"{m['recipient']}.bin").read_bytes())
    assert manifest["outputs"]["state"] == codec.digest((out / "state.bin").read_bytes())
    assert manifest["outputs"]["model"] is None
    # same computation as the simulator's round 1 for this organisation
    algo = average_consensus.AverageConsensus(eps=0.3, noise=0.1)
    datasets = {o: make_dataset(1) for o in ORGS}
    sim = simulate(algo, datasets, rounds=1, seed=5, topology=ring(3), consortium=ORGS)
    assert manifest["outputs"]["state"] == sim.state_digests[1]["Org1MSP"]
    assert {m["recipient"]: m["digest"] for m in msgs} == {
        r: d for (s, r), d in sim.message_digests[0].items() if s == "Org1MSP"
    }


def test_later_round_reads_state_and_inbox_and_final_round_writes_model(tmp_path):
    state = codec.encode({"x": [1.0, 2.0, 3.0], "n": 4})
    inbox = {"Org3MSP": codec.encode({"x": [3.0, 2.0, 1.0]})}
    task, d, key_path, _ = prepare(tmp_path, spec(rnd=2), state=state, inbox=inbox)
    manifest = run_task(task, d, key_path)
    assert manifest["inputs"]["state"] == codec.digest(state)
    assert manifest["inputs"]["messages"] == [{"sender": "Org3MSP", "digest": codec.digest(inbox["Org3MSP"])}]
    model = codec.decode((task / "out" / "model.bin").read_bytes())
    # x + eps * (x_3 - x) = [1.6, 2.0, 2.4]
    assert list(model["x"]) == pytest.approx([1.6, 2.0, 2.4], abs=1e-12)
    assert manifest["outputs"]["model"]["digest"] == codec.digest((task / "out" / "model.bin").read_bytes())
    assert manifest["metrics"]["norm"] == pytest.approx(float((1.6**2 + 4 + 2.4**2) ** 0.5))


def test_missing_state_after_round_one_is_an_error_file(tmp_path):
    task, d, key_path, _ = prepare(tmp_path, spec(rnd=2))
    assert main([str(task), str(d), str(key_path)]) == 1
    err = json.loads((task / "out" / "error.json").read_bytes())
    assert err["error"] == "TaskInputError" and "state.bin" in err["message"]
    assert not (task / "out" / "manifest.json").exists()


def test_message_from_non_member_is_refused(tmp_path):
    task, d, key_path, _ = prepare(tmp_path, spec(), inbox={"Mallory": codec.encode({"x": [0.0]})})
    with pytest.raises(TaskInputError, match="not a consortium member"):
        run_task(task, d, key_path)


def test_image_entrypoint_runs_only_its_algorithm(tmp_path):
    task, d, key_path, _ = prepare(tmp_path, spec(algorithm="algorithms.step:StepResult"))
    assert main([str(task), str(d), str(key_path)], only_algorithm=ALGO) == 1
    assert "this image runs" in json.loads((task / "out" / "error.json").read_bytes())["message"]


def test_a_task_refuses_to_run_where_its_numeric_profile_is_not_in_effect(tmp_path):
    """The image's profile must be in effect once the algorithm is loaded: otherwise nothing runs,
    nothing is written but error.json naming what differs (the agent fails the record with it)."""
    elsewhere = NumericProfile(
        "elsewhere", 1, "a profile this process was not started under", {"OPENBLAS_CORETYPE": "Zen"}
    )
    task, d, key_path, _ = prepare(tmp_path, spec())
    with pytest.raises(NumericProfileError, match=r"elsewhere/1 is not in effect: \$OPENBLAS_CORETYPE="):
        run_task(task, d, key_path, profile=elsewhere)
    assert not (task / "out").exists()
    # through the image's command line: an unknown declared profile, then one not in effect
    with pytest.raises(ValueError, match="unknown numeric profile"):
        main([str(task), str(d), str(key_path)], numeric_profile="x86-64-v9/1")
    from algorithms.task_runtime import run_and_report

    assert run_and_report(task, d, key_path, None, profile=elsewhere) == 1
    err = json.loads((task / "out" / "error.json").read_bytes())
    assert err["error"] == "NumericProfileError" and "OPENBLAS_CORETYPE" in err["message"]
    assert not (task / "out" / "manifest.json").exists()


def test_same_inputs_same_output_digests(tmp_path):
    digests = []
    for i in range(2):
        task, d, key_path, _ = prepare(tmp_path / str(i), spec())
        m = run_task(task, d, key_path)
        digests.append((m["outputs"], m["inputs"]))
        shutil.rmtree(task / "out")
    assert digests[0] == digests[1]
