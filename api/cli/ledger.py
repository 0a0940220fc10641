"""``consortia ledger``: check an embedded ledger file offline, and sign checkpoints of its head."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer
from rich.text import Text

from api.cli.output import EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_USAGE, JsonOpt, console, fail, with_output

group = typer.Typer(no_args_is_help=True, help="The ledger itself: verify, checkpoint.")


def _not_verified(exc: Exception, code: int, as_json: bool, what: str = "ledger not verified") -> NoReturn:
    details = {"error": str(exc), "block": getattr(exc, "block_number", None)}
    fail(str(exc), code, as_json, kind=what, details=details)


def _existing(path: Path, as_json: bool, what: str) -> Path:
    """The ledger file; a path with no file is "not found" (exit 3, docs/cli.md), never a new ledger."""
    if not path.is_file():
        _not_verified(FileNotFoundError(f"no ledger file at {path}"), EXIT_NOT_FOUND, as_json, what)
    return path


@group.command("verify")
@with_output
def ledger_verify(
    path: Path = typer.Argument(..., help="The embedded ledger file."),
    crypto: Path = typer.Option(
        ..., help="The consortium's crypto directory (the only trusted certificates)."
    ),
    checkpoint: list[Path] = typer.Option(
        [],
        "--checkpoint",
        help="A file of signed chain-head checkpoints (ledger checkpoint, or an audit bundle's "
        "checkpoint.json); the chain must still reach and match each.",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Re-check every block hash and signature and replay the state of an embedded ledger.

    Opens the file read-only, trusts only the consortium's CA and orderer certificates, judges
    certificates at each block's timestamp, and detects truncation below any given checkpoint
    (exit 1 when it does not verify, 2 when the crypto or a checkpoint file cannot be read, 3 when
    there is no ledger file)."""
    from audit.ledger_file import verify_ledger_file
    from ledger.checkpoint import load_checkpoints
    from ledger.errors import LedgerError
    from ledger.identity import Consortium

    _existing(path, as_json, "ledger not verified")
    try:
        consortium = Consortium(crypto)
        cps = [cp for f in checkpoint for cp in load_checkpoints(f)]
    except (OSError, LedgerError) as exc:
        _not_verified(exc, EXIT_USAGE, as_json)
    try:
        stats = verify_ledger_file(path, consortium, cps)
    except LedgerError as exc:
        _not_verified(exc, EXIT_REFUSED, as_json)
    if as_json:
        print(json.dumps({"ok": True, **stats}))
        return
    console.print(
        Text.assemble(
            ("ledger verified", "green"),
            f": {stats['blocks']} blocks, {stats['transactions']} transactions "
            f"({stats['valid_transactions']} valid)"
            + (f", reaches {stats['checkpoints']} checkpoint(s)" if cps else ""),
        )
    )


def _head(path: Path) -> tuple[int, str, str]:
    """(number, header hash, channel) of the last block of an embedded ledger file (read-only)."""
    from audit.ledger_file import open_read_only

    con = open_read_only(path)
    try:
        number, header_hash = con.execute(
            "SELECT number, header_hash FROM blocks ORDER BY number DESC LIMIT 1"
        ).fetchone()
        genesis = json.loads(con.execute("SELECT body FROM blocks WHERE number = 0").fetchone()[0])
        return number, header_hash, genesis["config"]["channel"]
    finally:
        con.close()


@group.command("checkpoint")
@with_output
def ledger_checkpoint(
    path: Path = typer.Argument(..., help="The embedded ledger file."),
    crypto: Path = typer.Option(..., help="The consortium's crypto directory."),
    out: Path = typer.Option(..., help="Checkpoint file to append to (keep it outside the ledger)."),
    org: str | None = typer.Option(
        None, help="Sign as this organisation's admin (default: the orderer identity)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Verify the ledger, then sign a checkpoint of its chain head (block number + header hash)
    and append it to a file (never vouch for a head that does not verify)."""
    from audit.ledger_file import verify_ledger_file
    from ledger.checkpoint import append_checkpoint, sign_checkpoint
    from ledger.errors import LedgerCorrupted, LedgerError
    from ledger.identity import Consortium

    _existing(path, as_json, "cannot checkpoint")
    try:
        consortium = Consortium(crypto)
        identity = consortium.identity(org, "Admin") if org else consortium.orderer_identity()
        try:
            verify_ledger_file(path, consortium)
        except LedgerCorrupted as exc:
            _not_verified(exc, EXIT_REFUSED, as_json, "not checkpointed: the ledger does not verify")
        number, header_hash, channel = _head(path)
    except (OSError, StopIteration, KeyError, TypeError, LedgerError) as exc:
        _not_verified(exc, EXIT_USAGE, as_json, "cannot checkpoint")
    cp = sign_checkpoint(identity, channel, number, header_hash)
    append_checkpoint(out, cp)
    if as_json:
        print(json.dumps(cp.to_json()))
    else:
        console.print(
            f"checkpoint of block {number} ({header_hash[:16]}…) signed by {identity.msp_id}, appended to {out}",
            markup=False,
            highlight=False,
        )
