"""The node agent of one organisation: follows the ledger and runs its share of every open round
(docs/design.md "Execution", docs/executor.md "Node agent"; seed 003 §IV-B/C, Fig. 2).

For each running learning process whose consortium includes the organisation, and for the
process's current round ``r`` (derived on chain from the execution records):

0. **consent**: its organisation accepted these very terms and approved this exact image digest for
   this dataset, and its local policy holds (:mod:`executor.consent`, docs/consent.md) -- checked here
   whatever the ledger let through; a refusal is recorded with ``fail_task``, nothing runs;
1. **verify** the local image (container image id or sandbox bundle digest) against the digest the
   process pins -- a mismatch is recorded on the ledger with ``ExecutionRecord:fail_task``, the task
   never runs; what only this node can see (its dataset folder, its labels) is checked once per process;
2. **register** a fresh task key: its public key goes into a new execution record (``create_task``) first;
3. **gather inputs**: the previous state from the organisation's own store (digest from its
   completed record of round r-1), each message addressed to it in round r-1 (from the sender's
   artifact service, found by the store's locations; verified against the sender's signed on-chain
   digest, opened: one call of :class:`exchange.rounds.RoundFiles`), its dataset;
4. **run** the task isolated: a worker of the node's pool (:mod:`executor.node.workers`: a one-shot
   worker started early; with ``warm`` one per process kept across rounds, maybe a spare started
   before it) runs it; the agent verifies the signed outputs (:mod:`executor.tasks`) and checks every
   message and the model against what the image declares it sends, before anything is sealed
   (:mod:`executor.images.outputs`: size, schema, no raw rows; a message over the declared size is
   never fetched in step 3);
5. **publish**: store the new state and the model sealed to the organisation itself (nothing plaintext
   at rest, :meth:`exchange.store.ArtifactStore.put_private`), seal each outgoing message to its
   recipient, then ``complete_task`` with the signed result; after the last round, publish the model
   (encrypted once, data key sealed to every consortium member) with ``Model:publish``
   (:mod:`executor.model_publication`).

**Idempotent and resumable.** Every step is keyed by (process, round, organisation) and checks
the ledger first, so a restart after a kill at any point neither duplicates nor loses a record:

* a *journal* entry per task holds the task key, sealed to the organisation's own key-agreement
  key (:func:`exchange.sealing.seal`), written *before* ``create_task`` (:mod:`executor.node.journal`);
  after a restart the same key is reused, so a record whose public key is already registered can
  still be completed (the key is removed when the record is completed or failed);
* a record that exists and is completed is never touched again; a task is simply re-run after
  a crash (steps are deterministic, so its outputs' digests are the same);
* a ``complete_task`` whose commit status was lost is recognised on restart by the record being
  completed with the same result.

**Rides out ledger outages.** Every ledger call of the agent goes through
:class:`ledger.outage.PatientLedger`: while its peer, the peers an endorsement needs or
the orderers are unreachable (:func:`ledger.errors.transient`) the call is retried with capped
exponential backoff and jitter, logged once when the outage starts and once when it ends, and the
agent's status file says what it waits for (:mod:`executor.node.status`); a submit whose outcome was
unknown is submitted again and the contract's refusal of the duplicate resolved by reading the record
back, as after a restart. A contract's refusal or a refused identity still fails the task as before.

The agent's task passes the checkpoints of :mod:`executor.node.checkpoints` (its fault plan, by
default none). It is built from explicit parts and does nothing until :meth:`NodeAgent.start`:
making its state directory and data salt, opening its worker pool, publishing its artifact endpoint
in its membership record (:func:`exchange.locations.publish_own_membership`) and starting its spare
workers. Every way of running it starts it first; it is built from a home by :func:`home.agent.build_agent`
(its command line is ``consortia node run``, :mod:`api.cli.node`).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.task_spec import TaskSpec
from exchange.errors import ArtifactError
from exchange.locations import publish_own_membership
from exchange.rounds import RoundFiles
from exchange.store import ArtifactStore
from executor.consent import CONSENT_REFUSED, ConsentPolicy, consent_problem
from executor.errors import (
    ExecutorError,
    ImageDigestMismatch,
    ManifestInvalid,
    RuntimeUnavailable,
    TaskFailed,
)
from executor.images.declarations import (
    dataset_problem,
    declaration,
    topology_problems,
    validation_problem,
)
from executor.images.outputs import (
    DeclarationInvalid,
    OutputDeclaration,
    OutputRefused,
    RawRows,
    check_outputs,
)
from executor.images.resolver import ImageResolver, verify_digest
from executor.model_publication import publish_model
from executor.node.checkpoints import NO_FAULTS, FaultPlan
from executor.node.journal import TaskJournal
from executor.node.round_events import EVENT_WAIT_LIMIT, wait_round_open
from executor.node.scratch import release_scratch, task_scratch
from executor.node.status import (
    KEEP_PROCESSES,
    AgentStatus,
    ProcessState,
    now_utc,
    waiting_for,
    write_status,
)
from executor.node.workers import PrewarmEntry, SpareWorkers, WorkerPool, dataset_dir
from executor.runtimes.base import Limits, TaskRuntime
from executor.runtimes.warm import WarmWorker
from executor.task_keys import TaskKey
from executor.tasks import TaskOutputs, task_spec
from ledger.client import ConsortiaClient, ExecutionRecord, ImageRecord, ProcessRecord, split_result
from ledger.errors import AlreadyExists, BudgetExceeded, InvalidState, MVCCConflict, NotFound, transient
from ledger.identity import Consortium
from ledger.outage import LedgerOutage, PatientLedger
from wire import timing
from wire.canonical import canonical_json

__all__ = ["NodeAgent", "RoundOutcome"]

log = logging.getLogger(__name__)


@dataclass
class RoundOutcome:
    process_id: str
    round: int
    status: str  # completed | failed | waiting | done
    detail: str = ""
    step_seconds: float = 0.0  # the algorithm's own init+step time inside the task (completed only)


class NodeAgent:
    """Runs the tasks of one organisation (``client.organisation``), from explicit parts:

    * ``client``: the ledger, as this organisation (the agent reaches it through a
      :class:`~ledger.outage.PatientLedger`, riding out outages; ``outage`` says whether
      it is reachable);
    * ``runtime``: how its tasks run isolated (container or sandbox), under ``limits``;
    * ``store``: its artifact store, with the endpoint of its artifact service if it serves one over
      HTTPS, and the locations through which it reaches the others' services
      (:func:`exchange.service.node_store`);
    * ``data_root``: its datasets, ``<data_root>/<dataset>/dataset.npz``;
    * ``state_dir``: its own state (task-key journal, data salt; 0700 once started);
    * ``images``: where the images processes pin are on this node (default: by the runtime, under the
      cache); ``warm``: keep one worker per process across rounds; ``prewarm``: images to keep a spare
      worker of (:mod:`executor.node.workers`); ``faults``: its fault plan (tests).

    Constructing it has no effect; :meth:`start` (called by every way of running it) does the rest.
    """

    def __init__(
        self,
        client: ConsortiaClient,
        consortium: Consortium,
        runtime: TaskRuntime,
        store: ArtifactStore,
        data_root: str | os.PathLike[str],
        state_dir: str | os.PathLike[str],
        *,
        limits: Limits = Limits(),
        images: ImageResolver | None = None,
        warm: bool = False,
        prewarm: Sequence[PrewarmEntry] = (),
        faults: FaultPlan = NO_FAULTS,
        consent: ConsentPolicy = ConsentPolicy(),
    ):
        self.state_dir = Path(state_dir)
        self.outage = LedgerOutage(client.organisation, on_change=self._write_status)
        client = ConsortiaClient(PatientLedger(client.ledger, self.outage), client.identity)
        self.client = client
        self.ledger, self.identity, self.org = client.ledger, client.identity, client.organisation
        self.consortium, self.runtime, self.limits, self.warm = consortium, runtime, limits, warm
        self.store = store
        self.data_root = Path(data_root)
        self.images = images or ImageResolver(runtime)
        self.round_files = RoundFiles(client, store, consortium)
        self.journal = TaskJournal(self.state_dir / "tasks", consortium, self.org)
        self.prewarm = tuple(prewarm)
        self.faults = faults
        self.consent = consent
        self._pool: WorkerPool | None = None  # opened by start()
        self._scratch: Path | None = None  # its task directories' base (start(); removed by close())
        self._spares: SpareWorkers | None = None
        self._salt = ""  # read by start()
        self._finished: set[str] = set()  # processes this agent saw finished (run_once skips them)
        self._declarations: dict[str, OutputDeclaration] = {}  # image digest -> what it may send
        self._rows: dict[str, RawRows] = {}  # pid -> its dataset's feature rows (raw-row check)
        self._ready: set[str] = set()  # processes whose preflight passed here (checked once per process)
        self._written: dict[str, ExecutionRecord] = {}  # pid -> the record it completed last (_own_record)
        self._states: dict[str, ProcessState] = {}  # pid -> its last outcome there (the status file)
        self._status_lock = threading.Lock()  # the outage tells from whichever thread called the ledger

    # ---- life cycle
    @property
    def started(self) -> bool:
        return self._pool is not None

    def start(self) -> NodeAgent:
        """Make the state directory (0700), publish this organisation's artifact endpoint in its
        membership record (if its store serves one), make the data salt, open the worker pool on the task
        directories' base (:mod:`executor.node.scratch`) and start the spare workers of ``prewarm``.
        Once: an agent already started is returned as it is."""
        if self._pool is not None:
            return self
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)  # salt, key journal, status (task directories: scratch): its own only
        if self.store.endpoint:  # the others find this organisation's service on the ledger
            publish_own_membership(self.client, self.consortium, self.store.endpoint)
        self._salt = self._data_salt()
        self._scratch = task_scratch(self.state_dir)
        pool = WorkerPool(self.runtime, self.limits, self._scratch, self.org, self.warm)
        self._spares = SpareWorkers(pool, self.client, self.images, self.data_root)
        self._pool = pool
        self._spares.prewarm_images(self.prewarm)
        self._write_status()
        return self

    @property
    def pool(self) -> WorkerPool:
        """The workers of this node's tasks (once started)."""
        if self._pool is None:
            raise ExecutorError(f"{self.org}: the node agent is not started (NodeAgent.start)")
        return self._pool

    @property
    def spares(self) -> SpareWorkers:
        """Which spare workers this node starts (once started)."""
        if self._spares is None:
            raise ExecutorError(f"{self.org}: the node agent is not started (NodeAgent.start)")
        return self._spares

    def stop_workers(self, pid: str | None = None) -> None:
        if self._pool is not None:
            self._pool.stop(pid)

    def close(self) -> None:
        """Stop the workers, remove the task directories' base (:func:`release_scratch`: nothing of this
        agent stays in memory) and close the store's connections. A later :meth:`start` starts afresh."""
        self.stop_workers()
        if self._scratch is not None:
            release_scratch(self._scratch, self.state_dir)
            self._scratch = None
            self._pool = self._spares = None
        self.store.close()

    def _data_salt(self) -> str:
        """The organisation's secret salt for data commitments (created once, 0600)."""
        p = self.state_dir / "data_salt"
        if not p.exists():
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        return p.read_text().strip()

    def _write_status(self) -> None:
        """Rewrite the status file (:mod:`executor.node.status`): the ledger's reachability, what the
        agent waits for and its last outcome per process. Only once started (the state directory is
        made by :meth:`start`)."""
        if not self.state_dir.is_dir():
            return
        with self._status_lock:
            states = dict(self._states)
            outage, ledger = self.outage.status()
            write_status(
                self.state_dir,
                AgentStatus(
                    organisation=self.org,
                    pid=os.getpid(),
                    updated=now_utc(),
                    waiting_for=waiting_for(outage, states),
                    ledger=ledger,
                    processes=states,
                ),
            )

    def _note(self, o: RoundOutcome) -> None:
        """Keep ``o`` as the process's state in the status file if it says something new."""
        with self._status_lock:
            last = self._states.get(o.process_id)
            if last is not None and (last.round, last.status, last.detail) == (o.round, o.status, o.detail):
                return
            self._states.pop(o.process_id, None)  # the most recently changed last
            self._states[o.process_id] = ProcessState(o.round, o.status, o.detail, now_utc())
            while len(self._states) > KEEP_PROCESSES:
                self._states.pop(next(iter(self._states)))
        try:
            self._write_status()
        except OSError as exc:  # a status that cannot be written never stops the agent
            log.warning("%s: status not written: %s", self.org, exc)

    def data_dir(self, process: ProcessRecord) -> Path:
        """``<data root>/<process dataset or 'default'>`` (holding ``dataset.npz``)."""
        return dataset_dir(self.data_root, process.dataset)

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

    def _own_record(self, pid: str, rnd: int, *, read: bool = False) -> ExecutionRecord | None:
        """Its record of round ``rnd``. Unless ``read``, the one it completed last is final, and the next
        round's cannot exist yet (only this organisation creates it): neither is read from the ledger."""
        if not read and (last := self._written.get(pid)) is not None and last.round in (rnd, rnd - 1):
            return last if last.round == rnd else None
        try:
            return self.client.get_execution(pid, rnd, self.org)
        except NotFound:
            return None

    # ---- following the ledger
    def run_once(self) -> list[RoundOutcome]:
        """Advance every running process of this organisation by at most one task each.

        An infrastructure error (engine down; the ledger unreachable, which its calls ride out
        themselves) is logged and retried on the next pass; it is not recorded as a task failure."""
        self.start()
        outcomes, processes = [], self.client.list_processes()
        self.spares.prewarm_members(processes)  # (warm) a spare worker for each of ours not started yet
        for p in processes:
            if self.org not in p.consortium or p.id in self._finished or p.status == "created":
                continue
            try:
                outcome = self.run_process_round(p.id)
            except Exception as exc:
                if not isinstance(exc, (ExecutorError, OSError)) and not transient(exc):
                    raise
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
        self.start()
        process, deadline = self.client.get_process(process_id), time.monotonic() + timeout
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
            if o.status == "waiting" or (o.status == "completed" and o.round < process.rounds):
                # until the ledger's events say the round opened (right after its own task too)
                members, limit = process.consortium, max(poll, EVENT_WAIT_LIMIT)
                wait_round_open(self.client, process_id, o.round, members, limit)
        raise TimeoutError(f"{self.org}: process {process_id} did not finish within {timeout} s")

    def follow(self, stop: threading.Event | None = None, poll: float = 1.0) -> None:
        """Run forever (until ``stop``): wake on chaincode events, and poll as a safety net. A ledger
        outage is ridden out (``stop`` also ends that waiting)."""
        stop = stop or threading.Event()
        self.outage.stop = stop
        self.start()
        height = self.ledger.block_height(self.identity)
        while not stop.is_set():
            for o in self.run_once():
                if o.status in ("completed", "failed"):
                    log.info("task %s round %d: %s %s", o.process_id, o.round, o.status, o.detail)
            try:
                for ev in self.ledger.events(self.identity, start_block=height, timeout=poll):
                    height = ev.block_number + 1
                    break
            except Exception:  # events are a wake-up hint only; polling continues
                time.sleep(poll)

    # ---- one round
    def run_process_round(self, pid: str) -> RoundOutcome:
        """Do what this organisation has to do now in process ``pid``: at most one task (its outcome is
        kept in the status file)."""
        outcome = self._run_process_round(pid)
        self._note(outcome)
        return outcome

    def _run_process_round(self, pid: str) -> RoundOutcome:
        self.start()
        process = self.client.get_process(pid)
        rnd = int(process.current_round or 1)
        if process.status == "completed":
            self._publish_model(process)  # a kill right after the last completion left it unpublished
        if process.status in ("completed", "failed", "aborted", "declined"):
            self.journal.forget_process(pid)
            self._rows.pop(pid, None)
            self.stop_workers(pid)
            return RoundOutcome(pid, rnd, "done", f"{process.status} {process.status_reason}".strip())
        if process.status != "running":
            return RoundOutcome(pid, rnd, "waiting", process.status)
        if rnd > process.rounds:
            self._finish(process)
            return RoundOutcome(pid, rnd, "done", "all rounds completed")
        record = self._own_record(pid, rnd)
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
        """A failed task ends the process (a round needs every member), with the reason on the ledger."""
        try:
            self._retry(self.client.fail_process, pid, reason[:1000])
        except InvalidState:
            pass  # already failed, aborted or completed

    def _execute(self, process: ProcessRecord, rnd: int, record: ExecutionRecord | None) -> RoundOutcome:
        pid = process.id
        # 0. consent, checked here whatever the ledger let through: its organisation's acceptance of
        # these very terms, its approval of this exact digest for this dataset now, its local policy
        # (executor.consent); read anew for every task (an approval may be revoked between rounds)
        # (both read through self.client, whose ledger rides out outages: PatientLedger)
        image = self.client.get_image(process.image_id)
        problem = consent_problem(self.client, process, image, self.consent)
        if problem is not None:
            return self._fail(pid, rnd, f"consent refused: {problem}", {"code": CONSENT_REFUSED})
        # 1. verify the image first (again before a spare is bound; a live worker was verified at its start)
        try:
            if not self.pool.live(pid, process.image_digest):
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
        # Can it run here at all (topology, dataset folder, declared labels)? If not, refused on the ledger
        # with the reason, so it ends failed, not running for ever. Checked once per process (fixed for life).
        if pid not in self._ready and (problem := self._preflight(process, image)) is not None:
            return self._fail(pid, rnd, problem, {"code": "TASK_PREFLIGHT"})
        self._ready.add(pid)
        # The task's worker starts now (start-up overlaps the key registration); it runs only after it.
        worker = self.pool.worker(
            pid,
            process.image_digest,
            self.data_dir(process),
            self.images.bundle_dir(image.reference),
            self.journal.work_dir(pid, rnd),
        )
        try:
            return self._register_run_publish(process, image, rnd, record, worker)
        finally:
            if worker.one_shot:
                worker.stop()

    def _preflight(self, process: ProcessRecord, image: ImageRecord) -> str | None:
        """Why this organisation cannot run a task of ``process`` at all, or None."""
        if topology := topology_problems(process.topology, len(process.consortium)):
            return "; ".join(topology)
        try:
            problem = dataset_problem(self.data_dir(process), declaration(image.algorithm))
        except ExecutorError as exc:
            return str(exc)
        if problem is None and process.validation_fraction:
            seed = int(process.topology.get("seed", 0))
            problem = validation_problem(self.data_dir(process), process.validation_fraction, seed, self.org)
        return problem

    def _register_run_publish(
        self,
        process: ProcessRecord,
        image: ImageRecord,
        rnd: int,
        record: ExecutionRecord | None,
        worker: WarmWorker,
    ) -> RoundOutcome:
        pid = process.id
        # 2. task key
        key = self._register_key(pid, rnd, record)
        if isinstance(key, RoundOutcome):
            return key
        # 3. inputs: no message larger than its image declares is fetched
        try:
            declared = self._declared(process, image)
            with timing.section("artifact_io"):
                # (reads only: the others' membership records through the store's own client too)
                previous_state, inbox = self.outage.call(
                    self.round_files.gather_inputs, process, rnd, declared.message.max_bytes
                )
        except (ExecutorError, ArtifactError, ValueError) as exc:
            return self._fail(pid, rnd, f"inputs unavailable: {exc}")
        # 4. run
        spec = self._task_spec(process, image, rnd)
        self.faults.reached("during_run", rnd)
        try:
            with timing.section("task"):
                outputs = worker.run(spec, key, previous_state, inbox)
        except (TaskFailed, ManifestInvalid) as exc:
            return self._fail(pid, rnd, str(exc), {"code": exc.code})
        # 4b. what it sends, checked against what its image declares, before anything is sealed
        try:
            rows = None if declared.raw_rows else self._raw_rows(process)
            check_outputs(declared, outputs.outbox, outputs.model, rows)
        except (OutputRefused, DeclarationInvalid) as exc:
            return self._fail(pid, rnd, f"output refused: {exc}", {"code": exc.code})
        # 5. publish
        refused = self._publish(process, rnd, key, outputs)
        if refused is not None:
            return refused
        self.journal.forget(pid, rnd)
        if rnd == process.rounds:
            self._publish_model(process)
            self.stop_workers(pid)
        return RoundOutcome(pid, rnd, "completed", outputs.manifest["outputs"]["state"], outputs.step_seconds)

    def _declared(self, process: ProcessRecord, image: ImageRecord) -> OutputDeclaration:
        """What the process's image declares it sends (read once per image digest, from the verified image)."""
        declared = self._declarations.get(process.image_digest)
        if declared is None:
            declared = self._declarations[process.image_digest] = self.images.output_declaration(
                image.reference
            )
        return declared

    def _raw_rows(self, process: ProcessRecord) -> RawRows:
        """This organisation's feature rows of the process's dataset, to find them in outputs (once per process)."""
        rows = self._rows.get(process.id)
        if rows is None:
            with np.load(self.data_dir(process) / "dataset.npz", allow_pickle=False) as z:
                rows = self._rows[process.id] = RawRows.of(z["features"])
        return rows

    def _register_key(self, pid: str, rnd: int, record: ExecutionRecord | None) -> TaskKey | RoundOutcome:
        """The task's key: the journaled one (a restart), or a new one journaled then registered with
        ``create_task``; a refusal (the registered key is not the journaled one) as the failed outcome."""
        key = self.journal.load_key(pid, rnd)
        if record is not None and (key is None or record.public_key != key.public_key_pem):
            return self._fail(pid, rnd, "task key lost: the registered key is not in this agent's journal")
        if key is None:
            key = TaskKey.generate()
            self.journal.save_key(pid, rnd, key)
        if record is None:
            self._written.pop(pid, None)  # its record of rnd exists from here on: a retry must read it
            self.faults.reached("before_register", rnd)
            try:
                self._retry(self.client.create_task, pid, rnd, key.public_key_pem, self.runtime.name)
            except AlreadyExists:
                record = self._own_record(pid, rnd, read=True)
                if record is None or record.public_key != key.public_key_pem:
                    return self._fail(pid, rnd, "an execution record with another key already exists")
            self.faults.reached("after_register", rnd)
        return key

    def _publish(
        self, process: ProcessRecord, rnd: int, key: TaskKey, outputs: TaskOutputs
    ) -> RoundOutcome | None:
        """Store the outputs, then complete the record with the signed result; None once it is
        completed (by this call or an earlier one whose commit status was lost), else the refusal."""
        pid = process.id
        with timing.section("artifact_io"):
            self.round_files.store_outputs(pid, rnd, outputs.state, outputs.outbox, outputs.model)
        self.faults.reached("before_complete", rnd)
        # the task signed its whole manifest (verified by verify_outputs); the ledger gets the public
        # form, its metrics, data commitment and validation scores replaced by the salted digest of
        # that confidential part, signed with the same task key (docs/confidentiality.md)
        public, confidential = split_result(outputs.manifest, secrets.token_hex(32))
        try:
            self._written[pid] = self._retry(
                self.client.complete_task, public, key.sign(canonical_json(public)), confidential
            )
        except BudgetExceeded as exc:
            # the contract refused the round: it would exceed the process's privacy budget
            spent = {
                k: outputs.manifest["metrics"][k]
                for k in ("epsilon_spent", "epsilon_network_spent")
                if k in outputs.manifest["metrics"]
            }
            return self._fail(
                pid, rnd, f"privacy budget exceeded: {exc}", {"code": exc.code, **exc.details, **spent}
            )
        except InvalidState:
            rec = self._own_record(pid, rnd, read=True)
            if not (rec and rec.status == "completed" and rec.public_key == key.public_key_pem):
                now = self.client.get_process(pid)
                if now.status in ("failed", "aborted") and rec is not None and rec.status == "running":
                    # another member ended the process meanwhile: stop, do not hang (fail_task is refused
                    # once the process ended, so the record stays running; the process says why)
                    return self._fail(
                        pid, rnd, f"result not accepted: the process is {now.status} ({now.status_reason})"
                    )
                raise
        self.faults.reached("after_complete", rnd)
        return None

    def _task_spec(self, process: ProcessRecord, image: ImageRecord, rnd: int) -> TaskSpec:
        return task_spec(process, image, self.org, rnd, self.runtime.name, self._salt)

    # ---- end of the process
    def _publish_model(self, process: ProcessRecord) -> None:
        publish_model(self.client, self.store, self.consortium, process, self._retry)

    def _finish(self, process: ProcessRecord) -> None:
        self._publish_model(process)
        try:
            self._retry(self.client.complete_process, process.id)
        except InvalidState:
            pass  # another organisation completed it first
