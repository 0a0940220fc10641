"""``fabric-network/network {up|down|deploy|status|logs}``: the command line of the native network
(``python -m network``; ``consortia network`` forwards here), and the commands one member of a
consortium without a centre runs on its own host (docs/fabric.md "A consortium without a centre")::

    channel create --package P ... [--consensus bft|raft] [--out FILE]   the genesis block, from packages
    channel join --block B [--package P ...] [--node orderer|peer]       its own orderer and peer join
    channel inspect --block B [--package P ...]                           what a block holds (checked)
    node start|stop|status [ca|orderer|peer|chaincode]                    one node of its own
    chaincode approve|commit|status                                        the definition, by its admin

(``--home DIR``: the organisation's home made by ``consortia org init``, default ``$CONSORTIA_HOME``.)"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabric_protos.common import common_pb2

from network.channel import CONSENSUS, block_signers, check_block, create_channel, inspect_block
from network.config import DEFAULT_NET, NetworkConfig, NetworkError
from network.lifecycle import FabricNetwork
from network.member import NODES, ChaincodeDefinition, MemberNodes
from network.package import export_package, read_packages
from network.placement import parse_hosts
from wire.env import environment

MEMBER_COMMANDS = ("channel", "node", "chaincode")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in MEMBER_COMMANDS:
        return member_main(args)
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
    a = p.parse_args(args)
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


# --------------------------------------------------------------------------- one member, on its own host


def _member_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="consortia network", description="One member's channel, nodes and chaincode, on its own host"
    )
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument(
        "--home",
        default=None,
        help="the organisation's home (consortia org init; default $CONSORTIA_HOME, else ./consortia-home)",
    )
    home.add_argument("--json", action="store_true", help="machine-readable output")
    top = p.add_subparsers(dest="group", required=True)

    channel = top.add_parser("channel", help="the channel, from the members' public packages")
    ch = channel.add_subparsers(dest="action", required=True)
    create = ch.add_parser("create", parents=[home], help="the genesis block from the members' packages only")
    create.add_argument(
        "--package", action="append", required=True, help="a member's public package (repeat)"
    )
    create.add_argument("--channel", default="consortia")
    create.add_argument(
        "--consensus", choices=CONSENSUS, default=None, help="default: bft from 4 members on, else raft"
    )
    create.add_argument("--batch-timeout", default="50ms")
    create.add_argument("--out", default=None, help="the block file (default ./<channel>.block)")
    join = ch.add_parser("join", parents=[home], help="join its own orderer and peer, as its own admin")
    join.add_argument("--block", required=True, help="the channel's genesis block")
    join.add_argument("--package", action="append", default=[], help="a member's public package (repeat)")
    join.add_argument("--channel", default="consortia")
    join.add_argument("--node", choices=("orderer", "peer"), action="append", help="default: both")
    fetch = ch.add_parser(
        "fetch",
        parents=[home],
        help="a block, through its own orderer: who signed it (BFT: 2f + 1 consenters)",
    )
    fetch.add_argument("which", nargs="?", default="newest", help="newest, oldest, config or a number")
    fetch.add_argument("--channel", default="consortia")
    fetch.add_argument("--out", default=None, help="the block file (default ./<channel>-<which>.block)")
    inspect = ch.add_parser("inspect", parents=[home], help="what a configuration block holds")
    inspect.add_argument("--block", required=True)
    inspect.add_argument("--package", action="append", default=[], help="check the block against these")

    node = top.add_parser("node", help="start, stop or report one node of this organisation")
    nd = node.add_subparsers(dest="action", required=True)
    for action in ("start", "stop", "status"):
        q = nd.add_parser(action, parents=[home])
        q.add_argument("node", nargs="?" if action == "status" else None, choices=NODES)

    chaincode = top.add_parser("chaincode", help="the chaincode definition: approve, commit, status")
    cc = chaincode.add_subparsers(dest="action", required=True)
    defaults = ChaincodeDefinition()
    for action in ("approve", "commit", "status"):
        q = cc.add_parser(action, parents=[home])
        q.add_argument("--channel", default=defaults.channel)
        q.add_argument("--name", default=defaults.name)
        q.add_argument("--version", default=defaults.version)
        q.add_argument("--sequence", type=int, default=defaults.sequence)
        q.add_argument("--signature-policy", default="", help="default: the channel's Endorsement policy")
        q.add_argument("--dispatch", default=environment().chaincode_dispatch, help="the contracts served")
    return p


def _org_home(home: str | None) -> Path:
    return Path(home or environment().home or "consortia-home").resolve()


def member_main(argv: Sequence[str]) -> int:
    """``channel``, ``node`` and ``chaincode``: what one member runs on its own host."""
    p = _member_parser()
    a = p.parse_args(list(argv))
    try:
        out = _member_command(a)
    except NetworkError as exc:
        if a.json:
            print(json.dumps({"ok": False, "code": type(exc).__name__, "message": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    if a.json or not isinstance(out, str):
        print(json.dumps(out, indent=None if a.json else 2, sort_keys=True))
    else:
        print(out)
    return 0


def _member_command(a: argparse.Namespace) -> dict[str, Any] | str:
    home = _org_home(a.home)
    if a.group == "channel":
        packages = read_packages(getattr(a, "package", []))
        if a.action == "create":
            out = Path(a.out or f"{a.channel}.block")
            config = create_channel(packages, out, a.channel, a.consensus, a.batch_timeout)
            if (home / "organisation.json").is_file():  # a member creating it keeps what it was given
                nodes = MemberNodes(home)
                nodes.store_packages(packages)
                kept = nodes.layout.block(a.channel)
                if out.resolve() != kept:
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(out, kept)
            info = {**config.to_json(), "block_file": str(out.resolve()), "block_sha256": _sha256(out)}
            return (
                info
                if a.json
                else (
                    f"channel {config.channel}: {config.consensus}, members {', '.join(sorted(config.members))}; "
                    f"genesis block {out} (sha256 {info['block_sha256']}): hand it to every member"
                )
            )
        if a.action == "inspect":
            config = inspect_block(Path(a.block))
            if packages:
                check_block(config, packages)
            return {**config.to_json(), "checked_against": [pk.msp_id for pk in packages]}
        nodes = MemberNodes(home)
        if a.action == "fetch":
            genesis = nodes.layout.block(a.channel)
            if not genesis.is_file():
                raise NetworkError(f"{nodes.org.msp_id} has not joined channel {a.channel} (no {genesis})")
            got = nodes.fetch_block(a.channel, Path(a.out or f"{a.channel}-{a.which}.block"), a.which)
            number = common_pb2.Block.FromString(got.read_bytes()).header.number
            return {
                "channel": a.channel,
                "block": number,
                "file": str(got),
                "signers": block_signers(got, inspect_block(genesis)),
            }
        own = export_package(home)  # its own package comes from its own home, not from what it was sent
        for pk in packages:
            if pk.msp_id == own.msp_id and pk.digest != own.digest:
                raise NetworkError(f"the package of {own.msp_id} given is not this home's own ({pk.digest})")
        known = {pk.msp_id: pk for pk in nodes.members()}
        known.update({pk.msp_id: pk for pk in packages})
        known[own.msp_id] = own
        config = inspect_block(Path(a.block))
        if config.channel != a.channel:
            raise NetworkError(f"{a.block} is the block of channel {config.channel}, not {a.channel}")
        check_block(config, list(known.values()))  # exactly the members whose packages it was given
        nodes.store_packages(list(known.values()))
        which = tuple(a.node or ("orderer", "peer"))
        nodes.join_channel(Path(a.block), a.channel, which)
        return (
            {"channel": a.channel, "organisation": nodes.org.msp_id, "joined": list(which)}
            if a.json
            else (f"{nodes.org.msp_id} joined its {' and '.join(which)} to channel {a.channel}")
        )
    nodes = MemberNodes(home)
    if a.group == "node":
        if a.action == "start":
            return {a.node: nodes.start(a.node)}
        if a.action == "stop":
            nodes.stop(a.node)
            return {a.node: nodes.status()["nodes"][a.node]}
        status = nodes.status()
        return {a.node: status["nodes"][a.node]} if a.node else status
    d = ChaincodeDefinition(a.channel, a.name, a.version, a.sequence, a.signature_policy, a.dispatch)
    if a.action == "approve":
        package_id = nodes.approve(d)
        return {"organisation": nodes.org.msp_id, "package_id": package_id, "approvals": nodes.readiness(d)}
    if a.action == "commit":
        return {"committed": nodes.commit(d)}
    return {"committed": nodes.committed(d), "approvals": nodes.readiness(d)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
