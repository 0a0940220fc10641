"""``consortia provenance``: the history of images, processes, executions, artifacts and models."""

from __future__ import annotations

import typer

from api.cli.output import check_digest, emit, guarded, say
from api.cli.session import Session, journey

group = typer.Typer(
    no_args_is_help=True, help="Provenance history of images, processes, executions, artifacts, models."
)
HISTORY = ["tx_id", "timestamp", "value"]
ProcessArg = typer.Argument(..., help="The process id.")


@journey(group, "image")
def provenance_image(
    s: Session, image_id: str = typer.Argument(..., help="The image id (NAME:VERSION).")
) -> None:
    """Every version of an image record (registration, revocation)."""
    history = guarded(lambda: s.client.image_history(image_id), s.as_json)
    emit(history, s.as_json, f"history of image {image_id}", HISTORY)


@journey(group, "process")
def provenance_process(s: Session, process_id: str = ProcessArg) -> None:
    """The process's ledger events in order (timeline) from the audit index."""
    guarded(lambda: s.client.get_process(process_id), s.as_json)  # membership checked by the contract
    events = s.synced_index().events(process_id=process_id, limit=100_000)
    emit(events, s.as_json, f"timeline of {process_id}", ["block", "name", "subject", "tx_id"])


@journey(group, "execution")
def provenance_execution(
    s: Session,
    process_id: str = ProcessArg,
    round: int = typer.Argument(..., help="The round (from 1)."),
    organisation: str = typer.Argument(..., help="The organisation that ran it (name or MSP id)."),
) -> None:
    """Every version of one execution record (task registered, completed or failed)."""
    msp = s.msp(organisation)
    history = guarded(lambda: s.client.execution_history(process_id, round, msp), s.as_json)
    emit(history, s.as_json, f"history of {process_id}/{round}/{msp}", HISTORY)


@journey(group, "artifacts")
def provenance_artifacts(
    s: Session,
    process_id: str = ProcessArg,
    organisation: str | None = typer.Option(None, "--by", help="Only this organisation's."),
) -> None:
    """Which artifacts each run published (or which ones organisation --by published) for a process."""
    guarded(lambda: s.client.get_process(process_id), s.as_json)
    rows = s.synced_index().published_artifacts(process_id, organisation and s.msp(organisation))
    columns = ["round", "organisation", "kind", "recipient", "digest"]
    emit(rows, s.as_json, f"artifacts published for {process_id}", columns)


@journey(group, "artifact")
def provenance_artifact(
    s: Session, digest: str = typer.Argument(..., help="The artifact's sha256:<64 hex> digest.")
) -> None:
    """Which executions produced and consumed an artifact."""
    check_digest(digest, s.as_json)
    emit({"digest": digest, **s.synced_index().artifact(digest)}, s.as_json, f"artifact {digest}")


@journey(group, "model")
def provenance_model(
    s: Session,
    model_id: str = typer.Argument(..., help="The model id (PROCESS:ORG, ORG a name or an MSP id)."),
) -> None:
    """The lineage of a model: every execution it descends from and the artifacts between them."""
    guarded(lambda: s.client.get_model(model_id), s.as_json)
    lin = s.synced_index().lineage(model_id)
    if s.as_json:
        emit(lin, True)
        return
    say(
        f"lineage of {model_id}: {len(lin['nodes'])} executions, "
        f"{len(lin['edges'])} artifacts, image {lin['image_digest']}"
    )
    emit(lin["edges"], False, "", ["from", "to", "kind", "digest"])
