"""Audit-index benchmark: ingest rate and provenance latency with 100,000 execution records.

    python -m benchmarks.api [--quick] [--records N]

Workloads:
* ingest: ``N`` execution records (default 100,000 = 500 processes x 4 organisations x 50 rounds,
  ring topology, each record shaped like the contract's: signed result with inputs, outputs,
  metrics, task key and signature) written into a fresh SQLite audit index the way the follower
  writes them (``api.index.ingest_executions``), in blocks of 500 -> ``index_ingest_per_s``.
  Record generation is not timed; the ledger reads the follower does per event are measured
  separately below (``follower_events_per_s``), on a real embedded ledger.
* provenance: lineage of a model (every execution it descends from and the artifacts between
  them, ``AuditIndex.lineage``, what ``GET /api/v1/models/{id}/lineage`` serves) for random
  models, with the index full -> ``provenance_p50_ms`` / ``provenance_p99_ms``; also "which
  artifacts did organisation X publish for process P" -> ``published_p99_ms``.
  Wall-clock latencies on a shared machine include waiting for a core; ``provenance_cpu_p99_ms`` (the
  query thread's CPU time) and ``load_average`` are printed so a reader can tell work from waiting.
* follower: a real audited process on the embedded ledger (3 organisations, signed results), then
  the follower builds an index from its events (reading each record through the contracts) ->
  ``follower_events_per_s``.
The last line printed is JSON with the figures. Targets (issue 9): p99 <= 20 ms, ingest >= 2,000/s.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from api.index import AuditIndex, ingest_executions
from wire.canonical import sha256_digest

ORGS = ("Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP")


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(q / 100 * (len(xs) - 1)))))
    return xs[k]


def _d(text: str) -> str:
    return sha256_digest(text.encode())


def synthetic_records(processes: int, rounds: int, seed: int = 7):
    """(record, block) pairs of ring processes, in commit order (round by round)."""
    rng = random.Random(seed)
    key = (
        "-----BEGIN PUBLIC KEY-----\n"
        + base64.b64encode(rng.randbytes(91)).decode()
        + "\n-----END PUBLIC KEY-----\n"
    )
    image = _d("image")
    block = 0
    n = len(ORGS)
    for p in range(processes):
        pid = f"bench-{p:05d}"
        for r in range(1, rounds + 1):
            block += 1
            for i, org in enumerate(ORGS):
                pred, succ = ORGS[(i - 1) % n], ORGS[(i + 1) % n]
                result = {
                    "process_id": pid,
                    "round": r,
                    "organisation": org,
                    "image_digest": image,
                    "runtime": "sandbox",
                    "inputs": {
                        "state": _d(f"{pid}s{org}{r - 1}") if r > 1 else None,
                        "data_commitment": _d(f"data{org}"),
                        "messages": [{"sender": pred, "digest": _d(f"{pid}m{pred}{org}{r - 1}")}]
                        if r > 1
                        else [],
                    },
                    "outputs": {
                        "state": _d(f"{pid}s{org}{r}"),
                        "messages": [
                            {"recipient": succ, "digest": _d(f"{pid}m{org}{succ}{r}"), "size": 4096}
                        ],
                        "model": {"digest": _d(f"{pid}model{org}"), "size": 65536} if r == rounds else None,
                    },
                    "metrics": {"loss": 1.0 / r, "epsilon_spent": 0.01},
                    "started": "2026-01-01T00:00:00Z",
                    "finished": "2026-01-01T00:00:01Z",
                }
                yield (
                    {
                        "process_id": pid,
                        "round": r,
                        "organisation": org,
                        "image_digest": image,
                        "runtime": "sandbox",
                        "public_key": key,
                        "status": "completed",
                        "created": "2026-01-01T00:00:00Z",
                        "created_by": f"User1@{org.lower()}",
                        "tx_id": hashlib.sha256(f"c{pid}{r}{org}".encode()).hexdigest(),
                        "result": result,
                        "signature": base64.b64encode(rng.randbytes(71)).decode(),
                        "completed": "2026-01-01T00:00:01Z",
                        "failure_reason": "",
                        "epsilon_total": 0.01 * r,
                        "completed_tx_id": hashlib.sha256(f"d{pid}{r}{org}".encode()).hexdigest(),
                    },
                    block,
                )


def bench_index(args, root: Path) -> dict[str, float]:
    processes = args.records // (len(ORGS) * args.rounds)
    records = list(synthetic_records(processes, args.rounds))
    ix = AuditIndex(root / "index.db")
    t = time.perf_counter()
    n = ingest_executions(ix, records, batch=500)
    ingest_s = time.perf_counter() - t
    with ix.transaction() as tx:
        for p in range(processes):
            pid = f"bench-{p:05d}"
            tx._put_process(
                {
                    "id": pid,
                    "image_id": "bench:1",
                    "image_digest": _d("image"),
                    "creator": ORGS[0],
                    "status": "completed",
                    "rounds": args.rounds,
                    "consortium": list(ORGS),
                    "tx_id": "t",
                },
                0,
            )
            for org in ORGS:
                tx._put_model(
                    {
                        "id": f"{pid}:{org}",
                        "process_id": pid,
                        "owner": org,
                        "digest": _d(f"{pid}model{org}"),
                        "round": args.rounds,
                        "image_digest": _d("image"),
                        "tx_id": "t",
                    },
                    0,
                )
    del records
    rng = random.Random(1)
    lat, cpu, pub, sizes = [], [], [], []
    for _ in range(args.samples):
        pid = f"bench-{rng.randrange(processes):05d}"
        org = rng.choice(ORGS)
        t, c = time.perf_counter(), time.thread_time()
        lin = ix.lineage(f"{pid}:{org}")
        lat.append((time.perf_counter() - t) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
        sizes.append(len(lin["nodes"]))
        t = time.perf_counter()
        ix.published_artifacts(pid, rng.choice(ORGS))
        pub.append((time.perf_counter() - t) * 1000)
    counts = ix.counts()
    ix.close()
    return {
        "records": n,
        "index_ingest_s": ingest_s,
        "index_ingest_per_s": n / ingest_s,
        "index_mb": os.path.getsize(root / "index.db") / 2**20,
        "artifact_rows": counts["artifacts"],
        "provenance_p50_ms": statistics.median(lat),
        "provenance_p99_ms": percentile(lat, 99),
        "provenance_cpu_p99_ms": percentile(cpu, 99),
        "load_average": os.getloadavg()[0],
        "lineage_nodes_mean": statistics.mean(sizes),
        "published_p99_ms": percentile(pub, 99),
        "samples": args.samples,
    }


def bench_follower(args, root: Path) -> dict[str, float]:
    from api.follower import sync
    from exchange.store import ArtifactStore
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium
    from tests.api.world import World, ring_process

    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2", "Org3"])
    with EmbeddedLedger(root / "ledger.db", consortium, batch_timeout=0.002) as led:
        clients = {
            o.msp_id: ConsortiaClient(led, consortium.identity(o.msp_id)) for o in consortium.organisations
        }
        w = World(consortium, led, clients, {m: ArtifactStore.at(root / m) for m in clients}, root)
        t = time.perf_counter()
        ring_process(
            w, "follow", rounds=args.follower_rounds, orgs=("Org1MSP", "Org2MSP", "Org3MSP"), budget=None
        )
        ledger_s = time.perf_counter() - t
        ix = AuditIndex(root / "follower.db")
        t = time.perf_counter()
        events = sync(ix, clients["Org1MSP"])
        sync_s = time.perf_counter() - t
        execs = ix.executions("follow", limit=10_000).total
        ix.close()
    return {
        "follower_events": events,
        "follower_events_per_s": events / sync_s,
        "follower_executions": execs,
        "ledger_process_s": ledger_s,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer latency samples and a shorter real process")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args(argv)
    if args.records < len(ORGS) * args.rounds:
        ap.error(f"--records must be at least {len(ORGS) * args.rounds}")
    args.samples = 300 if args.quick else 3000
    args.follower_rounds = 10 if args.quick else 40
    results: dict[str, float] = {"cores": os.cpu_count() or 0}
    with tempfile.TemporaryDirectory() as d:
        results.update(bench_index(args, Path(d)))
        results.update(bench_follower(args, Path(d)))
    for k, v in results.items():
        print(f"{k:>24}: {v:.3f}" if isinstance(v, float) else f"{k:>24}: {v}")
    results["targets_met"] = bool(
        results["provenance_p99_ms"] <= 20 and results["index_ingest_per_s"] >= 2000
    )
    out = Path(__file__).parent / "results" / ("api-quick.json" if args.quick else "api.json")
    out.write_text(json.dumps(results, indent=2, sort_keys=True))
    print(
        json.dumps(
            {k: (round(v, 3) if isinstance(v, float) else v) for k, v in results.items()}, sort_keys=True
        )
    )
    return results


if __name__ == "__main__":
    main()
