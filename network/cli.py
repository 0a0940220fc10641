"""``fabric-network/network {up|down|deploy|status|logs}``: the command line of the native network
(``python -m network``; ``consortia network`` forwards here)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from network.config import DEFAULT_NET, NetworkConfig, NetworkError
from network.lifecycle import FabricNetwork
from network.placement import parse_hosts
from wire.env import environment


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="fabric-network/network", description="Native Fabric network for Consortia"
    )
    p.add_argument("command", choices=["up", "down", "deploy", "status", "logs"])
    p.add_argument("node", nargs="?", default="", help="for logs: orderer, peer0.org1, ..., chaincode")
    p.add_argument("--orgs", default=environment().fabric_orgs)
    p.add_argument("--dispatch", default=environment().chaincode_dispatch)
    p.add_argument("--net-dir", default=str(DEFAULT_NET))
    p.add_argument(
        "--hosts",
        default="",
        help="placement, e.g. Org1=127.0.1.1,Org2=127.0.2.1,orderer=127.0.0.1 (loopback 127.0.0.0/8 only; "
        "default: as the network was made, else everything on 127.0.0.1)",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        default=None,
        help="up: start each node in a bubblewrap view of its own files only, as on a host of its own "
        "(default: as the network was started)",
    )
    p.add_argument("--purge", action="store_true", help="down: also delete ledgers and identities")
    p.add_argument("-n", "--lines", type=int, default=50)
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (status and deploy always are)"
    )
    a = p.parse_args(argv)
    try:
        net = FabricNetwork(
            NetworkConfig(
                organisations=tuple(o.strip() for o in a.orgs.split(",") if o.strip()),
                dispatch=a.dispatch,
                net_dir=Path(a.net_dir),
                hosts=parse_hosts(a.hosts) if a.hosts else None,  # None: as placed before
                isolate=a.isolate,  # None: as started before
            )
        )
    except ValueError as exc:  # PlacementError included: refused before anything starts
        p.error(str(exc))
    try:
        if a.command == "up":
            t0 = time.monotonic()
            net.up()
            print(
                json.dumps(
                    {
                        "status": "up",
                        "seconds": round(time.monotonic() - t0, 1),
                        "profile": str(net.profile_file),
                    }
                )
                if a.json
                else f"network up in {time.monotonic() - t0:.1f} s; profile {net.profile_file}"
            )
        elif a.command == "down":
            net.down(purge=a.purge)
            print(
                json.dumps({"status": "down", "purged": a.purge})
                if a.json
                else "network down" + (" (purged)" if a.purge else "")
            )
        elif a.command == "deploy":
            net.deploy()
            print(json.dumps(net.status(), indent=2))
        elif a.command == "status":
            print(json.dumps(net.status(), indent=2))
        elif a.command == "logs":
            logs = net.logs(a.node or "orderer", a.lines)
            print(json.dumps({"node": a.node or "orderer", "lines": logs.splitlines()}) if a.json else logs)
    except NetworkError as exc:
        if a.json:
            print(json.dumps({"ok": False, "code": "NetworkError", "message": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
    return 0
