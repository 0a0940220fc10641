"""``consortia token``: API tokens of this organisation's gateway (only their hashes are kept)."""

from __future__ import annotations

import typer

from api.cli.output import EXIT_NOT_FOUND, emit, fail
from api.cli.session import Session, journey

group = typer.Typer(
    no_args_is_help=True, help="API tokens of this organisation's gateway: issue, list, revoke."
)


@journey(group, "issue", user=True)
def token_issue(s: Session) -> None:
    """Issue an API token for a user of your organisation (shown once; only its hash is kept)."""
    try:
        s.consortium.identity(s.msp_id, s.user)  # the user must exist
    except (FileNotFoundError, StopIteration):
        raise typer.BadParameter(f"{s.user} has no identity in {s.msp_id}", param_hint="--user") from None
    token = s.gateway().tokens.issue(s.user)
    emit({"organisation": s.msp_id, "user": s.user, "token": token}, s.as_json, "API token (store it now)")


@journey(group, "list")
def token_list(s: Session) -> None:
    """Your organisation's API tokens (ids and users; the tokens themselves are never stored)."""
    emit(
        [o.__dict__ for o in s.gateway().tokens.owners()],
        s.as_json,
        "API tokens",
        ["token_id", "user", "created"],
    )


@journey(group, "revoke")
def token_revoke(
    s: Session,
    token_id: str = typer.Argument(..., help="The token id (`token list`)."),
) -> None:
    """Revoke an API token by its id."""
    if not s.gateway().tokens.revoke(token_id):
        fail(f"no token {token_id} in {s.msp_id}'s gateway", EXIT_NOT_FOUND, s.as_json, kind="NOT_FOUND")
    emit({"revoked": True, "token_id": token_id}, s.as_json)
