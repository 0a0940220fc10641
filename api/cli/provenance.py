"""``consortia provenance``: the history of images, processes, executions, artifacts and models."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import HomeOpt, JsonOpt, OrgOpt, check_digest, emit, guarded, say
from api.cli.session import session

group = typer.Typer(
    no_args_is_help=True, help="Provenance history of images, processes, executions, artifacts, models."
)
HISTORY = ["tx_id", "timestamp", "value"]


@group.command("image")
def provenance_image(
    image_id: str = typer.Argument(..., help="The image id (NAME:VERSION)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Every version of an image record (registration, revocation)."""
    with session(home, org, as_json=as_json) as s:
        emit(
            guarded(lambda: s.client.image_history(image_id), as_json),
            as_json,
            f"history of image {image_id}",
            HISTORY,
        )


@group.command("process")
def provenance_process(
    process_id: str = typer.Argument(..., help="The process id."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The process's ledger events in order (timeline) from the audit index."""
    with session(home, org, as_json=as_json) as s:
        guarded(lambda: s.client.get_process(process_id), as_json)  # membership checked by the contract
        events = s.synced_index().events(process_id=process_id, limit=100_000)
        emit(events, as_json, f"timeline of {process_id}", ["block", "name", "subject", "tx_id"])


@group.command("execution")
def provenance_execution(
    process_id: str = typer.Argument(..., help="The process id."),
    round: int = typer.Argument(..., help="The round (from 1)."),
    organisation: str = typer.Argument(..., help="The organisation that ran it (name or MSP id)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Every version of one execution record (task registered, completed or failed)."""
    with session(home, org, as_json=as_json) as s:
        msp = s.msp(organisation)
        emit(
            guarded(lambda: s.client.execution_history(process_id, round, msp), as_json),
            as_json,
            f"history of {process_id}/{round}/{msp}",
            HISTORY,
        )


@group.command("artifacts")
def provenance_artifacts(
    process_id: str = typer.Argument(..., help="The process id."),
    organisation: str | None = typer.Option(None, "--by", help="Only this organisation's."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which artifacts each run published (or which ones organisation --by published) for a process."""
    with session(home, org, as_json=as_json) as s:
        guarded(lambda: s.client.get_process(process_id), as_json)
        rows = s.synced_index().published_artifacts(process_id, organisation and s.msp(organisation))
        emit(
            rows,
            as_json,
            f"artifacts published for {process_id}",
            ["round", "organisation", "kind", "recipient", "digest"],
        )


@group.command("artifact")
def provenance_artifact(
    digest: str = typer.Argument(..., help="The artifact's sha256:<64 hex> digest."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which executions produced and consumed an artifact."""
    check_digest(digest, as_json)
    with session(home, org, as_json=as_json) as s:
        emit({"digest": digest, **s.synced_index().artifact(digest)}, as_json, f"artifact {digest}")


@group.command("model")
def provenance_model(
    model_id: str = typer.Argument(..., help="The model id (PROCESS:MSP)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The lineage of a model: every execution it descends from and the artifacts between them."""
    with session(home, org, as_json=as_json) as s:
        guarded(lambda: s.client.get_model(model_id), as_json)
        lin = s.synced_index().lineage(model_id)
        if as_json:
            emit(lin, True)
            return
        say(
            f"lineage of {model_id}: {len(lin['nodes'])} executions, "
            f"{len(lin['edges'])} artifacts, image {lin['image_digest']}"
        )
        emit(lin["edges"], False, "", ["from", "to", "kind", "digest"])
