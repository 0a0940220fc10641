"""The task runtime: what runs inside an algorithm image for one task (one organisation, one round).

It is the seed's *Computational Task Runtime* (003 §IV-B, Fig. 2): it reads the task's inputs
from files, calls the algorithm's ``init``/``step`` (:mod:`algorithms.step`), writes the outputs
as files and signs a manifest of their digests with the task's private key. The executor
(``executor/``) prepares the inputs, runs this module in an isolated container or sandbox, and
publishes the signed manifest to the ledger. The file contract (documented in docs/executor.md):

    <task>/in/task.json            the task description (canonical JSON, algorithms.task_spec.TaskSpec)
    <task>/in/state.bin            previous private state (absent in round 1: init runs first)
    <task>/in/inbox/<sender>.bin   each message addressed to this organisation for this round
    <data>/dataset.npz             the organisation's dataset (read-only mount)
    <key>/task_key.pem             the task's private key (PKCS#8 PEM, readable only by the task)

    <task>/out/state.bin           new private state            (algorithms.codec payload)
    <task>/out/outbox/<recipient>.bin  one message per recipient (algorithms.codec payload)
    <task>/out/model.bin           the model, if the step returned one
    <task>/out/metrics.json        metrics (canonical JSON)
    <task>/out/manifest.json       the result: input and output digests, metrics (canonical JSON,
                                   the ExecutionRecord contract's result schema, algorithms.task_manifest)
                                   and, in the last round of a process with a validation slice, the
                                   validation block (algorithms.validation)
    <task>/out/manifest.sig        DER ECDSA P-256/SHA-256 low-S signature of manifest.json
    <task>/out/timing.json         init/step wall seconds (unsigned; for overhead measurements)
    <task>/out/error.json          only on failure: {"error": type, "message": text}

A task computes under the numeric profile its image declares (:mod:`algorithms.numeric_profile`): it
refuses to run (``NumericProfileError`` in ``error.json``) where the profile is not in effect, and
its signed result records the profile.

The manifest bytes are exactly the canonical JSON (sorted keys, compact, UTF-8) of the result,
so the signature verifies against the canonical form of the result the agent submits.

A warm worker (:func:`algorithms.task_worker.serve`) runs the same contract task after task in one
isolated process; the image's command line is :mod:`algorithms.task_command`.

This module imports only numpy, ``cryptography``, :mod:`algorithms` and :mod:`wire` (it runs inside
images).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import IO, Any

import numpy as np

from algorithms import codec, validation
from algorithms.numeric_profile import PROFILE, NumericProfile
from algorithms.step import Algorithm, LocalDataset, StepResult
from algorithms.task_manifest import build_manifest, data_commitment, metrics_json, sign_low_s, utc_now
from algorithms.task_spec import TaskInputError, TaskSpec
from wire.canonical import canonical_json


def _safe_name(name: str, what: str) -> str:
    if not name or "/" in name or name.startswith(".") or "\x00" in name:
        raise TaskInputError(f"invalid {what} name {name!r}")
    return name


# --------------------------------------------------------------------------- data


def save_dataset(path: str | os.PathLike[str], data: LocalDataset) -> None:
    """Write a dataset in the runtime's format (npz: features, labels?, extra__<name>...)."""
    arrays: dict[str, np.ndarray] = {"features": np.asarray(data.features)}
    if data.labels is not None:
        arrays["labels"] = np.asarray(data.labels)
    for k, v in data.extras.items():
        arrays[f"extra__{k}"] = np.asarray(v)
    arrays["name"] = np.array(data.name)
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds after allow_pickle


def load_dataset(path: str | os.PathLike[str] | IO[bytes]) -> LocalDataset:
    with np.load(path, allow_pickle=False) as z:
        extras = {k[len("extra__") :]: z[k] for k in z.files if k.startswith("extra__")}
        labels = z["labels"] if "labels" in z.files else None
        name = str(z["name"]) if "name" in z.files else "local"
        return LocalDataset(features=z["features"], labels=labels, name=name, extras=extras)


# --------------------------------------------------------------------------- the task


def load_algorithm(spec: TaskSpec) -> Algorithm:
    module_name, _, class_name = spec.algorithm.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise TaskInputError(f"cannot load algorithm {spec.algorithm!r}: {exc}") from None
    algo = cls(**dict(spec.params))
    if not isinstance(algo, Algorithm):
        raise TaskInputError(f"{spec.algorithm} does not implement algorithms.step.Algorithm")
    return algo


def payload_provenance(algo: Algorithm, payload: Any) -> dict[str, Any]:
    """Extra fields an algorithm wants recorded (and signed) with an output message or model:
    its optional ``payload_provenance(payload) -> dict`` hook, else nothing. Collaborative RF
    lists the ids and digests of the estimators a payload carries (seed 003 Fig. 5)."""
    hook = getattr(algo, "payload_provenance", None)
    if hook is None:
        return {}
    extra = dict(hook(payload))
    clash = {"recipient", "digest", "size"} & set(extra)
    if clash:
        raise TaskInputError(f"payload_provenance may not override {sorted(clash)}")
    recorded: dict[str, Any] = json.loads(canonical_json(extra))
    return recorded


def run_task(
    task_dir: str | os.PathLike[str],
    data_dir: str | os.PathLike[str],
    key_path: str | os.PathLike[str],
    only_algorithm: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    profile: NumericProfile = PROFILE,
) -> dict[str, Any]:
    """Run one task per the file contract; return the manifest it wrote and signed.

    ``only_algorithm`` (set by an image's entrypoint) refuses tasks for any other algorithm;
    ``out_dir`` (default ``<task_dir>/out``) is where outputs go (warm workers); ``profile`` (the
    image's declared numeric profile) must be in effect once the algorithm is loaded and again after
    its step (a module it imported late), else :class:`~algorithms.numeric_profile.NumericProfileError`
    and nothing is written."""
    started = utc_now()
    task = Path(task_dir)
    spec = TaskSpec.from_json((task / "in" / "task.json").read_bytes())
    if only_algorithm is not None and spec.algorithm != only_algorithm:
        raise TaskInputError(f"this image runs {only_algorithm}, not {spec.algorithm}")
    algo = load_algorithm(spec)
    profile.require()
    data_bytes = (Path(data_dir) / "dataset.npz").read_bytes()
    import io

    dataset = load_dataset(io.BytesIO(data_bytes))
    held_out = None
    if spec.validation_fraction:  # train on the rest; the slice scores the last round's models
        if not validation.supports(algo):
            raise validation.ValidationUnsupported(
                f"{spec.algorithm} cannot score a validation slice; the process declares "
                f"validation_fraction {spec.validation_fraction:g}"
            )
        dataset, held_out = validation.split(
            dataset, spec.validation_fraction, spec.process_seed, spec.organisation
        )

    state_file = task / "in" / "state.bin"
    init_digest = None
    t_init = time.perf_counter()
    if state_file.exists():
        state_bytes = state_file.read_bytes()
        previous_digest = codec.digest(state_bytes)
        state = codec.decode(state_bytes)
    else:
        if spec.round != 1:
            raise TaskInputError(f"round {spec.round} needs in/state.bin (the previous state)")
        previous_digest = None
        init_bytes = codec.encode(algo.init(dataset, spec.init_context()))
        init_digest = codec.digest(init_bytes)
        state = codec.decode(init_bytes)  # exactly what the simulator hands to step
    init_seconds = time.perf_counter() - t_init if init_digest is not None else 0.0

    inbox: dict[str, Any] = {}
    inbox_digests: dict[str, str] = {}
    inbox_dir = task / "in" / "inbox"
    if inbox_dir.is_dir():
        for f in sorted(inbox_dir.iterdir()):
            if f.suffix != ".bin":
                continue
            sender = _safe_name(f.stem, "sender")
            if sender not in spec.consortium:
                raise TaskInputError(f"message from {sender!r}, not a consortium member")
            b = f.read_bytes()
            inbox_digests[sender] = codec.digest(b)
            inbox[sender] = codec.decode(b)

    ctx = spec.context()
    t_step = time.perf_counter()
    res = algo.step(state, dict(sorted(inbox.items())), dataset, ctx)
    step_seconds = time.perf_counter() - t_step
    if not isinstance(res, StepResult):
        raise TaskInputError(f"{spec.algorithm}.step returned {type(res).__name__}, not StepResult")
    for recipient in res.outbox:
        if recipient == spec.organisation or recipient not in spec.consortium:
            raise TaskInputError(f"message addressed to {recipient!r}: not another consortium member")
    assessment = None
    if held_out is not None and spec.round == spec.rounds:
        assessment = validation.assess(
            algo, res.model, dataset, held_out, spec.process_seed, spec.rounds, spec.organisation
        )
    profile.require()

    out = Path(out_dir) if out_dir is not None else task / "out"
    (out / "outbox").mkdir(parents=True, exist_ok=True)
    new_state = codec.encode(res.state)
    (out / "state.bin").write_bytes(new_state)
    outbox_digests: dict[str, tuple[str, int]] = {}
    outbox_provenance: dict[str, dict[str, Any]] = {}
    model_digest = None
    model_provenance: dict[str, Any] = {}
    # an algorithm may cache what its provenance hook computes across this task's payloads
    scope = getattr(algo, "provenance_scope", None)
    with scope() if scope is not None else nullcontext():
        for recipient, payload in sorted(res.outbox.items()):
            blob = codec.encode(payload)
            (out / "outbox" / f"{_safe_name(recipient, 'recipient')}.bin").write_bytes(blob)
            outbox_digests[recipient] = (codec.digest(blob), len(blob))
            outbox_provenance[recipient] = payload_provenance(algo, payload)
        if res.model is not None:
            model = codec.encode(res.model)
            (out / "model.bin").write_bytes(model)
            model_digest = (codec.digest(model), len(model))
            model_provenance = payload_provenance(algo, res.model)
    metrics = metrics_json(res.metrics)
    (out / "metrics.json").write_bytes(canonical_json(metrics))
    # Not signed, not on the ledger: lets the executor separate its overhead from the algorithm's time.
    (out / "timing.json").write_bytes(
        canonical_json({"init_seconds": init_seconds, "step_seconds": step_seconds})
    )

    manifest = build_manifest(
        spec,
        previous_state=previous_digest,
        inbox=inbox_digests,
        data_commitment=data_commitment(spec.data_salt, data_bytes),
        state=codec.digest(new_state),
        outbox=outbox_digests,
        model=model_digest,
        metrics=metrics,
        started=started,
        finished=utc_now(),
        outbox_provenance=outbox_provenance,
        model_provenance=model_provenance,
        numeric_profile=profile.record(),
        validation=None if assessment is None else assessment.record(),
    )
    body = canonical_json(manifest)
    signature = sign_low_s(Path(key_path).read_bytes(), body)
    (out / "manifest.sig").write_bytes(signature)
    (out / "manifest.json").write_bytes(body)  # written last: its presence means "done"
    return manifest


def run_and_report(
    task_dir: str | os.PathLike[str],
    data_dir: str | os.PathLike[str],
    key_path: str | os.PathLike[str],
    only_algorithm: str | None,
    out_dir: str | os.PathLike[str] | None = None,
    profile: NumericProfile = PROFILE,
) -> int:
    t0 = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else Path(task_dir) / "out"
    try:
        manifest = run_task(task_dir, data_dir, key_path, only_algorithm, out_dir=out, profile=profile)
    except Exception as exc:  # report any failure as a file the agent records on the ledger
        err = {"error": type(exc).__name__, "message": str(exc)[:2000]}
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "error.json").write_bytes(canonical_json(err))
        except OSError:
            pass
        print(f"task failed: {err['error']}: {err['message']}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {"task": "completed", "round": manifest["round"], "seconds": round(time.perf_counter() - t0, 6)}
        ),
        file=sys.stderr,
    )
    return 0
