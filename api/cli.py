"""The ``consortia`` command line (Typer + Rich).

Every journey of DESIGN.md plus operations. ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Consortia: verifiable and auditable collaborative learning on a permissioned ledger.")
ledger_app = typer.Typer(no_args_is_help=True, help="The ledger itself: verify, inspect.")
app.add_typer(ledger_app, name="ledger")
console = Console()


@app.command()
def demo(out: Path = typer.Option(Path("demo-output"), help="Folder for the report, plots and ledger."),
         quick: bool = typer.Option(False, help="A smaller run (fewer rows and rounds)."),
         backend: str = typer.Option("embedded", help="Ledger host: embedded or fabric."),
         runtime: str = typer.Option("sandbox", help="Task runtime: sandbox, container or inprocess.")) -> None:
    """Run a complete audited learning process among several organisations (the main job)."""
    from api.demo import run_demo
    raise typer.Exit(run_demo(out=out, quick=quick, backend=backend, runtime=runtime, console=console))


@ledger_app.command("verify")
def ledger_verify(path: Path = typer.Argument(..., help="The embedded ledger file."),
                  crypto: Path = typer.Option(..., help="The consortium's crypto directory."),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """Re-check every block hash and signature and replay the state of an embedded ledger."""
    from ledger.embedded import EmbeddedLedger
    from ledger.errors import LedgerCorrupted
    from ledger.identity import Consortium
    if not path.exists():
        console.print(f"[red]no ledger at {path}[/red]")
        raise typer.Exit(2)
    with EmbeddedLedger(path, Consortium(crypto)) as led:
        try:
            stats = led.verify()
        except LedgerCorrupted as exc:
            if as_json:
                print(json.dumps({"ok": False, "error": str(exc), "block": exc.block_number}))
            else:
                console.print(f"[red]ledger corrupted:[/red] {exc}")
            raise typer.Exit(1)
    if as_json:
        print(json.dumps({"ok": True, **stats}))
    else:
        console.print(f"[green]ledger verified[/green]: {stats['blocks']} blocks, "
                      f"{stats['transactions']} transactions ({stats['valid_transactions']} valid)")


def main(argv: Optional[list[str]] = None) -> None:
    app(argv)


if __name__ == "__main__":
    main()
