"""``consortia network``: a native Hyperledger Fabric network (:mod:`network`, docs/fabric.md).

On one machine (``fabric-network/network`` runs these commands, ``python -m api.cli network ...``)::

    network up|down|deploy|status|logs [NODE]     the whole network: every organisation's nodes here

One member of a consortium without a centre, on its own host (docs/fabric.md "A consortium without a
centre"; ``--home DIR``: the organisation's home made by ``consortia org init``, default
``$CONSORTIA_HOME``)::

    network channel create --package P ... [--consensus bft|raft] [--out FILE]   the genesis block
    network channel join --block B [--config-block C] [--package P ...] [--node orderer|peer]
                                                                                  its own nodes join
    network channel fetch [WHICH] / inspect --block B [--package P ...]           blocks, checked
    network node start|stop|status [ca|orderer|peer|chaincode]                    one node of its own
    network chaincode approve|commit|status                                       the definition

Every command takes ``-o table|wide|json`` (``--json``), answers with the exit codes of docs/cli.md (a
refused or failed network step is 1, a bad option 2) and reports an error on stderr in one line.
Nothing but the command line is imported until a command runs.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from api.cli.output import EXIT_REFUSED, EXIT_USAGE, emit, fail, say, with_output

if TYPE_CHECKING:
    from network.lifecycle import FabricNetwork

group = typer.Typer(
    no_args_is_help=True,
    help="A native Hyperledger Fabric network: up, down, deploy, status, logs; one member's channel, "
    "node and chaincode.",
)
channel_group = typer.Typer(no_args_is_help=True, help="The channel, from the members' public packages.")
node_group = typer.Typer(no_args_is_help=True, help="Start, stop or report one node of this organisation.")
chaincode_group = typer.Typer(no_args_is_help=True, help="The chaincode definition: approve, commit, status.")
group.add_typer(channel_group, name="channel")
group.add_typer(node_group, name="node")
group.add_typer(chaincode_group, name="chaincode")


class Consensus(StrEnum):
    """The channel's ordering service (``network.channel.CONSENSUS``)."""

    bft = "bft"
    raft = "raft"


class MemberNode(StrEnum):
    """One node of a member's own (``network.member.NODES``)."""

    ca = "ca"
    orderer = "orderer"
    peer = "peer"
    chaincode = "chaincode"


class JoiningNode(StrEnum):
    """The nodes that join a channel."""

    orderer = "orderer"
    peer = "peer"


def _environment() -> Any:
    from wire.env import environment

    return environment()


def _default_net() -> str:
    from network.config import DEFAULT_NET

    return str(DEFAULT_NET)


# --------------------------------------------------------------------------- the whole network, here

OrgsOpt = typer.Option(
    None,
    "--orgs",
    help="Organisations, e.g. Org1,Org2,Org3 (default $CONSORTIA_FABRIC_ORGS, else Org1,Org2,Org3).",
)
DispatchOpt = typer.Option(
    None, "--dispatch", help="The contracts served, module:callable (default $CONSORTIA_CHAINCODE_DISPATCH)."
)
NetDirOpt = typer.Option(
    None, "--net-dir", help="The network directory (default ~/.cache/consortia/fabric-net)."
)
HostsOpt = typer.Option(
    "",
    "--hosts",
    help="Placement, e.g. Org1=127.0.1.1,Org2=127.0.2.1,orderer=127.0.0.1 (loopback 127.0.0.0/8 only; "
    "default: as the network was made, else everything on 127.0.0.1).",
)
IsolateOpt = typer.Option(
    None,
    "--isolate",
    help="Start each node (up; deploy: the chaincode services) in a bubblewrap view of its own files only, "
    "as on a host of its own (default: as the network was started).",
)
JsonOpt = typer.Option(False, "--json", help="Machine-readable output (the same as -o json).")


def _network(
    orgs: str | None,
    dispatch: str | None,
    net_dir: Path | None,
    hosts: str,
    isolate: bool | None,
    as_json: bool,
) -> FabricNetwork:
    """The network these options name; a refused option (a placement off loopback...) is exit 2."""
    from network.config import NetworkConfig
    from network.lifecycle import FabricNetwork
    from network.placement import parse_hosts

    env = _environment()
    try:
        return FabricNetwork(
            NetworkConfig(
                organisations=tuple(o.strip() for o in (orgs or env.fabric_orgs).split(",") if o.strip()),
                dispatch=dispatch or env.chaincode_dispatch,
                net_dir=Path(net_dir or _default_net()),
                hosts=parse_hosts(hosts) if hosts else None,  # None: as placed before
                isolate=isolate,  # None: as started before
            )
        )
    except ValueError as exc:  # PlacementError included: refused before anything starts
        fail(str(exc), EXIT_USAGE, as_json, kind="bad network option")


def _step(as_json: bool, run: Any) -> Any:
    """Run one network step; a :class:`network.NetworkError` is exit 1 (one line on stderr)."""
    from network.config import NetworkError

    try:
        return run()
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind=type(exc).__name__)


def up(
    orgs: str | None = OrgsOpt,
    dispatch: str | None = DispatchOpt,
    net_dir: Path | None = NetDirOpt,
    hosts: str = HostsOpt,
    isolate: bool | None = IsolateOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Bring the network up: an orderer, one peer per organisation, the channel, the chaincode and a
    Python chaincode service per organisation (its connection profile is written)."""
    net = _network(orgs, dispatch, net_dir, hosts, isolate, as_json)
    t0 = time.monotonic()
    _step(as_json, net.up)
    seconds = round(time.monotonic() - t0, 1)
    if as_json:
        emit({"status": "up", "seconds": seconds, "profile": str(net.profile_file)}, True)
    else:
        say(f"network up in {seconds:.1f} s; profile {net.profile_file}")


def down(
    orgs: str | None = OrgsOpt,
    dispatch: str | None = DispatchOpt,
    net_dir: Path | None = NetDirOpt,
    hosts: str = HostsOpt,
    purge: bool = typer.Option(False, "--purge", help="Also delete ledgers and identities."),
    as_json: bool = JsonOpt,
) -> None:
    """Stop every node of the network (--purge: and delete its ledgers and identities)."""
    net = _network(orgs, dispatch, net_dir, hosts, None, as_json)
    _step(as_json, lambda: net.down(purge=purge))
    if as_json:
        emit({"status": "down", "purged": purge}, True)
    else:
        say("network down" + (" (purged)" if purge else ""))


def deploy(
    orgs: str | None = OrgsOpt,
    dispatch: str | None = DispatchOpt,
    net_dir: Path | None = NetDirOpt,
    hosts: str = HostsOpt,
    isolate: bool | None = IsolateOpt,
    as_json: bool = JsonOpt,
) -> None:
    """(Re)start the chaincode services and finish a partial deploy; then the status."""
    net = _network(orgs, dispatch, net_dir, hosts, isolate, as_json)
    _step(as_json, net.deploy)
    emit(_step(as_json, net.status), as_json, "network")


def status(
    orgs: str | None = OrgsOpt,
    dispatch: str | None = DispatchOpt,
    net_dir: Path | None = NetDirOpt,
    hosts: str = HostsOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which nodes run, the placement, the package ids and whether the definition is committed."""
    net = _network(orgs, dispatch, net_dir, hosts, None, as_json)
    emit(_step(as_json, net.status), as_json, "network")


def logs(
    node: str = typer.Argument("orderer", help="orderer, peer0.org1, ..., chaincode.org1, ..."),
    lines: int = typer.Option(50, "-n", "--lines", help="How many of the last lines."),
    orgs: str | None = OrgsOpt,
    dispatch: str | None = DispatchOpt,
    net_dir: Path | None = NetDirOpt,
    hosts: str = HostsOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The last lines of one node's log."""
    net = _network(orgs, dispatch, net_dir, hosts, None, as_json)
    text = _step(as_json, lambda: net.logs(node, lines))
    if as_json:
        emit({"node": node, "lines": text.splitlines()}, True)
    else:
        print(text)


for _command in (up, down, deploy, status, logs):
    group.command()(with_output(_command))


# --------------------------------------------------------------------------- one member, on its own host

MemberHomeOpt = typer.Option(
    None,
    "--home",
    envvar="CONSORTIA_HOME",
    help="The organisation's home (consortia org init; default ./consortia-home).",
)
PackagesOpt = typer.Option([], "--package", help="A member's public package (repeat).")
ChannelOpt = typer.Option("consortia", "--channel", help="The channel.")


def _home(home: Path | None) -> Path:
    return (home or Path("consortia-home")).resolve()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _answer(out: dict[str, Any] | str, as_json: bool, title: str) -> None:
    if isinstance(out, str) and not as_json:
        say(out)
    else:
        emit(out, as_json, title)


def channel_create(
    package: list[str] = typer.Option(..., "--package", help="A member's public package (repeat)."),
    channel: str = ChannelOpt,
    consensus: Consensus | None = typer.Option(None, help="Default: bft from 4 members on, else raft."),
    batch_timeout: str = typer.Option(
        "50ms", "--batch-timeout", help="How long a block collects transactions."
    ),
    out: Path | None = typer.Option(None, "--out", help="The block file (default ./<channel>.block)."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The genesis block from the members' public packages only (hand it to every member)."""
    from network.channel import create_channel
    from network.member import MemberNodes
    from network.package import read_packages

    org_home = _home(home)

    def create() -> dict[str, Any] | str:
        packages = read_packages(package)
        block = Path(out or f"{channel}.block")
        config = create_channel(
            packages, block, channel, consensus.value if consensus else None, batch_timeout
        )
        if (org_home / "organisation.json").is_file():  # a member creating it keeps what it was given
            nodes = MemberNodes(org_home)
            nodes.store_packages(packages)
            kept = nodes.layout.block(channel)
            if block.resolve() != kept:
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(block, kept)
        info = {**config.to_json(), "block_file": str(block.resolve()), "block_sha256": _sha256(block)}
        if as_json:
            return info
        return (
            f"channel {config.channel}: {config.consensus}, members {', '.join(sorted(config.members))}; "
            f"genesis block {block} (sha256 {info['block_sha256']}): hand it to every member"
        )

    _answer(_step(as_json, create), as_json, "channel")


def channel_join(
    block: Path = typer.Option(..., "--block", help="The channel's genesis block."),
    config_block: Path | None = typer.Option(
        None,
        "--config-block",
        help="A member added later: the channel's configuration block that made it a member "
        "(consortia network channel fetch config, by a member); checked instead of the genesis block.",
    ),
    package: list[str] = PackagesOpt,
    channel: str = ChannelOpt,
    node: list[JoiningNode] = typer.Option([], "--node", help="orderer or peer (repeat; default: both)."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Join this organisation's own orderer and peer to the channel, as its own admin; the block (or the
    configuration block of a later member) must hold exactly the members whose packages it was given
    (its own package comes from its own home)."""
    from network.channel import check_block, inspect_block
    from network.config import NetworkError
    from network.member import MemberNodes
    from network.package import export_package, read_packages

    org_home = _home(home)

    def join() -> dict[str, Any] | str:
        packages = read_packages(package)
        nodes = MemberNodes(org_home)
        own = export_package(org_home)  # its own package comes from its own home, not from what it was sent
        for pk in packages:
            if pk.msp_id == own.msp_id and pk.digest != own.digest:
                raise NetworkError(f"the package of {own.msp_id} given is not this home's own ({pk.digest})")
        known = {pk.msp_id: pk for pk in nodes.members()}
        known.update({pk.msp_id: pk for pk in packages})
        known[own.msp_id] = own
        genesis = inspect_block(block)
        config = inspect_block(config_block) if config_block else genesis
        for got in (genesis, config):
            if got.channel != channel:
                raise NetworkError(f"a block of channel {got.channel} given, not of {channel}")
        if genesis.number != 0:
            raise NetworkError(f"{block} is block {genesis.number}, not the genesis block")
        check_block(config, list(known.values()))  # exactly the members whose packages it was given
        nodes.store_packages(list(known.values()))
        which = tuple(n.value for n in node) or ("orderer", "peer")
        nodes.join_channel(block, channel, which, config_block)
        if as_json:
            return {"channel": channel, "organisation": nodes.org.msp_id, "joined": list(which)}
        return f"{nodes.org.msp_id} joined its {' and '.join(which)} to channel {channel}"

    _answer(_step(as_json, join), as_json, "channel")


def channel_fetch(
    which: str = typer.Argument("newest", help="newest, oldest, config or a block number."),
    channel: str = ChannelOpt,
    out: Path | None = typer.Option(
        None, "--out", help="The block file (default ./<channel>-<which>.block)."
    ),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """A block, through this organisation's own orderer, and who signed it (BFT: 2f + 1 consenters)."""
    from fabric_protos.common import common_pb2

    from network.channel import block_signers, inspect_block
    from network.config import NetworkError
    from network.member import MemberNodes

    def fetch() -> dict[str, Any]:
        nodes = MemberNodes(_home(home))
        genesis = nodes.layout.block(channel)
        if not genesis.is_file():
            raise NetworkError(f"{nodes.org.msp_id} has not joined channel {channel} (no {genesis})")
        got = nodes.fetch_block(channel, Path(out or f"{channel}-{which}.block"), which)
        number = common_pb2.Block.FromString(got.read_bytes()).header.number
        return {
            "channel": channel,
            "block": number,
            "file": str(got),
            "signers": block_signers(got, inspect_block(genesis)),
        }

    _answer(_step(as_json, fetch), as_json, "block")


def channel_inspect(
    block: Path = typer.Option(..., "--block", help="A configuration block (e.g. the genesis block)."),
    package: list[str] = typer.Option([], "--package", help="Check the block against these packages."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """What a configuration block holds (checked against the packages given)."""
    from network.channel import check_block, inspect_block
    from network.package import read_packages

    def inspect() -> dict[str, Any]:
        packages = read_packages(package)
        config = inspect_block(block)
        if packages:
            check_block(config, packages)
        return {**config.to_json(), "checked_against": [pk.msp_id for pk in packages]}

    _answer(_step(as_json, inspect), as_json, "channel")


for _command, _name in (
    (channel_create, "create"),
    (channel_join, "join"),
    (channel_fetch, "fetch"),
    (channel_inspect, "inspect"),
):
    channel_group.command(_name)(with_output(_command))


def node_start(
    node: MemberNode = typer.Argument(..., help="ca, orderer, peer or chaincode."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Start one node of this organisation."""
    from network.member import MemberNodes

    _answer(_step(as_json, lambda: {node.value: MemberNodes(_home(home)).start(node.value)}), as_json, "node")


def node_stop(
    node: MemberNode = typer.Argument(..., help="ca, orderer, peer or chaincode."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Stop one node of this organisation."""
    from network.member import MemberNodes

    def stop() -> dict[str, Any]:
        nodes = MemberNodes(_home(home))
        nodes.stop(node.value)
        return {node.value: nodes.status()["nodes"][node.value]}

    _answer(_step(as_json, stop), as_json, "node")


def node_status(
    node: MemberNode | None = typer.Argument(None, help="ca, orderer, peer or chaincode (default: all)."),
    home: Path | None = MemberHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """This organisation's nodes (or one of them): running, addresses, channels joined."""
    from network.member import MemberNodes

    def report() -> dict[str, Any]:
        status = MemberNodes(_home(home)).status()
        return {node.value: status["nodes"][node.value]} if node else status

    _answer(_step(as_json, report), as_json, "nodes")


for _command, _name in ((node_start, "start"), (node_stop, "stop"), (node_status, "status")):
    node_group.command(_name)(with_output(_command))


def _chaincode(action: str) -> Any:
    def command(
        channel: str = ChannelOpt,
        name: str = typer.Option("consortia", "--name", help="The chaincode's name."),
        version: str = typer.Option("1.0", "--version", help="Its version."),
        sequence: int = typer.Option(1, "--sequence", help="The definition's sequence number."),
        signature_policy: str = typer.Option(
            "", "--signature-policy", help="Default: the channel's Endorsement policy."
        ),
        dispatch: str | None = typer.Option(
            None, "--dispatch", help="The contracts served (module:callable)."
        ),
        home: Path | None = MemberHomeOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        from network.member import ChaincodeDefinition, MemberNodes

        d = ChaincodeDefinition(
            channel, name, version, sequence, signature_policy, dispatch or _environment().chaincode_dispatch
        )

        def run() -> dict[str, Any]:
            nodes = MemberNodes(_home(home))
            if action == "approve":
                package_id = nodes.approve(d)
                return {
                    "organisation": nodes.org.msp_id,
                    "package_id": package_id,
                    "approvals": nodes.readiness(d),
                }
            if action == "commit":
                return {"committed": nodes.commit(d)}
            return {"committed": nodes.committed(d), "approvals": nodes.readiness(d)}

        _answer(_step(as_json, run), as_json, "chaincode")

    command.__doc__ = {
        "approve": "Approve the chaincode definition for this organisation (installing its package first).",
        "commit": "Commit the definition once enough members approved it.",
        "status": "Whether the definition is committed, and who approved it.",
    }[action]
    command.__name__ = f"chaincode_{action}"
    return command


for _action in ("approve", "commit", "status"):
    chaincode_group.command(_action)(with_output(_chaincode(_action)))
