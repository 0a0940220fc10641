"""The ``consortia`` command line (Typer + Rich).

Every user journey of docs/design.md plus operations (docs/api.md). ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Consortia: verifiable and auditable collaborative learning on a permissioned ledger.",
)
ledger_app = typer.Typer(no_args_is_help=True, help="The ledger itself: verify, checkpoint.")
app.add_typer(ledger_app, name="ledger")
console = Console()
err_console = Console(stderr=True, soft_wrap=True)
DIGEST_RE = r"^sha256:[0-9a-f]{64}$"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("consortia")
    except PackageNotFoundError:
        import tomllib

        return tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())[
            "project"
        ]["version"]


def _version_callback(value: bool) -> None:
    if value:
        print(f"consortia {_version()}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Consortia: verifiable and auditable collaborative learning on a permissioned ledger."""


def _table_console() -> Console:
    """Tables are printed at their natural width (never cut with "…"): ids and digests stay whole
    and can be copied; a terminal narrower than the table wraps the lines itself."""
    return Console(
        width=4000,
        force_terminal=console.is_terminal,
        color_system=console.color_system,
        no_color=console.no_color,
        highlight=False,
    )


# Exit codes (stable; docs/api.md "Command line"): 0 done; 1 refused or failed (a contract refusal,
# a failed verification or process); 2 bad input (usage, malformed value, unknown organisation,
# invalid data); 3 not found (no home, no ledger, no such file or artifact).
EXIT_REFUSED, EXIT_USAGE, EXIT_NOT_FOUND = 1, 2, 3


def fail(message: str, code: int = EXIT_USAGE, as_json: bool = False, kind: str = "error") -> None:
    """Report an error on stderr (JSON on stdout too with --json) and exit with ``code``."""
    if as_json:
        print(json.dumps({"ok": False, "code": kind, "message": message}))
    from rich.text import Text

    err_console.print(Text.assemble((str(kind), "red"), ": ", str(message)), highlight=False)
    raise typer.Exit(code)


@app.command()
def demo(
    out: Path = typer.Option(Path("demo-output"), help="Folder for the report, plots and ledger."),
    quick: bool = typer.Option(False, help="A smaller run (fewer rows and rounds)."),
    backend: str = typer.Option("embedded", help="Ledger host: embedded or fabric."),
    runtime: str = typer.Option("sandbox", help="Task runtime: sandbox (bubblewrap) or container (Podman)."),
) -> None:
    """Run a complete audited learning process among several organisations (the main job)."""
    from api.demo import run_demo

    raise typer.Exit(run_demo(out=out, quick=quick, backend=backend, runtime=runtime, console=console))


@app.command()
def init(
    orgs: str = typer.Option(..., "--orgs", help="Comma-separated organisation names, e.g. Org1,Org2,Org3."),
    home: Path | None = typer.Option(
        None, "--home", envvar="CONSORTIA_HOME", help="The new Consortia home (default ./consortia-home)."
    ),
    force: bool = typer.Option(False, help="Replace the consortium already in that home."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON output."),
) -> None:
    """Make a Consortia home: identities per organisation, consortia.toml, folders, an empty ledger."""
    from ledger.config import HomeError, init_home

    try:
        settings = init_home(home, orgs.split(","), force=force)
    except HomeError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind="init refused")
    layout = settings.paths
    info = {
        "home": str(settings.home),
        "config": str(layout.config),
        "organisations": list(settings.organisations),
        "default_organisation": settings.default_organisation,
        "crypto": str(layout.crypto),
        "ledger": str(layout.ledger),
        "data": str(layout.data_root),
        "artifacts": str(layout.store_root),
    }
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return
    console.print(
        f"consortium of {len(settings.organisations)} organisations in [bold]{settings.home}[/bold]: "
        f"{', '.join(settings.organisations)}",
        highlight=False,
    )
    for k in ("config", "crypto", "ledger", "data", "artifacts"):
        console.print(f"  {k:10} {info[k]}", highlight=False, markup=False)
    console.print(f"next: export CONSORTIA_HOME={settings.home}; consortia image build <name>", markup=False)


@ledger_app.command("verify")
def ledger_verify(
    path: Path = typer.Argument(..., help="The embedded ledger file."),
    crypto: Path = typer.Option(
        ..., help="The consortium's crypto directory (the only trusted certificates)."
    ),
    checkpoint: list[Path] = typer.Option(
        [],
        "--checkpoint",
        help="A file of signed chain-head "
        "checkpoints (ledger checkpoint, or an audit bundle's "
        "checkpoint.json); the chain must still reach and match each.",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Re-check every block hash and signature and replay the state of an embedded ledger.

    Opens the file read-only, trusts only the consortium's CA and orderer certificates, judges
    certificates at each block's timestamp, and detects truncation below any given checkpoint."""
    from ledger.checkpoint import load_checkpoints
    from ledger.embedded.verify import verify_ledger_file
    from ledger.errors import LedgerError
    from ledger.identity import Consortium

    def fail(exc: Exception, code: int) -> None:
        if as_json:
            print(json.dumps({"ok": False, "error": str(exc), "block": getattr(exc, "block_number", None)}))
        else:
            console.print(f"[red]ledger not verified:[/red] {exc}")
        raise typer.Exit(code)

    try:
        consortium = Consortium(crypto)
        cps = [cp for f in checkpoint for cp in load_checkpoints(f)]
    except (OSError, LedgerError) as exc:
        fail(exc, 2)
    try:
        stats = verify_ledger_file(path, consortium, cps)
    except LedgerError as exc:
        fail(exc, 1)
    if as_json:
        print(json.dumps({"ok": True, **stats}))
    else:
        console.print(
            f"[green]ledger verified[/green]: {stats['blocks']} blocks, "
            f"{stats['transactions']} transactions ({stats['valid_transactions']} valid)"
            + (f", reaches {stats['checkpoints']} checkpoint(s)" if cps else "")
        )


@ledger_app.command("checkpoint")
def ledger_checkpoint(
    path: Path = typer.Argument(..., help="The embedded ledger file."),
    crypto: Path = typer.Option(..., help="The consortium's crypto directory."),
    out: Path = typer.Option(..., help="Checkpoint file to append to (keep it outside the ledger)."),
    org: str | None = typer.Option(
        None, help="Sign as this organisation's admin (default: the orderer identity)."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Verify the ledger, then sign a checkpoint of its chain head (block number + header hash)
    and append it to a file (never vouch for a head that does not verify)."""
    from ledger.checkpoint import append_checkpoint, sign_checkpoint
    from ledger.embedded.verify import open_read_only, verify_ledger_file
    from ledger.errors import LedgerCorrupted, LedgerError
    from ledger.identity import Consortium

    try:
        consortium = Consortium(crypto)
        identity = consortium.identity(org, "Admin") if org else consortium.orderer_identity()
        try:
            verify_ledger_file(path, consortium)
        except LedgerCorrupted as exc:
            console.print(f"[red]not checkpointed: the ledger does not verify:[/red] {exc}")
            raise typer.Exit(1) from exc
        con = open_read_only(path)
        try:
            number, header_hash, body = con.execute(
                "SELECT number, header_hash, body FROM blocks ORDER BY number DESC LIMIT 1"
            ).fetchone()
            channel = json.loads(con.execute("SELECT body FROM blocks WHERE number = 0").fetchone()[0])[
                "config"
            ]["channel"]
        finally:
            con.close()
    except (OSError, StopIteration, KeyError, LedgerError) as exc:
        console.print(f"[red]cannot checkpoint:[/red] {exc}")
        raise typer.Exit(2) from exc
    cp = sign_checkpoint(identity, channel, number, header_hash)
    append_checkpoint(out, cp)
    if as_json:
        print(json.dumps(cp.to_json()))
    else:
        console.print(
            f"checkpoint of block {number} ({header_hash[:16]}…) signed by {identity.msp_id}, appended to {out}"
        )


# ---------------------------------------------------------------------------------------------
# The journeys (docs/design.md "Who uses it, for what"; docs/api.md): images, processes, provenance,
# models, audit, serve.
# Every command acts for one organisation (--org, default from $CONSORTIA_ORG) of the consortium in
# the Consortia home (--home, default $CONSORTIA_HOME); the identity comes from its certificate.

image_app = typer.Typer(
    no_args_is_help=True, help="Algorithm images: build, register, list, get, revoke, approve."
)
process_app = typer.Typer(
    no_args_is_help=True, help="Learning processes: create, list, get, start, abort, watch."
)
provenance_app = typer.Typer(
    no_args_is_help=True, help="Provenance history of images, processes, executions, artifacts, models."
)
model_app = typer.Typer(
    no_args_is_help=True,
    help="Final models: list, get (download), export, predict, grant, revoke, verify (lineage: `provenance model`).",
)
audit_app = typer.Typer(no_args_is_help=True, help="Offline audit bundles: export and verify.")
token_app = typer.Typer(no_args_is_help=True, help="API tokens of this organisation's gateway.")
index_app = typer.Typer(no_args_is_help=True, help="The off-chain audit index.")
data_app = typer.Typer(
    no_args_is_help=True, help="Your organisation's own datasets: import a CSV/Parquet file, list."
)
for _sub, _name in (
    (image_app, "image"),
    (process_app, "process"),
    (provenance_app, "provenance"),
    (model_app, "model"),
    (audit_app, "audit"),
    (token_app, "token"),
    (index_app, "index"),
    (data_app, "data"),
):
    app.add_typer(_sub, name=_name)

HomeOpt = typer.Option(None, "--home", envvar="CONSORTIA_HOME", help="The Consortia home directory.")
OrgOpt = typer.Option(
    None,
    "--org",
    envvar="CONSORTIA_ORG",
    help="The organisation acting (name or MSP id; default: the home's first organisation).",
)
UserOpt = typer.Option("User1", "--user", help="The user identity of the organisation.")
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON output.")


class _Session:
    """The ledger, identity, index and artifact store of one organisation, opened on demand."""

    def __init__(self, home: Path | None, org: str | None, user: str = "User1"):
        from ledger.config import HomeError, LedgerNotFound, load, open_ledger
        from ledger.identity import Consortium

        try:
            self.settings = load(home)
        except (HomeError, ValueError) as exc:
            fail(str(exc), EXIT_USAGE, kind="bad home")
        if self.settings.ledger_backend != "embedded":
            fail("the CLI reaches the embedded ledger; start a gateway for a Fabric network", EXIT_USAGE)
        if not (self.settings.crypto / Consortium.MANIFEST).exists():
            fail(
                f"no consortium at {self.settings.home} (no {self.settings.crypto / Consortium.MANIFEST}): "
                f"run `consortia init --home {self.settings.home} --orgs Org1,Org2,Org3` to make one",
                EXIT_NOT_FOUND,
                kind="no consortium",
            )
        self.consortium = Consortium(self.settings.crypto)
        org = org or self.settings.default_organisation or self.consortium.msp_ids[0]
        try:
            self.msp_id = self.consortium.organisation(org).msp_id
        except KeyError as exc:
            raise typer.BadParameter(str(exc).strip("'\""), param_hint="--org") from None
        self.user = user
        named = self.settings.identity_dir(self.msp_id)
        if user == "User1" and named is not None and not (named / "signcerts").is_dir():
            fail(
                f"no identity at {named} (named for {self.msp_id} in {self.settings.paths.config})",
                EXIT_NOT_FOUND,
                kind="no identity",
            )
        self._ledger = self._index = None
        try:  # never create a ledger by accident: a wrong --home is an error, not an empty ledger
            self._ledger = open_ledger(self.settings, self.consortium)
        except LedgerNotFound as exc:
            fail(str(exc), EXIT_NOT_FOUND, kind="no ledger")

    @property
    def ledger(self):
        return self._ledger

    @property
    def client(self):
        from ledger.client import ConsortiaClient
        from ledger.identity import Identity

        named = self.settings.identity_dir(self.msp_id) if self.user == "User1" else None
        identity = (
            Identity.from_msp_dir(self.msp_id, named)
            if named is not None
            else self.consortium.identity(self.msp_id, self.user)
        )
        return ConsortiaClient(self.ledger, identity)

    @property
    def gateway_home(self) -> Path:
        return self.settings.paths.gateway(self.msp_id)

    @property
    def index(self):
        if self._index is None:
            from api.index import AuditIndex

            self._index = AuditIndex(self.gateway_home / "index.db")
        return self._index

    def synced_index(self, quiet: bool = True):
        from api.follower import sync

        sync(self.index, self.client)
        return self.index

    def gateway(self, follow_interval: float = 0.25):
        from api.artifacts import ArtifactStore
        from api.gateway import Gateway
        from api.tokens import TokenStore

        return Gateway(
            ledger=self.ledger,
            consortium=self.consortium,
            msp_id=self.msp_id,
            index=self.index,
            tokens=TokenStore(self.gateway_home / "tokens.json", self.msp_id),
            artifacts=ArtifactStore.at(self.settings.paths.artifacts(self.msp_id)),
            follow_interval=follow_interval,
        )

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        if self._ledger is not None:
            self._ledger.close()


def _plain(obj):
    from dataclasses import is_dataclass

    from ledger.records import to_dict

    if is_dataclass(obj) and not isinstance(obj, type):
        return to_dict(obj)
    if isinstance(obj, (list, tuple)):
        return [_plain(o) for o in obj]
    return obj


def _emit(obj, as_json: bool, title: str = "", columns: list[str] | None = None) -> None:
    """Print ``obj`` as JSON (--json) or as a Rich table / key-value list."""
    from rich.table import Table
    from rich.text import Text

    obj = _plain(obj)
    if as_json:
        print(json.dumps(obj, indent=None, sort_keys=True, default=str))
        return
    if isinstance(obj, list):
        cols = columns or (list(obj[0])[:6] if obj else [])
        table = Table(title=Text(title) if title else None)
        for c in cols:
            table.add_column(c, no_wrap=True)
        for row in obj:
            table.add_row(*[Text(_cell(row.get(c))) for c in cols])
        _table_console().print(table)
        return
    table = Table(title=Text(title) if title else None, show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", no_wrap=True)
    for k, v in obj.items():
        table.add_row(str(k), Text(_cell(v)))  # Text: "[completed]" is shown, not read as markup
    _table_console().print(table)


def _cell(v) -> str:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return "" if v is None else str(v)


def _run(fn, as_json: bool):
    """Run a journey step; refusals become a message on stderr (and JSON on stdout with --json) and
    a stable exit code: contract NOT_FOUND 3, INVALID_ARGUMENT 2, any other refusal 1."""
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


def _digest(value: str, as_json: bool, what: str = "digest") -> str:
    """A malformed digest is a usage error (exit 2), never an empty result."""
    import re

    if not re.fullmatch(DIGEST_RE, value or ""):
        fail(
            f"{what} {value!r} is not sha256:<64 lower-case hex digits>",
            EXIT_USAGE,
            as_json,
            kind="INVALID_ARGUMENT",
        )
    return value


def _msp(s: _Session, org: str) -> str:
    """An organisation's MSP id from its name, MSP id or domain (unknown ones are left to the contract)."""
    return s.consortium.organisation(org).msp_id if _known(s, org) else org


def _known(s: _Session, org: str) -> bool:
    try:
        s.consortium.organisation(org)
        return True
    except KeyError:
        return False


def _session(home, org, user="User1") -> _Session:
    return _Session(home, org, user)


# ---- images
@image_app.command("register")
def image_register(
    name: str,
    version: str,
    digest: str = typer.Option(..., help="sha256:<64 hex> of the image."),
    algorithm: str = typer.Option(..., help="The algorithm the image runs."),
    reference: str = typer.Option("", help="Where the image can be pulled or built from."),
    description: str = "",
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Register an algorithm image built elsewhere (owner = your organisation); see also `image build`."""
    _digest(digest, as_json, "--digest")
    s = _session(home, org)
    try:
        _emit(
            _run(
                lambda: s.client.register_image(
                    name, version, algorithm, digest, reference, description=description
                ),
                as_json,
            ),
            as_json,
            "image registered",
        )
    finally:
        s.close()


@image_app.command("build")
def image_build(
    name: str = typer.Argument(..., help="A folder of algorithm-images/ (e.g. collab-rf) or a path."),
    runtime: str = typer.Option("sandbox", help="sandbox (bubblewrap bundle) or container (Podman)."),
    image_id: str | None = typer.Option(None, "--id", help="Image id (default NAME:VERSION of image.json)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Build an algorithm image, check its digest against what was built, and register it."""
    from executor.errors import ExecutorError
    from executor.image_build import build_and_register

    s = _session(home, org)
    try:
        try:
            with (
                err_console.status(f"building {name} ({runtime})...", spinner="dots")
                if not as_json
                else _nothing()
            ):
                done = _run(lambda: build_and_register(s.client, name, runtime, image_id), as_json)
        except ExecutorError as exc:
            fail(
                str(exc),
                EXIT_USAGE if "no image recipe" in str(exc) else EXIT_REFUSED,
                as_json,
                kind=exc.code,
            )
        _emit(
            done.to_dict(),
            as_json,
            "image built and registered" if done.registered else "image already registered",
        )
    finally:
        s.close()


def _nothing():
    import contextlib

    return contextlib.nullcontext()


@image_app.command("list")
def image_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Every registered algorithm image."""
    s = _session(home, org)
    try:
        _emit(
            _run(s.client.list_images, as_json),
            as_json,
            "images",
            ["id", "owner", "status", "digest", "created"],
        )
    finally:
        s.close()


@image_app.command("get")
def image_get(image_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """One image record: digest, algorithm, owner, status, approvals."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.get_image(image_id), as_json), as_json, f"image {image_id}")
    finally:
        s.close()


@image_app.command("revoke")
def image_revoke(
    image_id: str,
    reason: str = typer.Option("", help="Why it is revoked."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Revoke your image: no new process can pin it."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.revoke_image(image_id, reason), as_json), as_json, "image revoked")
    finally:
        s.close()


@image_app.command("approve")
def image_approve(
    image_id: str,
    digest: str = typer.Option(..., help="The digest you inspected."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Approve an image for your organisation, naming the digest you inspected."""
    _digest(digest, as_json, "--digest")
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.approve_image(image_id, digest), as_json), as_json, "image approved")
    finally:
        s.close()


# ---- processes
@process_app.command("create")
def process_create(
    process_id: str,
    image_id: str = typer.Option(..., "--image"),
    consortium: str = typer.Option(..., help="Comma-separated organisations (names or MSP ids)."),
    topology: str = typer.Option("ring", help="Topology kind."),
    seed: int = 0,
    rounds: int = typer.Option(..., min=1),
    hyperparameters: str = typer.Option("{}", help="JSON object."),
    epsilon: float | None = typer.Option(None, help="Privacy budget ε (with --mechanism)."),
    mechanism: str = "gaussian",
    start: bool = typer.Option(False, help="Start it right away."),
    dataset: str = typer.Option(
        "", help="The dataset name each member imported (`consortia data import`); default: 'default'."
    ),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Create (and optionally start) an audited learning process."""
    from executor.declarations import InvalidProcessSpec, validate_process

    try:
        hyper = json.loads(hyperparameters)
    except ValueError as exc:
        fail(f"--hyperparameters is not JSON: {exc}", EXIT_USAGE, as_json, kind="bad input")
    s = _session(home, org)
    try:
        members = [
            s.consortium.organisation(m.strip()).msp_id if _known(s, m.strip()) else m.strip()
            for m in consortium.split(",")
            if m.strip()
        ]
        image = _run(lambda: s.client.get_image(image_id), as_json)
        try:
            validate_process(image.algorithm, {"kind": topology, "seed": seed}, hyper, dataset)
        except InvalidProcessSpec as exc:
            fail(f"process {process_id} refused: {exc}", EXIT_USAGE, as_json, kind="INVALID_ARGUMENT")
        mine = s.settings.paths.data(s.msp_id) / (dataset or "default") / "dataset.npz"
        if s.msp_id in members and not mine.is_file():  # the others' data cannot be seen from here
            err_console.print(
                f"warning: {s.msp_id} has no dataset {dataset or 'default'!r} at {mine.parent} yet "
                f"(import it with `consortia data import`); its tasks fail until it does",
                markup=False,
                highlight=False,
            )
        budget = None if epsilon is None else {"mechanism": mechanism, "epsilon": epsilon}
        rec = _run(
            lambda: s.client.create_process(
                process_id,
                image_id,
                members,
                {"kind": topology, "seed": seed},
                rounds,
                hyper,
                budget,
                dataset,
            ),
            as_json,
        )
        if start:
            rec = _run(lambda: s.client.start_process(process_id), as_json)
        _emit(rec, as_json, "learning process")
    finally:
        s.close()


@process_app.command("list")
def process_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """The learning processes your organisation can see."""
    s = _session(home, org)
    try:
        _emit(
            _run(s.client.list_processes, as_json),
            as_json,
            "learning processes",
            ["id", "status", "creator", "rounds", "image_id", "consortium"],
        )
    finally:
        s.close()


@process_app.command("get")
def process_get(
    process_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """One process: image digest, consortium, topology, rounds, status and its reason."""
    s = _session(home, org)
    try:
        _emit(
            _run(lambda: s.client.get_process(process_id), as_json), as_json, f"learning process {process_id}"
        )
    finally:
        s.close()


@process_app.command("start")
def process_start(
    process_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Start a created process: the members' node agents begin round 1."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.start_process(process_id), as_json), as_json, "started")
    finally:
        s.close()


@process_app.command("abort")
def process_abort(
    process_id: str, reason: str = "", home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Abort a process you created, with a reason."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.abort_process(process_id, reason), as_json), as_json, "aborted")
    finally:
        s.close()


@process_app.command("watch")
def process_watch(
    process_id: str,
    timeout: float = typer.Option(600.0, help="Give up after this many seconds."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Follow a process round by round until it completes, fails or is aborted."""
    import time

    from rich.progress import BarColumn, Progress, TextColumn

    s = _session(home, org)
    try:
        process = _run(lambda: s.client.get_process(process_id), as_json)
        total = process.rounds * len(process.consortium)
        deadline = time.monotonic() + timeout
        with Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} tasks"),
            console=console,
            disable=as_json,
        ) as bar:
            task = bar.add_task(f"{process_id}", total=total)
            while True:
                execs = s.client.query_executions(process_id)
                done = sum(1 for e in execs if e.status == "completed")
                process = s.client.get_process(process_id)
                bar.update(
                    task,
                    completed=done,
                    description=f"{process_id} [{process.status}] round "
                    f"{min(process.current_round or 1, process.rounds)}",
                )
                if process.status in ("completed", "failed", "aborted") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        _emit(
            {
                "id": process_id,
                "status": process.status,
                "completed_tasks": done,
                "tasks": total,
                "reason": process.status_reason or "",
            },
            as_json,
        )
        raise typer.Exit(0 if process.status == "completed" else 1)
    finally:
        s.close()


# ---- provenance
@provenance_app.command("image")
def provenance_image(
    image_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Every version of an image record (registration, revocation)."""
    s = _session(home, org)
    try:
        _emit(
            _run(lambda: s.client.image_history(image_id), as_json),
            as_json,
            f"history of image {image_id}",
            ["tx_id", "timestamp", "value"],
        )
    finally:
        s.close()


@provenance_app.command("process")
def provenance_process(
    process_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """The process's ledger events in order (timeline) from the audit index."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_process(process_id), as_json)  # membership check by the contract
        events = s.synced_index().events(process_id=process_id, limit=100_000)
        _emit(events, as_json, f"timeline of {process_id}", ["block", "name", "subject", "tx_id"])
    finally:
        s.close()


@provenance_app.command("execution")
def provenance_execution(
    process_id: str,
    round: int,
    organisation: str,
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Every version of one execution record (task registered, completed or failed)."""
    s = _session(home, org)
    try:
        organisation = _msp(s, organisation)
        _emit(
            _run(lambda: s.client.execution_history(process_id, round, organisation), as_json),
            as_json,
            f"history of {process_id}/{round}/{organisation}",
            ["tx_id", "timestamp", "value"],
        )
    finally:
        s.close()


@provenance_app.command("artifacts")
def provenance_artifacts(
    process_id: str,
    organisation: str | None = typer.Option(None, "--by", help="Only this organisation's."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which artifacts each run published (or which ones organisation --by published) for a process."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_process(process_id), as_json)
        rows = s.synced_index().published_artifacts(process_id, organisation and _msp(s, organisation))
        _emit(
            rows,
            as_json,
            f"artifacts published for {process_id}",
            ["round", "organisation", "kind", "recipient", "digest"],
        )
    finally:
        s.close()


@provenance_app.command("artifact")
def provenance_artifact(
    digest: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Which executions produced and consumed an artifact."""
    _digest(digest, as_json)
    s = _session(home, org)
    try:
        _emit({"digest": digest, **s.synced_index().artifact(digest)}, as_json, f"artifact {digest}")
    finally:
        s.close()


@provenance_app.command("model")
def provenance_model(
    model_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """The lineage of a model: every execution it descends from and the artifacts between them."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_model(model_id), as_json)
        lin = s.synced_index().lineage(model_id)
        if as_json:
            _emit(lin, True)
        else:
            console.print(
                f"lineage of [bold]{model_id}[/bold]: {len(lin['nodes'])} executions, "
                f"{len(lin['edges'])} artifacts, image {lin['image_digest']}"
            )
            _emit(lin["edges"], False, "", ["from", "to", "kind", "digest"])
    finally:
        s.close()


# ---- models
@model_app.command("list")
def model_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Models whose access list includes your organisation."""
    s = _session(home, org)
    try:
        models = [
            {k: v for k, v in _plain(m).items() if k != "wrapped_key"}
            for m in _run(s.client.list_models, as_json)
        ]
        _emit(models, as_json, "models", ["id", "owner", "process_id", "digest", "access"])
    finally:
        s.close()


@model_app.command("get")
def model_get(
    model_id: str,
    out: Path | None = typer.Option(None, help="Download the model payload to this file."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show a model; with --out, download it (access checked, digests verified)."""
    from api.gateway import open_model_payload

    s = _session(home, org)
    try:
        rec = _plain(_run(lambda: s.client.get_model(model_id), as_json))
        info = {k: v for k, v in rec.items() if k != "wrapped_key"}
        if out is not None:
            from api.artifacts import ArtifactMissing, DigestMismatch

            try:
                data = open_model_payload(s.gateway(), rec)
            except (ArtifactMissing, DigestMismatch) as exc:
                fail(
                    str(exc),
                    EXIT_NOT_FOUND if isinstance(exc, ArtifactMissing) else EXIT_REFUSED,
                    as_json,
                    kind=type(exc).__name__,
                )
            out.write_bytes(data)
            info["downloaded_to"] = str(out)
        _emit(info, as_json, f"model {model_id}")
    finally:
        s.close()


@model_app.command("export")
def model_export(
    model_id: str,
    out: Path = typer.Option(..., help="New folder for the exported model."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Export a model in a standard format (scikit-learn joblib for forests, PyTorch state_dict for
    the VAE) with its digest, lineage reference and library versions in metadata.json."""
    from api.artifacts import ArtifactMissing, DigestMismatch
    from api.gateway import open_model_payload
    from api.model_export import ModelExportError, export_model

    s = _session(home, org)
    try:
        rec = _plain(_run(lambda: s.client.get_model(model_id), as_json))
        process = _run(lambda: s.client.get_process(rec["process_id"]), as_json)
        try:
            payload = open_model_payload(s.gateway(), rec)
        except (ArtifactMissing, DigestMismatch) as exc:
            fail(
                str(exc),
                EXIT_NOT_FOUND if isinstance(exc, ArtifactMissing) else EXIT_REFUSED,
                as_json,
                kind=type(exc).__name__,
            )
        schema_file = s.settings.paths.data(s.msp_id) / (process.dataset or "default") / "schema.json"
        schema = json.loads(schema_file.read_text()) if schema_file.is_file() else {}
        lineage = {
            "root_execution": f"{process.id}/{process.rounds}/{rec['owner']}",
            "image_id": process.image_id,
            "image_digest": rec.get("image_digest") or process.image_digest,
            "model_tx_id": rec.get("tx_id"),
            "dataset": process.dataset or "default",
            "verify": f"consortia model verify {model_id}",
        }
        try:
            done = export_model(
                payload,
                rec,
                out,
                features=schema.get("features"),
                label=schema.get("label"),
                classes=schema.get("classes"),
                lineage=lineage,
            )
        except ModelExportError as exc:
            fail(str(exc), EXIT_USAGE, as_json, kind=exc.code)
        _emit({"folder": str(done.folder), **done.metadata}, as_json, f"model {model_id} exported")
    finally:
        s.close()


@model_app.command("predict")
def model_predict(
    model: Path = typer.Argument(..., help="A folder written by `consortia model export`."),
    csv: Path = typer.Option(..., "--csv", help="Rows to score (the model's feature columns)."),
    as_json: bool = JsonOpt,
) -> None:
    """Score CSV rows with an exported forest: one line per row (score and decision)."""
    from api.model_export import ModelExportError, predict_csv

    if not (model / "metadata.json").is_file():
        fail(
            f"{model} is not an exported model (no metadata.json): run `consortia model export MODEL --out DIR`",
            EXIT_NOT_FOUND,
            as_json,
            kind="not found",
        )
    if not csv.is_file():
        fail(f"no such file {csv}", EXIT_NOT_FOUND, as_json, kind="not found")
    try:
        scores, decisions, meta = predict_csv(model, csv)
    except ModelExportError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind=exc.code)
    rows = [
        {"row": i + 1, "score": float(sc), "positive": int(d)}
        for i, (sc, d) in enumerate(zip(scores, decisions))
    ]
    if as_json:
        print(json.dumps({"model_id": meta["model_id"], "model_digest": meta["model_digest"], "rows": rows}))
    else:
        _emit(rows, False, f"{meta['model_id']} ({meta['decision']})", ["row", "score", "positive"])


@model_app.command("grant")
def model_grant(
    model_id: str, organisation: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Give another organisation access (its own sealed copy of the data key)."""
    from api.gateway import _data_key, model_key_info
    from ledger.envelope import seal

    s = _session(home, org)
    try:
        rec = _plain(_run(lambda: s.client.get_model(model_id), as_json))
        target = s.consortium.organisation(organisation).msp_id
        wrapped = seal(
            s.consortium.encryption_certificate(target), _data_key(s.gateway(), rec), model_key_info(rec)
        )
        _emit(
            {
                k: v
                for k, v in _plain(
                    _run(lambda: s.client.grant_model(model_id, target, wrapped), as_json)
                ).items()
                if k != "wrapped_key"
            },
            as_json,
            "access granted",
        )
    finally:
        s.close()


@model_app.command("revoke")
def model_revoke(
    model_id: str, organisation: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Take an organisation off the access list; the data key is rotated and the model re-encrypted."""
    s = _session(home, org)
    try:
        target = s.consortium.organisation(organisation).msp_id
        from api.artifacts import ArtifactMissing, DigestMismatch
        from api.gateway import revoke_with_rotation

        try:
            revoked = _run(lambda: revoke_with_rotation(s.gateway(), s.client, model_id, target), as_json)
        except (ArtifactMissing, DigestMismatch) as exc:  # the stored model cannot be re-encrypted
            fail(
                str(exc),
                EXIT_NOT_FOUND if isinstance(exc, ArtifactMissing) else EXIT_REFUSED,
                as_json,
                kind=type(exc).__name__,
            )
        _emit({k: v for k, v in _plain(revoked).items() if k != "wrapped_key"}, as_json, "access revoked")
    finally:
        s.close()


@model_app.command("verify")
def model_verify(
    model_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Re-check every signature and digest of the model's lineage against the ledger."""
    from api.verification import verify_model_on_ledger

    s = _session(home, org)
    try:
        report = _run(lambda: verify_model_on_ledger(s.client, s.synced_index(), model_id), as_json)
        _report(report, as_json)
    finally:
        s.close()


def _report(report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), sort_keys=True))
    else:
        for c in report.checks:
            mark = "[green]ok[/green]" if c["ok"] else "[red]FAILED[/red]"
            console.print(f"{mark} {c['check']}" + (f": {c['detail']}" if c["detail"] else ""))
        console.print(
            f"[bold]{'verified' if report.ok else 'VERIFICATION FAILED'}[/bold] "
            f"({len(report.checks)} checks, {len(report.failures)} failed)"
        )
    if not report.ok:
        raise typer.Exit(1)


# ---- audit bundles
@audit_app.command("export")
def audit_export(
    model_id: str,
    out: Path = typer.Option(..., help="New directory for the bundle."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write an offline audit bundle of a model: attestations, records with block hashes and
    transaction ids, certificates -- signed by your organisation."""
    from rich.progress import Progress

    from api.bundle import BundleError, export_bundle

    s = _session(home, org)
    try:
        signers = {}
        for o in s.consortium.organisations:  # organisations whose identities are on this machine
            try:
                signers[o.msp_id] = s.consortium.identity(o.msp_id)
            except (FileNotFoundError, StopIteration):
                pass
        cas = {
            o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes()
            for o in s.consortium.organisations
        }
        with Progress(console=console, disable=as_json) as bar:
            task = bar.add_task("attesting executions", total=None)
            summary = _run(
                lambda: export_bundle(
                    out,
                    s.client,
                    model_id,
                    signers=signers,
                    ca_certificates=cas,
                    index=s.synced_index(),
                    progress=lambda i, n: bar.update(task, completed=i, total=n),
                ),
                as_json,
            )
        _emit(summary, as_json, "audit bundle written")
    except BundleError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind="BundleError")
    finally:
        s.close()


@audit_app.command("verify")
def audit_verify(
    bundle: Path,
    ca: Path | None = typer.Option(
        None, help="Trusted CA certificates: a folder of <MSP>.pem, or a consortium's crypto folder."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Verify an audit bundle with no network and no ledger access."""
    from api.bundle import verify_bundle

    trusted = None
    if ca is not None:
        from ledger.identity import Consortium

        if (ca / Consortium.MANIFEST).is_file():  # a consortium's crypto folder (cryptogen layout)
            cons = Consortium(ca)
            trusted = {
                o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in cons.organisations
            }
        elif ca.is_dir():
            trusted = {p.stem: p.read_bytes() for p in sorted(ca.glob("*.pem"))}
        if not trusted:
            fail(
                f"{ca} holds no CA certificates (a folder of <MSP>.pem files or a consortium crypto folder)",
                EXIT_NOT_FOUND,
                as_json,
                kind="not found",
            )
    _report(verify_bundle(bundle, trusted), as_json)


# ---- data
@data_app.command("import")
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

    s = _session(home, org)
    try:
        decl = None
        if image is not None:
            decl = declaration(_run(lambda: s.client.get_image(image), as_json).algorithm)
        try:
            done = import_dataset(
                s.settings.paths.data(s.msp_id), dataset, file, label, decl, replace=replace
            )
        except DataImportError as exc:
            fail(
                str(exc), EXIT_NOT_FOUND if "no such file" in str(exc) else EXIT_USAGE, as_json, kind=exc.code
            )
        _emit({"organisation": s.msp_id, **done.to_dict()}, as_json, f"dataset {dataset} of {s.msp_id}")
    finally:
        s.close()


@data_app.command("list")
def data_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Your organisation's datasets (the names processes can use)."""
    from executor.data_import import list_datasets

    s = _session(home, org)
    try:
        _emit(
            list_datasets(s.settings.paths.data(s.msp_id)),
            as_json,
            f"datasets of {s.msp_id}",
            ["dataset", "rows", "features", "label", "path"],
        )
    finally:
        s.close()


# ---- tokens, index, serve
@token_app.command("issue")
def token_issue(
    home: Path | None = HomeOpt, org: str = OrgOpt, user: str = UserOpt, as_json: bool = JsonOpt
) -> None:
    """Issue an API token for a user of your organisation (shown once; only its hash is kept)."""
    s = _session(home, org, user)
    try:
        s.consortium.identity(s.msp_id, user)  # the user must exist
    except (FileNotFoundError, StopIteration):
        raise typer.BadParameter(f"{user} has no identity in {s.msp_id}") from None
    token = s.gateway().tokens.issue(user)
    _emit({"organisation": s.msp_id, "user": user, "token": token}, as_json, "API token (store it now)")


@token_app.command("list")
def token_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Your organisation's API tokens (ids and users; the tokens themselves are never stored)."""
    s = _session(home, org)
    _emit(
        [o.__dict__ for o in s.gateway().tokens.owners()],
        as_json,
        "API tokens",
        ["token_id", "user", "created"],
    )


@token_app.command("revoke")
def token_revoke(
    token_id: str, home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt
) -> None:
    """Revoke an API token by its id."""
    s = _session(home, org)
    ok = s.gateway().tokens.revoke(token_id)
    if not ok:
        fail(f"no token {token_id} in {s.msp_id}'s gateway", EXIT_NOT_FOUND, as_json, kind="NOT_FOUND")
    _emit({"revoked": ok, "token_id": token_id}, as_json)


@index_app.command("sync")
def index_sync(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Bring the audit index up to the ledger (resumes from the last indexed block)."""
    from rich.progress import Progress

    from api.follower import sync

    s = _session(home, org)
    try:
        with Progress(console=console, disable=as_json) as bar:
            task = bar.add_task("indexing blocks", total=None)
            n = sync(s.index, s.client, progress=lambda b, h: bar.update(task, completed=b + 1, total=h))
        _emit({"new_events": n, "last_block": s.index.last_block, **s.index.counts()}, as_json, "audit index")
    finally:
        s.close()


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    tls_cert: Path | None = typer.Option(None, help="Server TLS certificate (PEM)."),
    tls_key: Path | None = typer.Option(None, help="Server TLS key (PEM)."),
    mtls: bool = typer.Option(
        False, help="Also authenticate TLS client certificates of this organisation's users."
    ),
    require_client_cert: bool = typer.Option(False, help="With --mtls: refuse connections without one."),
) -> None:
    """Run this organisation's gateway: REST API, OpenAPI document at /docs, explorer at /explorer/."""
    import uvicorn

    from api.gateway import create_app

    s = _session(home, org)
    gw = s.gateway()
    extra = {}
    if mtls:
        if not (tls_cert and tls_key):
            raise typer.BadParameter("--mtls needs --tls-cert and --tls-key")
        from api.mtls import ssl_options

        gw.mtls = True
        extra = ssl_options(s.consortium, s.gateway_home, require_client_cert)
    if not gw.tokens.owners():
        console.print(f"[yellow]no API tokens yet[/yellow]: run `consortia token issue --org {s.msp_id}`")
    console.print(
        f"gateway of [bold]{s.msp_id}[/bold] on http{'s' if tls_cert else ''}://{host}:{port} "
        f"(explorer at /explorer/, OpenAPI at /docs)"
    )
    try:
        uvicorn.run(
            create_app(gw),
            host=host,
            port=port,
            log_level="info",
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
            **extra,
        )
    finally:
        s.close()


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def node(ctx: typer.Context) -> None:
    """This organisation's node agent: `consortia node run --org ORG --home H --runtime sandbox [--process ID]`
    (the executor's command line; `consortia node run --help` lists its options)."""
    from executor.node_agent import main as node_main

    raise typer.Exit(node_main(list(ctx.args)))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def network(ctx: typer.Context) -> None:
    """A native Hyperledger Fabric network: `consortia network up|down|deploy|status|logs …`
    (ledger.fabric.network; `consortia network --help` lists its options)."""
    from ledger.fabric.network import main as network_main

    raise typer.Exit(network_main(list(ctx.args)))


def main(argv: list[str] | None = None) -> None:
    app(argv)


if __name__ == "__main__":
    main()
