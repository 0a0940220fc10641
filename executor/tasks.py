"""One task, end to end on the host: prepare its files, run it isolated, verify what it wrote.

:func:`run_isolated_task` runs one task in a fresh container or sandbox (:meth:`TaskRuntime.run
<executor.runtimes.base.TaskRuntime.run>`: tests, tools, bit-identity checks); the node agent hands its
tasks to a worker (:class:`executor.runtimes.warm.WarmWorker`, started with
:meth:`~executor.runtimes.base.TaskRuntime.start_worker`), which uses the same :func:`write_inputs` and
:func:`verify_outputs`. Either way, between registering the task's public key and completing the
execution record, a task

1. writes the task directory per the task-runtime file contract (:mod:`algorithms.task_runtime`):
   ``in/task.json``, ``in/state.bin``, ``in/inbox/<sender>.bin``; the dataset directory is
   mounted read-only as it is;
2. hands the task's private key over in a separate key directory and destroys it after the run,
   whatever happens;
3. runs the runtime, then checks the outputs: manifest signature by the task key, every output
   digest in the manifest against the bytes written, the input digests against what was
   given, and the numeric profile it names (one this platform knows, digest included). Any failure
   raises :class:`executor.errors.TaskFailed` with the reason.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algorithms.numeric_profile import of_record
from algorithms.task_spec import TaskSpec
from executor.errors import ManifestInvalid, TaskFailed
from executor.images.declarations import sdk_problem
from executor.runtimes.base import Limits, RunOutcome, TaskMounts, TaskRuntime
from executor.task_keys import TaskKey, destroy_key_dir, verify_task_signature
from ledger.client import ImageRecord, ProcessRecord
from wire import bounded_json
from wire.canonical import canonical_json, sha256_digest


def task_spec(
    process: ProcessRecord, image: ImageRecord, organisation: str, rnd: int, runtime: str, data_salt: str
) -> TaskSpec:
    """The task description of ``organisation``'s task of round ``rnd``, from the ledger's process and image
    records: what the node agent writes into ``in/task.json``, and what an auditor's replay rebuilds
    (audit/replay.py), so both compute the same task."""
    return TaskSpec(
        process_id=process.id,
        round=rnd,
        rounds=process.rounds,
        organisation=organisation,
        consortium=tuple(process.consortium),
        process_seed=int(process.topology.get("seed", 0)),
        algorithm=image.algorithm,
        params=dict(process.hyperparameters or {}),
        image_digest=process.image_digest,
        runtime=runtime,
        topology=dict(process.topology),  # the task builds its neighbours from it (names and seed)
        data_salt=data_salt,
        validation_fraction=float(process.validation_fraction),
    )


@dataclass
class TaskOutputs:
    """Verified outputs of one task."""

    manifest: dict[str, Any]
    manifest_bytes: bytes
    signature: bytes
    state: bytes
    outbox: dict[str, bytes]
    model: bytes | None
    metrics: dict[str, Any]
    outcome: RunOutcome
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def step_seconds(self) -> float:
        return float(self.timing.get("step_seconds", 0.0)) + float(self.timing.get("init_seconds", 0.0))


def write_inputs(
    mounts: TaskMounts, spec: TaskSpec, previous_state: bytes | None, inbox: Mapping[str, bytes]
) -> None:
    """Write ``in/`` per the file contract (and clear stale ``out/``)."""
    inp = mounts.inputs
    if inp.exists():
        shutil.rmtree(inp)
    (inp / "inbox").mkdir(parents=True)
    (inp / "task.json").write_bytes(spec.to_json())
    if previous_state is not None:
        (inp / "state.bin").write_bytes(previous_state)
    for sender, blob in sorted(inbox.items()):
        if sender not in spec.consortium or "/" in sender:
            raise ValueError(f"inbox sender {sender!r} is not a consortium member")
        (inp / "inbox" / f"{sender}.bin").write_bytes(blob)
    out = mounts.outputs
    if out.exists():
        shutil.rmtree(out)


def verify_outputs(
    out_dir: Path,
    spec: TaskSpec,
    public_key_pem: str,
    previous_state: bytes | None,
    inbox: Mapping[str, bytes],
    outcome: RunOutcome,
) -> TaskOutputs:
    """Check a task's outputs in ``out_dir`` against its signed manifest (see module doc)."""
    out = Path(out_dir)
    mpath = out / "manifest.json"
    if not mpath.exists():
        reason = f"{outcome.runtime} task exited with code {outcome.exit_code}"
        if outcome.timed_out:
            reason = f"{outcome.runtime} task timed out"
        err = out / "error.json"
        if err.exists():
            try:
                e = bounded_json.loads(err.read_bytes(), "the task's error.json")
                reason += f": {e.get('error')}: {e.get('message')}"
            except (ValueError, AttributeError):
                pass
        raise TaskFailed(reason)
    body = mpath.read_bytes()
    signature = (out / "manifest.sig").read_bytes() if (out / "manifest.sig").exists() else b""
    if not verify_task_signature(public_key_pem, body, signature):
        raise ManifestInvalid("manifest signature does not verify with the task's registered key")
    try:
        manifest = bounded_json.loads(body, "the task's manifest")
    except ValueError as exc:
        raise ManifestInvalid(f"manifest is not JSON: {exc}") from None
    if canonical_json(manifest) != body:
        raise ManifestInvalid("manifest is not in canonical JSON form")
    for k, want in (
        ("process_id", spec.process_id),
        ("round", spec.round),
        ("organisation", spec.organisation),
        ("image_digest", spec.image_digest),
        ("runtime", spec.runtime),
    ):
        if manifest.get(k) != want:
            raise ManifestInvalid(f"manifest {k} is {manifest.get(k)!r}, expected {want!r}")
    try:
        of_record(manifest.get("numeric_profile"))
    except ValueError as exc:
        raise ManifestInvalid(f"manifest names no numeric profile this platform knows: {exc}") from None
    if "sdk" in manifest:  # absent: an image built before tasks recorded it
        problem = sdk_problem(manifest["sdk"])
        if problem is not None:
            raise ManifestInvalid(f"manifest sdk: {problem}")

    try:
        ins, outs = manifest["inputs"], manifest["outputs"]
        want_prev = sha256_digest(previous_state) if previous_state is not None else None
        if ins.get("state") != want_prev:
            raise ManifestInvalid("manifest names a previous state other than the one given")
        if {m["sender"]: m["digest"] for m in ins["messages"]} != {
            s: sha256_digest(b) for s, b in inbox.items()
        }:
            raise ManifestInvalid("manifest names inbox messages other than those given")
        out_messages = {m["recipient"]: m["digest"] for m in outs["messages"]}
        model_entry = outs.get("model")
    except (KeyError, TypeError, AttributeError) as exc:
        raise ManifestInvalid(f"manifest does not follow the result schema: {exc!r}") from None

    def read_checked(path: Path, digest: str, what: str) -> bytes:
        if not path.is_file() or path.is_symlink():
            raise ManifestInvalid(f"{what} named in the manifest was not written")
        data = path.read_bytes()
        if sha256_digest(data) != digest:
            raise ManifestInvalid(f"{what} does not match its manifest digest")
        return data

    state = read_checked(out / "state.bin", outs["state"], "new state")
    outbox = {
        r: read_checked(out / "outbox" / f"{r}.bin", d, f"message to {r}")
        for r, d in sorted(out_messages.items())
    }
    for r in outbox:
        if r not in spec.consortium or r == spec.organisation:
            raise ManifestInvalid(f"message addressed to {r!r}, not another consortium member")
    written = {p.stem for p in (out / "outbox").glob("*.bin")} if (out / "outbox").is_dir() else set()
    if written - set(outbox):
        raise ManifestInvalid(f"messages written but not in the manifest: {sorted(written - set(outbox))}")
    model = read_checked(out / "model.bin", model_entry["digest"], "model") if model_entry else None
    timing: dict[str, float] = {}
    if (out / "timing.json").is_file():
        try:
            timing = {k: float(v) for k, v in json.loads((out / "timing.json").read_bytes()).items()}
        except (ValueError, TypeError, AttributeError):
            timing = {}
    return TaskOutputs(
        manifest=manifest,
        manifest_bytes=body,
        signature=signature,
        state=state,
        outbox=outbox,
        model=model,
        metrics=dict(manifest.get("metrics", {})),
        outcome=outcome,
        timing=timing,
    )


def run_isolated_task(
    runtime: TaskRuntime,
    spec: TaskSpec,
    task_key: TaskKey,
    work_dir: str | Path,
    data_dir: str | Path,
    previous_state: bytes | None,
    inbox: Mapping[str, bytes],
    limits: Limits = Limits(),
    bundle_dir: str | Path | None = None,
    command: Sequence[str] | None = None,
) -> TaskOutputs:
    """Run one task under ``work_dir`` (created; its ``key/`` is always destroyed afterwards)."""
    if spec.runtime != runtime.name:
        raise ValueError(f"task is for runtime {spec.runtime!r}, given {runtime.name!r}")
    work = Path(work_dir)
    mounts = TaskMounts(task_dir=work / "task", data_dir=Path(data_dir), key_dir=work / "key")
    write_inputs(mounts, spec, previous_state, inbox)
    mounts.prepare(runtime.task_uid)
    try:
        task_key.hand_over(mounts.key_dir, uid=runtime.task_uid)
        outcome = runtime.run(spec.image_digest, mounts, limits, command=command, bundle_dir=bundle_dir)
    finally:
        destroy_key_dir(mounts.key_dir)
    return verify_outputs(mounts.outputs, spec, task_key.public_key_pem, previous_state, inbox, outcome)
