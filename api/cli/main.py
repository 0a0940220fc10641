"""The ``consortia`` command: the application, ``--version``, and one sub-command group per module."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli import (
    algorithm,
    artifacts,
    audit,
    data,
    governance,
    home,
    images,
    index,
    ledger,
    models,
    network,
    node,
    org,
    processes,
    provenance,
    services,
    tokens,
)
from api.cli.output import with_output

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Consortia: verifiable and auditable collaborative learning on a permissioned ledger.",
)


def version() -> str:
    """The installed package's version (the source tree's pyproject.toml when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("consortia")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


def _print_version(value: bool) -> None:
    if value:
        print(f"consortia {version()}")
        raise typer.Exit(0)


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Consortia: verifiable and auditable collaborative learning on a permissioned ledger."""


for _command in (home.demo, home.init, home.join, services.serve):
    app.command()(with_output(_command))
app.command("simulate")(with_output(algorithm.simulate))
for _module, _name in (
    (node, "node"),
    (artifacts, "artifacts"),
    (network, "network"),
    (ledger, "ledger"),
    (images, "image"),
    (processes, "process"),
    (provenance, "provenance"),
    (models, "model"),
    (audit, "audit"),
    (tokens, "token"),
    (index, "index"),
    (data, "data"),
    (org, "org"),
    (governance, "governance"),
    (algorithm, "algorithm"),
):
    app.add_typer(_module.group, name=_name)


def main(argv: list[str] | None = None) -> None:
    app(argv)
