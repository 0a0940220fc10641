"""The node agent of one organisation: follows the ledger and runs its share of every open round
(docs/design.md "Execution", docs/executor.md "Node agent"; seed 003 §IV-B/C, Fig. 2).

For each running learning process whose consortium includes the organisation, and for the
process's current round ``r`` (derived on chain from the execution records):

1. **verify** the local image (container image id or sandbox bundle digest) against the digest the
   process pins -- a mismatch is recorded on the ledger with ``ExecutionRecord:fail_task`` and the
   task is never run;
2. **register** a fresh task key: the public key goes into a new execution record
   (``create_task``) before the task runs;
3. **gather inputs**: the previous state from the organisation's own store (digest from its
   completed record of round r-1), each message addressed to it in round r-1 (located in the
   sender's store, verified against the sender's signed on-chain digest, decrypted), its dataset;
4. **run** the task isolated (:func:`executor.tasks.run_isolated_task`);
5. **publish**: store the new state and the model sealed to the organisation itself (nothing
   plaintext at rest, :meth:`executor.artifacts.ArtifactStore.put_private`), seal each outgoing
   message to its recipient, then ``complete_task`` with the signed result; after the last
   round, publish the model (encrypted once, data key sealed to every consortium member) with
   ``Model:publish``.

**Idempotent and resumable.** Every step is keyed by (process, round, organisation) and checks
the ledger first, so a restart after a kill at any point neither duplicates nor loses a record:

* a *journal* entry per task holds the task key, sealed to the organisation's own key-agreement
  key (:func:`ledger.envelope.seal`), written *before* ``create_task``; after a restart the same
  key is reused, so a record whose public key is already registered can still be completed
  (the key is removed when the record is completed or failed);
* a record that exists and is completed is never touched again; a task is simply re-run after
  a crash (steps are deterministic, so its outputs' digests are the same);
* a ``complete_task`` whose commit status was lost is recognised on restart by the record being
  completed with the same result.

Fault injection for tests: if ``CONSORTIA_AGENT_KILL_AT`` equals ``<checkpoint>:<round>`` the
agent SIGKILLs itself at that checkpoint (``before_register``, ``after_register``,
``during_run``, ``before_complete``, ``after_complete``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from algorithms.simulator import context as task_context
from algorithms.task_runtime import TaskSpec
from executor.artifacts import ArtifactRef, ArtifactStore, MessageRef, open_message, write_private_file
from executor.declarations import build_topology, dataset_problem, declaration
from executor.errors import (
    ExecutorError,
    ImageDigestMismatch,
    ManifestInvalid,
    RuntimeUnavailable,
    TaskFailed,
)
from executor.images import cache_root, verify_digest
from executor.runtimes.base import Limits, TaskRuntime
from executor.runtimes.warm import WarmWorker
from executor.task_keys import TaskKey
from executor.tasks import TaskOutputs
from ledger.client import ConsortiaClient
from ledger.envelope import encrypt_payload, seal, unseal
from ledger.errors import AlreadyExists, BudgetExceeded, ContractError, InvalidState, MVCCConflict, NotFound
from ledger.identity import Consortium, Identity
from ledger.interface import Ledger
from ledger.records import ExecutionRecord, ImageRecord, ProcessRecord

log = logging.getLogger(__name__)

CHECKPOINTS = ("before_register", "after_register", "during_run", "before_complete", "after_complete")


def _checkpoint(name: str, rnd: int) -> None:
    want = os.environ.get("CONSORTIA_AGENT_KILL_AT", "")
    if want and want == f"{name}:{rnd}":
        log.warning("fault injection: killing the agent at %s of round %d", name, rnd)
        os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- images


@dataclass
class ImageResolver:
    """Maps a process's image (ledger record) to what the runtime runs locally.

    Container: the engine image tagged with the record's ``reference``. Sandbox: the bundle
    named by a ``bundle:<dir>`` reference under ``<cache>/bundles``."""

    runtime: TaskRuntime
    bundles_root: Path = field(default_factory=lambda: cache_root() / "bundles")

    def bundle_dir(self, reference: str) -> Path | None:
        if not reference.startswith("bundle:"):
            return None
        name = reference[len("bundle:") :]
        if "/" in name or name.startswith("."):
            return None
        return self.bundles_root / name

    def local_digest(self, reference: str) -> str | None:
        if self.runtime.name == "sandbox":
            d = self.bundle_dir(reference)
            return self.runtime.local_digest(str(d)) if d is not None else None
        return self.runtime.local_digest(reference)


# --------------------------------------------------------------------------- journal


class TaskJournal:
    """Per-task recovery state under ``<state>/<process>/<round>/``: the task key sealed to the
    organisation's own key-agreement certificate (0600), removed once the record is final."""

    def __init__(self, root: Path, consortium: Consortium, org: str):
        self.root = root
        self.cert = consortium.encryption_certificate(org)
        self._key_loader = lambda: consortium.encryption_key(org)

    def _dir(self, pid: str, rnd: int) -> Path:
        return self.root / pid.replace("/", "_") / f"{rnd:06d}"

    def _info(self, pid: str, rnd: int) -> bytes:
        return f"consortia-task-key|{pid}|{rnd}".encode()

    def load_key(self, pid: str, rnd: int) -> TaskKey | None:
        p = self._dir(pid, rnd) / "task_key.sealed"
        if not p.exists():
            return None
        pem = unseal(self._key_loader(), p.read_bytes(), self._info(pid, rnd))
        key = serialization.load_pem_private_key(pem, None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return TaskKey(key)

    def save_key(self, pid: str, rnd: int, key: TaskKey) -> None:
        d = self._dir(pid, rnd)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "task_key.sealed.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(seal(self.cert, key.private_pem(), self._info(pid, rnd)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / "task_key.sealed")

    def work_dir(self, pid: str, rnd: int) -> Path:
        return self._dir(pid, rnd) / "work"

    def forget_process(self, pid: str) -> None:
        d = self.root / pid.replace("/", "_")
        if d.is_dir():
            for r in d.iterdir():
                if r.name.isdigit():
                    self.forget(pid, int(r.name))

    def forget(self, pid: str, rnd: int) -> None:
        import shutil

        d = self._dir(pid, rnd)
        p = d / "task_key.sealed"
        if p.exists():
            p.unlink()
        shutil.rmtree(d / "work", ignore_errors=True)


# --------------------------------------------------------------------------- the agent


@dataclass
class RoundOutcome:
    process_id: str
    round: int
    status: str  # completed | failed | waiting | done
    detail: str = ""
    step_seconds: float = 0.0  # the algorithm's own init+step time inside the task (completed only)


class NodeAgent:
    """Runs the tasks of one organisation (``identity.msp_id``)."""

    def __init__(
        self,
        ledger: Ledger,
        identity: Identity,
        consortium: Consortium,
        runtime: TaskRuntime,
        data_root: str | os.PathLike,
        store_root: str | os.PathLike,
        state_dir: str | os.PathLike,
        limits: Limits = Limits(),
        images: ImageResolver | None = None,
        warm: bool = False,
    ):
        self.ledger = ledger
        self.identity = identity
        self.client = ConsortiaClient(ledger, identity)
        self.org = identity.msp_id
        self.consortium = consortium
        self.runtime = runtime
        self.data_root = Path(data_root)
        self.store = ArtifactStore(store_root, self.org)
        self.store_root = Path(store_root)
        self.state_dir = Path(state_dir) / self.org
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)  # salt, key journal, task directories: this organisation's only
        self.limits = limits
        self.images = images or ImageResolver(runtime)
        self.journal = TaskJournal(self.state_dir / "tasks", consortium, self.org)
        self._salt = self._data_salt()
        self.warm = warm
        self._workers: dict[str, WarmWorker] = {}
        self._finished: set[str] = set()  # processes this agent saw finished (run_once skips them)

    # ---- warm workers (one per process, same isolation, fresh key per round)
    def _worker(self, process: ProcessRecord, image: ImageRecord) -> WarmWorker:
        pid = process.id
        w = self._workers.get(pid)
        if w is not None and w.alive(max_age=2.0):
            return w
        if w is not None:
            w.stop()
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{self.org}-{pid}")
        w = WarmWorker(
            self.runtime,
            process.image_digest,
            self.state_dir / "warm" / safe,
            self.data_dir(process),
            self.limits,
            bundle_dir=self.images.bundle_dir(image.reference),
            name=f"consortia-warm-{safe}"[:120],
        )
        self._workers[pid] = w.start()
        return w

    def stop_workers(self, pid: str | None = None) -> None:
        for k in [k for k in self._workers if pid is None or k == pid]:
            self._workers.pop(k).stop()

    def close(self) -> None:
        self.stop_workers()

    # ---- ledger helpers
    def _retry(self, submit: Callable[..., Any], *args: Any, attempts: int = 8, **kw: Any) -> Any:
        """Submit through the client; a transaction invalidated by an MVCC/phantom conflict
        (another organisation's record committed in the same block) wrote nothing, so it is retried."""
        for i in range(attempts):
            try:
                return submit(*args, **kw)
            except MVCCConflict:
                if i == attempts - 1:
                    raise
                time.sleep(0.01 * (2**i) * (0.5 + secrets.randbelow(1000) / 1000))

    def _record(self, pid: str, rnd: int, org: str | None = None) -> ExecutionRecord | None:
        try:
            return self.client.get_execution(pid, rnd, org or self.org)
        except NotFound:
            return None

    def _data_salt(self) -> str:
        """The organisation's secret salt for data commitments (created once, 0600)."""
        p = self.state_dir / "data_salt"
        if not p.exists():
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        return p.read_text().strip()

    def data_dir(self, process: ProcessRecord) -> Path:
        """``<data root>/<process dataset or 'default'>/dataset.npz``."""
        name = process.dataset or "default"
        if "/" in name or name.startswith("."):
            raise ExecutorError(f"invalid dataset name {name!r}")
        return self.data_root / name

    # ---- following the ledger
    def processes(self) -> list[ProcessRecord]:
        return [p for p in self.client.list_processes() if self.org in p.consortium and p.status == "running"]

    def run_once(self) -> list[RoundOutcome]:
        """Advance every running process of this organisation by at most one task each.

        An infrastructure error (engine down, ledger unreachable) is logged and retried on the
        next pass; it is not recorded as a task failure."""
        outcomes = []
        for p in self.client.list_processes():
            if self.org not in p.consortium or p.id in self._finished or p.status == "created":
                continue
            try:
                outcome = self.run_process_round(p.id)
            except (ExecutorError, OSError) as exc:
                log.error("%s: process %s: %s (will retry)", self.org, p.id, exc)
                continue
            if outcome.status == "done":  # final: model published, journal and workers cleared
                self._finished.add(p.id)
            outcomes.append(outcome)
        return outcomes

    def run_until_idle(
        self, process_id: str, timeout: float = 600.0, poll: float = 0.05
    ) -> list[RoundOutcome]:
        """Run this organisation's rounds of one process until it has nothing left to do
        (all its rounds completed, or a failure), waiting for other organisations as needed."""
        deadline = time.monotonic() + timeout
        outcomes: list[RoundOutcome] = []
        while time.monotonic() < deadline:
            try:
                o = self.run_process_round(process_id)
            except RuntimeUnavailable as exc:  # e.g. a worker ended before its task: start anew
                log.warning("%s: %s (retrying)", self.org, exc)
                time.sleep(poll)
                continue
            if o.status != "waiting":
                outcomes.append(o)
            if o.status in ("done", "failed"):
                return outcomes
            if o.status == "waiting":
                time.sleep(poll)
        raise TimeoutError(f"{self.org}: process {process_id} did not finish within {timeout} s")

    def follow(self, stop: threading.Event | None = None, poll: float = 1.0) -> None:
        """Run forever (until ``stop``): wake on chaincode events, and poll as a safety net."""
        stop = stop or threading.Event()
        start = self.ledger.block_height(self.identity)
        while not stop.is_set():
            for o in self.run_once():
                if o.status in ("completed", "failed"):
                    log.info("task %s round %d: %s %s", o.process_id, o.round, o.status, o.detail)
            try:
                for ev in self.ledger.events(self.identity, start_block=start, timeout=poll):
                    start = ev.block_number + 1
                    break
            except Exception:  # events are a wake-up hint only; polling continues
                time.sleep(poll)

    # ---- one round
    def run_process_round(self, pid: str) -> RoundOutcome:
        process = self.client.get_process(pid)
        rnd = int(process.current_round or 1)
        if process.status == "completed":
            self._publish_model(process)  # a kill right after the last completion left it unpublished
        if process.status in ("completed", "failed", "aborted"):
            self.journal.forget_process(pid)
            self.stop_workers(pid)
            return RoundOutcome(pid, rnd, "done", f"{process.status} {process.status_reason}".strip())
        if process.status != "running":
            return RoundOutcome(pid, rnd, "waiting", process.status)
        if rnd > process.rounds:
            self._finish(process)
            return RoundOutcome(pid, rnd, "done", "all rounds completed")
        record = self._record(pid, rnd)
        if record is not None and record.status == "completed":
            self.journal.forget(pid, rnd)
            if rnd == process.rounds:
                self._publish_model(process)
            return RoundOutcome(pid, rnd, "waiting", "own task completed; waiting for the others")
        if record is not None and record.status == "failed":
            self.journal.forget(pid, rnd)
            self._fail_process(pid, f"task of {self.org} for round {rnd} failed: {record.failure_reason}")
            return RoundOutcome(pid, rnd, "failed", record.failure_reason)
        return self._execute(process, rnd, record)

    def _fail(
        self, pid: str, rnd: int, reason: str, details: Mapping[str, Any] | None = None
    ) -> RoundOutcome:
        try:
            self._retry(self.client.fail_task, pid, rnd, reason[:2000], dict(details or {}))
        except InvalidState:
            pass  # already final (a previous attempt recorded it)
        self.journal.forget(pid, rnd)
        log.warning("%s: task of round %d of %s failed: %s", self.org, rnd, pid, reason)
        self._fail_process(pid, f"task of {self.org} for round {rnd} failed: {reason}")
        return RoundOutcome(pid, rnd, "failed", reason)

    def _fail_process(self, pid: str, reason: str) -> None:
        """A round completes only when every member completes it: a failed task ends the process,
        with the reason on the ledger, so that no organisation waits for it forever."""
        try:
            self._retry(self.client.fail_process, pid, reason[:1000])
        except InvalidState:
            pass  # already failed, aborted or completed

    def _execute(self, process: ProcessRecord, rnd: int, record: ExecutionRecord | None) -> RoundOutcome:
        pid = process.id
        image = self.client.get_image(process.image_id)
        # 1. verify the image before anything else (a live warm worker was verified when it started
        #    and runs that image id for its whole life: nothing to re-check)
        try:
            live = self._workers.get(pid)
            if not (
                self.warm
                and live is not None
                and live.image_digest == process.image_digest
                and live.alive(max_age=2.0)
            ):
                verify_digest(
                    image.reference, process.image_digest, self.images.local_digest(image.reference)
                )
        except ImageDigestMismatch as exc:
            return self._fail(
                pid,
                rnd,
                f"image refused: {exc}",
                {"code": exc.code, "pinned": exc.pinned, "local": exc.local or ""},
            )
        # 2. what only this agent can see: can this process run here at all? (a topology the executor
        #    does not know, a missing dataset folder, labels the image does not declare). Refused
        #    on the ledger with the reason, so the process ends failed instead of running for ever.
        problem = self._preflight(process, image)
        if problem is not None:
            return self._fail(pid, rnd, problem, {"code": "TASK_PREFLIGHT"})
        # The task's fresh container/sandbox starts now (engine start-up and imports overlap the key
        # registration); it gets its key and inputs, and may run, only after registration.
        worker = self._worker(process, image) if self.warm else self._one_shot(process, image, rnd)
        try:
            return self._register_run_publish(process, image, rnd, record, worker)
        finally:
            if worker.one_shot:
                worker.stop()

    def _preflight(self, process: ProcessRecord, image: ImageRecord) -> str | None:
        """Why this organisation cannot run a task of ``process`` at all, or None."""
        try:
            build_topology(process.topology, len(process.consortium))
        except ExecutorError as exc:
            return str(exc)
        try:
            data_dir = self.data_dir(process)
        except ExecutorError as exc:
            return str(exc)
        return dataset_problem(data_dir, declaration(image.algorithm))

    def _one_shot(self, process: ProcessRecord, image: ImageRecord, rnd: int) -> WarmWorker:
        return WarmWorker(
            self.runtime,
            process.image_digest,
            self.journal.work_dir(process.id, rnd),
            self.data_dir(process),
            self.limits,
            bundle_dir=self.images.bundle_dir(image.reference),
            one_shot=True,
        ).start()

    def _register_run_publish(
        self,
        process: ProcessRecord,
        image: ImageRecord,
        rnd: int,
        record: ExecutionRecord | None,
        worker: WarmWorker,
    ) -> RoundOutcome:
        pid = process.id
        # 2. task key: reuse the journaled one (restart), or create, journal, register
        key = self.journal.load_key(pid, rnd)
        if record is not None and (key is None or record.public_key != key.public_key_pem):
            return self._fail(pid, rnd, "task key lost: the registered key is not in this agent's journal")
        if key is None:
            key = TaskKey.generate()
            self.journal.save_key(pid, rnd, key)
        if record is None:
            _checkpoint("before_register", rnd)
            try:
                self._retry(self.client.create_task, pid, rnd, key.public_key_pem, self.runtime.name)
            except AlreadyExists:
                record = self._record(pid, rnd)
                if record is None or record.public_key != key.public_key_pem:
                    return self._fail(pid, rnd, "an execution record with another key already exists")
            _checkpoint("after_register", rnd)
        # 3. inputs
        try:
            previous_state, inbox = self._gather_inputs(process, rnd)
        except (ExecutorError, ValueError) as exc:
            return self._fail(pid, rnd, f"inputs unavailable: {exc}")
        # 4. run
        spec = self._task_spec(process, image, rnd)
        if os.environ.get("CONSORTIA_AGENT_KILL_AT") == f"during_run:{rnd}":
            threading.Timer(0.05, _checkpoint, ("during_run", rnd)).start()
        try:
            outputs = worker.run(spec, key, previous_state, inbox)
        except (TaskFailed, ManifestInvalid) as exc:
            return self._fail(pid, rnd, str(exc), {"code": exc.code})
        # 5. publish
        self._store_outputs(process, rnd, outputs)
        _checkpoint("before_complete", rnd)
        try:
            self._retry(self.client.complete_task, outputs.manifest, outputs.signature)
        except BudgetExceeded as exc:
            # the contract refused the round: it would exceed the process's privacy budget
            return self._fail(
                pid,
                rnd,
                f"privacy budget exceeded: {exc}",
                {
                    "code": exc.code,
                    **exc.details,
                    **{
                        k: outputs.manifest["metrics"][k]
                        for k in ("epsilon_spent", "epsilon_network_spent")
                        if k in outputs.manifest["metrics"]
                    },
                },
            )
        except InvalidState:
            rec = self._record(pid, rnd)
            if not (rec and rec.status == "completed" and rec.public_key == key.public_key_pem):
                now = self.client.get_process(pid)
                if now.status in ("failed", "aborted") and rec is not None and rec.status == "running":
                    # another member ended the process meanwhile: stop, do not hang (fail_task is refused
                    # once the process ended, so the record stays running; the process says why)
                    return self._fail(
                        pid, rnd, f"result not accepted: the process is {now.status} ({now.status_reason})"
                    )
                raise
        _checkpoint("after_complete", rnd)
        self.journal.forget(pid, rnd)
        if rnd == process.rounds:
            self._publish_model(process)
            self.stop_workers(pid)
        return RoundOutcome(pid, rnd, "completed", outputs.manifest["outputs"]["state"], outputs.step_seconds)

    def _task_spec(self, process: ProcessRecord, image: ImageRecord, rnd: int) -> TaskSpec:
        consortium = tuple(process.consortium)
        topo = build_topology(process.topology, len(consortium))
        seed = int(process.topology.get("seed", 0))
        ctx = task_context(seed, rnd, process.rounds, self.org, consortium, topo)
        return TaskSpec(
            process_id=process.id,
            round=rnd,
            rounds=process.rounds,
            organisation=self.org,
            consortium=consortium,
            process_seed=seed,
            algorithm=image.algorithm,
            params=dict(process.hyperparameters or {}),
            image_digest=process.image_digest,
            runtime=self.runtime.name,
            out_neighbours=ctx.out_neighbours,
            in_neighbours=ctx.in_neighbours,
            data_salt=self._salt,
        )

    def _gather_inputs(self, process: ProcessRecord, rnd: int) -> tuple[bytes | None, dict[str, bytes]]:
        if rnd == 1:
            return None, {}
        pid = process.id
        # one query for every member's record of round r-1 (not one evaluation per sender)
        previous = {r.organisation: r for r in self.client.query_executions(pid, rnd - 1)}
        own = previous.get(self.org)
        if own is None or own.status != "completed" or own.result is None:
            raise ExecutorError(f"no completed own record for round {rnd - 1}")
        key = self.consortium.encryption_key(self.org)
        state = self.store.get_private(own.result["outputs"]["state"], key)
        inbox: dict[str, bytes] = {}
        for sender in process.consortium:
            if sender == self.org:
                continue
            rec = previous.get(sender)
            if rec is None or rec.status != "completed" or rec.result is None:
                raise ExecutorError(f"round {rnd - 1} of {sender} is not completed")
            for m in rec.result["outputs"]["messages"]:
                if m["recipient"] != self.org:
                    continue
                ref = self._locate_message(pid, rnd - 1, sender, m["digest"])
                inbox[sender] = open_message(
                    ref, process_id=pid, round=rnd - 1, recipient=self.org, recipient_key=key
                )
        return state, inbox

    # ---- message index: where a sender's sealed message for a recipient is
    def _index_path(self, store_org: str, pid: str, rnd: int, recipient: str) -> Path:
        return (
            self.store_root
            / store_org
            / "messages"
            / pid.replace("/", "_")
            / f"{rnd:06d}"
            / f"{recipient}.json"
        )

    def _locate_message(self, pid: str, rnd: int, sender: str, payload_digest: str) -> MessageRef:
        p = self._index_path(sender, pid, rnd, self.org)
        try:
            entry = json.loads(p.read_text())
        except FileNotFoundError:
            raise ExecutorError(f"message of {sender} for round {rnd} is not in its store") from None
        if entry["payload_digest"] != payload_digest:
            raise ExecutorError(
                f"store of {sender} indexes message {entry['payload_digest']}, "
                f"the ledger names {payload_digest}"
            )
        return MessageRef(
            sender=sender,
            recipient=self.org,
            payload_digest=payload_digest,
            stored=ArtifactRef(**entry["stored"]),
        )

    def _store_outputs(self, process: ProcessRecord, rnd: int, outputs: TaskOutputs) -> None:
        pid = process.id
        own = self.consortium.encryption_certificate(self.org)
        self.store.put_private(outputs.state, own)  # sealed to this organisation: never in the clear at rest
        for recipient, payload in sorted(outputs.outbox.items()):
            ref = self.store.put_message(
                payload,
                process_id=pid,
                round=rnd,
                recipient=recipient,
                recipient_certificate=self.consortium.encryption_certificate(recipient),
            )
            write_private_file(
                self._index_path(self.org, pid, rnd, recipient),
                json.dumps(
                    {"payload_digest": ref.payload_digest, "stored": ref.stored.__dict__}, sort_keys=True
                ).encode(),
                self.store.home,
            )
        if outputs.model is not None:
            self.store.put_private(outputs.model, own)

    # ---- end of the process
    def _publish_model(self, process: ProcessRecord) -> None:
        pid, last = process.id, process.rounds
        try:
            self.client.get_model(f"{pid}:{self.org}")
            return  # already published
        except NotFound:
            pass
        except ContractError:
            return
        rec = self._record(pid, last)
        model = rec.result["outputs"].get("model") if rec is not None and rec.result else None
        if not model:
            return
        payload = self.store.get_private(model["digest"], self.consortium.encryption_key(self.org))
        aad = f"consortia-model|{pid}|{self.org}|{model['digest']}".encode()
        data_key, ciphertext = encrypt_payload(payload, aad)
        stored = self.store.put(ciphertext)
        wrapped = {
            org: seal(self.consortium.encryption_certificate(org), data_key, b"consortia-model-key|" + aad)
            for org in process.consortium
        }
        try:
            self._retry(
                self.client.publish_model,
                pid,
                model["digest"],
                model["size"],
                stored.digest,
                wrapped,
                metrics=dict(rec.result.get("metrics", {})),
                location=stored.location,
                estimators=list(model.get("estimators", [])),
            )
        except AlreadyExists:
            pass

    def _finish(self, process: ProcessRecord) -> None:
        self._publish_model(process)
        try:
            self._retry(self.client.complete_process, process.id)
        except InvalidState:
            pass  # another organisation completed it first


# --------------------------------------------------------------------------- command line


def build_agent(args: argparse.Namespace) -> NodeAgent:
    from executor.runtimes import get_runtime
    from ledger.embedded import EmbeddedLedger

    consortium = Consortium(args.consortium)
    identity = consortium.identity(args.org)
    if not Path(args.ledger).is_file():  # an agent never creates a ledger (a wrong path is an error)
        raise SystemExit(
            f"no ledger at {args.ledger}: run `consortia init` to make a consortium, or point "
            f"--ledger/--home at an existing one"
        )
    ledger = EmbeddedLedger(args.ledger, consortium)
    runtime = get_runtime(args.runtime)
    try:
        runtime.check()
    except RuntimeUnavailable as exc:
        raise SystemExit(f"node agent {args.org}: {exc}") from None
    return NodeAgent(
        ledger,
        identity,
        consortium,
        runtime,
        data_root=args.data,
        store_root=args.store,
        state_dir=args.state,
        limits=Limits(memory_bytes=args.memory_mb << 20, cpus=args.cpus),
        warm=args.warm,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m executor.node_agent run --org Org1MSP ...`` (``consortia node run``)."""
    p = argparse.ArgumentParser(prog="consortia node")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="follow the ledger and run this organisation's tasks")
    r.add_argument("--org", required=True, help="MSP id or name of this node's organisation")
    r.add_argument(
        "--home",
        default=os.environ.get("CONSORTIA_HOME"),
        help="a Consortia home (consortia init): the five paths below default to its layout",
    )
    r.add_argument("--consortium", help="consortium identity directory (cryptogen layout)")
    r.add_argument("--ledger", help="embedded ledger file")
    r.add_argument("--runtime", choices=("container", "sandbox"), default="container")
    r.add_argument("--data", help="this organisation's data root: <data>/<dataset>/dataset.npz")
    r.add_argument("--store", help="artifact store root")
    r.add_argument("--state", help="agent state directory")
    r.add_argument("--process", help="run only this process, until this organisation is done with it")
    r.add_argument("--memory-mb", type=int, default=2048)
    r.add_argument("--cpus", type=float, default=1.0)
    r.add_argument("--timeout", type=float, default=3600.0)
    r.add_argument(
        "--json",
        action="store_true",
        help="outcomes as JSON on stdout (one line per task with --process; logs go to stderr)",
    )
    r.add_argument(
        "--warm",
        action="store_true",
        help="keep one isolated worker per process alive across rounds (fresh key per round)",
    )
    args = p.parse_args(argv)
    paths = ("consortium", "ledger", "data", "store", "state")
    if args.home:
        from ledger.config import load

        settings = load(args.home)
        try:
            msp = Consortium(args.consortium or settings.crypto).organisation(args.org).msp_id
        except (FileNotFoundError, KeyError) as exc:
            p.error(str(exc))
        defaults = {
            "consortium": settings.crypto,
            "ledger": settings.ledger_path,
            "data": settings.paths.data(msp),
            "store": settings.paths.store_root,
            "state": settings.paths.state_root,
        }
        for k in paths:
            if getattr(args, k) is None:
                setattr(args, k, str(defaults[k]))
    missing = [f"--{k}" for k in paths if getattr(args, k) is None]
    if missing:
        p.error(f"without --home, {', '.join(missing)} are required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    agent = build_agent(args)
    try:
        if args.process:
            outcomes = agent.run_until_idle(args.process, timeout=args.timeout)
            print(json.dumps([o.__dict__ for o in outcomes], sort_keys=True))
            return 0 if outcomes and outcomes[-1].status == "done" else 1
        agent.follow()
        return 0
    finally:
        agent.close()
        agent.ledger.close()


if __name__ == "__main__":
    sys.exit(main())
