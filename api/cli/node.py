"""``consortia node``: this organisation's node agent (docs/executor.md "Node agent").

``consortia node status`` says what the node agent is doing and waiting for, from the status file it
keeps in its state directory (:mod:`executor.node.status`, docs/executor.md "Ledger outages").

``consortia node run`` takes the node's places from its home (``--home``, a Consortia home made by
``consortia init`` or ``consortia join``; each path overridable) or one by one without a home, builds
its agent the one way (:func:`home.agent.build_agent`: the home's ledger policy, its artifact store and
locations, the runtime checked, the fault plan of ``$CONSORTIA_FAULT_PLAN`` only), starts it and runs
it: following the ledger, or one process until this organisation is done with it (``--process``).

A node given no artifact endpoint (no separate artifact service) serves its own store itself on a
loopback port, which its agent publishes in its membership record when it starts: the others reach its
messages there, never through its files (docs/artifacts.md).

Start-up stays cheap: nothing but the command line is imported until the command runs.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, emit, fail, say, with_output

group = typer.Typer(no_args_is_help=True, help="This organisation's node agent: run, status.")


class Runtime(StrEnum):
    """How the node's tasks run isolated (:mod:`executor.runtimes`)."""

    container = "container"
    sandbox = "sandbox"


def run(
    org: str | None = typer.Option(
        None,
        "--org",
        help="This node's organisation (name or MSP id; default: the home's \\[node] organisation).",
    ),
    home: str | None = typer.Option(
        None,
        "--home",
        envvar="CONSORTIA_HOME",
        help="A Consortia home (consortia init/join): the five paths below default to its layout; "
        "an empty value means no home.",
    ),
    consortium: Path | None = typer.Option(None, help="Consortium identity directory (cryptogen layout)."),
    ledger: Path | None = typer.Option(None, help="Embedded ledger file (default: the home's ledger)."),
    runtime: Runtime = typer.Option(
        Runtime.container, help="Task runtime: container (Podman) or sandbox (bubblewrap)."
    ),
    data: Path | None = typer.Option(
        None, help="This organisation's data root: <data>/<dataset>/dataset.npz."
    ),
    store: Path | None = typer.Option(None, help="Artifact store root (holding <MSP id>/)."),
    state: Path | None = typer.Option(None, help="Agent state root (holding <MSP id>/)."),
    artifact_endpoint: str | None = typer.Option(
        None,
        "--artifact-endpoint",
        help="https://host:port of this organisation's artifact service (published in its membership "
        "record; default: the home's \\[node] artifact_endpoint, else its own store served on loopback).",
    ),
    peer_artifacts: list[str] = typer.Option(
        [],
        "--peer-artifacts",
        metavar="ORG=URL",
        help="Override: another organisation's artifact service (repeat); by default every endpoint is "
        "found in the organisations' membership records on the ledger.",
    ),
    process: str | None = typer.Option(
        None, "--process", help="Run only this process, until this organisation is done with it."
    ),
    memory_mb: int = typer.Option(2048, "--memory-mb", help="Memory limit of a task, in MiB."),
    cpus: float = typer.Option(1.0, help="CPU limit of a task."),
    timeout: float = typer.Option(3600.0, help="Seconds --process may take (and --barrier may wait)."),
    warm: bool = typer.Option(
        False,
        "--warm",
        help="Keep one isolated worker per process alive across rounds (fresh key per round).",
    ),
    prewarm: list[str] = typer.Option(
        [],
        "--prewarm",
        metavar="IMAGE_DIGEST[=DATASET]",
        help="With --warm: keep a started spare worker of this image (verified first) on this dataset "
        "folder (default: default), bound to the first process of that image and dataset (repeat).",
    ),
    barrier: Path | None = typer.Option(
        None,
        "--barrier",
        metavar="DIR",
        help="Once started (spare workers too), write DIR/<org>.ready and wait for DIR/go (benchmarks).",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Outcomes as JSON on stdout (with --process; logs go to stderr). The same as -o json.",
    ),
) -> None:
    """Follow the ledger and run this organisation's tasks (--process: one process, then exit 0 if all
    its tasks are done, 1 if not)."""
    import logging

    from exchange.errors import LocationRefused
    from exchange.locations import parse_endpoints
    from executor.errors import RuntimeUnavailable
    from executor.node.supervisor import meet_at_start
    from executor.runtimes.base import Limits
    from home.agent import NodePlaces, build_agent
    from home.errors import ConsortiumNotFound, HomeError, LedgerNotFound

    try:
        peers = parse_endpoints(peer_artifacts)
    except LocationRefused as exc:
        raise typer.BadParameter(str(exc), param_hint="--peer-artifacts") from None
    paths = {"consortium": consortium, "ledger": ledger, "data": data, "store": store, "state": state}
    try:
        if home:
            places = NodePlaces.of_home(home, org, artifact_endpoint=artifact_endpoint, **paths)
        elif org is None:
            raise HomeError("--org is required without a home")
        else:
            places = NodePlaces.given(org, artifact_endpoint=artifact_endpoint, **paths)
    except ConsortiumNotFound as exc:
        fail(str(exc), EXIT_NOT_FOUND, as_json, kind="no consortium")
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="usage")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        node = build_agent(
            places,
            runtime=runtime.value,
            warm=warm,
            limits=Limits(memory_bytes=memory_mb << 20, cpus=cpus),
            prewarm=() if process else prewarm,
            peer_artifacts=peers,
        )
    except LedgerNotFound as exc:
        fail(str(exc), EXIT_NOT_FOUND, as_json, kind="no ledger")
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="bad home")
    except ValueError as exc:  # a fault plan ($CONSORTIA_FAULT_PLAN) that makes no plan
        fail(str(exc), EXIT_USAGE, as_json, kind="bad fault plan")
    except RuntimeUnavailable as exc:
        fail(f"node agent {places.org}: {exc}", EXIT_REFUSED, as_json, kind="runtime unavailable")
    agent = node.agent
    try:
        agent.start()
        if process:  # this one process only: no spare started again once taken
            agent.spares.prewarm_images(prewarm, keep=False)
        if barrier is not None:
            meet_at_start(agent, barrier, timeout)
        if not process:
            agent.follow()
            raise typer.Exit(EXIT_OK)
        try:
            outcomes = agent.run_until_idle(process, timeout=timeout)
        except TimeoutError as exc:
            fail(str(exc), EXIT_REFUSED, as_json, kind="timeout")
        emit(
            [o.__dict__ for o in outcomes],
            as_json,
            f"{places.org} in {process}",
            ["process_id", "round", "status", "detail", "step_seconds"],
        )
        raise typer.Exit(EXIT_OK if outcomes and outcomes[-1].status == "done" else EXIT_REFUSED)
    finally:
        node.close()


group.command("run")(with_output(run))


def status(
    org: str | None = typer.Option(
        None, "--org", help="This organisation (name or MSP id; default: the home's \\[node] organisation)."
    ),
    home: str | None = typer.Option(
        None, "--home", envvar="CONSORTIA_HOME", help="A Consortia home (its state folder); empty: no home."
    ),
    state: Path | None = typer.Option(
        None, help="Agent state root (holding <MSP id>/; default: the home's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="The status file as it is (the same as -o json)."),
) -> None:
    """What this organisation's node agent is doing and waiting for, from its status file
    (<state>/<MSP>/status.json, docs/executor.md "Ledger outages"); exit 1 if no agent has written one."""
    from executor.node.status import read_status
    from home.errors import HomeError
    from home.settings import load
    from ledger.identity import Consortium

    state_root = state
    if home:
        try:
            settings = load(home)
            org = org or settings.node_setting("organisation") or settings.default_organisation
            state_root = state_root or settings.paths.state_root
            if org:
                org = Consortium(settings.crypto).organisation(org).msp_id
        except HomeError as exc:
            fail(str(exc), EXIT_USAGE, as_json, kind="bad home")
        except (FileNotFoundError, KeyError) as exc:
            fail(str(exc).strip("'\""), EXIT_USAGE, as_json, kind="usage")
    if state_root is None or not org:
        fail("status needs --org and --state, or a --home that names them", EXIT_USAGE, as_json, kind="usage")
    found = read_status(Path(state_root) / org)
    if found is None:
        fail(
            f"no status of {org}'s node agent under {Path(state_root) / org} (has it started?)",
            EXIT_REFUSED,
            as_json,
            kind="no status",
        )
    if as_json:
        from dataclasses import asdict

        emit(asdict(found), True)
        return
    say(f"{found.organisation} (pid {found.pid}, updated {found.updated})")
    say(f"  waiting for: {found.waiting_for or 'nothing'}")
    ledger = found.ledger
    reach = "reachable" if ledger.get("reachable") else f"unreachable since {ledger.get('unreachable_since')}"
    say(f"  ledger: {reach} ({ledger.get('outages', 0)} outage(s) ridden out)")
    for pid, ps in found.processes.items():
        say(f"  {pid}: round {ps.round} {ps.status} {ps.detail} (since {ps.since})")


group.command("status")(with_output(status))
