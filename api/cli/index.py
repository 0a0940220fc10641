"""``consortia index``: the off-chain audit index of this organisation's gateway."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import HomeOpt, JsonOpt, OrgOpt, console, emit
from api.cli.session import session

group = typer.Typer(no_args_is_help=True, help="The off-chain audit index: sync.")


@group.command("sync")
def index_sync(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Bring the audit index up to the ledger (resumes from the last indexed block)."""
    from rich.progress import Progress

    from api.follower import sync

    with session(home, org, as_json=as_json) as s:
        with Progress(console=console, disable=as_json) as bar:
            task = bar.add_task("indexing blocks", total=None)
            n = sync(s.index, s.client, progress=lambda b, h: bar.update(task, completed=b + 1, total=h))
        emit({"new_events": n, "last_block": s.index.last_block, **s.index.counts()}, as_json, "audit index")
