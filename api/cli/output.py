"""How every ``consortia`` command answers: stable exit codes, errors on stderr, tables or ``--json``.

The conventions are documented in docs/cli.md ("Conventions"); tests/api/test_cli_conventions.py holds
them.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from enum import StrEnum
from typing import Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

# Exit codes (stable; docs/cli.md "Exit codes").
EXIT_OK = 0
EXIT_REFUSED = 1  # a contract refusal (FORBIDDEN, CONFLICT...), a failed verification or process
EXIT_USAGE = 2  # bad input: usage, malformed value, unknown organisation, invalid data or process spec
EXIT_NOT_FOUND = 3  # no home, no ledger, no such file, record or artifact

DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
T = TypeVar("T")

# The options every journey command shares.
HomeOpt = typer.Option(None, "--home", envvar="CONSORTIA_HOME", help="The Consortia home directory.")
OrgOpt = typer.Option(
    None,
    "--org",
    envvar="CONSORTIA_ORG",
    help="The organisation acting (name or MSP id; default: the home's first organisation).",
)
UserOpt = typer.Option("User1", "--user", help="The user identity of the organisation.")
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON output.")


class Output(StrEnum):
    """``-o/--output``: kubectl's spelling of the output format."""

    table = "table"  # the chosen columns of a list (whole values, never cut)
    wide = "wide"  # every column of a list
    json = "json"  # one JSON line on stdout (``--json`` is its alias)


OutputOpt = typer.Option(
    None,
    "-o",
    "--output",
    help="Output format: table (default), wide (every column) or json (the same as --json).",
)

#: the running command's ``-o`` (set by :func:`with_output` for the length of the command)
current_output: ContextVar[Output] = ContextVar("consortia_output", default=Output.table)


def with_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command that takes ``as_json`` (``--json``, the alias of ``-o json``) the option
    ``-o/--output table|wide|json``; :func:`emit` prints its lists with every column under ``-o wide``."""
    sig = inspect.signature(fn, eval_str=True)
    output = inspect.Parameter(
        "output", inspect.Parameter.KEYWORD_ONLY, default=OutputOpt, annotation=Output | None
    )
    params = [*sig.parameters.values(), output]

    @functools.wraps(fn)
    def command(*args: Any, output: Output | None = None, **kwargs: Any) -> Any:
        if output is Output.json:
            kwargs["as_json"] = True
        token = current_output.set(Output.json if kwargs.get("as_json") else output or Output.table)
        try:
            return fn(*args, **kwargs)
        finally:
            current_output.reset(token)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def fail(
    message: str,
    code: int = EXIT_USAGE,
    as_json: bool = False,
    kind: str = "error",
    details: dict[str, Any] | None = None,
) -> NoReturn:
    """Report an error on stderr (and as ``{"ok": false, "code", "message", **details}`` on stdout with
    --json), then exit with ``code``."""
    if as_json:
        print(json.dumps({"ok": False, "code": kind, "message": message, **(details or {})}, default=str))
    err_console.print(Text.assemble((str(kind), "red"), ": ", str(message)), highlight=False)
    raise typer.Exit(code)


def guarded(fn: Callable[[], T], as_json: bool) -> T:
    """Run one journey step; a refusal becomes :func:`fail` with a stable exit code: contract
    NOT_FOUND 3, INVALID_ARGUMENT 2, any other contract refusal or ledger error 1."""
    from ledger.errors import ContractError, InvalidArgument, LedgerError, NotFound

    try:
        return fn()
    except ContractError as exc:
        code = (
            EXIT_NOT_FOUND
            if isinstance(exc, NotFound)
            else EXIT_USAGE
            if isinstance(exc, InvalidArgument)
            else EXIT_REFUSED
        )
        fail(exc.message, code, as_json, kind=exc.code)
    except LedgerError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind=type(exc).__name__)


def store_failure(exc: Exception, as_json: bool) -> NoReturn:
    """A stored payload that is missing or has no known location (3), or that does not match its digest,
    is refused or out of reach (1)."""
    fail(
        str(exc),
        EXIT_NOT_FOUND if isinstance(exc, LookupError) else EXIT_REFUSED,
        as_json,
        kind=type(exc).__name__,
    )


def check_digest(value: str, as_json: bool, what: str = "digest") -> str:
    """A malformed digest is a usage error (exit 2), never an empty result."""
    if not DIGEST_RE.fullmatch(value or ""):
        fail(
            f"{what} {value!r} is not sha256:<64 lower-case hex digits>",
            EXIT_USAGE,
            as_json,
            kind="INVALID_ARGUMENT",
        )
    return value


def plain(obj: Any) -> Any:
    """Records (:mod:`chaincode.records`) as dicts, recursively through lists."""
    from ledger.client import Record

    if isinstance(obj, Record):
        return obj.to_dict()
    if isinstance(obj, (list, tuple)):
        return [plain(o) for o in obj]
    return obj


def without_key(record: Any) -> dict[str, Any]:
    """A model record without its sealed data key (never printed)."""
    return {k: v for k, v in plain(record).items() if k != "wrapped_key"}


def table_console(like: Console | None = None) -> Console:
    """Tables are printed at their natural width (never cut with "…"): ids and digests stay whole
    and can be copied; a terminal narrower than the table wraps the lines itself. The console writes
    where ``like`` (default: stdout's console) writes, with its colours and quietness."""
    like = like or console
    return Console(
        file=like.file,
        width=4000,
        force_terminal=like.is_terminal,
        color_system=cast(Any, like.color_system),  # the same system as the console it stands for
        no_color=like.no_color,
        quiet=like.quiet,
        highlight=False,
    )


def cell(v: Any) -> str:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return "" if v is None else str(v)


def emit(obj: Any, as_json: bool, title: str = "", columns: list[str] | None = None) -> None:
    """Print ``obj`` as JSON (--json) or as a Rich table / key-value list. A list shows ``columns``
    (default: the first six fields), every field under ``-o wide``. Values are Rich ``Text``:
    "[completed]" is shown, not read as markup."""
    obj = plain(obj)
    if as_json:
        print(json.dumps(obj, indent=None, sort_keys=True, default=str))
        return
    if isinstance(obj, list):
        cols = columns or (list(obj[0])[:6] if obj else [])
        if current_output.get() is Output.wide:
            cols = list(dict.fromkeys([*cols, *(k for row in obj for k in row)]))
        table = Table(title=Text(title) if title else None)
        for c in cols:
            table.add_column(c, no_wrap=True)
        for row in obj:
            table.add_row(*[Text(cell(row.get(c))) for c in cols])
        table_console().print(table)
        return
    table = Table(title=Text(title) if title else None, show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", no_wrap=True)
    for k, v in obj.items():
        table.add_row(str(k), Text(cell(v)))
    table_console().print(table)


def say(message: str) -> None:
    """A human line on stdout, printed as it is (no markup, no highlighting)."""
    console.print(message, markup=False, highlight=False)


def report(result: Any, as_json: bool) -> None:
    """A verification report (checks, ok); exit 1 when it failed."""
    if as_json:
        print(json.dumps(result.to_dict(), sort_keys=True))
    else:
        for c in result.checks:
            mark = Text("ok", "green") if c["ok"] else Text("FAILED", "red")
            console.print(
                Text.assemble(mark, " ", c["check"], (f": {c['detail']}" if c["detail"] else "")),
                highlight=False,
            )
        console.print(
            Text(
                f"{'verified' if result.ok else 'VERIFICATION FAILED'} "
                f"({len(result.checks)} checks, {len(result.failures)} failed)",
                style="bold",
            )
        )
    if not result.ok:
        raise typer.Exit(EXIT_REFUSED)
