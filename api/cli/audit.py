"""``consortia audit``: offline audit bundles of a model (export, and verify with no ledger access); the
auditor's replay of disclosed tasks (disclose, replay, replay-process; docs/audit-replay.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from api.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_USAGE,
    JsonOpt,
    console,
    emit,
    fail,
    guarded,
    report,
    say,
    with_output,
)
from api.cli.session import Session, journey

group = typer.Typer(
    no_args_is_help=True,
    help="Offline audit bundles (export, verify); disclosures to an auditor and their replay.",
)


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


# ---------------------------------------------------------------------------------------- auditor replay
def _hosted_stores(s: Session) -> Any:
    """The artifact services of the organisations whose nodes this home holds (a one-machine home holds
    every organisation's; a joined home only its own, the others are reached by their membership
    records), served in memory for the length of the command."""
    from exchange.service import HostedServices, node_store
    from ledger.client import ConsortiaClient

    hosted = HostedServices()
    for o in s.consortium.organisations:
        if not s.layout.artifacts(o.msp_id).is_dir():
            continue
        try:
            client = ConsortiaClient(s.ledger, s.consortium.identity(o.msp_id))
        except (KeyError, OSError, ValueError, StopIteration):
            continue
        node_store(client, s.consortium, s.layout.store_root, hosted=hosted)
    return hosted


@journey(group, "disclose")
def audit_disclose(
    s: Session,
    process_id: str = typer.Argument(..., help="The learning process."),
    rounds: str = typer.Option(
        ..., "--rounds", help="The rounds whose tasks to disclose: R1,R2, R1-R2 or all."
    ),
    to: str = typer.Option(
        ...,
        "--to",
        help="The auditor: an organisation (name or MSP id) or its key-agreement certificate (PEM file).",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="The disclosure file (default: ./<process>-<org>.disclosure.json)."
    ),
) -> None:
    """Disclose the inputs of your organisation's tasks (its data, previous states, inbox messages) to an
    auditor: sealed to the auditor's key-agreement certificate, written to one file, recorded on the ledger."""
    from audit.disclosure import DisclosureError, disclose, parse_rounds, summary
    from exchange.errors import ArtifactError
    from exchange.service import node_store
    from executor.errors import ExecutorError

    client = s.client
    try:
        process = guarded(lambda: client.get_process(process_id), s.as_json)
        wanted = parse_rounds(rounds, process.rounds)
        hosted = _hosted_stores(s)
        store = node_store(client, s.consortium, s.layout.store_root, hosted=hosted)
        disclosure, record = guarded(
            lambda: disclose(
                client,
                s.consortium,
                store,
                s.layout.data(s.msp_id),
                s.layout.state_root / s.msp_id,
                process_id,
                wanted,
                to,
            ),
            s.as_json,
        )
    except DisclosureError as exc:
        fail(str(exc), EXIT_USAGE, s.as_json, kind="DisclosureError")
    except (ArtifactError, ExecutorError) as exc:
        fail(
            str(exc),
            EXIT_NOT_FOUND if isinstance(exc, LookupError) else EXIT_REFUSED,
            s.as_json,
            kind=type(exc).__name__,
        )
    path = disclosure.write(out or Path(f"{process_id}-{s.msp_id}.disclosure.json"))
    emit(summary(disclosure, record, path), s.as_json, "disclosure recorded")


def _verdict_rows(tasks: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "task": t.task,
            "verdict": "matched" if t.matched else "MISMATCH",
            "digests": t.compared,
            "differs": "; ".join(str(m) for m in t.mismatches),
        }
        for t in tasks
    ]


def _images(bundle: Path | None) -> Any:
    from audit.replay import ImageSource
    from executor.images.recipe import cache_root

    return ImageSource(cache_root() / "bundles", bundle)


@journey(group, "replay")
def audit_replay(
    s: Session,
    disclosure: Path = typer.Argument(..., help="The disclosure file (`audit disclose --out`)."),
    bundle: Path | None = typer.Option(
        None,
        "--bundle",
        help="Run this bundle directory (your own build) instead of fetching the ledger's image.",
    ),
) -> None:
    """Re-run the disclosed tasks on this machine, as the auditor, and compare every digest with the signed
    execution records: a per-task verdict, exit 1 on any mismatch."""
    from audit.disclosure import Disclosure, DisclosureError
    from audit.replay import ReplayError, replay_disclosure

    try:
        d = Disclosure.read(disclosure)
        rep = replay_disclosure(d, s.client, s.consortium.encryption_key(s.msp_id), _images(bundle))
    except (DisclosureError, ReplayError) as exc:
        fail(str(exc), EXIT_REFUSED, s.as_json, kind=type(exc).__name__)
    if s.as_json:
        emit(rep.to_dict(), True)
    else:
        emit(_verdict_rows(rep.tasks), False, f"replay of {d.organisation}'s disclosure of {d.process_id}")
        say(f"{sum(t.matched for t in rep.tasks)}/{len(rep.tasks)} tasks matched in {rep.seconds:.1f} s")
    if not rep.ok:
        raise typer.Exit(EXIT_REFUSED)


@journey(group, "replay-process")
def audit_replay_process(
    s: Session,
    process_id: str = typer.Argument(..., help="The learning process."),
    disclosures: Path = typer.Option(
        ..., "--disclosures", help="A folder of disclosure files (*.json), one per member."
    ),
    bundle: Path | None = typer.Option(
        None, "--bundle", help="Run this bundle directory instead of the ledger's image."
    ),
) -> None:
    """Replay every member's disclosure of a process: every record and every final model must match."""
    from audit.disclosure import Disclosure, DisclosureError
    from audit.replay import replay_process

    files = sorted(disclosures.glob("*.json")) if disclosures.is_dir() else []
    if not files:
        fail(f"{disclosures} holds no disclosure files (*.json)", EXIT_NOT_FOUND, s.as_json, kind="not found")
    try:
        found = [Disclosure.read(f) for f in files]
    except DisclosureError as exc:
        fail(str(exc), EXIT_REFUSED, s.as_json, kind="DisclosureError")
    rep = replay_process(process_id, found, s.client, s.consortium.encryption_key(s.msp_id), _images(bundle))
    if s.as_json:
        emit(rep.to_dict(), True)
    else:
        emit(_verdict_rows(rep.tasks), False, f"replay of {process_id}")
        for org, m in sorted(rep.models.items()):
            say(
                f"final model of {org}: {'matched' if m['matched'] else 'MISMATCH'} {m.get('digest') or ''} {m.get('detail', '')}"
            )
        for task in rep.missing:
            say(f"not disclosed: {task}")
        for e in rep.errors:
            say(f"not replayed: {e}")
        say(
            f"{sum(t.matched for t in rep.tasks)}/{len(rep.tasks)} records matched; {'OK' if rep.ok else 'MISMATCH'}"
        )
    if not rep.ok:
        raise typer.Exit(EXIT_REFUSED)
