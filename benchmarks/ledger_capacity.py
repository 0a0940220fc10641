"""A ledger's capacity: the submit throughput where latency starts to climb, not one client count's figure.

A closed-loop benchmark (each client waits for its commit before the next submit) measures its clients
as much as the network: with few clients the network idles between blocks, with many the throughput
stays flat while every submit queues longer. So the sweep runs the same submit workload
(``Image:register``, as ``bench_submit``) for a fixed time at increasing client counts and reports
each point's throughput and latency, then

* ``capacity_tps`` -- the highest throughput of the sweep (the network's saturation throughput);
* ``knee_clients`` -- the fewest clients that reach 90 % of it: more clients than that add latency,
  not throughput (``knee_p50_ms`` / ``knee_p99_ms`` are that point's latencies);
* ``saturated`` -- whether the sweep went past the knee (more clients than ``knee_clients`` were
  measured); if not, the sweep ended before the knee and ``capacity_tps`` is only a lower bound.

Used by ``benchmarks.ledger`` (embedded host, ``embedded_capacity_*``) and ``benchmarks.ledger_fabric``
(``fabric_capacity_*``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from benchmarks.ledger_workloads import DIGEST, clients_of, percentile, run_clients
from ledger.client import ConsortiaClient
from ledger.identity import Consortium
from ledger.interface import Ledger

KNEE_SHARE = 0.9  # a point reaching this share of the best throughput is "at capacity"


def sweep_point(
    ledger: Ledger,
    consortium: Consortium,
    clients: int,
    seconds: float,
    tag: str,
    seats: Sequence[ConsortiaClient] = (),
) -> dict:
    """``clients`` closed-loop submitters for ``seconds`` (spread over the organisations, or over
    ``seats``: :func:`benchmarks.ledger_workloads.clients_of`); throughput and latency of what committed."""
    users = clients_of(ledger, consortium, clients, seats)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop = threading.Event()
    deadline: list[float] = []

    def worker(i: int) -> None:
        j = 0
        while not stop.is_set():
            t = time.perf_counter()
            users[i].register_image(f"cap-{tag}-{clients}-{i}-{j}", "1", "bench", DIGEST)
            latencies[i].append(time.perf_counter() - t)
            j += 1
            if not deadline:
                deadline.append(t + seconds)
            if time.perf_counter() >= deadline[0]:
                stop.set()

    elapsed = run_clients(worker, clients)
    flat = [x for lat in latencies for x in lat]
    return {
        "clients": clients,
        "tps": len(flat) / elapsed,
        "p50_ms": percentile(flat, 50) * 1e3,
        "p99_ms": percentile(flat, 99) * 1e3,
        "submits": len(flat),
    }


def knee(points: Sequence[dict]) -> dict:
    """The capacity figures of a sweep (see the module docstring)."""
    best = max(p["tps"] for p in points)
    at = next(p for p in points if p["tps"] >= KNEE_SHARE * best)
    return {
        "capacity_tps": best,
        "knee_clients": at["clients"],
        "knee_p50_ms": at["p50_ms"],
        "knee_p99_ms": at["p99_ms"],
        "saturated": points[-1]["clients"] > at["clients"],
    }


def capacity_sweep(
    ledger: Ledger,
    consortium: Consortium,
    client_counts: Sequence[int],
    seconds: float,
    prefix: str,
    seats: Sequence[ConsortiaClient] = (),
) -> dict[str, object]:
    """Run the sweep, print one line per point, and return ``<prefix>_capacity_tps`` and friends plus
    the whole sweep under ``<prefix>_capacity_sweep``."""
    tag = f"{time.time_ns():x}"
    points = []
    for n in client_counts:
        p = sweep_point(ledger, consortium, n, seconds, tag, seats)
        print(
            f"  {prefix} capacity sweep: {n:4d} clients  {p['tps']:8.1f} tx/s  "
            f"p50 {p['p50_ms']:8.1f} ms  p99 {p['p99_ms']:8.1f} ms",
            flush=True,
        )
        points.append(p)
    out: dict[str, object] = {f"{prefix}_{k}": v for k, v in knee(points).items()}
    out[f"{prefix}_capacity_sweep"] = [
        {k: round(v, 3) if isinstance(v, float) else v for k, v in p.items()} for p in points
    ]
    return out
