"""Run every organisation's node agent for one learning process on this machine until it ends,
reporting progress from the ledger (docs/audited-process.md; :func:`run_process`).

Agents run as threads of this process (one :class:`executor.node.agent.NodeAgent` each, woken by
each other's completions) or as OS processes (``consortia node run --process``, the command a node
runs), supervised: an agent that dies while the process runs is restarted and resumes from the
ledger. Where the organisations' nodes keep their things, and how their agents are built, is the
caller's (:class:`LocalNodes`: :class:`home.platform.Platform`, whose agents
:func:`home.agent.build_agent` builds).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from executor.errors import ExecutorError, RuntimeUnavailable
from executor.node.agent import NodeAgent
from executor.node.round_events import EVENT_WAIT_LIMIT, wait_round_open
from executor.runtimes.base import TaskRuntime
from ledger.client import ConsortiaClient, ExecutionRecord, ProcessRecord
from ledger.identity import Consortium
from ledger.outage import LedgerOutage, PatientLedger
from wire import timing

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAULT_PLAN = "CONSORTIA_FAULT_PLAN"  # passed to an agent's first start only (agent_env)
log = logging.getLogger(__name__)


class LocalNodes(Protocol):
    """Where the organisations' nodes of one machine keep their things, as :func:`run_process` uses it."""

    consortium: Consortium
    root: Path  # agents as OS processes write their logs under <root>/logs

    @property
    def store_root(self) -> Path:
        """The organisations' artifact stores (``<store_root>/<MSP>``)."""
        ...

    def client(self, org: str) -> ConsortiaClient: ...

    def agent(self, org: str, runtime: TaskRuntime, warm: bool = False) -> NodeAgent:
        """``org``'s node agent (not started)."""
        ...

    def agent_command(
        self, org: str, process_id: str, runtime: str, warm: bool = False, timeout: float = 3600.0
    ) -> list[str]:
        """``org``'s node command for one process (agents as OS processes)."""
        ...


@dataclass
class Progress:
    """What the ledger says about a running process (for progress bars)."""

    process_id: str
    status: str
    rounds: int
    organisations: int
    completed_tasks: int
    current_round: int


@dataclass
class ProcessOutcome:
    process_id: str
    status: str  # completed | failed | aborted
    reason: str
    wall_seconds: float
    agent_errors: dict[str, str] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    step_seconds: float = 0.0  # the algorithm's own init+step time summed over tasks (thread mode)
    prewarm_seconds: float = 0.0  # agents and spare workers starting, before wall_seconds (prewarm)


def progress(client: ConsortiaClient, process_id: str) -> Progress:
    p = client.process_progress(process_id)  # counted on chain: no record crosses the wire
    return Progress(process_id, p.status, p.rounds, p.organisations, p.completed_tasks, p.current_round)


@dataclass(frozen=True)
class MemberProgress:
    """Where one member of a process stands, from the ledger alone (``consortia process watch``): its
    last completed round, its task of the current round, and how long ago it last wrote a record."""

    organisation: str
    last_completed: int  # 0: none yet
    task: str  # of the current round: "not registered" | "running" | "completed" | "failed"
    last_record_seconds: float | None  # since its last record was created or completed (None: none)
    waiting_for: str  # what the round waits for from it, or what it waits for

    def describe(self) -> str:
        ago = "no record yet" if self.last_record_seconds is None else f"{self.last_record_seconds:.0f}s ago"
        return f"{self.organisation}: {self.waiting_for} (last completed round {self.last_completed}; last record {ago})"


def _seconds_since(timestamp: str, now: datetime) -> float | None:
    try:
        t = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (now - t).total_seconds())


def members_progress(
    process: ProcessRecord, records: Sequence[ExecutionRecord], now: datetime | None = None
) -> list[MemberProgress]:
    """Each member of ``process`` as its execution records ``records`` show it: who the current round
    waits for and why (its task not registered: its node is not running, or cannot reach the ledger;
    registered and running: it computes or cannot submit its result; failed: the reason)."""
    now = now or datetime.now(UTC)
    rnd = min(int(process.current_round or 1), process.rounds)
    by_member: dict[str, list[ExecutionRecord]] = {m: [] for m in process.consortium}
    for r in records:
        by_member.setdefault(r.organisation, []).append(r)
    completed_now = {r.organisation for r in records if r.round == rnd and r.status == "completed"}
    missing = [m for m in process.consortium if m not in completed_now]
    out = []
    for m in process.consortium:
        own = by_member.get(m, [])
        done = [r.round for r in own if r.status == "completed"]
        current = next((r for r in own if r.round == rnd), None)
        stamps = [t for r in own for t in (r.created, r.completed) if t]
        last = min((s for t in stamps if (s := _seconds_since(t, now)) is not None), default=None)
        if process.status != "running":
            task, why = (current.status if current else "not registered"), f"process {process.status}"
        elif current is None:
            task, why = (
                "not registered",
                f"round {rnd}: task not registered yet (its node is down or cannot reach the ledger)",
            )
        elif current.status == "running":
            task, why = "running", f"round {rnd}: task registered, result not recorded yet"
        elif current.status == "failed":
            task, why = "failed", f"round {rnd}: task failed: {current.failure_reason}"
        else:
            others = [o for o in missing if o != m]
            task, why = "completed", f"round {rnd} completed; waiting for {', '.join(others) or 'nobody'}"
        out.append(MemberProgress(m, max(done, default=0), task, last, why))
    return out


def _runtime_instance(runtime: Any) -> TaskRuntime:
    """A runtime instance from a runtime, a runtime class or a factory."""
    if isinstance(runtime, type) or not hasattr(runtime, "run"):
        return runtime()
    return runtime


def run_process(
    platform: LocalNodes,
    process_id: str,
    runtime: TaskRuntime | Callable[[], TaskRuntime],
    orgs: Sequence[str] | None = None,
    *,
    agents: str = "threads",
    warm: bool = False,
    timeout: float = 1800.0,
    poll: float = 0.5,
    progress_every: float = 1.0,
    on_progress: Callable[[Progress], None] | None = None,
    agent_env: Mapping[str, Mapping[str, str]] | None = None,
    max_restarts: int = 3,
    prewarm: bool = False,
) -> ProcessOutcome:
    """Run every organisation's node agent for ``process_id`` until it is completed or failed.

    ``agents="threads"``: one :class:`NodeAgent` per organisation in a thread of this process;
    ``runtime`` is a runtime or a factory (one runtime per organisation). ``agents="processes"``:
    one ``consortia node run --process`` per organisation (embedded ledger file),
    with ``agent_env[org]`` added to that organisation's environment on its first start only (a fault
    plan, ``CONSORTIA_FAULT_PLAN``, reaches no other start); an agent that dies (signal or error exit)
    while the process runs is restarted (up to ``max_restarts``) and resumes from the ledger.

    ``prewarm`` (with ``warm``): every agent first starts, and a spare worker of the process's image
    (:mod:`executor.node.workers`) finishes starting up, as an organisation's node runs before a process
    is launched; then the agents run. ``wall_seconds`` counts from then, ``prewarm_seconds`` is the start.
    (Agents as OS processes: ``--prewarm`` for the image and ``--barrier``, where each says it started.)
    """
    first = platform.client((orgs or platform.consortium.msp_ids)[0])
    # its own progress reads ride out ledger outages as the agents do (ledger.outage)
    outage = LedgerOutage(f"supervisor of {process_id}")
    client = ConsortiaClient(PatientLedger(first.ledger, outage), first.identity)
    process = client.get_process(process_id)
    orgs = list(orgs or process.consortium)
    t0 = time.perf_counter()
    prewarm_seconds = 0.0
    errors: dict[str, str] = {}
    restarts: dict[str, int] = {o: 0 for o in orgs}
    step_seconds = [0.0]
    lock = threading.Lock()
    deadline = time.monotonic() + timeout

    def report() -> Progress:
        pr = progress(client, process_id)
        if on_progress is not None:
            on_progress(pr)
        return pr

    if agents == "threads":
        # A waiting agent learns that its round opened from the ledger's events (the block holding the
        # last completion of the round, executor.node.round_events), not by polling the process record:
        # it wakes once per round instead of at every other organisation's completion. The wait is
        # bounded (a safety net for a lost event); ``poll`` paces retries after a runtime error.
        members = tuple(process.consortium)
        started = threading.Barrier(len(orgs) + 1)  # every agent (and its spare worker) has started

        def go(org: str) -> None:
            agent: NodeAgent | None = None
            try:
                agent = platform.agent(org, _runtime_instance(runtime), warm=warm).start()
                if prewarm and warm:
                    _prewarm(agent, process)
            except Exception as exc:  # reported in the outcome, never swallowed
                with lock:
                    errors[org] = f"{type(exc).__name__}: {exc}"
                if agent is not None:
                    agent.close()
                return
            finally:
                _pass(started)
            try:
                while True:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{org}: process {process_id} did not finish within {timeout} s")
                    try:
                        o = agent.run_process_round(process_id)
                    except RuntimeUnavailable as exc:  # e.g. a warm worker ended before its task: anew
                        log.warning("%s: %s (retrying)", org, exc)
                        time.sleep(poll)
                        continue
                    if o.status in ("done", "failed"):
                        if o.status == "failed":
                            log.warning("%s: task of round %d failed: %s", org, o.round, o.detail)
                        return
                    if o.status == "completed":
                        with lock:
                            step_seconds[0] += o.step_seconds
                        if o.round >= process.rounds:
                            continue  # the next pass publishes the model and completes the process
                    # waiting for the others (right after its own task too: its round is still open)
                    with timing.section("wait_round"):
                        wait_round_open(agent.client, process_id, o.round, members, EVENT_WAIT_LIMIT)
            except Exception as exc:  # reported in the outcome, never swallowed
                log.error("%s: agent stopped: %s: %s", org, type(exc).__name__, exc, exc_info=True)
                with lock:
                    errors[org] = f"{type(exc).__name__}: {exc}"
            finally:
                agent.close()

        threads = [threading.Thread(target=go, args=(o,), name=f"agent-{o}", daemon=True) for o in orgs]
        for t in threads:
            t.start()
        _pass(started)
        prewarm_seconds, t0 = time.perf_counter() - t0, time.perf_counter()
        while any(t.is_alive() for t in threads):
            report()
            for t in threads:
                t.join(timeout=progress_every / max(1, len(threads)))
    elif agents == "processes":
        rt_name = runtime.name if isinstance(runtime, type) else _runtime_instance(runtime).name
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
        env.pop(FAULT_PLAN, None)
        logs = platform.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)

        def start(org: str, first: bool) -> subprocess.Popen:
            e = dict(env, **(dict((agent_env or {}).get(org, {})) if first else {}))
            log = open(logs / f"{org}.log", "ab")
            return subprocess.Popen(
                platform.agent_command(org, process_id, rt_name, warm, timeout)
                + (prewarm_args if first and prewarm and warm else []),
                env=e,
                stdout=log,
                stderr=log,
                cwd=PROJECT_ROOT,
            )

        barrier = logs / f"start-{process_id}"  # each agent: <org>.ready when started; all: go
        prewarm_args = ["--prewarm", f"{process.image_digest}={process.dataset or 'default'}"]
        prewarm_args += ["--barrier", str(barrier)]
        if prewarm and warm:
            shutil.rmtree(barrier, ignore_errors=True)
            barrier.mkdir(parents=True)
        procs = {o: start(o, True) for o in orgs}
        if prewarm and warm:
            while len(list(barrier.glob("*.ready"))) < len(orgs) and all(
                p.poll() is None for p in procs.values()
            ):
                time.sleep(0.01)
            prewarm_seconds, t0 = time.perf_counter() - t0, time.perf_counter()
            (barrier / "go").touch()
        while procs:
            if time.monotonic() > deadline:
                for p in procs.values():
                    p.kill()
                raise TimeoutError(f"process {process_id} did not finish within {timeout} s")
            time.sleep(poll)
            report()  # (agents in other processes poll the ledger themselves)
            for org, p in list(procs.items()):
                rc = p.poll()
                if rc is None:
                    continue
                del procs[org]
                if rc == 0:
                    continue
                still_running = client.get_process(process_id).status in ("created", "running")
                if (
                    still_running and restarts[org] < max_restarts
                ):  # died: restart, it resumes from the ledger
                    restarts[org] += 1
                    procs[org] = start(org, False)
                else:
                    errors[org] = f"agent exited with {rc} (log {logs / (org + '.log')})"
    else:
        raise ValueError(f"agents must be 'threads' or 'processes', got {agents!r}")

    final = report()
    return ProcessOutcome(
        process_id,
        final.status,
        client.get_process(process_id).status_reason,
        time.perf_counter() - t0,
        errors,
        {o: n for o, n in restarts.items() if n},
        step_seconds[0],
        prewarm_seconds,
    )


def _prewarm(agent: NodeAgent, process: ProcessRecord) -> None:
    """Start a spare worker of ``process``'s image and wait for its start-up; a refusal is logged (the
    agent's first task then verifies the image again and records the refusal on the ledger)."""
    try:
        spare = agent.spares.prewarm_process(process)
    except ExecutorError as exc:
        log.warning("%s: no spare worker: %s", agent.org, exc)
        return
    if spare is not None:
        spare.wait_started()


def meet_at_start(agent: NodeAgent, directory: Path, timeout: float) -> None:
    """An agent run as an OS process (``consortia node run --barrier DIR``) says that it and its spare
    workers have started (``DIR/<org>.ready``), then waits for :func:`run_process` to let every agent go
    at once (``DIR/go``, or ``timeout`` seconds)."""
    for spare in agent.pool.spares.values():
        spare.wait_started()
    (directory / f"{agent.org}.ready").touch()
    deadline = time.monotonic() + timeout
    while not (directory / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.005)


def _pass(barrier: threading.Barrier, timeout: float = 600.0) -> None:
    """Wait at ``barrier``; a broken or timed-out barrier lets everyone go on (it only aligns a clock)."""
    try:
        barrier.wait(timeout)
    except threading.BrokenBarrierError:
        pass
