"""``consortia token``: API tokens of this organisation's gateway (only their hashes are kept)."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, HomeOpt, JsonOpt, OrgOpt, UserOpt, emit, fail
from api.cli.session import session

group = typer.Typer(
    no_args_is_help=True, help="API tokens of this organisation's gateway: issue, list, revoke."
)


@group.command("issue")
def token_issue(
    home: Path | None = HomeOpt, org: str = OrgOpt, user: str = UserOpt, as_json: bool = JsonOpt
) -> None:
    """Issue an API token for a user of your organisation (shown once; only its hash is kept)."""
    with session(home, org, user, as_json=as_json) as s:
        try:
            s.consortium.identity(s.msp_id, user)  # the user must exist
        except (FileNotFoundError, StopIteration):
            raise typer.BadParameter(f"{user} has no identity in {s.msp_id}", param_hint="--user") from None
        token = s.gateway().tokens.issue(user)
        emit({"organisation": s.msp_id, "user": user, "token": token}, as_json, "API token (store it now)")


@group.command("list")
def token_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Your organisation's API tokens (ids and users; the tokens themselves are never stored)."""
    with session(home, org, as_json=as_json) as s:
        emit(
            [o.__dict__ for o in s.gateway().tokens.owners()],
            as_json,
            "API tokens",
            ["token_id", "user", "created"],
        )


@group.command("revoke")
def token_revoke(
    token_id: str = typer.Argument(..., help="The token id (`token list`)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Revoke an API token by its id."""
    with session(home, org, as_json=as_json) as s:
        if not s.gateway().tokens.revoke(token_id):
            fail(f"no token {token_id} in {s.msp_id}'s gateway", EXIT_NOT_FOUND, as_json, kind="NOT_FOUND")
        emit({"revoked": True, "token_id": token_id}, as_json)
