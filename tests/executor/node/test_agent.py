"""The node agent on the embedded ledger: audited runs equal the simulator, refusals and forgeries
end up on (or are refused by) the ledger, and a killed agent resumes without duplicates or losses."""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from algorithms.simulator import simulate
from algorithms.task_runtime import save_dataset
from algorithms.topologies.static import ring
from chaincode.errors import InvalidArgument, InvalidState, SignatureInvalid
from chaincode.records import RESULT_CONFIDENTIAL
from exchange.errors import ArtifactCorrupted
from exchange.readers import LedgerReaders
from exchange.service import ArtifactServer, HostedServices, node_store
from exchange.store import ArtifactStore
from executor.consent import give_consent
from executor.errors import ExecutorError
from executor.images.bundle import build_bundle
from executor.images.engine import build_image
from executor.node.agent import NodeAgent
from executor.node.checkpoints import CHECKPOINTS
from executor.runtimes.sandbox import SandboxRuntime
from executor.task_keys import TaskKey
from executor.tasks import run_isolated_task
from ledger.client import (
    ConsortiaClient,
    creation_endorsers,
    private_terms_transient,
    process_transient,
    split_result,
)
from ledger.embedded import EmbeddedLedger
from tests.executor.conftest import ROOT, altered_recipe, make_dataset
from tests.support.faults import kill_at_environment
from wire.canonical import canonical_json

PARAMS = {"eps": 0.3, "noise": 0.1}
SEED = 11


@dataclass
class Platform:
    root: Path
    consortium: object
    ledger: EmbeddedLedger
    orgs: list
    hosted: HostedServices = field(default_factory=HostedServices)  # its agent threads' services

    def submit(self, org, fn, *args, **kw):
        return json.loads(self.ledger.submit(self.consortium.identity(org), fn, *args, **kw).result)

    def evaluate(self, org, fn, *args):
        return json.loads(self.ledger.evaluate(self.consortium.identity(org), fn, *args))

    def register_image(self, image_id, recipe, digest, reference):
        name, version = image_id.split(":")
        self.submit(
            self.orgs[0],
            "Image:register",
            json.dumps(
                {
                    "id": image_id,
                    "name": name,
                    "version": version,
                    "algorithm": recipe.algorithm,
                    "digest": digest,
                    "reference": reference,
                }
            ),
        )

    def launch(self, pid, image_id, rounds, orgs=None):
        orgs = orgs or self.orgs
        self.submit(
            orgs[0],
            "LearningProcess:create",
            json.dumps(
                {
                    "id": pid,
                    "image_id": image_id,
                    "consortium": orgs,
                    "topology": {"kind": "ring", "seed": SEED},
                    "rounds": rounds,
                }
            ),
            transient=private_terms_transient(PARAMS, None),
            endorsing_organisations=creation_endorsers(orgs),
        )
        admins = {o: ConsortiaClient(self.ledger, self.consortium.identity(o, "Admin")) for o in orgs}
        give_consent(admins, pid)  # each member's admin approves the image and accepts (docs/consent.md)
        self.submit(orgs[0], "LearningProcess:start", pid)

    def agent(self, org, runtime=None, ledger=None, endpoint=None, **parts):
        """``org``'s agent with its data, store and state under ``root`` (not started), a thread of this
        process: the others hosted here reach its store in memory (``endpoint``: it serves over HTTPS there
        instead, published on the ledger when it starts)."""
        client = ConsortiaClient(ledger or self.ledger, self.consortium.identity(org))
        hosted = None if endpoint else self.hosted
        return NodeAgent(
            client,
            self.consortium,
            runtime or SandboxRuntime(),
            node_store(client, self.consortium, self.root / "store", endpoint=endpoint, hosted=hosted),
            self.root / "data" / org,
            self.root / "state" / org,
            **parts,
        )

    def serve(self, org):
        """``org``'s artifact service over HTTPS (loopback), as a node in its own process has it."""
        store = ArtifactStore(self.root / "store", org)
        client = ConsortiaClient(self.ledger, self.consortium.identity(org))
        return ArtifactServer(("127.0.0.1", 0), store, self.consortium, LedgerReaders(client, store)).start()

    def records(self, pid):
        return self.evaluate(self.orgs[0], "ExecutionRecord:query", json.dumps({"process_id": pid}))

    def datasets(self, orgs=None):
        return {o: make_dataset(10 + i, shift=float(i)) for i, o in enumerate(orgs or self.orgs)}


@pytest.fixture
def platform(tmp_path, consortium):
    orgs = list(consortium.msp_ids)
    p = Platform(tmp_path, consortium, EmbeddedLedger(tmp_path / "ledger.sqlite", consortium), orgs)
    for o, ds in p.datasets().items():
        (tmp_path / "data" / o / "default").mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "default" / "dataset.npz", ds)
    yield p
    p.ledger.close()


def run_all(platform, pid, agents):
    """Run the agents concurrently (one thread each) until the process is done."""
    errors = []

    def go(a):
        try:
            a.run_until_idle(pid, timeout=120)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def assert_matches_simulation(platform, pid, rounds, average_consensus, orgs=None):
    orgs = orgs or platform.orgs
    sim = simulate(
        average_consensus.AverageConsensus(**PARAMS),
        platform.datasets(orgs),
        rounds,
        SEED,
        ring(len(orgs)),
        orgs,
    )
    recs = platform.records(pid)
    assert len(recs) == rounds * len(orgs)
    for r in recs:
        assert r["status"] == "completed"
        assert r["result"]["outputs"]["state"] == sim.state_digests[r["round"]][r["organisation"]]
        sent = {(r["organisation"], m["recipient"]): m["digest"] for m in r["result"]["outputs"]["messages"]}
        assert sent == {
            k: v for k, v in sim.message_digests[r["round"] - 1].items() if k[0] == r["organisation"]
        }
    for o in orgs:
        model = platform.evaluate(o, "Model:get", f"{pid}:{o}")
        assert model["digest"] == "sha256:" + hashlib.sha256(sim.models[o]).hexdigest()


def test_audited_sandbox_process_equals_the_simulator(platform, bundle, recipe, average_consensus):
    platform.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    platform.launch("p-sim", "avg:1", rounds=3)
    run_all(platform, "p-sim", [platform.agent(o) for o in platform.orgs])
    assert platform.evaluate(platform.orgs[0], "LearningProcess:get", "p-sim")["status"] == "completed"
    assert_matches_simulation(platform, "p-sim", 3, average_consensus)
    for r in platform.records("p-sim"):
        assert r["runtime"] == "sandbox" and r["image_digest"] == bundle.digest
        history = platform.evaluate(
            r["organisation"], "ExecutionRecord:history", "p-sim", str(r["round"]), r["organisation"]
        )
        assert [h["value"]["status"] for h in history] == ["running", "completed"]
    # the agent is idempotent: running it again changes nothing
    height = platform.ledger.block_height(platform.consortium.identity("Org1"))
    assert platform.agent("Org1MSP").run_process_round("p-sim").status == "done"
    assert platform.ledger.block_height(platform.consortium.identity("Org1")) == height


class _RecordingRuntime:
    """A runtime that starts no process: it records the workers it is asked for, and says every
    bundle has ``digest``."""

    name, task_uid = "sandbox", None

    def __init__(self, digest):
        self.digest, self.started = digest, []

    def local_digest(self, reference):
        return self.digest

    def start_worker(self, spec):
        self.started.append(spec)
        return _IdleWorker()


class _IdleWorker:
    bell = None

    def ring(self):
        pass

    def alive(self, max_age=0.0):
        return True

    def end(self, grace):
        pass


def test_constructing_an_agent_does_nothing_and_start_does_everything_once(platform, bundle, recipe):
    """NodeAgent() only wires its parts: no state directory, no salt, no membership record, no spare
    worker. start() does all of it, once."""
    platform.register_image("avg:n", recipe, bundle.digest, bundle.reference)
    org, endpoint = "Org1MSP", "https://127.0.1.1:8443"
    identity = platform.consortium.identity(org)
    client = ConsortiaClient(platform.ledger, identity)
    state, rt = platform.root / "state" / org, _RecordingRuntime(bundle.digest)
    height = platform.ledger.block_height(identity)
    agent = NodeAgent(
        client,
        platform.consortium,
        rt,
        ArtifactStore(platform.root / "store", org, endpoint=endpoint),
        platform.root / "data" / org,
        state,
        warm=True,
        prewarm=[bundle.digest],
    )
    assert not state.exists() and not rt.started and not agent.started
    assert platform.ledger.block_height(identity) == height  # nothing published
    with pytest.raises(ExecutorError, match="not started"):
        _ = agent.pool
    agent.close()  # closing an agent never started is fine
    assert agent.start() is agent and agent.started
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "data_salt").stat().st_mode & 0o777 == 0o600
    assert client.get_member(org).artifact_endpoint == endpoint
    assert len(rt.started) == 1 and rt.started[0].image_digest == bundle.digest  # the spare
    salt, height = (state / "data_salt").read_bytes(), platform.ledger.block_height(identity)
    agent.start()
    assert len(rt.started) == 1 and platform.ledger.block_height(identity) == height
    assert (state / "data_salt").read_bytes() == salt
    agent.close()


def test_the_agent_tells_its_fault_plan_every_checkpoint_in_order(
    platform, bundle, recipe, average_consensus
):
    platform.register_image("avg:cp", recipe, bundle.digest, bundle.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-cp", "avg:cp", rounds=2, orgs=orgs)
    seen = []

    class Plan:
        def reached(self, checkpoint, rnd):
            seen.append((checkpoint, rnd))

    run_all(platform, "p-cp", [platform.agent(orgs[0], faults=Plan()), platform.agent(orgs[1])])
    assert_matches_simulation(platform, "p-cp", 2, average_consensus, orgs)
    assert seen == [(c, r) for r in (1, 2) for c in CHECKPOINTS]


@pytest.mark.parametrize("runtime_name", ["sandbox", pytest.param("container", marks=pytest.mark.container)])
def test_warm_agents_equal_the_simulator(request, platform, recipe, average_consensus, runtime_name):
    if runtime_name == "container":
        from executor.runtimes.container import ContainerRuntime

        image, rt = (
            request.getfixturevalue("container_image"),
            ContainerRuntime(client=request.getfixturevalue("engine")),
        )
    else:
        image, rt = request.getfixturevalue("bundle"), SandboxRuntime()
    platform.register_image("avg:w", recipe, image.digest, image.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-warm", "avg:w", rounds=3, orgs=orgs)
    agents = [platform.agent(o, runtime=rt, warm=True) for o in orgs]
    run_all(platform, "p-warm", agents)
    assert_matches_simulation(platform, "p-warm", 3, average_consensus, orgs)
    keys = {r["public_key"] for r in platform.records("p-warm")}
    assert len(keys) == 6  # a fresh task key per organisation and round
    assert all(not a.pool.workers for a in agents)  # workers stopped after the last round


class CountingLedger:
    """The platform's ledger, counting the functions evaluated through it."""

    def __init__(self, ledger):
        self._ledger, self.evaluated = ledger, collections.Counter()

    def evaluate(self, identity, function, *args):
        self.evaluated[function] += 1
        return self._ledger.evaluate(identity, function, *args)

    def __getattr__(self, name):
        return getattr(self._ledger, name)


def test_an_agent_reads_its_own_record_only_when_it_may_exist(platform, bundle, recipe, average_consensus):
    """After completing round r an agent knows it has no record of round r+1 yet (only its own
    organisation creates it): it reads its record at the first round only, not once per round."""
    platform.register_image("avg:c", recipe, bundle.digest, bundle.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-count", "avg:c", rounds=3, orgs=orgs)
    ledgers = {o: CountingLedger(platform.ledger) for o in orgs}
    run_all(platform, "p-count", [platform.agent(o, ledger=ledgers[o], warm=True) for o in orgs])
    assert_matches_simulation(platform, "p-count", 3, average_consensus, orgs)
    for o in orgs:
        # round 1 (a restarted agent may have made it) and, once, the model publication; and its artifact
        # service, once per round whose messages it hands out (rounds 1 and 2: confirmed on the ledger)
        assert ledgers[o].evaluated["ExecutionRecord:get"] == 2 + 2, (o, ledgers[o].evaluated)
        assert ledgers[o].evaluated["ExecutionRecord:inbox"] == 2  # rounds 2 and 3 gather messages
    # a new agent (a restart) has no such knowledge: it reads, sees the process done, writes nothing
    height = platform.ledger.block_height(platform.consortium.identity("Org1"))
    assert platform.agent("Org1MSP").run_process_round("p-count").status == "done"
    assert platform.ledger.block_height(platform.consortium.identity("Org1")) == height


def test_dead_warm_worker_is_replaced_between_rounds(platform, bundle, recipe, average_consensus):
    platform.register_image("avg:d", recipe, bundle.digest, bundle.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-dead", "avg:d", rounds=3, orgs=orgs)
    agents = [platform.agent(o, warm=True) for o in orgs]
    for a in agents:
        assert a.run_process_round("p-dead").status == "completed"
    first = agents[0].pool.workers["p-dead"]
    first.process.proc.kill()  # the worker dies between rounds
    first.process.proc.wait()
    run_all(platform, "p-dead", agents)
    assert_matches_simulation(platform, "p-dead", 3, average_consensus, orgs)
    assert all(r["status"] == "completed" for r in platform.records("p-dead"))


def test_image_with_one_changed_byte_is_refused_on_the_ledger(tmp_path, platform, bundle, recipe):
    tampered = build_bundle(altered_recipe(tmp_path, recipe))
    # the ledger pins the genuine digest, but the local image under the reference was rebuilt
    platform.register_image("avg:2", recipe, bundle.digest, tampered.reference)
    platform.launch("p-bad", "avg:2", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    outcome = platform.agent("Org1MSP").run_process_round("p-bad")
    assert outcome.status == "failed"
    rec = platform.evaluate("Org1MSP", "ExecutionRecord:get", "p-bad", "1", "Org1MSP")
    assert rec["status"] == "failed" and "image refused" in rec["failure_reason"]
    assert (
        rec["failure_details"]["pinned"] == bundle.digest
        and rec["failure_details"]["local"] == tampered.digest
    )
    assert rec["public_key"] == ""  # no task key was ever registered: never executed
    assert not (platform.root / "state" / "Org1MSP" / "tasks" / "p-bad" / "000001" / "work").exists()
    # the round can never complete, so the process is failed with the reason; the other member stops
    process = platform.evaluate("Org2MSP", "LearningProcess:get", "p-bad")
    assert process["status"] == "failed" and "image refused" in process["status_reason"]
    assert platform.agent("Org2MSP").run_until_idle("p-bad", timeout=30)[-1].status == "done"


class ForeignKernelSandbox(SandboxRuntime):
    """A host whose sandbox hands the task another OpenBLAS kernel than its numeric profile's (as a
    machine whose BLAS ignores the pin would): the profile cannot be applied there."""

    def command(self, bundle_dir, mounts, command):
        args = super().command(bundle_dir, mounts, command)
        end = args.index("--")
        return [*args[:end], "--setenv", "OPENBLAS_CORETYPE", "Prescott", *args[end:]]


def test_a_task_whose_numeric_profile_cannot_be_applied_fails_its_record_with_the_reason(
    platform, bundle, recipe
):
    platform.register_image("avg:np", recipe, bundle.digest, bundle.reference)
    platform.launch("p-np", "avg:np", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    outcome = platform.agent("Org1MSP", runtime=ForeignKernelSandbox()).run_process_round("p-np")
    assert outcome.status == "failed"
    rec = platform.evaluate("Org1MSP", "ExecutionRecord:get", "p-np", "1", "Org1MSP")
    assert rec["status"] == "failed" and rec["result"] is None
    assert "NumericProfileError: numeric profile x86-64-v2/1 is not in effect" in rec["failure_reason"]
    assert "$OPENBLAS_CORETYPE='Prescott'" in rec["failure_reason"]
    assert "runs Katmai kernels, not Nehalem" in rec["failure_reason"]


@pytest.mark.container
def test_container_image_with_one_changed_byte_is_refused_on_the_ledger(
    tmp_path, platform, engine, container_image, recipe
):
    from executor.runtimes.container import ContainerRuntime

    ref = "consortia/average-consensus-rebuilt:1.0.0"
    build_image(engine, altered_recipe(tmp_path, recipe), reference=ref)
    platform.register_image("avg:3", recipe, container_image.digest, ref)
    platform.launch("p-bad-c", "avg:3", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    outcome = platform.agent("Org1MSP", runtime=ContainerRuntime(client=engine)).run_process_round("p-bad-c")
    assert outcome.status == "failed"
    rec = platform.evaluate("Org1MSP", "ExecutionRecord:get", "p-bad-c", "1", "Org1MSP")
    assert rec["status"] == "failed" and "image refused" in rec["failure_reason"]
    assert rec["failure_details"]["pinned"] == container_image.digest
    engine.images.remove(ref)


@pytest.mark.container
def test_audited_container_process_equals_the_simulator(
    platform, engine, container_image, recipe, average_consensus
):
    from executor.runtimes.container import ContainerRuntime

    platform.register_image("avg:4", recipe, container_image.digest, container_image.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-ctr", "avg:4", rounds=2, orgs=orgs)
    rt = ContainerRuntime(client=engine)
    run_all(platform, "p-ctr", [platform.agent(o, runtime=rt) for o in orgs])
    assert_matches_simulation(platform, "p-ctr", 2, average_consensus, orgs)
    assert {r["runtime"] for r in platform.records("p-ctr")} == {"container"}


def test_follow_runs_every_open_round_until_stopped(platform, bundle, recipe, average_consensus):
    platform.register_image("avg:f", recipe, bundle.digest, bundle.reference)
    orgs = ["Org1MSP", "Org2MSP"]
    platform.launch("p-follow", "avg:f", rounds=2, orgs=orgs)
    stop = threading.Event()
    threads = [threading.Thread(target=platform.agent(o).follow, args=(stop, 0.2)) for o in orgs]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while platform.evaluate("Org1MSP", "LearningProcess:get", "p-follow")["status"] != "completed":
            assert time.monotonic() < deadline, "followers did not complete the process"
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert_matches_simulation(platform, "p-follow", 2, average_consensus, orgs)


def test_forged_or_altered_result_signature_is_rejected_by_the_chaincode(tmp_path, platform, bundle, recipe):
    platform.register_image("avg:5", recipe, bundle.digest, bundle.reference)
    platform.launch("p-sig", "avg:5", rounds=1, orgs=["Org1MSP", "Org2MSP"])
    agent = platform.agent("Org1MSP").start()  # its data salt goes into the task spec
    key = TaskKey.generate()
    platform.submit(
        "Org1MSP",
        "ExecutionRecord:create_task",
        json.dumps(
            {"process_id": "p-sig", "round": 1, "public_key": key.public_key_pem, "runtime": "sandbox"}
        ),
    )
    process = agent.client.get_process("p-sig")
    spec = agent._task_spec(process, agent.client.get_image("avg:5"), 1)
    out = run_isolated_task(
        agent.runtime,
        spec,
        key,
        tmp_path / "work",
        agent.data_dir(process),
        None,
        {},
        bundle_dir=bundle.location,
    )
    # the agent's form (docs/confidentiality.md): the task key signs the public result; the confidential
    # part and Org1's copy of the private terms (the privacy charge) travel in the transient map
    public, confidential = split_result(out.manifest, secrets.token_hex(32))
    raw = canonical_json(public).decode()
    good_sig = base64.b64encode(key.sign(canonical_json(public))).decode()
    private = {**(process_transient(process) or {}), RESULT_CONFIDENTIAL: confidential.canonical()}
    altered = {**public, "outputs": {**public["outputs"], "state": "sha256:" + "0" * 64}}
    with pytest.raises(SignatureInvalid):
        platform.submit(
            "Org1MSP",
            "ExecutionRecord:complete_task",
            canonical_json(altered).decode(),
            good_sig,
            transient=private,
        )
    forged = base64.b64encode(TaskKey.generate().sign(canonical_json(public))).decode()
    with pytest.raises(SignatureInvalid):
        platform.submit("Org1MSP", "ExecutionRecord:complete_task", raw, forged, transient=private)
    # the task's own signature over its full manifest (metrics in clear) is refused for this process
    with pytest.raises(InvalidArgument, match="signed in clear"):
        platform.submit(
            "Org1MSP",
            "ExecutionRecord:complete_task",
            out.manifest_bytes.decode(),
            base64.b64encode(out.signature).decode(),
            transient=private,
        )
    rec = platform.submit("Org1MSP", "ExecutionRecord:complete_task", raw, good_sig, transient=private)
    assert rec["status"] == "completed"
    with pytest.raises(InvalidState):
        platform.submit("Org1MSP", "ExecutionRecord:complete_task", raw, good_sig, transient=private)


def _agent_cmd(platform, org, pid, runtime="sandbox"):
    return [
        sys.executable,
        "-m",
        "api.cli",
        "node",
        "run",
        "--org",
        org,
        "--consortium",
        str(platform.consortium.root),
        "--ledger",
        str(platform.root / "ledger.sqlite"),
        "--runtime",
        runtime,
        "--data",
        str(platform.root / "data" / org),
        "--store",
        str(platform.root / "store"),
        "--state",
        str(platform.root / "state"),
        "--process",
        pid,
        "--timeout",
        "120",
    ]


@pytest.mark.parametrize(
    "checkpoint,warm,runtime",
    [(c, False, "sandbox") for c in CHECKPOINTS]
    + [
        ("during_run", True, "sandbox"),
        pytest.param("during_run", False, "container", marks=pytest.mark.container),
    ],
)
def test_agent_killed_at_any_step_resumes_without_duplicates(
    request, platform, recipe, average_consensus, checkpoint, warm, runtime
):
    pid = f"p-kill-{checkpoint.replace('_', '-')}{'-warm' if warm else ''}-{runtime}"
    orgs = ["Org1MSP", "Org2MSP"]
    if runtime == "container":
        from executor.runtimes.container import ContainerRuntime

        image, rt = (
            request.getfixturevalue("container_image"),
            ContainerRuntime(client=request.getfixturevalue("engine")),
        )
    else:
        image, rt = request.getfixturevalue("bundle"), SandboxRuntime()
    platform.register_image("avg:k", recipe, image.digest, image.reference)
    platform.launch(pid, "avg:k", rounds=2, orgs=orgs)
    # Org2's agent runs here, Org1's in its own process: each serves its store over HTTPS, and each
    # finds the other's endpoint in its membership record (Org1's changes when it restarts)
    served = platform.serve("Org2MSP")
    other = threading.Thread(
        target=lambda: platform.agent("Org2MSP", runtime=rt, endpoint=served.url).run_until_idle(
            pid, timeout=120
        )
    )
    other.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = _agent_cmd(platform, "Org1MSP", pid, runtime) + (["--warm"] if warm else [])
    faulty = {**env, **kill_at_environment(checkpoint, 2)}  # the node command loads the test's plan
    killed = subprocess.run(cmd, env=faulty, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert f"killing the agent at {checkpoint} of round 2" in killed.stderr
    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    other.join(timeout=180)
    served.stop()
    recs = platform.records(pid)
    assert sorted((r["round"], r["organisation"]) for r in recs) == [(1, o) for o in orgs] + [
        (2, o) for o in orgs
    ]
    assert all(r["status"] == "completed" for r in recs)
    for r in recs:  # exactly one record per key, created once and completed once
        history = platform.evaluate(
            "Org1MSP", "ExecutionRecord:history", pid, str(r["round"]), r["organisation"]
        )
        assert [h["value"]["status"] for h in history] == ["running", "completed"]
    assert_matches_simulation(platform, pid, 2, average_consensus, orgs)
    assert platform.evaluate("Org1MSP", "LearningProcess:get", pid)["status"] == "completed"
    # the sealed task-key journal is gone once the record is final
    assert not list((platform.root / "state" / "Org1MSP" / "tasks").rglob("task_key.sealed"))


def _store_files(root):
    return [p for p in root.rglob("*") if p.is_file()]


def test_store_holds_only_ciphertext_in_private_modes(platform, bundle, recipe, average_consensus):
    """Issue 14 item 6: after an audited run no organisation's state or plaintext model is in any
    store file, every file is 0600 and every directory 0700; the owner opens its sealed state and
    model with its own key and they are bit-identical to the simulator's."""
    platform.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    platform.launch("p-rest", "avg:1", rounds=3)
    run_all(platform, "p-rest", [platform.agent(o) for o in platform.orgs])
    sim = simulate(
        average_consensus.AverageConsensus(**PARAMS),
        platform.datasets(),
        3,
        SEED,
        ring(len(platform.orgs)),
        platform.orgs,
    )
    store = platform.root / "store"
    files = _store_files(store)
    assert files
    contents = [f.read_bytes() for f in files]
    for o in platform.orgs:
        for secret in (sim.states[o], sim.models[o]):
            assert not any(secret in c for c in contents), f"plaintext of {o} found in the store"
    for p in [store / o for o in platform.orgs] + [d for d in store.rglob("*") if d.is_dir()]:
        assert p.stat().st_mode & 0o777 == 0o700, p
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o600, f
    for o in platform.orgs:
        s = ArtifactStore(store, o)
        last = platform.evaluate(o, "ExecutionRecord:get", "p-rest", "3", o)["result"]["outputs"]
        key = platform.consortium.encryption_key(o)
        assert s.get_private(last["state"], key) == sim.states[o]
        assert s.get_private(last["model"]["digest"], key) == sim.models[o]
        other = platform.consortium.encryption_key(next(x for x in platform.orgs if x != o))
        with pytest.raises(ArtifactCorrupted):
            s.get_private(last["state"], other)
