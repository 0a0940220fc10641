"""Ledger benchmark: throughput and latency of the embedded host (and of real Fabric, where the
Fabric host is installed), with every signature really made and verified.

    python -m benchmarks.ledger [--quick] [--clients N] [--backend embedded|fabric]

Workloads (same for every host):
* submit: concurrent clients (threads, identities of all organisations) each registering
  images -- a real contract write with validation, endorsement by a MAJORITY of peers, ordering,
  MVCC validation and commit; throughput over the whole run, per-transaction latency p50/p99;
* evaluate: concurrent clients reading an image record (signed proposal, checked by the peer);
* history: ``Model:history`` of a model whose access list changed 1,000 times (grant/revoke),
  i.e. a key with 1,000 versions, latency p50/p99.
The last line printed is JSON with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from ledger.client import ConsortiaClient
from ledger.envelope import encrypt_payload, seal
from ledger.identity import Consortium, sign
from wire.canonical import canonical_json

DIGEST = "sha256:" + "ab" * 32


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(q / 100 * (len(xs) - 1)))))
    return xs[k]


def run_clients(worker, clients: int) -> float:
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


def _clients(ledger, consortium: Consortium, n: int) -> list[ConsortiaClient]:
    orgs = [o.msp_id for o in consortium.organisations]
    return [ConsortiaClient(ledger, consortium.identity(orgs[i % len(orgs)])) for i in range(n)]


def bench_submit(ledger, consortium: Consortium, clients: int, total: int) -> dict[str, float]:
    per_client = total // clients
    users = _clients(ledger, consortium, clients)
    latencies: list[list[float]] = [[] for _ in range(clients)]

    def worker(i: int) -> None:
        for j in range(per_client):
            t = time.perf_counter()
            users[i].register_image(f"bench-{i}-{j}", "1", "bench", DIGEST)
            latencies[i].append(time.perf_counter() - t)

    elapsed = run_clients(worker, clients)
    flat = [x for lat in latencies for x in lat]
    return {
        "submit_tps": len(flat) / elapsed,
        "submit_p50_ms": percentile(flat, 50) * 1e3,
        "submit_p99_ms": percentile(flat, 99) * 1e3,
        "submits": len(flat),
    }


def bench_evaluate(ledger, consortium: Consortium, clients: int, total: int) -> dict[str, float]:
    per_client = total // clients
    users = _clients(ledger, consortium, clients)

    def worker(i: int) -> None:
        for j in range(per_client):
            ledger.evaluate(users[i].identity, "Image:get", f"bench-{i % clients}-{j % 50}:1")

    return {"evaluate_tps": per_client * clients / run_clients(worker, clients)}


def bench_history(ledger, consortium: Consortium, versions: int, samples: int) -> dict[str, float]:
    """A model whose access list changed ``versions`` times; time Model:history."""
    c1 = ConsortiaClient(ledger, consortium.identity("Org1"))
    c2 = ConsortiaClient(ledger, consortium.identity("Org2"))
    c1.register_image("hist", "1", "bench", DIGEST)
    pid = f"hist-{os.getpid()}-{time.time_ns()}"
    c1.create_process(pid, "hist:1", ["Org1MSP", "Org2MSP"], {"kind": "ring", "seed": 1}, 1)
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
        c.complete_task(res, sign(key, canonical_json(res)))
    data_key, ct = encrypt_payload(b"model")
    wrapped = {m: seal(consortium.encryption_certificate(m), data_key) for m in ("Org1MSP", "Org2MSP")}
    model = c1.publish_model(pid, model_digest, 5, DIGEST, wrapped)
    sealed3 = seal(consortium.encryption_certificate("Org3MSP"), data_key)
    # grant/revoke alternate on one key: each must see the previous version, so submit in sequence
    for i in range(versions - 1):
        if i % 2 == 0:
            c1.grant_model(model.id, "Org3MSP", sealed3)
        else:
            c1.revoke_model(model.id, "Org3MSP")
    lat = []
    n_versions = 0
    for _ in range(samples):
        t = time.perf_counter()
        h = c2.model_history(model.id)
        lat.append(time.perf_counter() - t)
        n_versions = len(h)
    return {
        "history_versions": n_versions,
        "history_p50_ms": percentile(lat, 50) * 1e3,
        "history_p99_ms": percentile(lat, 99) * 1e3,
    }


def run_embedded(args, workdir: Path, consortium: Consortium) -> dict[str, float]:
    from ledger.embedded import EmbeddedLedger

    out: dict[str, float] = {}
    with EmbeddedLedger(workdir / "bench.db", consortium, batch_timeout=args.batch_timeout) as led:
        s = bench_submit(led, consortium, args.clients, args.submits)
        e = bench_evaluate(led, consortium, max(1, args.eval_clients), args.evaluates)
        h = bench_history(led, consortium, args.versions, args.history_samples)
        t = time.perf_counter()
        stats = led.verify()
        verify_s = time.perf_counter() - t
    out.update(
        {
            "embedded_submit_tps": s["submit_tps"],
            "submit_p50_ms": s["submit_p50_ms"],
            "submit_p99_ms": s["submit_p99_ms"],
            "embedded_evaluate_tps": e["evaluate_tps"],
            "history_p50_ms": h["history_p50_ms"],
            "history_p99_ms": h["history_p99_ms"],
            "history_versions": h["history_versions"],
            "submits": s["submits"],
            "verify_s": verify_s,
            "verified_transactions": stats["transactions"],
        }
    )
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backend", choices=["embedded", "fabric"], default="embedded")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--eval-clients", type=int, default=2)
    ap.add_argument("--batch-timeout", type=float, default=0.01)
    args = ap.parse_args(argv)
    args.submits = 2000 if args.quick else 10000
    args.evaluates = 4000 if args.quick else 20000
    args.versions = 1000
    args.history_samples = 50 if args.quick else 200
    results: dict[str, float] = {"clients": args.clients, "cores": os.cpu_count() or 0}
    with tempfile.TemporaryDirectory() as d:
        consortium = Consortium.generate(Path(d) / "crypto", ["Org1", "Org2", "Org3"])
        results.update(run_embedded(args, Path(d), consortium))
        if args.backend == "fabric":
            from benchmarks.ledger_fabric import run_fabric  # provided with the Fabric host

            results.update(run_fabric(args, consortium))
    for k, v in results.items():
        print(f"{k:>24}: {v:.3f}" if isinstance(v, float) else f"{k:>24}: {v}")
    out = Path(__file__).parent / "results" / ("ledger-quick.json" if args.quick else "ledger.json")
    out.write_text(json.dumps(results, indent=2, sort_keys=True))
    print(
        json.dumps(
            {k: (round(v, 3) if isinstance(v, float) else v) for k, v in results.items()}, sort_keys=True
        )
    )
    return results


if __name__ == "__main__":
    main()
