"""``consortia data``: your organisation's own datasets -- import a CSV/Parquet file, list them."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE, emit, fail, guarded
from api.cli.session import Session, journey

group = typer.Typer(
    no_args_is_help=True, help="Your organisation's own datasets: import a CSV/Parquet file, list."
)


@journey(group, "import")
def data_import(
    s: Session,
    file: Path = typer.Argument(..., help="A .csv or .parquet file: one row per example."),
    dataset: str = typer.Option(..., "--dataset", help="The name processes use (--dataset NAME)."),
    label: str | None = typer.Option(None, "--label", help="The label column (the rest are features)."),
    image: str | None = typer.Option(
        None, "--image", help="Check the file against what this image declares."
    ),
    replace: bool = typer.Option(False, help="Replace a dataset of that name."),
) -> None:
    """Import a CSV/Parquet file as one of your organisation's datasets (checked; all or nothing)."""
    from executor.data_import import DataImportError, import_dataset
    from executor.images.declarations import declaration

    decl = None
    if image is not None:
        decl = declaration(guarded(lambda: s.client.get_image(image), s.as_json).algorithm)
    try:
        done = import_dataset(s.layout.data(s.msp_id), dataset, file, label, decl, replace=replace)
    except DataImportError as exc:
        code = EXIT_NOT_FOUND if "no such file" in str(exc) else EXIT_USAGE
        fail(str(exc), code, s.as_json, kind=exc.code)
    emit({"organisation": s.msp_id, **done.to_dict()}, s.as_json, f"dataset {dataset} of {s.msp_id}")


@journey(group, "list")
def data_list(s: Session) -> None:
    """Your organisation's datasets (the names processes can use)."""
    from executor.data_import import list_datasets

    emit(
        list_datasets(s.layout.data(s.msp_id)),
        s.as_json,
        f"datasets of {s.msp_id}",
        ["dataset", "rows", "features", "label", "path"],
    )
