"""Fabric's BatchTimeout for this workload: the capacity sweep on a fresh network per setting.

    python -m benchmarks.fabric_batch [--timeouts 500ms,100ms,50ms,20ms] [--seconds 8] [--clients 1,8,32]

For each BatchTimeout a fresh three-organisation network (``~/.cache/consortia/fabric-batch``, ports from
27050, purged before and after) runs :func:`benchmarks.ledger_capacity.capacity_sweep` (closed-loop
``Image:register`` submits for ``--seconds`` per client count) and prints each point; the last line is
JSON, one entry per setting. docs/fabric.md "Batch settings" reports the runs and why the default is 50 ms.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.ledger_capacity import capacity_sweep
from ledger.fabric.gateway import FabricLedger
from network import DEFAULT_HOME, FabricNetwork, NetworkConfig
from wire.env import environment

NET_DIR = (environment().cache or Path.home() / ".cache" / "consortia") / "fabric-batch"


def sweep(batch_timeout: str, clients: tuple[int, ...], seconds: float) -> dict[str, object]:
    net = FabricNetwork(
        NetworkConfig(
            net_dir=NET_DIR,
            port_base=27050,
            fabric_home=DEFAULT_HOME,
            dispatch="chaincode.dispatch:invoke",
            batch_timeout=batch_timeout,
        )
    )
    net.down(purge=True)
    try:
        net.up()
        with FabricLedger.from_profile(net.profile_file) as led:
            return capacity_sweep(led, net.consortium(), clients, seconds, "fabric")
    finally:
        net.down(purge=True)


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeouts", default="500ms,100ms,50ms,20ms")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv)
    clients = tuple(int(c) for c in args.clients.split(","))
    out: dict[str, object] = {}
    for bt in [t for t in args.timeouts.split(",") if t]:
        print(f"BatchTimeout {bt}", flush=True)
        out[bt] = sweep(bt, clients, args.seconds)
    print(json.dumps(out, sort_keys=True))
    return out


if __name__ == "__main__":
    main()
