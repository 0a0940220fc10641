"""``consortia algorithm new|check`` and ``consortia simulate``: write your own algorithm outside this
repository, check its contract, simulate it on local files (docs/sdk.md "Write, check, simulate")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from api.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_USAGE,
    JsonOpt,
    Output,
    current_output,
    emit,
    err_console,
    fail,
    with_output,
)

group = typer.Typer(
    no_args_is_help=True, help="Your own algorithm: new (from a template), check (its contract)."
)
FolderArg = typer.Argument(..., help="The algorithm folder (image.json, its module, requirements, tests).")
HyperOpt = typer.Option(
    None, "--hyperparameters", help="JSON object overriding the defaults of image.json's parameters."
)


def _hyper(text: str | None, as_json: bool) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"--hyperparameters is not JSON: {exc}", EXIT_USAGE, as_json, kind="bad input")
    if not isinstance(value, dict):
        fail("--hyperparameters must be a JSON object", EXIT_USAGE, as_json, kind="bad input")
    return value


def _folder(path: Path, as_json: bool) -> Path:
    if not (path / "image.json").is_file():
        fail(f"{path} is not an algorithm folder (no image.json)", EXIT_NOT_FOUND, as_json, kind="not found")
    return path


def _under_profile() -> None:
    """Re-execute under the images' numeric profile unless already under it: the simulator computes
    with the kernels the tasks compute with (docs/reproducibility.md)."""
    from algorithms.numeric_profile import reexec_selected

    reexec_selected()


@group.command("new")
@with_output
def algorithm_new(
    name: str = typer.Argument(..., help="The algorithm's name (lower-case words and '-', e.g. fraud-mlp)."),
    template: str = typer.Option(..., "--template", help="sklearn (logistic regression) or torch (an MLP)."),
    directory: Path = typer.Option(Path("."), "--dir", help="Where the folder NAME is made."),
    as_json: bool = JsonOpt,
) -> None:
    """Write a working algorithm folder from a template: image.json (SDK version, declared input,
    hyper-parameter schema, runtimes, numeric profile), the module, pinned requirements, a README and a
    test that it learns and is deterministic."""
    from api.algorithm_kit.scaffold import ScaffoldError, new_folder

    try:
        done = new_folder(name, template, directory)
    except ScaffoldError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="bad input")
    except OSError as exc:
        fail(f"cannot write the folder: {exc}", EXIT_REFUSED, as_json, kind=type(exc).__name__)
    emit(done.to_dict(), as_json, f"algorithm folder {done.folder}")
    if not as_json:
        err_console.print(
            f"next: cd {done.folder} && python -m pytest tests && consortia algorithm check .",
            markup=False,
            highlight=False,
        )


@group.command("check")
@with_output
def algorithm_check(
    path: Path = FolderArg,
    data: Path | None = typer.Option(
        None, "--data", help="One CSV/Parquet file per organisation (default: synthetic data as declared)."
    ),
    label: str = typer.Option("label", "--label", help="The label column of --data files."),
    rounds: int = typer.Option(3, min=1, help="Rounds of each of the two runs."),
    seed: int = typer.Option(7, help="The process seed of the runs."),
    hyperparameters: str | None = HyperOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check the folder's algorithm as its image loads it, run twice on data matching its declared input:
    identical bytes, parameters rebuild it, payloads encode and fit its declaration, messages only to
    neighbours, declared inputs honoured; a clock, an unseeded generator or the network is named with its
    line (exit 1 with the failures)."""
    from api.algorithm_kit.contract import check_folder
    from api.algorithm_kit.local_run import LocalRunError, read_organisations
    from executor.errors import ExecutorError
    from executor.images.declarations import ImageDeclaration

    _folder(path, as_json)
    hyper = _hyper(hyperparameters, as_json)
    _under_profile()
    rows = None
    if data is not None:
        try:
            decl = ImageDeclaration.from_folder(path.resolve())
            rows = read_organisations(data, label, decl)
        except (LocalRunError, ExecutorError) as exc:
            fail(str(exc), EXIT_USAGE, as_json, kind="bad input")
    report = check_folder(path, data=rows, rounds=rounds, seed=seed, hyperparameters=hyper)
    if as_json:
        print(json.dumps(report.to_dict(), sort_keys=True))
    else:
        rows_out = [
            {"check": c.check, "result": "pass" if c.ok else "FAIL", "reason": c.detail}
            for c in report.checks
        ]
        emit(rows_out, False, f"algorithm check {report.folder}", ["check", "result", "reason"])
        failed = len(report.failures)
        err_console.print(
            f"{len(report.checks)} checks, {failed} failed" + ("" if failed else ": ready to build"),
            markup=False,
            highlight=False,
        )
    if not report.ok:
        raise typer.Exit(EXIT_REFUSED)


def simulate(
    path: Path = FolderArg,
    data: Path = typer.Option(..., "--data", help="One CSV/Parquet file per organisation, named by it."),
    topology: str = typer.Option(..., "--topology", help="KIND[,k=v...], e.g. ring or random_link,links=2."),
    rounds: int = typer.Option(..., "--rounds", min=1, help="Number of rounds."),
    seed: int = typer.Option(0, "--seed", help="The process seed (also the topology's)."),
    label: str = typer.Option("label", "--label", help="The label column (the rest are features)."),
    validation_fraction: float = typer.Option(
        0.0, "--validation-fraction", min=0.0, max=0.99, help="Each member's validation slice (0: none)."
    ),
    hyperparameters: str | None = HyperOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run the folder's algorithm in the in-memory simulator on local files, under the platform's numeric
    profile: per-organisation metrics of the last round (every round with -o wide) and the final model
    digests, those an audited process of the same data and seed records."""
    from algorithms.numeric_profile import NumericProfileError
    from algorithms.simulator import ProtocolViolation
    from algorithms.topologies.registry import TopologyError
    from algorithms.validation import ValidationSliceError, ValidationUnsupported
    from api.algorithm_kit.folder import FolderError
    from api.algorithm_kit.local_run import LocalRunError, run_folder
    from executor.errors import ExecutorError

    _folder(path, as_json)
    hyper = _hyper(hyperparameters, as_json)
    _under_profile()
    try:
        done = run_folder(
            path,
            data,
            topology=topology,
            rounds=rounds,
            seed=seed,
            label=label,
            validation_fraction=validation_fraction,
            hyperparameters=hyper,
        )
    except (LocalRunError, TopologyError, ValidationSliceError, ValidationUnsupported, ExecutorError) as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="bad input")
    except (FolderError, ProtocolViolation, NumericProfileError) as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind=type(exc).__name__)
    if as_json:
        print(json.dumps(done.to_dict(), sort_keys=True, default=str))
        return
    if current_output.get() is Output.wide:
        every = done.every_round()
        emit(every, False, "metrics, every round", list(dict.fromkeys(k for row in every for k in row)))
    last = done.last_metrics()
    title = f"round {rounds} of {len(done.result.consortium)} organisations"
    emit(last, False, title, list(dict.fromkeys(k for row in last for k in row)))
    profile = done.result.numeric_profile
    err_console.print(
        f"topology {done.topology}, seed {seed}, numeric profile "
        + (f"{profile['name']}/{profile['version']}" if profile else "host (this machine's kernels)"),
        markup=False,
        highlight=False,
    )
