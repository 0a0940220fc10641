"""An auditor re-runs disclosed tasks and compares every digest with the signed execution records
(docs/audit-replay.md).

:func:`replay_disclosure` runs on the auditor's own machine, as the auditor's organisation:

1. the disclosure file's sealed bytes hash to the digest it names, and the ledger holds a disclosure
   record of exactly that bundle, from that organisation, to the auditor, for those rounds
   (``Disclosure:records``, which also hands over the process and the disclosed execution records --
   readable by the recipient even when it is not a member of the process);
2. the bundle opens with the auditor's key-agreement key;
3. every disclosed record's task signature holds (the key registered before the task ran signed it);
4. the image is the one the process pins: made local by its ledger reference (a registry reference by
   digest is fetched and re-hashed, :class:`executor.images.resolver.ImageResolver`) and its digest
   compared with the pinned one, and the numeric profile it declares is the one the record names;
5. the disclosed data with the disclosed salt gives the record's data commitment, the previous state
   and each inbox message hash to the digests the record signed;
6. the task runs in the sandbox (:func:`executor.tasks.run_isolated_task`) under the profile the image
   declares, with a fresh task key, and every output digest -- state, each message, model -- and the
   profile of its manifest is compared with the signed record.

Each task gets a :class:`TaskVerdict`: matched, or the list of :class:`Mismatch` naming exactly which
digest differs (``input data``, ``previous state``, ``inbox message from X``, ``image``, ``profile``,
``output state``, ``message to X``, ``model``; ``record signature``, ``run`` when the record is forged or
the task did not finish). :func:`replay_process` does it for every member's disclosure of a process and
says which records and final models matched, and which tasks no disclosure covered.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from algorithms.numeric_profile import NumericProfile
from algorithms.task_manifest import data_commitment
from algorithms.task_spec import TaskSpec
from audit.disclosure import Bundle, DisclosedTask, Disclosure, DisclosureError
from audit.signatures import check_record_signature
from exchange.errors import DecryptionError
from executor.errors import ExecutorError, ImageBuildError
from executor.images.bundle import bundle_profile
from executor.images.reference import RegistryError
from executor.images.resolver import ImageResolver
from executor.runtimes.base import Limits
from executor.runtimes.sandbox import SandboxRuntime
from executor.task_keys import TaskKey, TaskSignatureInvalid
from executor.tasks import run_isolated_task
from executor.tasks import task_spec as executor_task_spec
from ledger.client import (
    ConsortiaClient,
    DisclosedRecords,
    ExecutionRecord,
    ImageRecord,
    PrivateTerms,
    ProcessRecord,
    ResultConfidential,
)
from ledger.errors import ContractError, LedgerError
from wire.canonical import sha256_digest


class ReplayError(ValueError):
    """A disclosure cannot be replayed at all (not recorded, not addressed to this key, ...)."""


@dataclass(frozen=True)
class Mismatch:
    """One digest that differs: ``what`` it is, what the signed record says, what the replay found."""

    what: str
    recorded: str | None
    found: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "recorded": self.recorded, "found": self.found}

    def __str__(self) -> str:
        return f"{self.what}: recorded {self.recorded}, found {self.found}"


@dataclass
class TaskVerdict:
    """The verdict on one replayed task."""

    process_id: str
    round: int
    organisation: str
    mismatches: list[Mismatch] = field(default_factory=list)
    compared: int = 0  #: digests compared
    seconds: float = 0.0
    ran: bool = False  #: the task ran to its signed manifest in the replay
    model: str | None = None  #: the digest of the model the replay made (a last round)

    @property
    def matched(self) -> bool:
        return self.ran and not self.mismatches

    @property
    def task(self) -> str:
        return f"{self.process_id}/{self.round}/{self.organisation}"

    def differ(self, what: str, recorded: str | None, found: str | None) -> None:
        self.compared += 1
        if recorded != found:
            self.mismatches.append(Mismatch(what, recorded, found))

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "process_id": self.process_id,
            "round": self.round,
            "organisation": self.organisation,
            "verdict": "matched" if self.matched else "mismatch",
            "mismatches": [m.to_dict() for m in self.mismatches],
            "digests_compared": self.compared,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class ReplayReport:
    """The replay of one disclosure."""

    process_id: str
    organisation: str
    recipient: str
    bundle_digest: str
    disclosed: str  #: when the ledger recorded the disclosure
    image_digest: str
    tasks: list[TaskVerdict]
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.tasks) and all(t.matched for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "organisation": self.organisation,
            "recipient": self.recipient,
            "bundle_digest": self.bundle_digest,
            "disclosed": self.disclosed,
            "image_digest": self.image_digest,
            "ok": self.ok,
            "replayed_tasks": len(self.tasks),
            "matched": sum(t.matched for t in self.tasks),
            "tasks": [t.to_dict() for t in self.tasks],
            "seconds": round(self.seconds, 3),
        }


@dataclass
class ImageSource:
    """Where the auditor's machine gets the pinned image: by the ledger's reference into ``bundles_root``
    (a registry reference by digest is fetched), or a bundle directory the auditor names (``bundle``: its
    own build)."""

    bundles_root: Path
    bundle: Path | None = None
    runtime: SandboxRuntime = field(default_factory=SandboxRuntime)

    def locate(self, image: ImageRecord) -> tuple[Path | None, str | None, str]:
        """(bundle directory, its digest here, a note): None where it cannot be had, the note then
        saying why (absent, unreachable, or what the registry served and the digest it should have)."""
        if self.bundle is not None:
            return self.bundle, self.runtime.local_digest(str(self.bundle)), f"given bundle {self.bundle}"
        resolver = ImageResolver(self.runtime, self.bundles_root)
        d = resolver.bundle_dir(image.reference)
        try:
            digest = resolver.local_digest(image.reference)
        except (RegistryError, ExecutorError, OSError) as exc:
            return d, None, str(exc) if image.reference in str(exc) else f"{image.reference}: {exc}"
        return d, digest, image.reference if digest is not None else f"{image.reference}: not on this machine"


def ledger_records(client: ConsortiaClient, disclosure: Disclosure) -> DisclosedRecords:
    """The ledger's disclosure record of this bundle, with the process and the disclosed records; the
    record must name the file's organisation, recipient (the caller) and rounds."""
    try:
        found = client.disclosed_records(disclosure.process_id, disclosure.bundle_digest)
    except (ContractError, LedgerError) as exc:
        raise ReplayError(
            f"the ledger holds no disclosure of bundle {disclosure.bundle_digest} to {client.organisation}: {exc}"
        ) from None
    record = found.disclosure
    if record.recipient != client.organisation:
        raise ReplayError(
            f"the disclosure of bundle {disclosure.bundle_digest} is addressed to {record.recipient}, "
            f"not to {client.organisation}"
        )
    if (record.organisation, tuple(record.rounds)) != (disclosure.organisation, disclosure.rounds):
        raise ReplayError(
            f"the ledger's disclosure of bundle {disclosure.bundle_digest} is from {record.organisation} for "
            f"rounds {list(record.rounds)}; the file claims {disclosure.organisation} for rounds "
            f"{list(disclosure.rounds)}"
        )
    return found


def _with_terms(process: ProcessRecord, bundle: Bundle) -> ProcessRecord:
    """The disclosed process record (public) with the bundle's private terms joined, after checking
    them against its ``private_sha256`` (docs/confidentiality.md); ReplayError if they do not match."""
    if process.private_sha256 is None:
        return process
    if bundle.private_terms is None:
        raise ReplayError(
            f"the disclosure carries no private terms of {process.id}: its tasks cannot be rebuilt"
        )
    try:
        terms = PrivateTerms.model_validate(bundle.private_terms)
    except ValueError as exc:
        raise ReplayError(f"the disclosure's private terms of {process.id} are malformed: {exc}") from None
    if terms.digest() != process.private_sha256:
        raise ReplayError(
            f"the disclosure's private terms of {process.id} do not match the on-chain hash {process.private_sha256}"
        )
    return process.joined(terms)


def _with_confidential(record: ExecutionRecord, task: DisclosedTask) -> ExecutionRecord:
    """The disclosed (public) record with the bundle's confidential part of its result joined when it
    hashes to the signed ``confidential_sha256``; as it is otherwise (the replay then names the input
    data it cannot compare)."""
    result = record.result
    if result is None or result.confidential_sha256 is None or task.confidential is None:
        return record
    try:
        part = ResultConfidential.model_validate(task.confidential)
    except ValueError:
        return record
    if part.digest() != result.confidential_sha256:
        return record
    return record.view(result=result.joined(part), confidential_salt=part.salt)


def task_spec(process: ProcessRecord, image: ImageRecord, record: ExecutionRecord, salt: str) -> TaskSpec:
    """The task description the organisation's agent wrote for this task (:func:`executor.tasks.task_spec`),
    run in the auditor's sandbox."""
    return executor_task_spec(process, image, record.organisation, record.round, "sandbox", salt)


def _profile_id(p: Mapping[str, Any] | None) -> str | None:
    return None if p is None else f"{p.get('name')}/{p.get('version')} {p.get('digest')}"


def replay_task(
    process: ProcessRecord,
    image: ImageRecord,
    record: ExecutionRecord,
    bundle: Bundle,
    task: DisclosedTask,
    bundle_dir: Path | None,
    local_digest: str | None,
    work: Path,
    runtime: SandboxRuntime,
    limits: Limits = Limits(),
    image_note: str = "",
) -> TaskVerdict:
    """Check one task's inputs against its signed record, run it, compare its outputs (module doc).
    ``image_note``: why the image could not be had here (:meth:`ImageSource.locate`), reported as what
    was found in its place."""
    t0 = time.perf_counter()
    v = TaskVerdict(process.id, record.round, record.organisation)
    try:
        check_record_signature(record)
    except TaskSignatureInvalid as exc:
        v.mismatches.append(Mismatch("record signature", "valid", str(exc)))
        return v
    result = record.result
    if record.status != "completed" or result is None:
        v.mismatches.append(Mismatch("record", "completed", record.status))
        return v
    # the image and its numeric profile
    v.differ("image", process.image_digest, result.image_digest)
    if local_digest is None and image_note:
        v.compared += 1
        v.mismatches.append(Mismatch("image", process.image_digest, f"none: {image_note}"))
    else:
        v.differ("image", process.image_digest, local_digest)
    declared: NumericProfile | None = None
    if bundle_dir is not None and local_digest is not None:
        try:
            declared = bundle_profile(bundle_dir)
        except ImageBuildError:
            declared = None
    recorded_profile = None if result.numeric_profile is None else result.numeric_profile.json_object()
    v.differ("profile", _profile_id(recorded_profile), _profile_id(declared.record() if declared else None))
    # the inputs against the digests the record signed
    ins = result.inputs
    v.differ("input data", ins.data_commitment, data_commitment(bundle.data_salt, bundle.dataset))
    v.differ("previous state", ins.state, None if task.state is None else sha256_digest(task.state))
    # a message's party is None when its confidential part was not disclosed (or did not match)
    signed_in = {m.sender or f"undisclosed sender {i}": m.digest for i, m in enumerate(ins.messages)}
    for sender in sorted(set(signed_in) | set(task.inbox)):
        got = task.inbox.get(sender)
        v.differ(
            f"inbox message from {sender}", signed_in.get(sender), None if got is None else sha256_digest(got)
        )
    if record.runtime != "sandbox":
        v.mismatches.append(Mismatch("runtime", record.runtime, "sandbox (the replay runs sandboxed tasks)"))
        return v
    if local_digest != process.image_digest or bundle_dir is None:
        v.seconds = time.perf_counter() - t0
        return v  # another image would compute other bytes: not run
    # the run
    spec = task_spec(process, image, record, bundle.data_salt)
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "dataset.npz").write_bytes(bundle.dataset)
    try:
        out = run_isolated_task(
            runtime,
            spec,
            TaskKey.generate(),
            work / "task",
            data,
            task.state,
            task.inbox,
            limits,
            bundle_dir=bundle_dir,
        )
    except (ExecutorError, ValueError) as exc:
        v.mismatches.append(Mismatch("run", "completed", f"{type(exc).__name__}: {exc}"))
        v.seconds = time.perf_counter() - t0
        return v
    v.ran = True
    outs = result.outputs
    v.differ("profile", _profile_id(recorded_profile), _profile_id(out.manifest.get("numeric_profile")))
    v.differ("output state", outs.state, sha256_digest(out.state))
    signed_out = {m.recipient or f"undisclosed recipient {i}": m.digest for i, m in enumerate(outs.messages)}
    for recipient in sorted(set(signed_out) | set(out.outbox)):
        got = out.outbox.get(recipient)
        v.differ(
            f"message to {recipient}", signed_out.get(recipient), None if got is None else sha256_digest(got)
        )
    v.model = None if out.model is None else sha256_digest(out.model)
    if outs.model is not None or out.model is not None:
        v.differ(
            "model",
            None if outs.model is None else outs.model.digest,
            None if out.model is None else sha256_digest(out.model),
        )
    v.seconds = time.perf_counter() - t0
    return v


def replay_disclosure(
    disclosure: Disclosure,
    client: ConsortiaClient,
    private_key: ec.EllipticCurvePrivateKey,
    images: ImageSource,
    work_dir: Path | None = None,
    limits: Limits = Limits(),
    progress: Callable[[TaskVerdict], None] | None = None,
) -> ReplayReport:
    """Replay every task of ``disclosure`` as ``client``'s organisation (the recipient), opening it with
    ``private_key`` (module doc). :class:`ReplayError` if it cannot be replayed at all."""
    t0 = time.perf_counter()
    found = ledger_records(client, disclosure)
    try:
        bundle = disclosure.open(private_key)
    except DecryptionError as exc:
        raise ReplayError(f"the disclosure does not open with {client.organisation}'s key: {exc}") from None
    except DisclosureError as exc:
        raise ReplayError(str(exc)) from None
    process = found.process
    try:
        image = client.get_image(process.image_id)
    except (ContractError, LedgerError) as exc:
        raise ReplayError(f"image {process.image_id} of {process.id}: {exc}") from None
    bundle_dir, local, image_note = images.locate(image)
    process = _with_terms(process, bundle)
    records = {
        r.round: _with_confidential(r, t)
        for r in found.executions
        for t in bundle.tasks
        if t.round == r.round
    }
    verdicts = []
    tmp = Path(tempfile.mkdtemp(prefix="consortia-replay-", dir=work_dir))
    try:
        for task in bundle.tasks:
            record = records.get(task.round)
            if record is None:
                v = TaskVerdict(process.id, task.round, bundle.organisation)
                v.mismatches.append(Mismatch("record", "on the ledger", None))
            else:
                v = replay_task(
                    process,
                    image,
                    record,
                    bundle,
                    task,
                    bundle_dir,
                    local,
                    tmp / f"r{task.round}",
                    images.runtime,
                    limits,
                    image_note if local is None else "",
                )
            verdicts.append(v)
            if progress is not None:
                progress(v)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ReplayReport(
        process.id,
        bundle.organisation,
        client.organisation,
        disclosure.bundle_digest,
        found.disclosure.created,
        process.image_digest,
        verdicts,
        time.perf_counter() - t0,
    )


@dataclass
class ProcessReplay:
    """Every member's disclosure of a process replayed: which records and final models matched."""

    process_id: str
    reports: list[ReplayReport]
    missing: list[str]  #: tasks (``process/round/org``) no disclosure covered
    models: dict[str, dict[str, Any]]  #: per organisation: the final model's signed digest and the verdict
    errors: list[str]  #: disclosures that could not be replayed at all

    @property
    def tasks(self) -> list[TaskVerdict]:
        return [t for r in self.reports for t in r.tasks]

    @property
    def ok(self) -> bool:
        return (
            bool(self.reports)
            and not self.missing
            and not self.errors
            and all(t.matched for t in self.tasks)
            and all(m["matched"] for m in self.models.values())
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "ok": self.ok,
            "records": len(self.tasks),
            "records_matched": sum(t.matched for t in self.tasks),
            "missing": self.missing,
            "models": self.models,
            "errors": self.errors,
            "disclosures": [r.to_dict() for r in self.reports],
        }


def replay_process(
    process_id: str,
    disclosures: Iterable[Disclosure],
    client: ConsortiaClient,
    private_key: ec.EllipticCurvePrivateKey,
    images: ImageSource,
    work_dir: Path | None = None,
    limits: Limits = Limits(),
    progress: Callable[[TaskVerdict], None] | None = None,
) -> ProcessReplay:
    """Replay each disclosure of ``process_id`` and match the whole process: every completed record of
    every member covered by a matched replay, and each member's final model (the model its last-round
    record signed, and the Model record where the auditor may read it) equal to the replayed model."""
    reports: list[ReplayReport] = []
    errors: list[str] = []
    process: ProcessRecord | None = None
    for d in disclosures:
        if d.process_id != process_id:
            errors.append(f"disclosure {d.bundle_digest} is of process {d.process_id}, not {process_id}")
            continue
        try:
            reports.append(replay_disclosure(d, client, private_key, images, work_dir, limits, progress))
            process = process or client.disclosed_records(d.process_id, d.bundle_digest).process
        except ReplayError as exc:
            errors.append(f"{d.organisation} ({d.bundle_digest}): {exc}")
    covered = {(t.organisation, t.round): t for t in (t for r in reports for t in r.tasks)}
    missing: list[str] = []
    models: dict[str, dict[str, Any]] = {}
    if process is not None:
        for org in process.consortium:
            for rnd in range(1, process.rounds + 1):
                if (org, rnd) not in covered:
                    missing.append(f"{process_id}/{rnd}/{org}")
            last = covered.get((org, process.rounds))
            if last is None:
                continue
            model = _model_verdict(client, process_id, org, last)
            if model is not None:
                models[org] = model
    return ProcessReplay(process_id, reports, missing, models, errors)


def _model_verdict(
    client: ConsortiaClient, process_id: str, org: str, last: TaskVerdict
) -> dict[str, Any] | None:
    """The final model of ``org`` (None: its last round has none): the replay of its last round matched,
    model digest included; where the auditor may read the Model record, its digest is the replayed one."""
    if not last.ran:
        return {"matched": False, "detail": "its last round did not run in the replay"}
    if last.model is None and not any(m.what == "model" for m in last.mismatches):
        return None
    out: dict[str, Any] = {"digest": last.model, "matched": last.matched}
    mismatch = next((m for m in last.mismatches if m.what == "model"), None)
    if mismatch is not None:
        out["detail"] = str(mismatch)
    try:
        record = client.get_model(f"{process_id}:{org}")
    except (ContractError, LedgerError):
        return out  # not on its access list: the signed record is what it has
    out["model_record"] = record.digest
    if record.digest != last.model:
        out["matched"] = False
        out.setdefault("detail", f"the Model record names {record.digest}, the replay made {last.model}")
    return out
