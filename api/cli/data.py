"""``consortia data``: your organisation's own datasets -- import a CSV/Parquet file, list them."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE, HomeOpt, JsonOpt, OrgOpt, emit, fail, guarded
from api.cli.session import session

group = typer.Typer(
    no_args_is_help=True, help="Your organisation's own datasets: import a CSV/Parquet file, list."
)


@group.command("import")
def data_import(
    file: Path = typer.Argument(..., help="A .csv or .parquet file: one row per example."),
    dataset: str = typer.Option(..., "--dataset", help="The name processes use (--dataset NAME)."),
    label: str | None = typer.Option(None, "--label", help="The label column (the rest are features)."),
    image: str | None = typer.Option(
        None, "--image", help="Check the file against what this image declares."
    ),
    replace: bool = typer.Option(False, help="Replace a dataset of that name."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Import a CSV/Parquet file as one of your organisation's datasets (checked; all or nothing)."""
    from executor.data_import import DataImportError, import_dataset
    from executor.declarations import declaration

    with session(home, org, as_json=as_json) as s:
        decl = None
        if image is not None:
            decl = declaration(guarded(lambda: s.client.get_image(image), as_json).algorithm)
        try:
            done = import_dataset(s.layout.data(s.msp_id), dataset, file, label, decl, replace=replace)
        except DataImportError as exc:
            code = EXIT_NOT_FOUND if "no such file" in str(exc) else EXIT_USAGE
            fail(str(exc), code, as_json, kind=exc.code)
        emit({"organisation": s.msp_id, **done.to_dict()}, as_json, f"dataset {dataset} of {s.msp_id}")


@group.command("list")
def data_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Your organisation's datasets (the names processes can use)."""
    from executor.data_import import list_datasets

    with session(home, org, as_json=as_json) as s:
        emit(
            list_datasets(s.layout.data(s.msp_id)),
            as_json,
            f"datasets of {s.msp_id}",
            ["dataset", "rows", "features", "label", "path"],
        )
