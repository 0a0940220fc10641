"""``consortia index``: the off-chain audit index of this organisation's gateway."""

from __future__ import annotations

import typer

from api.cli.output import console, emit
from api.cli.session import Session, journey

group = typer.Typer(no_args_is_help=True, help="The off-chain audit index: sync.")


@journey(group, "sync")
def index_sync(s: Session) -> None:
    """Bring the audit index up to the ledger (resumes from the last indexed block)."""
    from rich.progress import Progress

    from api.follower import sync

    with Progress(console=console, disable=s.as_json) as bar:
        task = bar.add_task("indexing blocks", total=None)
        n = sync(s.index, s.client, progress=lambda b, h: bar.update(task, completed=b + 1, total=h))
    emit({"new_events": n, "last_block": s.index.last_block, **s.index.counts()}, s.as_json, "audit index")
