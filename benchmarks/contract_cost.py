"""Contract cost: CPU time of one contract call, ``chaincode.dispatch.invoke`` on the embedded stub.

    python -m benchmarks.contract_cost [--quick] [--batches B] [--calls N] [--only FUNCTION]...

A committed ledger holds an image, a started three-member process whose round 1 every member
completed (Org1's round 2 task registered), a finished one-round process and a published model.
Each workload then runs ``invoke`` many times, each time on a fresh
:class:`ledger.embedded.simulation.TxSimulator` over that committed state (a simulation writes
nothing, so every call sees the same state): the figure is the contract's own work (argument
limits, creator, reads from SQLite, validation, canonical JSON of what is stored and answered),
without signing, endorsement, ordering or commit. ``complete_task`` (the public form the node agent
sends, its confidential part in the transient map) includes one ECDSA P-256 verification and the
private copy written for each member.

Times are CPU time of the calling thread (``time.thread_time``), so other processes on the machine
do not count, but they still slow a call down (shared caches and cores). So calls are timed in
``B`` batches of ``N`` calls: printed per function are the best batch's mean (the least disturbed;
the figure to compare) and the median batch's mean, in microseconds; the last line is JSON
(``<function>_us`` = best).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from chaincode import dispatch
from chaincode.records import MODEL_PRIVATE, RESULT_CONFIDENTIAL, ModelPrivate
from executor.consent import give_consent
from ledger.client import ConsortiaClient, private_terms_transient, process_transient, split_result
from ledger.embedded import EmbeddedLedger
from ledger.embedded.simulation import TxSimulator
from ledger.identity import Consortium, public_key_pem, sign
from wire.canonical import canonical_json, sha256_digest

IMAGE_DIGEST = sha256_digest(b"bench image")
ORGS = ("Org1", "Org2", "Org3")


def _digest(text: str) -> str:
    return sha256_digest(text.encode())


def _result(pid: str, rnd: int, org: str, consortium: tuple[str, ...], model: str | None = None) -> dict:
    return {
        "process_id": pid,
        "round": rnd,
        "organisation": org,
        "image_digest": IMAGE_DIGEST,
        "runtime": "sandbox",
        "inputs": {
            "state": _digest(f"state-{org}-{rnd - 1}") if rnd > 1 else None,
            "messages": [{"sender": o, "digest": _digest(f"m-{o}-{org}-{rnd - 1}")} for o in consortium],
            "data_commitment": _digest(f"data-{org}"),
        },
        "outputs": {
            "state": _digest(f"state-{org}-{rnd}"),
            "messages": [
                {"recipient": o, "digest": _digest(f"m-{org}-{o}-{rnd}"), "size": 4096} for o in consortium
            ],
            "model": None if model is None else {"digest": model, "size": 1234},
        },
        "metrics": {"loss": 0.25, "accuracy": 0.875, "n_samples": 1000},
        "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:00:01Z",
    }


def _complete(client: ConsortiaClient, pid: str, rnd: int, consortium: tuple[str, ...], model=None):
    key = ec.generate_private_key(ec.SECP256R1())
    client.create_task(pid, rnd, key.public_key(), "sandbox")
    result = _result(pid, rnd, client.organisation, consortium, model)
    public, confidential = split_result(result, secrets.token_hex(32))  # as the node agent completes
    client.complete_task(public, sign(key, canonical_json(public)), confidential)


#: the transient map of a workload, by function (docs/confidentiality.md: private terms travel there)
TRANSIENT: dict[str, dict[str, bytes]] = {}


def prepare(led: EmbeddedLedger, cons: Consortium) -> dict[str, tuple[str, list[str]]]:
    """Commit the state the workloads read; return ``function -> (calling organisation, arguments)``
    (:data:`TRANSIENT` holds the transient maps of the functions that take a process's private terms)."""
    c1, c2, c3 = (ConsortiaClient(led, cons.identity(o)) for o in ORGS)
    members = tuple(f"{o}MSP" for o in ORGS)
    c1.register_image("bench", "1", "collab-rf", IMAGE_DIGEST, description="benchmark image")
    hyper = {"n_new": 5, "n_estimators": 20, "max_depth": 8, "gradient_clip": 1.0}
    topology = {"kind": "ring", "seed": 7}
    c1.create_process("run", "bench:1", members, topology, 3, hyperparameters=hyper, dataset="adult")
    admins = {f"{o}MSP": ConsortiaClient(led, cons.identity(o, "Admin")) for o in ORGS}
    give_consent(admins, "run")  # each member approves the image and accepts (docs/consent.md)
    c1.start_process("run")
    for c in (c1, c2, c3):
        _complete(c, "run", 1, members)
    key = ec.generate_private_key(ec.SECP256R1())
    c1.create_task("run", 2, key.public_key(), "sandbox")
    result2, confidential2 = split_result(_result("run", 2, "Org1MSP", members), secrets.token_hex(32))
    signature2 = base64.b64encode(sign(key, canonical_json(result2))).decode()
    c1.create_process("idle", "bench:1", members, topology, 3, hyperparameters=hyper)
    give_consent(admins, "idle")  # start needs every member's acceptance
    TRANSIENT["LearningProcess:create"] = private_terms_transient(hyper, None)
    TRANSIENT["ExecutionRecord:complete_task"] = {
        **(process_transient(c1.get_process("run")) or {}),
        RESULT_CONFIDENTIAL: confidential2.canonical(),
    }
    pair = members[:2]
    c1.create_process("done", "bench:1", pair, {"kind": "complete", "seed": 1}, 1, hyperparameters=hyper)
    give_consent(admins, "done")
    c1.start_process("done")
    model = _digest("final model")
    _complete(c1, "done", 1, pair, model=model)
    model2 = _digest("final model of Org2")
    _complete(c2, "done", 1, pair, model=model2)
    wrapped = {o: base64.b64encode(os.urandom(80)).decode() for o in pair}
    wrapped3 = base64.b64encode(os.urandom(80)).decode()
    model_spec = {
        "process_id": "done",
        "digest": model,
        "ciphertext_digest": _digest("ciphertext"),
        "wrapped_keys": wrapped,
    }
    # the process's terms are private, so are its models' size, metrics and estimators (transient)
    TRANSIENT["Model:publish"] = {
        MODEL_PRIVATE: ModelPrivate(
            size=1234,
            metrics={"accuracy": 0.9},
            estimators=tuple({"id": f"e{i}", "digest": _digest(f"e{i}")} for i in range(20)),
            salt=secrets.token_hex(32),
        ).canonical()
    }
    c1.publish_membership("https://org1.example:7443", _digest("ca"))
    c2.publish_model("done", model2, 1234, _digest("ciphertext-2"), {o: os.urandom(80) for o in pair})
    TRANSIENT["Model:grant"] = {MODEL_PRIVATE: c2.get_model("done:Org2MSP").private_part().canonical()}
    task_key = public_key_pem(ec.generate_private_key(ec.SECP256R1()).public_key())
    new_image = {"name": "other", "version": "2", "algorithm": "collab-rf", "digest": IMAGE_DIGEST}
    new_process = {
        "id": "new",
        "image_id": "bench:1",
        "consortium": list(members),
        "topology": topology,
        "rounds": 3,
    }
    task = {"process_id": "run", "round": 2, "public_key": task_key, "runtime": "sandbox"}
    failure = {"process_id": "run", "round": 2, "reason": "data missing", "details": {"code": 3}}
    member = {"artifact_endpoint": "https://org1.example:8443", "tls_ca_digest": _digest("ca2")}
    j = json.dumps
    # name -> (calling organisation, arguments)
    return {
        "Image:register": ("Org1", [j(new_image)]),
        "Image:get": ("Org1", ["bench:1"]),
        "Image:list": ("Org1", []),
        "LearningProcess:create": ("Org1", [j(new_process)]),
        "LearningProcess:start": ("Org1", ["idle"]),
        "LearningProcess:get": ("Org1", ["run"]),
        "LearningProcess:progress": ("Org1", ["run"]),
        "ExecutionRecord:create_task": ("Org3", [j(task)]),
        "ExecutionRecord:complete_task": ("Org1", [canonical_json(result2).decode(), signature2]),
        "ExecutionRecord:fail_task": ("Org2", [j(failure)]),
        "ExecutionRecord:get": ("Org1", ["run", "1", "Org2MSP"]),
        "ExecutionRecord:query": ("Org1", [j({"process_id": "run", "round": 1})]),
        "ExecutionRecord:inbox": ("Org1", ["run", "1"]),
        "Model:publish": ("Org1", [j(model_spec)]),
        "Model:get": ("Org2", ["done:Org2MSP"]),
        "Model:grant": ("Org2", ["done:Org2MSP", "Org3MSP", wrapped3]),
        "Membership:publish": ("Org2", [j(member)]),
        "Membership:get": ("Org1", ["Org1MSP"]),
    }


def time_batches(invoke: Callable[[], bytes], batches: int, calls: int) -> list[float]:
    """Mean CPU microseconds of this thread per call, for each of ``batches`` batches of ``calls``
    calls (after a warm-up batch)."""
    for _ in range(calls):
        invoke()
    means = []
    for _ in range(batches):
        t = time.thread_time()
        for _ in range(calls):
            invoke()
        means.append((time.thread_time() - t) * 1e6 / calls)
    return means


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batches", type=int, default=None, help="batches per function (default 15, quick 5)")
    ap.add_argument("--calls", type=int, default=200, help="calls per batch (default 200)")
    ap.add_argument("--only", action="append", default=[], help="time only this function (repeatable)")
    args = ap.parse_args(argv)
    batches = args.batches or (5 if args.quick else 15)
    with tempfile.TemporaryDirectory() as tmp:
        cons = Consortium.generate(Path(tmp) / "crypto", list(ORGS))
        with EmbeddedLedger(Path(tmp) / "bench.db", cons, batch_timeout=0.002) as led:
            workloads = prepare(led, cons)
            con = led._store.connection()
            private = {f"{o}MSP": led._private_stores[f"{o}MSP"].connection() for o in ORGS}
            creators = {o: cons.identity(o).serialized() for o in ORGS}
            figures: dict[str, float] = {}
            print(f"{'function':34s} {'best µs':>8s} {'median µs':>10s}")
            for function, (org, fargs) in workloads.items():
                if args.only and function not in args.only:
                    continue

                msp = f"{org}MSP"

                def call(function=function, fargs=fargs, creator=creators[org], msp=msp) -> bytes:
                    sim = TxSimulator(
                        con,
                        tx_id="bench",
                        channel="c",
                        timestamp=time.time(),
                        creator=creator,
                        transient=TRANSIENT.get(function),
                        msp_id=msp,
                        collections=led._collections,
                        private=private[msp],
                    )
                    return dispatch.invoke(sim, function, fargs)

                call()  # fails loudly if a workload is not a valid call
                means = time_batches(call, batches, args.calls)
                figures[function] = round(min(means), 1)
                print(f"{function:34s} {figures[function]:8.1f} {statistics.median(means):10.1f}")
    without_ecdsa = [v for k, v in figures.items() if k != "ExecutionRecord:complete_task"] or [0.0]
    summary = {
        **{f"{k}_us": v for k, v in figures.items()},
        "mean_us": round(statistics.mean(figures.values()), 1),
        "mean_without_complete_task_us": round(statistics.mean(without_ecdsa), 1),
        "batches": batches,
        "calls_per_batch": args.calls,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
