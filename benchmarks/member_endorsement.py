"""``member_endorsement_scaling``: does a process's cost depend on the consortium's size?

A learning process is endorsed by a majority of its members (key-level policies, docs/ledger.md
"Who endorses what"), not of the channel. This brings up two fresh Fabric networks side by side, one
of 4 and one of 8 organisations (own directories and free ports, purged first, stopped after), each
serving the Consortia contracts, and on each creates ``--processes`` learning processes of the same
3 members (Org1, Org2, Org3). Every member's admin of every process then submits
``LearningProcess:accept`` again and again -- a record of the process (its acceptance, plus the
process's endorsement guard), so each submit needs 2 of the 3 members' endorsements on both networks,
where a channel majority would need 3 and 5. Measurement windows alternate between the two networks
(4, 8, 4, 8, ...) so that a change in the shared machine's load hits both alike.

Figures: ``member_submit_tps_4orgs`` and ``member_submit_tps_8orgs`` (submits/s, committed, over all
windows of that network), ``member_endorsement_scaling`` = the 8-organisation figure / the 4-organisation
one (the target is ≥ 0.8), ``member_endorsements_per_submit`` (the policy's ``required``), clients, windows.

    python -m benchmarks.member_endorsement [--quick]   # figures to benchmarks/results/member_endorsement*.json
    python -m benchmarks.ledger_fabric [--quick]        # runs it too, beside the ledger figures
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.ledger_workloads import report, run_clients
from ledger.client import ConsortiaClient
from ledger.fabric.gateway import FabricLedger
from network import DEFAULT_HOME, FabricNetwork, NetworkConfig

MEMBERS = ("Org1MSP", "Org2MSP", "Org3MSP")
DIGEST = "sha256:" + "ab" * 32
NET_ROOT = Path.home() / ".cache" / "consortia" / "fabric-bench-members"
PORT_BASES = range(30050, 64000, 1050)


def _ports_free(cfg: NetworkConfig, taken: set[int]) -> bool:
    for host, port in cfg.listen_addresses():
        if port in taken:
            return False
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def _network(orgs: int, taken: set[int]) -> FabricNetwork:
    """A fresh network of ``orgs`` organisations on ports free now and not in ``taken``."""
    net_dir = NET_ROOT / f"{orgs}orgs-{os.getpid()}"
    for base in PORT_BASES:
        cfg = NetworkConfig(
            organisations=tuple(f"Org{i}" for i in range(1, orgs + 1)),
            net_dir=net_dir,
            port_base=base,
            fabric_home=DEFAULT_HOME,
            dispatch="chaincode.dispatch:invoke",
        )
        if _ports_free(cfg, taken):
            taken.update(port for _, port in cfg.listen_addresses())
            return FabricNetwork(cfg)
    raise RuntimeError("no free port range for a benchmark network")


class _Workload:
    """``processes`` processes of the three members on one network, and their admins' accepts."""

    def __init__(self, led: FabricLedger, net: FabricNetwork, processes: int):
        cons = net.consortium()
        self.led = led
        owner = ConsortiaClient(led, cons.identity("Org1"))
        tag = f"{os.getpid()}-{time.time_ns()}"
        owner.register_image(f"members-{tag}", "1", "bench", DIGEST)
        self.jobs: list[tuple[Any, str, str]] = []  # (admin identity, process id, terms digest)
        for k in range(processes):
            pid = f"members-{tag}-{k}"
            record = owner.create_process(
                pid, f"members-{tag}:1", list(MEMBERS), {"kind": "ring", "seed": 1}, 1
            )
            for msp in MEMBERS:
                admin = cons.identity(msp.removesuffix("MSP"), "Admin")
                # the first accept creates the acceptance key (the chaincode's policy): not timed
                ConsortiaClient(led, admin).accept_process(pid, record.terms_digest())
                self.jobs.append((admin, pid, record.terms_digest()))
        self.required = owner.process_endorsement(f"members-{tag}-0").required

    def window(self, seconds: float) -> tuple[int, float]:
        """Every admin accepts in a loop for ``seconds``: (committed submits, elapsed seconds)."""
        counts = [0] * len(self.jobs)
        deadline = time.monotonic() + seconds

        def worker(i: int) -> None:
            identity, pid, terms = self.jobs[i]
            while time.monotonic() < deadline:
                self.led.submit(identity, "LearningProcess:accept", pid, terms)
                counts[i] += 1

        elapsed = run_clients(worker, len(self.jobs))
        return sum(counts), elapsed


def member_endorsement_scaling(
    quick: bool, processes: int = 16, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """The figures of the module docstring, from two networks brought up side by side."""
    windows, seconds = (2, 8.0) if quick else (4, 20.0)
    taken: set[int] = set()
    nets = {orgs: _network(orgs, taken) for orgs in (4, 8)}
    totals = {orgs: [0, 0.0] for orgs in nets}
    ledgers: dict[int, FabricLedger] = {}
    try:
        for orgs, net in nets.items():
            net.down(purge=True)
            t0 = time.perf_counter()
            net.up()
            log(f"{orgs}-organisation network up in {time.perf_counter() - t0:.1f} s")
            ledgers[orgs] = FabricLedger.from_profile(net.profile_file)
        loads = {orgs: _Workload(ledgers[orgs], nets[orgs], processes) for orgs in nets}
        for load in loads.values():
            load.window(2.0)  # warm-up: connections, the chaincode services' caches
        for w in range(windows):
            for orgs, load in loads.items():
                done, elapsed = load.window(seconds)
                totals[orgs][0] += done
                totals[orgs][1] += elapsed
                log(f"window {w + 1}/{windows}, {orgs} organisations: {done / elapsed:.1f} submits/s")
        required = {orgs: load.required for orgs, load in loads.items()}
    finally:
        for led in ledgers.values():
            led.close()
        for net in nets.values():
            net.down(purge=True)
    tps = {orgs: done / elapsed for orgs, (done, elapsed) in totals.items()}
    return {
        "member_submit_tps_4orgs": tps[4],
        "member_submit_tps_8orgs": tps[8],
        "member_endorsement_scaling": tps[8] / tps[4],
        "member_endorsements_per_submit": required[8],
        "member_endorsements_per_submit_4orgs": required[4],
        "member_clients": len(MEMBERS) * processes,
        "member_windows": windows,
        "member_window_s": seconds,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description="submits/s of a 3-member process in a 4- and an 8-organisation channel"
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--processes", type=int, default=16, help="processes per network (3 clients each)")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {
        "cores": os.cpu_count() or 0,
        **member_endorsement_scaling(args.quick, args.processes),
    }
    out = (
        Path(__file__).parent
        / "results"
        / ("member_endorsement-quick.json" if args.quick else "member_endorsement.json")
    )
    report(results, out)
    return results


if __name__ == "__main__":
    main()
