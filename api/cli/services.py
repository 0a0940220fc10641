"""``consortia serve``: this organisation's gateway. Its node agent is ``consortia node``
(:mod:`api.cli.node`), its artifact service ``consortia artifacts`` (:mod:`api.cli.artifacts`), a native
Fabric network ``consortia network`` (:mod:`api.cli.network`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from api.cli.output import HomeOpt, OrgOpt, say
from api.cli.session import session


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
    max_disclosure_mib: float | None = typer.Option(
        None,
        min=0.001,
        help="The largest disclosure file POST /api/v1/replays accepts, in MiB (default 64; larger: 413).",
    ),
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
        if max_disclosure_mib is not None:
            gw.max_disclosure_bytes = int(max_disclosure_mib * 1024 * 1024)
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


def _logs_on_stderr() -> dict:
    """uvicorn's logging configuration with its access log on stderr too (stdout stays JSON)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config
