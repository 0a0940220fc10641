"""The Fabric half of the ledger benchmark: the same workloads as the embedded host
(``benchmarks.ledger_workloads``: ``bench_submit``, ``bench_evaluate``, ``bench_history``) against a real
Fabric 3.1 network brought up fresh for the run (its own directory and ports, purged first, stopped
after), serving the Consortia contracts through the Python chaincode service.

    python -m benchmarks.ledger --backend fabric [--quick]     # embedded + the founder network
    python -m benchmarks.ledger_fabric [--quick] [--consensus bft|raft|founder] [--clients N]

``--consensus bft`` (the default) and ``raft``: four members without a centre (benchmarks.members: each
member's own Fabric CA, orderer, peer and chaincode service on its own address, in a view of its own
folder; the channel made from their public packages, one orderer per member). The submit workload
and the capacity sweep run with the clients spread over the four members, each member's clients on
its own home's ledger connection (its peer's Gateway, its own identity). The chosen consensus gives
the ``fabric_*`` figures; the other one is measured in the same run on a second consortium of the
same layout and reported beside them with its name as prefix (``raft_capacity_tps``,
``raft_cpu_ms_per_submit``, ... or ``bft_*``). ``founder``: the founder-made network below (one
etcdraft orderer of its own organisation, three organisations, every key made by ``network up``),
where the evaluate and history workloads run too.

Figures: ``fabric_submit_tps`` (concurrent clients, each submit = endorse by a MAJORITY of peers,
order, commit, wait for its commit status), ``fabric_commit_p50_s`` / ``fabric_commit_p99_s``
(latency of those submits, proposal to commit status), ``fabric_evaluate_tps``, and history
latency on a key with ``fabric_history_versions`` versions (``fabric_history_p*_ms``: a page of the
newest 100; ``fabric_history_full_p*_ms``: the whole history); then the capacity sweep
(``benchmarks.ledger_capacity``: ``fabric_capacity_tps``, the throughput where latency starts to climb).
``fabric_cpu_ms_per_submit``: CPU milliseconds of every Fabric-side process (orderers, peers, chaincode
services, with their descendants) per transaction of the submit phase, and per node (target <= 6);
beside it ``fabric_txs_per_block`` (transactions per block in that phase) and
``fabric_idle_cpu_ms_per_s_by_node`` (each node's CPU per second at rest, measured just before).
``private_*``: the private submit workload (``bench_private_submit``: a one-round learning process created
among every organisation, whose hyper-parameters and privacy budget the contract keeps in each member's
implicit collection, docs/confidentiality.md), run side by side with the public one on the same network
and clients, in alternating blocks (public, private, public, private: :data:`SUBMIT_BLOCKS`), so that
the machine's load falls on both: ``private_submit_tps``, ``private_submit_p50_ms`` / ``_p99_ms``,
``private_cpu_ms_per_submit`` (measured as ``fabric_cpu_ms_per_submit``) and ``private_over_public_cpu``.
The orderer's BatchTimeout is ``--batch-timeout`` (default: ``NetworkConfig``'s, 50 ms); ``--out`` names
the result file.
``member_endorsement_scaling`` (``benchmarks.member_endorsement``, two more networks): submits/s of a
3-member process in an 8-organisation channel over those in a 4-organisation one (target ≥ 0.8).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.ledger_capacity import capacity_sweep
from benchmarks.ledger_workloads import (
    bench_evaluate,
    bench_history,
    bench_private_submit,
    bench_submit,
    percentile,
    prepare_private_submit,
    report,
)
from benchmarks.member_endorsement import member_endorsement_scaling
from ledger.client import ConsortiaClient
from ledger.fabric.gateway import FabricLedger
from network import DEFAULT_HOME, FabricNetwork, NetworkConfig
from wire.env import environment

BENCH_NET = environment().fabric_bench_net or Path.home() / ".cache" / "consortia" / "fabric-bench"
BENCH_PORT_BASE = environment().fabric_bench_port_base
DEFAULT_FABRIC_CLIENTS = 96
CAPACITY_CLIENTS = (1, 8, 32, 96, 192)  # the capacity sweep's client counts
IDLE_SECONDS = 10.0  # how long each node's CPU at rest is measured before the submit workload


def process_tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (``/proc``; 0 for a gone one)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_fabric(args: Any, consortium: Any = None) -> dict[str, Any]:
    """Run the workloads on a fresh network; ``consortium`` (the embedded run's) is not used:
    the network has its own identities. Reads ``args.submits``, ``args.evaluates``,
    ``args.eval_clients``, ``args.quick`` and optionally ``args.fabric_clients``."""
    clients = int(
        getattr(args, "fabric_clients", 0) or environment().fabric_bench_clients or DEFAULT_FABRIC_CLIENTS
    )
    # bench_evaluate reads images bench-<i>-<j % 50> of the first clients: every client writes >= 50
    submits = clients * max(50, args.submits // clients)
    batch_timeout = getattr(args, "fabric_batch_timeout", None) or NetworkConfig.batch_timeout
    versions = 50 if args.quick else 1000
    samples = 20 if args.quick else 100
    net = FabricNetwork(
        NetworkConfig(
            net_dir=BENCH_NET,
            port_base=BENCH_PORT_BASE,
            fabric_home=DEFAULT_HOME,
            dispatch="chaincode.dispatch:invoke",
            batch_timeout=batch_timeout,
        )
    )
    net.down(purge=True)
    t0 = time.perf_counter()
    try:
        net.up()
        up_s = time.perf_counter() - t0
        cons = net.consortium()
        with FabricLedger.from_profile(net.profile_file) as led:
            prepare_private_submit(ConsortiaClient(led, cons.identity(cons.organisations[0].name)))
            figures = submit_figures(
                net.pids(),
                in_blocks(partial(bench_submit, led, cons), clients, submits),
                in_blocks(partial(bench_private_submit, led, cons), clients, submits),
                5.0 if args.quick else 15.0,
                lambda counts, seconds: capacity_sweep(led, cons, counts, seconds, "fabric"),
                lambda: led.block_height(cons.identity(cons.organisations[0].name)),
            )
            reader = cons.identity(cons.organisations[0].name)
            for i in range(max(1, args.eval_clients)):  # the records bench_evaluate reads exist
                led.evaluate(reader, "Image:get", f"bench-{i}-49:1")
            e = bench_evaluate(led, cons, max(1, args.eval_clients), args.evaluates)
            h = bench_history(led, cons, versions, samples)
    finally:
        net.down()
    return {
        **figures,
        "fabric_clients": clients,
        "fabric_evaluate_tps": e["evaluate_tps"],
        "fabric_history_versions": h["history_versions"],
        "fabric_history_p50_ms": h["history_p50_ms"],
        "fabric_history_p99_ms": h["history_p99_ms"],
        "fabric_history_page_versions": h["history_page_versions"],
        "fabric_history_full_p50_ms": h["history_full_p50_ms"],
        "fabric_history_full_p99_ms": h["history_full_p99_ms"],
        "fabric_batch_timeout": batch_timeout,
        "fabric_network_up_s": up_s,
    }


SUBMIT_BLOCKS = 2  # the submit phase alternates public and private blocks: public, private, public, private


def in_blocks(
    workload: Callable[..., dict[str, Any]], clients: int, total: int
) -> Callable[[int], dict[str, Any]]:
    """Block ``k`` (of :data:`SUBMIT_BLOCKS`) of ``total`` submits of ``workload(clients, n, first=...)``
    (``bench_submit`` or ``bench_private_submit`` with its ledger bound): each block its own records."""
    per = total // SUBMIT_BLOCKS
    return lambda k: workload(clients, per, first=k * (per // clients))


def _cpu_of(nodes: dict[str, int]) -> dict[str, float]:
    return {n: process_tree_cpu(p) for n, p in nodes.items()}


def _self_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def submit_figures(
    nodes: dict[str, int],
    submit: Callable[[int], dict[str, Any]],
    private_submit: Callable[[int], dict[str, Any]],
    seconds_per_point: float,
    sweep: Callable,
    height: Callable[[], int],
) -> dict[str, Any]:
    """The submit workloads with the CPU their Fabric nodes (``nodes``: name -> pid) and this process spent
    per committed transaction, then the capacity sweep (``sweep(client_counts, seconds)``).

    ``submit(k)`` (public: ``bench_submit``) and ``private_submit(k)`` (``bench_private_submit``) run
    side by side: :data:`SUBMIT_BLOCKS` blocks of each, alternating (public 0, private 0, public 1,
    ...) on the same network, so that a change of load on the machine falls on both; each kind's figures
    pool its blocks (CPU and submits summed, latencies pooled). Before them, each node's CPU while
    nothing is submitted (:data:`IDLE_SECONDS`); around each block, the chain's height (``height()``),
    so that the figures say how many transactions a block carried."""
    idle = _cpu_of(nodes)
    time.sleep(IDLE_SECONDS)
    before = _cpu_of(nodes)
    kinds = {"public": submit, "private": private_submit}
    cpu = {kind: dict.fromkeys(nodes, 0.0) for kind in kinds}
    client = dict.fromkeys(kinds, 0.0)
    blocks = dict.fromkeys(kinds, 0)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    for k in range(SUBMIT_BLOCKS):
        for kind, work in kinds.items():
            h0, me0, n0 = height(), _self_cpu(), _cpu_of(nodes)
            runs[kind].append(work(k))
            n1, me1 = _cpu_of(nodes), _self_cpu()
            blocks[kind] += height() - h0
            client[kind] += me1 - me0
            for n in nodes:
                cpu[kind][n] += n1[n] - n0[n]
    fig = {}
    for kind in kinds:
        n = sum(r["submits"] for r in runs[kind])
        lat = [x for r in runs[kind] for x in r["latencies_s"]]
        fig[kind] = {
            "tps": n / sum(r["elapsed_s"] for r in runs[kind]),
            "p50_ms": percentile(lat, 50) * 1e3,
            "p99_ms": percentile(lat, 99) * 1e3,
            "submits": n,
            "cpu": {node: v * 1e3 / n for node, v in cpu[kind].items()},
            "client_ms": client[kind] * 1e3 / n,
            "blocks": blocks[kind],
        }
    pub, priv = fig["public"], fig["private"]
    return {
        "fabric_submit_tps": pub["tps"],
        "fabric_commit_p50_s": pub["p50_ms"] / 1e3,
        "fabric_commit_p99_s": pub["p99_ms"] / 1e3,
        "fabric_submits": pub["submits"],
        # CPU of the Fabric side (every node process and its descendants) per submitted transaction
        # of the submit workload, and per node; the client (this process: Gateway calls, signing) apart
        "fabric_cpu_ms_per_submit": sum(pub["cpu"].values()),
        "fabric_cpu_ms_per_submit_by_node": {n: round(v, 3) for n, v in sorted(pub["cpu"].items())},
        "fabric_client_cpu_ms_per_submit": pub["client_ms"],
        # blocks the submit workload's transactions filled, and each node's CPU per second at rest
        # (gossip, heartbeats, deliver streams): what a transaction carries of each block's and
        # each second's fixed costs (docs/fabric.md "Where a transaction's CPU goes")
        "fabric_blocks": pub["blocks"],
        "fabric_txs_per_block": pub["submits"] / max(1, pub["blocks"]),
        "fabric_idle_cpu_ms_per_s_by_node": {
            n: round((before[n] - idle[n]) * 1e3 / IDLE_SECONDS, 2) for n in sorted(nodes)
        },
        # the private submit workload (a process created among every organisation), measured the same
        # way in the blocks between the public ones
        "private_submit_tps": priv["tps"],
        "private_submit_p50_ms": priv["p50_ms"],
        "private_submit_p99_ms": priv["p99_ms"],
        "private_submits": priv["submits"],
        "private_cpu_ms_per_submit": sum(priv["cpu"].values()),
        "private_cpu_ms_per_submit_by_node": {n: round(v, 3) for n, v in sorted(priv["cpu"].items())},
        "private_client_cpu_ms_per_submit": priv["client_ms"],
        "private_txs_per_block": priv["submits"] / max(1, priv["blocks"]),
        "private_over_public_cpu": sum(priv["cpu"].values()) / (sum(pub["cpu"].values()) or float("nan")),
        "submit_blocks": SUBMIT_BLOCKS,
        **sweep(CAPACITY_CLIENTS, seconds_per_point),
    }


def run_members(args: Any, consensus: str) -> dict[str, Any]:
    """The submit workload and the capacity sweep on four members without a centre (``consensus``: bft
    or raft), formed fresh in a temporary folder and stopped after."""
    from benchmarks.consortium import MEMBER_ORGS
    from benchmarks.members import Members
    from home.settings import load
    from ledger.identity import Consortium

    clients = int(args.fabric_clients)
    submits = clients * max(50, args.submits // clients)
    with tempfile.TemporaryDirectory(prefix=f"consortia-bench-ledger-{consensus}-") as tmp:
        members = Members(Path(tmp), MEMBER_ORGS)
        seats = []
        try:
            t0 = time.perf_counter()
            members.form(consensus)
            up_s = time.perf_counter() - t0
            seats = [h.ledger_client() for h in members.hosts.values()]  # each member's own connection
            nodes = {
                f"{node}.{h.name.lower()}": pid
                for h in members.hosts.values()
                for node, pid in h.nodes().pids().items()
                if node != "ca"
            }
            first = seats[0]
            cons = Consortium(load(members.hosts[MEMBER_ORGS[0]].home).crypto)
            prepare_private_submit(first)
            figures = submit_figures(
                nodes,
                in_blocks(partial(bench_submit, first.ledger, cons, seats=seats), clients, submits),
                in_blocks(partial(bench_private_submit, first.ledger, cons, seats=seats), clients, submits),
                5.0 if args.quick else 15.0,
                lambda counts, seconds: capacity_sweep(first.ledger, cons, counts, seconds, "fabric", seats),
                lambda: first.ledger.block_height(first.identity),
            )
        finally:
            for seat in seats:
                seat.ledger.close()
            members.close()
    return {
        **figures,
        "fabric_clients": clients,
        "fabric_consensus": consensus,
        "fabric_layout": "members",
        "fabric_orgs": len(MEMBER_ORGS),
        "fabric_orderers": len(members.channel["consenters"]),
        "fabric_network_up_s": up_s,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description="Fabric ledger benchmark (fabric host only)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--consensus",
        choices=("bft", "raft", "founder"),
        default="bft",
        help="bft (default) or raft: four members, one orderer each, the other consensus beside it; "
        "founder: the founder-made network of one orderer",
    )
    ap.add_argument("--clients", dest="fabric_clients", type=int, default=DEFAULT_FABRIC_CLIENTS)
    ap.add_argument("--eval-clients", type=int, default=2)
    ap.add_argument("--batch-timeout", dest="fabric_batch_timeout", default=None, help="orderer BatchTimeout")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the result file (default: benchmarks/results/ledger-fabric*.json)",
    )
    args = ap.parse_args(argv)
    if args.fabric_clients < 1:
        ap.error("--clients must be >= 1")
    args.submits = 2000 if args.quick else 10000
    args.evaluates = 4000 if args.quick else 20000
    results: dict[str, Any] = {"cores": os.cpu_count() or 0}
    if args.consensus == "founder":
        results |= run_fabric(args)
    else:
        other = "raft" if args.consensus == "bft" else "bft"
        results |= run_members(args, args.consensus)
        print(
            f"{args.consensus}:", json.dumps(results, sort_keys=True), flush=True
        )  # kept if a later step fails
        beside = run_members(args, other)
        print(f"{other}:", json.dumps(beside, sort_keys=True), flush=True)
        results |= {f"{other}_{k.removeprefix('fabric_')}": v for k, v in beside.items()}
    results |= member_endorsement_scaling(args.quick)
    infix = "" if args.consensus == "founder" else f"-{args.consensus}"
    report(
        results,
        args.out
        or Path(__file__).parent
        / "results"
        / (f"ledger-fabric{infix}-quick.json" if args.quick else f"ledger-fabric{infix}.json"),
    )
    return results


if __name__ == "__main__":
    main()
