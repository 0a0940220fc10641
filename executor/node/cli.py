"""The node's command line: ``consortia node run`` / ``python -m executor.node.cli run`` (docs/executor.md
"Node agent"), and ``consortia node status`` (its status file, docs/executor.md "Ledger outages").

It resolves the node's paths (from ``--home``, a Consortia home made by ``consortia init``, or given
one by one), opens the ledger, checks the runtime, builds the organisation's
:class:`executor.node.agent.NodeAgent` from its parts, starts it and runs it: following the ledger, or
one process until the organisation is done with it (``--process``, outcomes as JSON). Its fault plan
is none unless ``$CONSORTIA_FAULT_PLAN`` names one (tests, :mod:`executor.node.checkpoints`).

A node given no ``--artifact-endpoint`` (no separate artifact service) serves its own store itself on a
loopback port, which its agent publishes in its membership record when it starts: the others reach its
messages there, never through its files (docs/artifacts.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES
from exchange.errors import LocationRefused
from exchange.locations import parse_endpoints
from exchange.readers import LedgerReaders
from exchange.service import ArtifactServer, node_store
from exchange.store import ArtifactStore
from executor.consent import ConsentPolicy
from executor.errors import RuntimeUnavailable
from executor.node.agent import NodeAgent
from executor.node.checkpoints import NO_FAULTS, FaultPlan, load_fault_plan
from executor.runtimes.base import Limits
from ledger.client import ConsortiaClient
from ledger.identity import Consortium
from wire.env import environment


def build_agent(args: argparse.Namespace) -> tuple[NodeAgent, ArtifactServer | None]:
    """The organisation's agent from the command line's paths (not started), and the artifact service
    serving its own store that this started (None when ``--artifact-endpoint`` names a separate one)."""
    from executor.runtimes import get_runtime
    from ledger.embedded import EmbeddedLedger

    faults = fault_plan()
    consortium = Consortium(args.consortium)
    identity = consortium.identity(args.org)
    try:  # the others' services: by default from their membership records
        peer_endpoints = parse_endpoints(getattr(args, "peer_artifacts", None))
    except LocationRefused as exc:
        raise SystemExit(f"node agent {args.org}: --peer-artifacts: {exc}") from None
    settings = getattr(args, "settings", None)
    if settings is not None:  # a home: its owner's only (docs/configuration.md "A private home")
        from home.errors import NotPrivate
        from home.layout import check_private, sqlite_files

        try:
            check_private([settings.home])
            if settings.ledger_backend == "embedded":
                check_private(sqlite_files(Path(args.ledger)), "ledger file")
        except NotPrivate as exc:
            raise SystemExit(f"node agent {args.org}: {exc}") from None
    if settings is not None and settings.ledger_backend != "embedded":
        from home.ledger import open_ledger

        ledger = open_ledger(settings, consortium)  # the home's Fabric connection profile
    elif not Path(args.ledger).is_file():  # an agent never creates a ledger (a wrong path is an error)
        raise SystemExit(
            f"no ledger at {args.ledger}: run `consortia init` to make a consortium, or point "
            f"--ledger/--home at an existing one"
        )
    else:
        ledger = EmbeddedLedger(args.ledger, consortium)
    runtime = get_runtime(args.runtime)
    try:
        runtime.check()
    except RuntimeUnavailable as exc:
        raise SystemExit(f"node agent {args.org}: {exc}") from None
    limits = Limits(memory_bytes=args.memory_mb << 20, cpus=args.cpus)
    client = ConsortiaClient(ledger, identity)
    endpoint, server = getattr(args, "artifact_endpoint", None), None
    if not endpoint:  # no separate service: this node serves its own store (loopback, any free port)
        own = ArtifactStore(args.store, identity.msp_id)
        server = ArtifactServer(("127.0.0.1", 0), own, consortium, LedgerReaders(client, own)).start()
        endpoint = server.url
    agent = NodeAgent(
        client,
        consortium,
        runtime,
        node_store(
            client,
            consortium,
            args.store,
            endpoint=endpoint,
            endpoints=peer_endpoints,
            max_artifact_bytes=settings.max_artifact_bytes
            if settings is not None
            else environment().max_artifact_bytes or DEFAULT_MAX_ARTIFACT_BYTES,
        ),
        args.data,
        Path(args.state) / identity.msp_id,
        limits=limits,
        warm=args.warm,
        prewarm=() if getattr(args, "process", None) else getattr(args, "prewarm", None) or (),
        faults=faults,
        consent=settings.config.consent if settings is not None else ConsentPolicy(),
    )
    return agent, server


def fault_plan() -> FaultPlan:
    """The plan ``$CONSORTIA_FAULT_PLAN`` names (``module:callable``), else none."""
    spec = environment().fault_plan
    if not spec:
        return NO_FAULTS
    try:
        return load_fault_plan(spec)
    except ValueError as exc:
        raise SystemExit(f"node agent: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m executor.node.cli run --org Org1MSP ...`` (also ``consortia node run``)."""
    p = argparse.ArgumentParser(prog="consortia node")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="follow the ledger and run this organisation's tasks")
    r.add_argument(
        "--org", help="MSP id or name of this node's organisation (default: the home's [node] table)"
    )
    r.add_argument(
        "--home",
        default=environment().home,
        help="a Consortia home (consortia init): the five paths below default to its layout",
    )
    r.add_argument("--consortium", help="consortium identity directory (cryptogen layout)")
    r.add_argument("--ledger", help="embedded ledger file")
    r.add_argument("--runtime", choices=("container", "sandbox"), default="container")
    r.add_argument("--data", help="this organisation's data root: <data>/<dataset>/dataset.npz")
    r.add_argument("--store", help="artifact store root")
    r.add_argument("--state", help="agent state directory")
    r.add_argument(
        "--artifact-endpoint",
        help="https://host:port of this organisation's artifact service (published in its membership record)",
    )
    r.add_argument(
        "--peer-artifacts",
        action="append",
        metavar="ORG=URL",
        help="override: another organisation's artifact service (repeat); by default every endpoint is "
        "found in the organisations' membership records on the ledger",
    )
    r.add_argument("--process", help="run only this process, until this organisation is done with it")
    r.add_argument("--memory-mb", type=int, default=2048)
    r.add_argument("--cpus", type=float, default=1.0)
    r.add_argument("--timeout", type=float, default=3600.0)
    r.add_argument(
        "--json",
        action="store_true",
        help="outcomes as JSON on stdout (one line per task with --process; logs go to stderr)",
    )
    r.add_argument(
        "--warm",
        action="store_true",
        help="keep one isolated worker per process alive across rounds (fresh key per round)",
    )
    r.add_argument(
        "--prewarm",
        action="append",
        metavar="IMAGE_DIGEST[=DATASET]",
        help="with --warm: keep a started spare worker of this image (verified first) on this dataset "
        "folder (default: default), bound to the first process of that image and dataset (repeat)",
    )
    r.add_argument(
        "--barrier",
        metavar="DIR",
        help="once started (spare workers too), write DIR/<org>.ready and wait for DIR/go (benchmarks)",
    )
    st = sub.add_parser("status", help="what this organisation's node agent is doing and waiting for")
    st.add_argument("--org", help="MSP id or name (default: the home's [node] organisation)")
    st.add_argument("--home", default=environment().home, help="a Consortia home (its state folder)")
    st.add_argument("--state", help="agent state directory (default: the home's)")
    st.add_argument("--json", action="store_true", help="the status file as it is")
    args = p.parse_args(argv)
    if args.command == "status":
        return _status(p, args)
    paths = ("consortium", "ledger", "data", "store", "state")
    args.settings = None
    if args.home:
        from home.settings import load

        settings = args.settings = load(args.home)
        args.org = args.org or settings.node_setting("organisation")  # a `consortia join` home
        args.artifact_endpoint = args.artifact_endpoint or settings.node_setting("artifact_endpoint")
        if args.org is None:
            p.error("--org is required (the home has no [node] organisation)")
        try:
            msp = Consortium(args.consortium or settings.crypto).organisation(args.org).msp_id
        except (FileNotFoundError, KeyError) as exc:
            p.error(str(exc))
        defaults = {
            "consortium": settings.crypto,
            "ledger": settings.ledger_path,
            "data": settings.paths.data(msp),
            "store": settings.paths.store_root,
            "state": settings.paths.state_root,
        }
        for k in paths:
            if getattr(args, k) is None:
                setattr(args, k, str(defaults[k]))
    if args.org is None:
        p.error("--org is required without a home")
    missing = [f"--{k}" for k in paths if getattr(args, k) is None]
    if missing:
        p.error(f"without --home, {', '.join(missing)} are required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    agent, server = build_agent(args)
    try:
        agent.start()
        if args.process:  # this one process only: no spare started again once taken
            agent.spares.prewarm_images(args.prewarm or (), keep=False)
        if args.barrier:
            _barrier(agent, Path(args.barrier), args.timeout)
        if args.process:
            outcomes = agent.run_until_idle(args.process, timeout=args.timeout)
            print(json.dumps([o.__dict__ for o in outcomes], sort_keys=True))
            return 0 if outcomes and outcomes[-1].status == "done" else 1
        agent.follow()
        return 0
    finally:
        agent.close()
        if server is not None:
            server.stop()
        agent.ledger.close()


def _status(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``consortia node status``: the agent's status file (:mod:`executor.node.status`); exit 1 if
    no agent of this organisation has written one yet."""
    from executor.node.status import read_status

    state, org = args.state, args.org
    if args.home:
        from home.settings import load

        settings = load(args.home)
        org = org or settings.node_setting("organisation") or settings.default_organisation
        state = state or str(settings.paths.state_root)
        if org:
            org = Consortium(settings.crypto).organisation(org).msp_id
    if not state or not org:
        p.error("status needs --org and --state, or a --home that names them")
    status = read_status(Path(state) / org)
    if status is None:
        print(f"no status of {org}'s node agent under {Path(state) / org} (has it started?)", file=sys.stderr)
        return 1
    if args.json:
        print(status.to_json())
        return 0
    print(f"{status.organisation} (pid {status.pid}, updated {status.updated})")
    print(f"  waiting for: {status.waiting_for or 'nothing'}")
    ledger = status.ledger
    reach = "reachable" if ledger.get("reachable") else f"unreachable since {ledger.get('unreachable_since')}"
    print(f"  ledger: {reach} ({ledger.get('outages', 0)} outage(s) ridden out)")
    for pid, ps in status.processes.items():
        print(f"  {pid}: round {ps.round} {ps.status} {ps.detail} (since {ps.since})")
    return 0


def _barrier(agent: NodeAgent, directory: Path, timeout: float) -> None:
    """Say that this agent and its spare workers have started, then wait for the others (``go``)."""
    for spare in agent.pool.spares.values():
        spare.wait_started()
    (directory / f"{agent.org}.ready").touch()
    deadline = time.monotonic() + timeout
    while not (directory / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.005)


if __name__ == "__main__":
    sys.exit(main())
