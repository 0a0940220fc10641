"""Host-side verification of a task's outputs: anything not signed as written is rejected."""

from __future__ import annotations

import json
import os

import pytest

from algorithms import codec
from algorithms.step import SDK_VERSION
from algorithms.task_runtime import run_task, save_dataset
from algorithms.task_spec import TaskSpec
from executor.errors import ManifestInvalid, TaskFailed
from executor.runtimes.base import RunOutcome, TaskMounts
from executor.task_keys import TaskKey
from executor.tasks import verify_outputs, write_inputs
from tests.executor.conftest import make_dataset
from wire.canonical import canonical_json

ORGS = ("Org1MSP", "Org2MSP")
OK = RunOutcome("sandbox", 0, 0.1, "")


def _run(tmp_path, state=None, inbox=None):
    spec = TaskSpec(
        process_id="p1",
        round=2 if state else 1,
        rounds=2,
        organisation="Org1MSP",
        consortium=ORGS,
        process_seed=3,
        algorithm="average_consensus:AverageConsensus",
        params={},
        image_digest="sha256:" + "c" * 64,
        runtime="sandbox",
        topology={"kind": "complete", "seed": 0},
        data_salt="01",
    )
    m = TaskMounts(tmp_path / "task", tmp_path / "data", tmp_path / "key")
    m.data_dir.mkdir()
    save_dataset(m.data_dir / "dataset.npz", make_dataset(4))
    write_inputs(m, spec, state, inbox or {})
    m.prepare(None)
    key = TaskKey.generate()
    kp = tmp_path / "k.pem"
    kp.write_bytes(key.private_pem())
    run_task(m.task_dir, m.data_dir, kp)
    return spec, m, key


def test_valid_outputs_verify(tmp_path, average_consensus):
    state = codec.encode({"x": [1.0, 1.0, 1.0], "n": 3})
    inbox = {"Org2MSP": codec.encode({"x": [0.0, 0.0, 0.0]})}
    spec, m, key = _run(tmp_path, state, inbox)
    out = verify_outputs(m.outputs, spec, key.public_key_pem, state, inbox, OK)
    assert (
        out.model is not None
        and set(out.outbox) == {"Org2MSP"}
        and out.state == (m.outputs / "state.bin").read_bytes()
    )
    assert out.timing["step_seconds"] >= 0


def test_altered_output_file_is_rejected(tmp_path, average_consensus):
    spec, m, key = _run(tmp_path)
    (m.outputs / "outbox" / "Org2MSP.bin").write_bytes(codec.encode({"x": [9.0]}))
    with pytest.raises(ManifestInvalid, match="message to Org2MSP does not match"):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)


def test_altered_manifest_or_foreign_signature_is_rejected(tmp_path, average_consensus):
    spec, m, key = _run(tmp_path)
    body = json.loads((m.outputs / "manifest.json").read_bytes())
    body["metrics"]["norm"] = 0.0
    (m.outputs / "manifest.json").write_bytes(canonical_json(body))
    with pytest.raises(ManifestInvalid, match="signature"):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)
    # re-signed by another key (a forger without the task key)
    forger = TaskKey.generate()
    (m.outputs / "manifest.sig").write_bytes(forger.sign(canonical_json(body)))
    with pytest.raises(ManifestInvalid, match="signature"):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)


@pytest.mark.parametrize(
    "record",
    [None, {"name": "x86-64-v2", "version": 1, "digest": "sha256:" + "0" * 64}, "x86-64-v2/1"],
    ids=["absent", "another-digest", "not-a-record"],
)
def test_manifest_without_a_known_numeric_profile_is_rejected(tmp_path, average_consensus, record):
    """Signed by the task key, but naming no profile this platform knows (or one with another
    digest: computed with other kernels)."""
    spec, m, key = _run(tmp_path)
    body = json.loads((m.outputs / "manifest.json").read_bytes())
    if record is None:
        del body["numeric_profile"]
    else:
        body["numeric_profile"] = record
    (m.outputs / "manifest.json").write_bytes(canonical_json(body))
    (m.outputs / "manifest.sig").write_bytes(key.sign(canonical_json(body)))
    with pytest.raises(ManifestInvalid, match="numeric profile"):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)


@pytest.mark.parametrize("version", ["2.0.0", "1.99.0", "one"])
def test_manifest_naming_an_sdk_this_platform_cannot_run_is_rejected(tmp_path, average_consensus, version):
    """A signed result whose task ran with another major SDK version, a newer minor one, or a malformed
    version is refused; the version this platform's tasks record is accepted (the other tests)."""
    spec, m, key = _run(tmp_path)
    body = json.loads((m.outputs / "manifest.json").read_bytes())
    assert body["sdk"] == SDK_VERSION
    body["sdk"] = version
    (m.outputs / "manifest.json").write_bytes(canonical_json(body))
    (m.outputs / "manifest.sig").write_bytes(key.sign(canonical_json(body)))
    with pytest.raises(ManifestInvalid, match="manifest sdk: .*" + version):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)


def test_unlisted_message_is_rejected(tmp_path, average_consensus):
    spec, m, key = _run(tmp_path)
    (m.outputs / "outbox" / "Org3MSP.bin").write_bytes(b"smuggled")
    with pytest.raises(ManifestInvalid, match="not in the manifest"):
        verify_outputs(m.outputs, spec, key.public_key_pem, None, {}, OK)


def test_manifest_for_other_inputs_is_rejected(tmp_path, average_consensus):
    spec, m, key = _run(tmp_path)
    with pytest.raises(ManifestInvalid, match="previous state"):
        verify_outputs(m.outputs, spec, key.public_key_pem, codec.encode({"x": [0.0], "n": 1}), {}, OK)


def test_missing_manifest_reports_the_task_error(tmp_path):
    m = TaskMounts(tmp_path / "task", tmp_path / "data", tmp_path / "key")
    os.makedirs(m.outputs)
    (m.outputs / "error.json").write_bytes(canonical_json({"error": "ValueError", "message": "boom"}))
    spec = TaskSpec(
        process_id="p1",
        round=1,
        rounds=1,
        organisation="Org1MSP",
        consortium=ORGS,
        process_seed=0,
        algorithm="a:B",
        params={},
        image_digest="sha256:" + "c" * 64,
        runtime="sandbox",
    )
    with pytest.raises(TaskFailed, match="ValueError: boom"):
        verify_outputs(
            m.outputs, spec, TaskKey.generate().public_key_pem, None, {}, RunOutcome("sandbox", 1, 0.1, "")
        )
    with pytest.raises(TaskFailed, match="timed out"):
        verify_outputs(
            m.outputs,
            spec,
            TaskKey.generate().public_key_pem,
            None,
            {},
            RunOutcome("sandbox", -9, 9, "", True),
        )
