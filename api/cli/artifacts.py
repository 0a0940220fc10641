"""``consortia artifacts``: this organisation's artifact service (docs/artifacts.md, :mod:`exchange.service`).

``consortia artifacts serve`` serves the organisation's content-addressed store over HTTPS with mutual
TLS, to the organisations the ledger lets read each artifact; it reads the home (``--home``; in a
joined home ``--org`` and ``--listen`` come from its ``[node]`` table) or takes its places one by one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE, HomeOpt, fail, with_output

group = typer.Typer(no_args_is_help=True, help="This organisation's artifact service: serve.")


def serve(
    home: Path | None = HomeOpt,
    org: str | None = typer.Option(
        None, "--org", help="This organisation (name or MSP id; default: the home's \\[node] organisation)."
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
        help="Loopback host:port, e.g. 127.0.1.1:8443 (default: the home's \\[node] listen, else 127.0.0.1:0).",
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


group.command("serve")(with_output(serve))
