"""Ledger benchmark: throughput and latency of the embedded host (and of real Fabric, where the
Fabric host is installed), with every signature really made and verified.

    python -m benchmarks.ledger [--quick] [--clients N] [--backend embedded|fabric]

Workloads (same for every host):
* submit: concurrent clients (threads, identities of all organisations) each registering
  images -- a real contract write with validation, endorsement by a MAJORITY of peers, ordering,
  MVCC validation and commit; throughput over the whole run, per-transaction latency p50/p99;
* evaluate: concurrent clients reading an image record (signed proposal, checked by the peer);
* history: ``Model:history`` of a model whose access list changed 1,000 times (grant/revoke),
  i.e. a key with 1,000 versions: ``history_p50_ms``/``history_p99_ms`` time one page of the newest
  100 versions (the gateway's and client's default page), ``history_full_p50_ms``/``_p99_ms`` the
  whole history in one read (both timed in every sample);
* capacity: the submit workload for a fixed time at 1 to 64 clients (``benchmarks.ledger_capacity``):
  ``embedded_capacity_tps`` is the throughput where latency starts to climb, with the whole sweep.
The last line printed is JSON with the figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from audit.ledger_file import verify_ledger_file
from benchmarks.ledger_capacity import capacity_sweep
from benchmarks.ledger_workloads import HISTORY_PAGE, bench_evaluate, bench_history, bench_submit, report
from ledger.identity import Consortium


def run_embedded(args, workdir: Path, consortium: Consortium) -> dict[str, float]:
    from ledger.embedded import EmbeddedLedger

    out: dict[str, float] = {}
    with EmbeddedLedger(workdir / "bench.db", consortium, batch_timeout=args.batch_timeout) as led:
        s = bench_submit(led, consortium, args.clients, args.submits)
        e = bench_evaluate(led, consortium, max(1, args.eval_clients), args.evaluates)
        h = bench_history(led, consortium, args.versions, args.history_samples)
        cap = capacity_sweep(led, consortium, args.capacity_clients, args.capacity_seconds, "embedded")
        t = time.perf_counter()
        stats = verify_ledger_file(led.path, consortium)
        verify_s = time.perf_counter() - t
    out.update(
        {
            "embedded_submit_tps": s["submit_tps"],
            "submit_p50_ms": s["submit_p50_ms"],
            "submit_p99_ms": s["submit_p99_ms"],
            "embedded_evaluate_tps": e["evaluate_tps"],
            "history_p50_ms": h["history_p50_ms"],
            "history_p99_ms": h["history_p99_ms"],
            "history_page_versions": h["history_page_versions"],
            "history_full_p50_ms": h["history_full_p50_ms"],
            "history_full_p99_ms": h["history_full_p99_ms"],
            "history_versions": h["history_versions"],
            "submits": s["submits"],
            "verify_s": verify_s,
            "verified_transactions": stats["transactions"],
            **cap,
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
    ap.add_argument(
        "--fabric-batch-timeout", help="the Fabric orderer's BatchTimeout (default: the network's)"
    )
    args = ap.parse_args(argv)
    args.submits = 2000 if args.quick else 10000
    args.evaluates = 4000 if args.quick else 20000
    args.versions = 1000
    args.history_samples = 50 if args.quick else 200
    args.capacity_clients = (1, 2, 4, 8, 16, 32, 64)
    args.capacity_seconds = 2.0 if args.quick else 5.0
    results: dict[str, float] = {"clients": args.clients, "cores": os.cpu_count() or 0}
    with tempfile.TemporaryDirectory() as d:
        consortium = Consortium.generate(Path(d) / "crypto", ["Org1", "Org2", "Org3"])
        results.update(run_embedded(args, Path(d), consortium))
        if args.backend == "fabric":
            from benchmarks.ledger_fabric import run_fabric  # imports the Fabric host's gRPC stack

            results.update(run_fabric(args, consortium))
    print(
        f"history: history_p*_ms read one page of the newest {HISTORY_PAGE} of {args.versions} versions "
        f"(the default page); history_full_p*_ms read all {args.versions} in one call"
    )
    report(
        results, Path(__file__).parent / "results" / ("ledger-quick.json" if args.quick else "ledger.json")
    )
    return results


if __name__ == "__main__":
    main()
