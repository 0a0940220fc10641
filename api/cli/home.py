"""``consortia init`` (make a Consortia home), ``consortia join`` (the home of one organisation of an
existing consortium) and ``consortia demo`` (the complete audited run)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from api.cli.output import EXIT_USAGE, JsonOpt, console, err_console, fail, say


def demo(
    out: Path = typer.Option(Path("demo-output"), help="Folder for the report, plots and ledger."),
    quick: bool = typer.Option(False, help="A smaller run (fewer rows and rounds)."),
    backend: str = typer.Option("embedded", help="Ledger host: embedded or fabric."),
    runtime: str = typer.Option("sandbox", help="Task runtime: sandbox (bubblewrap) or container (Podman)."),
    as_json: bool = typer.Option(
        False, "--json", help="Progress on stderr; the run's report.json (or the error) on stdout."
    ),
) -> None:
    """Run a complete audited learning process among several organisations (the main job)."""
    from algorithms.numeric_profile import reexec_selected
    from api.demo import run_demo

    reexec_selected()  # its simulator checks compute under the images' numeric profile

    code = run_demo(
        out=out, quick=quick, backend=backend, runtime=runtime, console=err_console if as_json else console
    )
    if as_json:
        report = out / "report.json"
        if code == 0 and report.is_file():
            print(json.dumps(json.loads(report.read_text()), sort_keys=True))
        else:
            message = f"the demo ended with exit code {code} (details on stderr; folder {out})"
            print(json.dumps({"ok": False, "code": "demo failed", "message": message, "exit_code": code}))
    raise typer.Exit(code)


def init(
    orgs: str = typer.Option(
        "", "--orgs", help="Comma-separated organisation names, e.g. Org1,Org2,Org3 (a new consortium)."
    ),
    home: Path | None = typer.Option(
        None, "--home", envvar="CONSORTIA_HOME", help="The new Consortia home (default ./consortia-home)."
    ),
    force: bool = typer.Option(False, help="Replace the consortium already in that home."),
    crypto: Path | None = typer.Option(
        None, "--crypto", help="With --fabric-profile: the existing network's identities (cryptogen layout)."
    ),
    fabric_profile: Path | None = typer.Option(
        None,
        "--fabric-profile",
        help="A home on a running Fabric network: its connection.json (fabric-network/network up).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Make a Consortia home: identities per organisation, consortia.toml, folders, an empty ledger
    (--orgs); or a home on a running Fabric network (--crypto and --fabric-profile)."""
    from home.create import init_home, join_home
    from home.errors import HomeError

    try:
        if fabric_profile is not None or crypto is not None:
            if orgs or fabric_profile is None or crypto is None:
                raise HomeError(
                    "a home on a Fabric network takes --crypto and --fabric-profile (and no --orgs)"
                )
            settings = join_home(home, crypto, fabric_profile, force=force)
        else:
            settings = init_home(home, orgs.split(","), force=force)
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="init refused")
    layout = settings.paths
    info = {
        "home": str(settings.home),
        "config": str(layout.config),
        "organisations": list(settings.organisations),
        "default_organisation": settings.default_organisation,
        "crypto": str(layout.crypto),
        "backend": settings.ledger_backend,
        "ledger": str(settings.ledger_profile if settings.ledger_backend == "fabric" else layout.ledger),
        "data": str(layout.data_root),
        "artifacts": str(layout.store_root),
    }
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return
    say(
        f"consortium of {len(settings.organisations)} organisations in {settings.home}: "
        f"{', '.join(settings.organisations)}"
    )
    for k in ("config", "crypto", "ledger", "data", "artifacts"):
        say(f"  {k:10} {info[k]}")
    say(f"next: export CONSORTIA_HOME={settings.home}; consortia image build <name>")


def join(
    package: list[Path] = typer.Option(
        [],
        "--package",
        help="A consortium without a centre: every other member's public package (repeat; "
        "consortia org export). The home is the one `consortia org init` made; no other option is needed.",
    ),
    org: str = typer.Option("", "--org", help="This organisation's name, e.g. Org2 (MSP id Org2MSP)."),
    msp_dir: Path | None = typer.Option(
        None, "--msp-dir", help="Its own cryptogen folder peerOrganizations/<domain> (with its keys)."
    ),
    member: list[str] = typer.Option(
        [],
        "--member",
        help="NAME=DIR: another organisation's public folder peerOrganizations/<domain> (repeat); only "
        "its msp/cacerts, msp/tlscacerts and encryption/cert.pem are taken.",
    ),
    orderer: Path | None = typer.Option(
        None,
        "--orderer",
        help="The orderer organisation's folder ordererOrganizations/<domain> (public part).",
    ),
    artifact_endpoint: str = typer.Option(
        "",
        "--artifact-endpoint",
        help="https://host:port where this organisation's artifact service is reached.",
    ),
    listen: str = typer.Option("", "--listen", help="host:port the artifact service listens on."),
    fabric_profile: Path | None = typer.Option(
        None, "--fabric-profile", help="A Fabric connection profile naming this organisation's own peer."
    ),
    ledger_file: Path | None = typer.Option(None, "--ledger", help="Or: an embedded ledger file."),
    data: Path | None = typer.Option(None, "--data", help="Its data root (<data>/<dataset>/dataset.npz)."),
    artifacts: Path | None = typer.Option(None, "--artifacts", help="Its artifact store root."),
    home: Path | None = typer.Option(
        None, "--home", envvar="CONSORTIA_HOME", help="The new home (default ./consortia-home)."
    ),
    force: bool = typer.Option(False, help="Replace the consortium already in that home."),
    as_json: bool = JsonOpt,
) -> None:
    """Make the home of ONE organisation of an existing consortium: its own MSP material, the others'
    public certificates only, a ledger connection, its data root, artifact store and public endpoint.
    With --package: from the other members' public packages, in the home `consortia org init` made."""
    from home.errors import HomeError
    from home.join import join_organisation
    from home.member import join_with_packages

    try:
        if package:
            if org or msp_dir or member or orderer or artifact_endpoint or fabric_profile or ledger_file:
                raise HomeError(
                    "with --package the home's own organisation, endpoints and profile come from "
                    "`consortia org init`: give only --package (and --data, --artifacts, --home, --force)"
                )
            settings = join_with_packages(home, package, data=data, artifacts=artifacts, force=force)
        else:
            if not org or msp_dir is None or orderer is None or not artifact_endpoint:
                raise HomeError(
                    "join takes --package FILE ... (a consortium without a centre), or --org, --msp-dir, "
                    "--orderer and --artifact-endpoint"
                )
            members = {}
            for item in member:
                name, sep, folder = item.partition("=")
                if not sep or not folder:
                    raise HomeError(f"--member takes NAME=DIR, got {item!r}")
                members[name] = folder
            settings = join_organisation(
                home,
                org,
                msp_dir,
                members,
                orderer,
                artifact_endpoint,
                profile=fabric_profile,
                ledger=ledger_file,
                data=data,
                artifacts=artifacts,
                listen=listen,
                force=force,
            )
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="join refused")
    msp = settings.node_setting("organisation")
    info = {
        "home": str(settings.home),
        "config": str(settings.paths.config),
        "organisation": msp,
        "organisations": list(settings.organisations),
        "crypto": str(settings.paths.crypto),
        "backend": settings.ledger_backend,
        "ledger": str(
            settings.ledger_profile if settings.ledger_backend == "fabric" else settings.ledger_path
        ),
        "data": str(settings.paths.data(str(msp))),
        "artifacts": str(settings.paths.store_root),
        "artifact_endpoint": settings.node_setting("artifact_endpoint"),
    }
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return
    say(f"{msp} joined a consortium of {len(settings.organisations)} organisations in {settings.home}")
    for k in ("config", "crypto", "ledger", "data", "artifacts", "artifact_endpoint"):
        say(f"  {k:17} {info[k]}")
    say(f"next: consortia node run --home {settings.home}")
