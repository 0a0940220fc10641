"""The ledger benchmark's workloads, the same for every ledger host (``benchmarks.ledger`` runs
them on the embedded host, ``benchmarks.ledger_fabric`` on a real Fabric network): concurrent
submits (public: an image registered; private: a learning process created among every organisation),
concurrent evaluates, and ``Model:history`` of a key with many versions (a page of the
newest 100, and the whole history); and the report every run prints and writes."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from exchange.sealing import encrypt_payload, seal
from executor.consent import give_consent
from ledger.client import ConsortiaClient, split_result
from ledger.identity import Consortium, sign
from ledger.interface import Ledger
from ledger.rules import DEFAULT_HISTORY_PAGE
from wire.canonical import canonical_json

DIGEST = "sha256:" + "ab" * 32
HISTORY_PAGE = DEFAULT_HISTORY_PAGE  #: versions in the timed history page (the API's default page size)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(q / 100 * (len(xs) - 1)))))
    return xs[k]


def run_clients(worker: Callable[[int], None], clients: int) -> float:
    """Run ``worker(i)`` in ``clients`` threads released together; return the wall seconds.
    An exception in any worker is raised here (never lost in a thread)."""
    barrier = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            worker(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def clients_of(
    ledger: Ledger, consortium: Consortium, n: int, seats: Sequence[ConsortiaClient] = ()
) -> list[ConsortiaClient]:
    """``n`` clients spread over the organisations in turn: over ``seats`` (one client per organisation,
    each on its own ledger connection: organisations on hosts of their own) when given, else over the
    organisations of ``consortium`` on ``ledger``."""
    if seats:
        return [
            ConsortiaClient(seats[i % len(seats)].ledger, seats[i % len(seats)].identity) for i in range(n)
        ]
    orgs = [o.msp_id for o in consortium.organisations]
    return [ConsortiaClient(ledger, consortium.identity(orgs[i % len(orgs)])) for i in range(n)]


def bench_submit(
    ledger: Ledger,
    consortium: Consortium,
    clients: int,
    total: int,
    seats: Sequence[ConsortiaClient] = (),
    first: int = 0,
) -> dict[str, Any]:
    """The public submit workload: ``clients`` concurrent clients register ``total`` images between them
    (``bench-<client>-<j>`` for ``j`` from ``first``, so that several calls on one ledger write distinct
    images); each submit is endorsed by the chaincode's policy (a majority), ordered and committed."""
    users = clients_of(ledger, consortium, clients, seats)
    return _timed_submits(
        lambda i, j: users[i].register_image(f"bench-{i}-{first + j}", "1", "bench", DIGEST),
        clients,
        total // clients,
    )


PRIVATE_IMAGE = "bench-private-image"  #: the image every process of :func:`bench_private_submit` runs


def prepare_private_submit(client: ConsortiaClient) -> None:
    """Register :data:`PRIVATE_IMAGE` (once per ledger, before :func:`bench_private_submit` is timed)."""
    client.register_image(PRIVATE_IMAGE, "1", "bench", DIGEST)


def bench_private_submit(
    ledger: Ledger,
    consortium: Consortium,
    clients: int,
    total: int,
    seats: Sequence[ConsortiaClient] = (),
    first: int = 0,
) -> dict[str, Any]:
    """The private submit workload, beside :func:`bench_submit` with the same clients and threads:
    each submit creates a one-round learning process (``LearningProcess:create``, through
    :meth:`ConsortiaClient.create_process`) whose consortium is every organisation of the ledger, with
    non-empty hyper-parameters and a privacy budget distinct per process (``bench-private-<client>-<j>``
    for ``j`` from ``first``). Where the contract keeps these in the members' implicit collections
    (docs/confidentiality.md), the submit carries them in the transient map, writes one private copy per
    member and is endorsed by every member; the workload calls the client, whichever path it takes.
    Needs :func:`prepare_private_submit` first."""
    users = clients_of(ledger, consortium, clients, seats)
    members = sorted({u.identity.msp_id for u in users})  # every organisation, when clients >= orgs

    def create(i: int, j: int) -> None:
        n = first + j
        users[i].create_process(
            f"bench-private-{i}-{n}",
            f"{PRIVATE_IMAGE}:1",
            members,
            {"kind": "ring", "seed": n},
            1,
            hyperparameters={"learning_rate": 0.01, "gradient_clip": 1.0, "bench_marker": f"hp-{i}-{n}"},
            privacy_budget={"mechanism": "gaussian", "epsilon": 1.0 + (n % 7) / 8, "delta": 1e-5},
        )

    return _timed_submits(create, clients, total // clients)


def _timed_submits(submit: Callable[[int, int], object], clients: int, per_client: int) -> dict[str, Any]:
    """``submit(i, j)`` for ``j < per_client`` in each of ``clients`` threads ``i``: throughput and the
    latencies (p50, p99 and every one, ``latencies_s``, so that several runs can be pooled)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]

    def worker(i: int) -> None:
        for j in range(per_client):
            t = time.perf_counter()
            submit(i, j)
            latencies[i].append(time.perf_counter() - t)

    elapsed = run_clients(worker, clients)
    flat = [x for lat in latencies for x in lat]
    return {
        "submit_tps": len(flat) / elapsed,
        "submit_p50_ms": percentile(flat, 50) * 1e3,
        "submit_p99_ms": percentile(flat, 99) * 1e3,
        "submits": len(flat),
        "elapsed_s": elapsed,
        "latencies_s": flat,
    }


def bench_evaluate(ledger: Ledger, consortium: Consortium, clients: int, total: int) -> dict[str, float]:
    per_client = total // clients
    users = clients_of(ledger, consortium, clients)

    def worker(i: int) -> None:
        for j in range(per_client):
            ledger.evaluate(users[i].identity, "Image:get", f"bench-{i % clients}-{j % 50}:1")

    return {"evaluate_tps": per_client * clients / run_clients(worker, clients)}


def bench_history(ledger: Ledger, consortium: Consortium, versions: int, samples: int) -> dict[str, float]:
    """A model whose access list changed ``versions`` times; time ``Model:history``: a page of the
    newest :data:`HISTORY_PAGE` versions and the whole history (:func:`_time_history`)."""
    c1 = ConsortiaClient(ledger, consortium.identity("Org1"))
    c2 = ConsortiaClient(ledger, consortium.identity("Org2"))
    c1.register_image("hist", "1", "bench", DIGEST)
    pid = f"hist-{os.getpid()}-{time.time_ns()}"
    c1.create_process(pid, "hist:1", ["Org1MSP", "Org2MSP"], {"kind": "ring", "seed": 1}, 1)
    admins = {o: ConsortiaClient(ledger, consortium.identity(o, "Admin")) for o in ("Org1MSP", "Org2MSP")}
    give_consent(admins, pid)  # each member approves the image and accepts (docs/consent.md)
    c1.start_process(pid)
    model_digest = "sha256:" + "cd" * 32
    for c in (c1, c2):
        key = ec.generate_private_key(ec.SECP256R1())
        c.create_task(pid, 1, key.public_key(), "inprocess")
        res = {
            "process_id": pid,
            "round": 1,
            "organisation": c.organisation,
            "image_digest": DIGEST,
            "runtime": "inprocess",
            "inputs": {"state": None, "messages": [], "data_commitment": DIGEST},
            "outputs": {"state": DIGEST, "messages": [], "model": {"digest": model_digest, "size": 10}},
            "metrics": {},
        }
        public, confidential = split_result(res, secrets.token_hex(32))  # as the node agent completes
        c.complete_task(public, sign(key, canonical_json(public)), confidential)
    data_key, ct = encrypt_payload(b"model")
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key) for m in ("Org1MSP", "Org2MSP")}
    model = c1.publish_model(pid, model_digest, 5, DIGEST, wrapped)
    sealed3 = seal(consortium.encryption_certificate("Org3MSP"), data_key)
    # a revocation rotates the data key: a new ciphertext digest each time and the key sealed for the
    # remaining organisations (the same sealed blobs every time: the contract cannot tell, and the
    # figure measured is the history read, not the sealing)
    remaining = {m: seal(consortium.encryption_certificate(m), data_key) for m in ("Org1MSP", "Org2MSP")}
    # grant/revoke alternate on one key: each must see the previous version, so submit in sequence
    for i in range(versions - 1):
        if i % 2 == 0:
            c1.grant_model(model.id, "Org3MSP", sealed3)
        else:
            c1.revoke_model(model.id, "Org3MSP", f"sha256:{i:064x}", remaining)
    return _time_history(c2, model.id, samples)


def _time_history(client: ConsortiaClient, model_id: str, samples: int) -> dict[str, float]:
    """``history_*``: one page of the newest :data:`HISTORY_PAGE` versions (the API's default page);
    ``history_full_*``: the whole history in one read (oldest first, the unpaged call)."""
    page_lat, full_lat = [], []
    n_versions = page_versions = 0
    for _ in range(samples):
        t = time.perf_counter()
        page = client.model_history(model_id, HISTORY_PAGE)
        page_lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        whole = client.model_history(model_id)
        full_lat.append(time.perf_counter() - t)
        n_versions, page_versions = len(whole), len(page.items)
    return {
        "history_versions": n_versions,
        "history_page_versions": page_versions,
        "history_p50_ms": percentile(page_lat, 50) * 1e3,
        "history_p99_ms": percentile(page_lat, 99) * 1e3,
        "history_full_p50_ms": percentile(full_lat, 50) * 1e3,
        "history_full_p99_ms": percentile(full_lat, 99) * 1e3,
    }


def report(results: Mapping[str, float], out: Path) -> None:
    """Print one line per figure, write ``out`` (JSON), and print the figures as the last line."""
    for k, v in results.items():
        print(f"{k:>24}: {v:.3f}" if isinstance(v, float) else f"{k:>24}: {v}")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True))
    print(
        json.dumps(
            {k: (round(v, 3) if isinstance(v, float) else v) for k, v in results.items()}, sort_keys=True
        )
    )
