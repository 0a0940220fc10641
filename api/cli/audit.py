"""``consortia audit``: offline audit bundles of a model -- export, and verify with no ledger access."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    JsonOpt,
    console,
    emit,
    fail,
    guarded,
    report,
    with_output,
)
from api.cli.session import Session, journey

group = typer.Typer(no_args_is_help=True, help="Offline audit bundles: export and verify.")


def ca_certificates(consortium) -> dict[str, bytes]:
    """Each organisation's CA certificate (cryptogen layout), by MSP id."""
    return {
        o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in consortium.organisations
    }


@journey(group, "export")
def audit_export(
    s: Session,
    model_id: str = typer.Argument(..., help="The model id (PROCESS:ORG, ORG a name or an MSP id)."),
    out: Path = typer.Option(..., help="New directory for the bundle."),
) -> None:
    """Write an offline audit bundle of a model: attestations, records with block hashes and
    transaction ids, certificates -- signed by your organisation."""
    from rich.progress import Progress

    from audit.bundles import BundleError, export_bundle

    signers = {}
    for o in s.consortium.organisations:  # organisations whose identities are on this machine
        try:
            signers[o.msp_id] = s.consortium.identity(o.msp_id)
        except (FileNotFoundError, StopIteration):
            pass
    try:
        with Progress(console=console, disable=s.as_json) as bar:
            task = bar.add_task("attesting executions", total=None)
            summary = guarded(
                lambda: export_bundle(
                    out,
                    s.client,
                    model_id,
                    signers=signers,
                    ca_certificates=ca_certificates(s.consortium),
                    index=s.synced_index(),
                    progress=lambda i, n: bar.update(task, completed=i, total=n),
                ),
                s.as_json,
            )
    except BundleError as exc:
        fail(str(exc), EXIT_REFUSED, s.as_json, kind="BundleError")
    emit(summary, s.as_json, "audit bundle written")


@group.command("verify")
@with_output
def audit_verify(
    bundle: Path = typer.Argument(..., help="The bundle directory (`audit export --out`)."),
    ca: Path | None = typer.Option(
        None,
        help="Trusted CA certificates: a folder of <MSP>.pem, or the consortium's crypto folder "
        "(<home>/crypto).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Verify an audit bundle with no network and no ledger access (exit 1 if any check fails)."""
    from audit.bundles import verify_bundle

    trusted = None
    if ca is not None:
        from ledger.identity import Consortium

        if (ca / Consortium.MANIFEST).is_file():  # a consortium's crypto folder (cryptogen layout)
            trusted = ca_certificates(Consortium(ca))
        elif ca.is_dir():
            trusted = {p.stem: p.read_bytes() for p in sorted(ca.glob("*.pem"))}
        if not trusted:
            fail(
                f"{ca} holds no CA certificates (a folder of <MSP>.pem files or a consortium crypto folder)",
                EXIT_NOT_FOUND,
                as_json,
                kind="not found",
            )
    report(verify_bundle(bundle, trusted), as_json)
