"""Long-running parts of one organisation: ``consortia serve`` (its gateway), ``consortia node`` (its
node agent), ``consortia artifact-service`` (its artifact service, :mod:`exchange.service`) and
``consortia network`` (a native Fabric network).

``node`` and ``network`` hand their arguments to the command lines of :mod:`executor.node.cli` and
:mod:`network`, which follow the same conventions (``--json``, errors on stderr, exit
codes of docs/cli.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE, HomeOpt, OrgOpt, fail, say
from api.cli.session import session

# node and network: every argument, --help included, goes to their own command line
PASS_THROUGH_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    tls_cert: Path | None = typer.Option(None, help="Server TLS certificate (PEM)."),
    tls_key: Path | None = typer.Option(None, help="Server TLS key (PEM)."),
    mtls: bool = typer.Option(
        False, help="Also authenticate TLS client certificates of this organisation's users."
    ),
    require_client_cert: bool = typer.Option(False, help="With --mtls: refuse connections without one."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print where the gateway listens as one JSON line (the server log is on stderr).",
    ),
) -> None:
    """Run this organisation's gateway: REST API, OpenAPI document at /docs, explorer at /explorer/."""
    import uvicorn

    from api.gateway import create_app

    if mtls and not (tls_cert and tls_key):
        raise typer.BadParameter("--mtls needs --tls-cert and --tls-key", param_hint="--mtls")
    with session(home, org, as_json=as_json) as s:
        gw = s.gateway()
        extra = {}
        if mtls:
            from api.mtls import ssl_options

            gw.mtls = True
            extra = ssl_options(s.consortium, s.gateway_home, require_client_cert)
        url = f"http{'s' if tls_cert else ''}://{host}:{port}"
        if as_json:
            info = {
                "organisation": s.msp_id,
                "url": url,
                "explorer": f"{url}/explorer/",
                "docs": f"{url}/docs",
            }
            print(json.dumps({**info, "tokens": len(gw.tokens.owners())}, sort_keys=True), flush=True)
        else:
            if not gw.tokens.owners():
                say(f"no API tokens yet: run `consortia token issue --org {s.msp_id}`")
            say(f"gateway of {s.msp_id} on {url} (explorer at /explorer/, OpenAPI at /docs)")
        uvicorn.run(
            create_app(gw),
            host=host,
            port=port,
            log_level="info",
            log_config=_logs_on_stderr() if as_json else uvicorn.config.LOGGING_CONFIG,
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
            **extra,
        )


def artifact_service(
    home: Path | None = HomeOpt,
    org: str | None = typer.Option(
        None, "--org", help="This organisation (name or MSP id; default: the home's [node] organisation)."
    ),
    consortium: Path | None = typer.Option(
        None, help="The consortium's crypto directory (default: the home's)."
    ),
    store: Path | None = typer.Option(
        None, help="Artifact store root, holding <MSP id>/ (default: the home's)."
    ),
    ledger: Path | None = typer.Option(None, help="An embedded ledger file (default: the home's ledger)."),
    listen: str | None = typer.Option(
        None,
        help="Loopback host:port, e.g. 127.0.1.1:8443 (default: the home's [node] listen, else 127.0.0.1:0).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print where the service listens as one JSON line (request logs go to stderr)."
    ),
) -> None:
    """Serve this organisation's artifact store over HTTPS with mutual TLS, to the organisations the ledger
    lets read each artifact (docs/artifacts.md). Give --home, or --consortium, --store and --ledger."""
    from exchange.readers import LedgerReaders
    from exchange.service import ArtifactServer
    from exchange.store import ArtifactStore
    from home.errors import HomeError, LedgerNotFound
    from home.ledger import open_ledger
    from home.settings import load
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    try:
        settings = load(home) if home else None
    except (HomeError, ValueError) as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="bad home")
    org = org or (settings.node_setting("organisation") if settings else None)
    listen = listen or (settings.node_setting("listen") if settings else None) or "127.0.0.1:0"
    if org is None:
        raise typer.BadParameter(
            "required (or a home whose [node] table names the organisation)", param_hint="--org"
        )
    crypto = consortium or (settings.crypto if settings else None)
    store_root = store or (settings.paths.store_root if settings else None)
    if crypto is None or store_root is None or (settings is None and ledger is None):
        raise typer.BadParameter("give --home, or --consortium, --store and --ledger", param_hint="--home")
    if not (Path(crypto) / Consortium.MANIFEST).exists():
        fail(f"no consortium at {crypto}", EXIT_NOT_FOUND, as_json, kind="no consortium")
    members = Consortium(crypto)
    try:
        msp = members.organisation(org).msp_id
    except KeyError as exc:
        raise typer.BadParameter(str(exc).strip("'\""), param_hint="--org") from None
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise typer.BadParameter(f"expected host:port, got {listen!r}", param_hint="--listen")
    if ledger is not None and not ledger.is_file():  # a service never creates a ledger
        fail(f"no ledger at {ledger}", EXIT_NOT_FOUND, as_json, kind="no ledger")
    try:
        if ledger is not None:
            led = EmbeddedLedger(ledger, members)
        else:
            assert settings is not None  # checked above: without --ledger there is a home
            led = open_ledger(settings, members)
    except LedgerNotFound as exc:
        fail(str(exc), EXIT_NOT_FOUND, as_json, kind="no ledger")
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="bad home")
    try:
        own = ArtifactStore(store_root, msp)
        readers = LedgerReaders(ConsortiaClient(led, members.identity(msp)), own)
        try:
            srv = ArtifactServer((host, int(port)), own, members, readers, log=_on_stderr)
        except ValueError as exc:  # not a loopback address
            raise typer.BadParameter(str(exc), param_hint="--listen") from None
        if as_json:
            print(json.dumps({"organisation": msp, "url": srv.url}, sort_keys=True), flush=True)
        else:
            print(f"artifact service of {msp} at {srv.url}", flush=True)
        try:
            srv.serve_forever()
        finally:
            srv.server_close()
    finally:
        led.close()


def _on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _logs_on_stderr() -> dict:
    """uvicorn's logging configuration with its access log on stderr too (stdout stays JSON)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


def json_spelling(args: list[str]) -> list[str]:
    """``-o/--output json|table|wide``, the other commands' spelling of the output format, as the
    ``node`` and ``network`` command lines take it: ``--json`` (json) or nothing (the tables)."""
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in ("-o", "--output"):
            value = next(rest, "")
        elif arg.startswith("--output="):
            value = arg.removeprefix("--output=")
        elif arg.startswith("-o") and not arg.startswith("--"):  # -ojson, -o=json
            value = arg[2:].lstrip("=")
        else:
            out.append(arg)
            continue
        if value not in ("json", "table", "wide"):
            raise typer.BadParameter(f"{value!r} is not one of json, table, wide", param_hint="-o/--output")
        out += ["--json"] if value == "json" else []
    return out


def node(ctx: typer.Context) -> None:
    """This organisation's node agent: `consortia node run --org ORG --home H --runtime sandbox [--process ID]
    [--json]` (the executor's command line; `consortia node run --help` lists its options)."""
    from executor.node.cli import main as node_main

    raise typer.Exit(node_main(json_spelling(list(ctx.args))))


def network(ctx: typer.Context) -> None:
    """A native Hyperledger Fabric network: `consortia network up|down|deploy|status|logs … [--json]`
    (:mod:`network`; `consortia network --help` lists its options); one member's own `channel
    create|join|inspect|fetch`, `node start|stop|status` and `chaincode approve|commit|status`."""
    from network import main as network_main

    raise typer.Exit(network_main(json_spelling(list(ctx.args))))
