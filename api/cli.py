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
         runtime: str = typer.Option("sandbox", help="Task runtime: sandbox (bubblewrap) or container (Podman).")) -> None:
    """Run a complete audited learning process among several organisations (the main job)."""
    from api.demo import run_demo
    raise typer.Exit(run_demo(out=out, quick=quick, backend=backend, runtime=runtime, console=console))


@ledger_app.command("verify")
def ledger_verify(path: Path = typer.Argument(..., help="The embedded ledger file."),
                  crypto: Path = typer.Option(..., help="The consortium's crypto directory (the only trusted certificates)."),
                  checkpoint: list[Path] = typer.Option([], "--checkpoint", help="A file of signed chain-head "
                                                        "checkpoints (ledger checkpoint, or an audit bundle's "
                                                        "checkpoint.json); the chain must still reach and match each."),
                  as_json: bool = typer.Option(False, "--json")) -> None:
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
        console.print(f"[green]ledger verified[/green]: {stats['blocks']} blocks, "
                      f"{stats['transactions']} transactions ({stats['valid_transactions']} valid)"
                      + (f", reaches {stats['checkpoints']} checkpoint(s)" if cps else ""))


@ledger_app.command("checkpoint")
def ledger_checkpoint(path: Path = typer.Argument(..., help="The embedded ledger file."),
                      crypto: Path = typer.Option(..., help="The consortium's crypto directory."),
                      out: Path = typer.Option(..., help="Checkpoint file to append to (keep it outside the ledger)."),
                      org: Optional[str] = typer.Option(None, help="Sign as this organisation's admin "
                                                                   "(default: the orderer identity)."),
                      as_json: bool = typer.Option(False, "--json")) -> None:
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
            raise typer.Exit(1)
        con = open_read_only(path)
        try:
            number, header_hash, body = con.execute(
                "SELECT number, header_hash, body FROM blocks ORDER BY number DESC LIMIT 1").fetchone()
            channel = json.loads(con.execute("SELECT body FROM blocks WHERE number = 0").fetchone()[0])["config"]["channel"]
        finally:
            con.close()
    except (OSError, StopIteration, KeyError, LedgerError) as exc:
        console.print(f"[red]cannot checkpoint:[/red] {exc}")
        raise typer.Exit(2)
    cp = sign_checkpoint(identity, channel, number, header_hash)
    append_checkpoint(out, cp)
    if as_json:
        print(json.dumps(cp.to_json()))
    else:
        console.print(f"checkpoint of block {number} ({header_hash[:16]}…) signed by {identity.msp_id}, appended to {out}")


# ---------------------------------------------------------------------------------------------
# The journeys (DESIGN.md "Gateway, CLI, web"): images, processes, provenance, models, audit, serve.
# Every command acts for one organisation (--org, default from $CONSORTIA_ORG) of the consortium in
# the Consortia home (--home, default $CONSORTIA_HOME); the identity comes from its certificate.

image_app = typer.Typer(no_args_is_help=True, help="Algorithm images: register, list, get, revoke, approve.")
process_app = typer.Typer(no_args_is_help=True, help="Learning processes: create, list, get, start, abort, watch.")
provenance_app = typer.Typer(no_args_is_help=True, help="Provenance history of images, processes, executions, artifacts, models.")
model_app = typer.Typer(no_args_is_help=True, help="Final models: list, get (download), grant, revoke, lineage, verify.")
audit_app = typer.Typer(no_args_is_help=True, help="Offline audit bundles: export and verify.")
token_app = typer.Typer(no_args_is_help=True, help="API tokens of this organisation's gateway.")
index_app = typer.Typer(no_args_is_help=True, help="The off-chain audit index.")
for _sub, _name in ((image_app, "image"), (process_app, "process"), (provenance_app, "provenance"),
                    (model_app, "model"), (audit_app, "audit"), (token_app, "token"), (index_app, "index")):
    app.add_typer(_sub, name=_name)

HomeOpt = typer.Option(None, "--home", envvar="CONSORTIA_HOME", help="The Consortia home directory.")
OrgOpt = typer.Option("Org1", "--org", envvar="CONSORTIA_ORG", help="The organisation acting (name or MSP id).")
UserOpt = typer.Option("User1", "--user", help="The user identity of the organisation.")
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON output.")


class _Session:
    """The ledger, identity, index and artifact store of one organisation, opened on demand."""

    def __init__(self, home: Optional[Path], org: str, user: str = "User1"):
        from ledger.config import load
        from ledger.identity import Consortium
        self.settings = load(home)
        if self.settings.ledger_backend != "embedded":
            raise typer.BadParameter("the CLI reaches the embedded ledger; start a gateway for a Fabric network")
        if not self.settings.crypto.exists():
            raise typer.BadParameter(f"no consortium crypto at {self.settings.crypto} (run `consortia demo` or generate one)")
        self.consortium = Consortium(self.settings.crypto)
        try:
            self.msp_id = self.consortium.organisation(org).msp_id
        except KeyError as exc:
            raise typer.BadParameter(str(exc)) from None
        self.user = user
        self._ledger = self._index = None

    @property
    def ledger(self):
        if self._ledger is None:
            from ledger.embedded import EmbeddedLedger
            self._ledger = EmbeddedLedger(self.settings.ledger_path, self.consortium, policy=self.settings.policy,
                                          batch_timeout=self.settings.batch_timeout)
        return self._ledger

    @property
    def client(self):
        from ledger.client import ConsortiaClient
        return ConsortiaClient(self.ledger, self.consortium.identity(self.msp_id, self.user))

    @property
    def gateway_home(self) -> Path:
        return self.settings.home / "gateways" / self.msp_id

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
        from api.artifacts import DirectoryArtifactStore
        from api.gateway import Gateway
        from api.tokens import TokenStore
        return Gateway(ledger=self.ledger, consortium=self.consortium, msp_id=self.msp_id, index=self.index,
                       tokens=TokenStore(self.gateway_home / "tokens.json", self.msp_id),
                       artifacts=DirectoryArtifactStore(self.settings.home / "artifacts" / self.msp_id),
                       follow_interval=follow_interval)

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


def _emit(obj, as_json: bool, title: str = "", columns: Optional[list[str]] = None) -> None:
    """Print ``obj`` as JSON (--json) or as a Rich table / key-value list."""
    from rich.table import Table
    obj = _plain(obj)
    if as_json:
        print(json.dumps(obj, indent=None, sort_keys=True, default=str))
        return
    if isinstance(obj, list):
        cols = columns or (list(obj[0])[:6] if obj else [])
        table = Table(title=title or None)
        for c in cols:
            table.add_column(c)
        for row in obj:
            table.add_row(*[_cell(row.get(c)) for c in cols])
        console.print(table)
        return
    table = Table(title=title or None, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for k, v in obj.items():
        table.add_row(str(k), _cell(v))
    console.print(table)


def _cell(v) -> str:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return "" if v is None else str(v)


def _run(fn, as_json: bool):
    """Run a journey step; contract refusals become a clear message and exit code 1."""
    from chaincode.errors import ContractError
    from ledger.errors import LedgerError
    try:
        return fn()
    except ContractError as exc:
        if as_json:
            print(json.dumps({"ok": False, "code": exc.code, "message": exc.message}))
        else:
            console.print(f"[red]{exc.code}[/red]: {exc.message}")
        raise typer.Exit(1)
    except LedgerError as exc:
        if as_json:
            print(json.dumps({"ok": False, "code": type(exc).__name__, "message": str(exc)}))
        else:
            console.print(f"[red]{type(exc).__name__}[/red]: {exc}")
        raise typer.Exit(1)


def _session(home, org, user="User1") -> _Session:
    return _Session(home, org, user)


# ---- images
@image_app.command("register")
def image_register(name: str, version: str, digest: str = typer.Option(..., help="sha256:<64 hex> of the image."),
                   algorithm: str = typer.Option(..., help="The algorithm the image runs."),
                   reference: str = typer.Option("", help="Where the image can be pulled or built from."),
                   description: str = "", home: Optional[Path] = HomeOpt, org: str = OrgOpt,
                   as_json: bool = JsonOpt) -> None:
    """Register an algorithm image (owner = your organisation)."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.register_image(name, version, algorithm, digest, reference,
                                                   description=description), as_json), as_json, "image registered")
    finally:
        s.close()


@image_app.command("list")
def image_list(home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(s.client.list_images, as_json), as_json, "images", ["id", "owner", "status", "digest", "created"])
    finally:
        s.close()


@image_app.command("get")
def image_get(image_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.get_image(image_id), as_json), as_json, f"image {image_id}")
    finally:
        s.close()


@image_app.command("revoke")
def image_revoke(image_id: str, reason: str = typer.Option("", help="Why it is revoked."),
                 home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.revoke_image(image_id, reason), as_json), as_json, "image revoked")
    finally:
        s.close()


@image_app.command("approve")
def image_approve(image_id: str, digest: str = typer.Option(..., help="The digest you inspected."),
                  home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.approve_image(image_id, digest), as_json), as_json, "image approved")
    finally:
        s.close()


# ---- processes
@process_app.command("create")
def process_create(process_id: str, image_id: str = typer.Option(..., "--image"),
                   consortium: str = typer.Option(..., help="Comma-separated MSP ids."),
                   topology: str = typer.Option("ring", help="Topology kind."), seed: int = 0,
                   rounds: int = typer.Option(..., min=1), hyperparameters: str = typer.Option("{}", help="JSON object."),
                   epsilon: Optional[float] = typer.Option(None, help="Privacy budget ε (with --mechanism)."),
                   mechanism: str = "gaussian", start: bool = typer.Option(False, help="Start it right away."),
                   home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Create (and optionally start) an audited learning process."""
    try:
        hyper = json.loads(hyperparameters)
    except ValueError as exc:
        raise typer.BadParameter(f"--hyperparameters is not JSON: {exc}") from None
    s = _session(home, org)
    try:
        budget = None if epsilon is None else {"mechanism": mechanism, "epsilon": epsilon}
        rec = _run(lambda: s.client.create_process(process_id, image_id, [m.strip() for m in consortium.split(",")],
                                                   {"kind": topology, "seed": seed}, rounds, hyper, budget), as_json)
        if start:
            rec = _run(lambda: s.client.start_process(process_id), as_json)
        _emit(rec, as_json, "learning process")
    finally:
        s.close()


@process_app.command("list")
def process_list(home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(s.client.list_processes, as_json), as_json, "learning processes",
              ["id", "status", "creator", "rounds", "image_id", "consortium"])
    finally:
        s.close()


@process_app.command("get")
def process_get(process_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.get_process(process_id), as_json), as_json, f"learning process {process_id}")
    finally:
        s.close()


@process_app.command("start")
def process_start(process_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.start_process(process_id), as_json), as_json, "started")
    finally:
        s.close()


@process_app.command("abort")
def process_abort(process_id: str, reason: str = "", home: Optional[Path] = HomeOpt, org: str = OrgOpt,
                  as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.abort_process(process_id, reason), as_json), as_json, "aborted")
    finally:
        s.close()


@process_app.command("watch")
def process_watch(process_id: str, timeout: float = typer.Option(600.0, help="Give up after this many seconds."),
                  home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Follow a process round by round until it completes, fails or is aborted."""
    import time
    from rich.progress import BarColumn, Progress, TextColumn
    s = _session(home, org)
    try:
        process = _run(lambda: s.client.get_process(process_id), as_json)
        total = process.rounds * len(process.consortium)
        deadline = time.monotonic() + timeout
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} tasks"),
                      console=console, disable=as_json) as bar:
            task = bar.add_task(f"{process_id}", total=total)
            while True:
                execs = s.client.query_executions(process_id)
                done = sum(1 for e in execs if e.status == "completed")
                process = s.client.get_process(process_id)
                bar.update(task, completed=done, description=f"{process_id} [{process.status}] round "
                                                             f"{min(process.current_round or 1, process.rounds)}")
                if process.status in ("completed", "failed", "aborted") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        _emit({"id": process_id, "status": process.status, "completed_tasks": done, "tasks": total}, as_json)
        raise typer.Exit(0 if process.status == "completed" else 1)
    finally:
        s.close()


# ---- provenance
@provenance_app.command("image")
def provenance_image(image_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Every version of an image record (registration, revocation)."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.image_history(image_id), as_json), as_json, f"history of image {image_id}",
              ["tx_id", "timestamp", "value"])
    finally:
        s.close()


@provenance_app.command("process")
def provenance_process(process_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """The process's ledger events in order (timeline) from the audit index."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_process(process_id), as_json)   # membership check by the contract
        events = s.synced_index().events(process_id=process_id, limit=100_000)
        _emit(events, as_json, f"timeline of {process_id}", ["block", "name", "subject", "tx_id"])
    finally:
        s.close()


@provenance_app.command("execution")
def provenance_execution(process_id: str, round: int, organisation: str, home: Optional[Path] = HomeOpt,
                         org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Every version of one execution record (task registered, completed or failed)."""
    s = _session(home, org)
    try:
        _emit(_run(lambda: s.client.execution_history(process_id, round, organisation), as_json), as_json,
              f"history of {process_id}/{round}/{organisation}", ["tx_id", "timestamp", "value"])
    finally:
        s.close()


@provenance_app.command("artifacts")
def provenance_artifacts(process_id: str, organisation: Optional[str] = typer.Option(None, "--by", help="Only this organisation's."),
                         home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Which artifacts each run published (or which ones organisation --by published) for a process."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_process(process_id), as_json)
        rows = s.synced_index().published_artifacts(process_id, organisation)
        _emit(rows, as_json, f"artifacts published for {process_id}", ["round", "organisation", "kind", "recipient", "digest"])
    finally:
        s.close()


@provenance_app.command("artifact")
def provenance_artifact(digest: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Which executions produced and consumed an artifact."""
    s = _session(home, org)
    try:
        _emit({"digest": digest, **s.synced_index().artifact(digest)}, as_json, f"artifact {digest}")
    finally:
        s.close()


@provenance_app.command("model")
def provenance_model(model_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """The lineage of a model: every execution it descends from and the artifacts between them."""
    s = _session(home, org)
    try:
        _run(lambda: s.client.get_model(model_id), as_json)
        lin = s.synced_index().lineage(model_id)
        if as_json:
            _emit(lin, True)
        else:
            console.print(f"lineage of [bold]{model_id}[/bold]: {len(lin['nodes'])} executions, "
                          f"{len(lin['edges'])} artifacts, image {lin['image_digest']}")
            _emit(lin["edges"], False, "", ["from", "to", "kind", "digest"])
    finally:
        s.close()


# ---- models
@model_app.command("list")
def model_list(home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Models whose access list includes your organisation."""
    s = _session(home, org)
    try:
        models = [{k: v for k, v in _plain(m).items() if k != "wrapped_key"} for m in _run(s.client.list_models, as_json)]
        _emit(models, as_json, "models", ["id", "owner", "process_id", "digest", "access"])
    finally:
        s.close()


@model_app.command("get")
def model_get(model_id: str, out: Optional[Path] = typer.Option(None, help="Download the model payload to this file."),
              home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
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
                console.print(f"[red]{type(exc).__name__}[/red]: {exc}")
                raise typer.Exit(1)
            out.write_bytes(data)
            info["downloaded_to"] = str(out)
        _emit(info, as_json, f"model {model_id}")
    finally:
        s.close()


@model_app.command("grant")
def model_grant(model_id: str, organisation: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt,
                as_json: bool = JsonOpt) -> None:
    """Give another organisation access (its own sealed copy of the data key)."""
    from api.gateway import _data_key, model_key_info
    from ledger.envelope import seal
    s = _session(home, org)
    try:
        rec = _plain(_run(lambda: s.client.get_model(model_id), as_json))
        target = s.consortium.organisation(organisation).msp_id
        wrapped = seal(s.consortium.encryption_certificate(target), _data_key(s.gateway(), rec), model_key_info(rec))
        _emit({k: v for k, v in _plain(_run(lambda: s.client.grant_model(model_id, target, wrapped), as_json)).items()
               if k != "wrapped_key"}, as_json, "access granted")
    finally:
        s.close()


@model_app.command("revoke")
def model_revoke(model_id: str, organisation: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt,
                 as_json: bool = JsonOpt) -> None:
    """Take an organisation off the access list; the data key is rotated and the model re-encrypted."""
    s = _session(home, org)
    try:
        target = s.consortium.organisation(organisation).msp_id
        from api.artifacts import ArtifactMissing, DigestMismatch
        from api.gateway import revoke_with_rotation
        try:
            revoked = _run(lambda: revoke_with_rotation(s.gateway(), s.client, model_id, target), as_json)
        except (ArtifactMissing, DigestMismatch) as exc:   # the stored model cannot be re-encrypted
            console.print(f"[red]{type(exc).__name__}[/red]: {exc}")
            raise typer.Exit(1)
        _emit({k: v for k, v in _plain(revoked).items() if k != "wrapped_key"}, as_json, "access revoked")
    finally:
        s.close()


@model_app.command("verify")
def model_verify(model_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
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
        console.print(f"[bold]{'verified' if report.ok else 'VERIFICATION FAILED'}[/bold] "
                      f"({len(report.checks)} checks, {len(report.failures)} failed)")
    if not report.ok:
        raise typer.Exit(1)


# ---- audit bundles
@audit_app.command("export")
def audit_export(model_id: str, out: Path = typer.Option(..., help="New directory for the bundle."),
                 home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Write an offline audit bundle of a model: attestations, records with block hashes and
    transaction ids, certificates -- signed by your organisation."""
    from rich.progress import Progress
    from api.bundle import BundleError, export_bundle
    s = _session(home, org)
    try:
        signers = {}
        for o in s.consortium.organisations:     # organisations whose identities are on this machine
            try:
                signers[o.msp_id] = s.consortium.identity(o.msp_id)
            except (FileNotFoundError, StopIteration):
                pass
        cas = {o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in s.consortium.organisations}
        with Progress(console=console, disable=as_json) as bar:
            task = bar.add_task("attesting executions", total=None)
            summary = _run(lambda: export_bundle(out, s.client, model_id, signers=signers, ca_certificates=cas,
                                                 index=s.synced_index(),
                                                 progress=lambda i, n: bar.update(task, completed=i, total=n)), as_json)
        _emit(summary, as_json, "audit bundle written")
    except BundleError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1)
    finally:
        s.close()


@audit_app.command("verify")
def audit_verify(bundle: Path, ca: Optional[Path] = typer.Option(None, help="Folder of trusted CA certificates <MSP>.pem."),
                 as_json: bool = JsonOpt) -> None:
    """Verify an audit bundle with no network and no ledger access."""
    from api.bundle import verify_bundle
    trusted = None if ca is None else {p.stem: p.read_bytes() for p in sorted(ca.glob("*.pem"))}
    _report(verify_bundle(bundle, trusted), as_json)


# ---- tokens, index, serve
@token_app.command("issue")
def token_issue(home: Optional[Path] = HomeOpt, org: str = OrgOpt, user: str = UserOpt, as_json: bool = JsonOpt) -> None:
    """Issue an API token for a user of your organisation (shown once; only its hash is kept)."""
    s = _session(home, org, user)
    try:
        s.consortium.identity(s.msp_id, user)        # the user must exist
    except (FileNotFoundError, StopIteration):
        raise typer.BadParameter(f"{user} has no identity in {s.msp_id}") from None
    token = s.gateway().tokens.issue(user)
    _emit({"organisation": s.msp_id, "user": user, "token": token}, as_json, "API token (store it now)")


@token_app.command("list")
def token_list(home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    _emit([o.__dict__ for o in s.gateway().tokens.owners()], as_json, "API tokens", ["token_id", "user", "created"])


@token_app.command("revoke")
def token_revoke(token_id: str, home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    s = _session(home, org)
    ok = s.gateway().tokens.revoke(token_id)
    _emit({"revoked": ok, "token_id": token_id}, as_json)
    if not ok:
        raise typer.Exit(1)


@index_app.command("sync")
def index_sync(home: Optional[Path] = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
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
def serve(host: str = "127.0.0.1", port: int = 8000, home: Optional[Path] = HomeOpt, org: str = OrgOpt,
          tls_cert: Optional[Path] = typer.Option(None, help="Server TLS certificate (PEM)."),
          tls_key: Optional[Path] = typer.Option(None, help="Server TLS key (PEM)."),
          mtls: bool = typer.Option(False, help="Also authenticate TLS client certificates of this organisation's users."),
          require_client_cert: bool = typer.Option(False, help="With --mtls: refuse connections without one.")) -> None:
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
        console.print(f"[yellow]no API tokens yet[/yellow]: run `consortia token issue --org {org}`")
    console.print(f"gateway of [bold]{s.msp_id}[/bold] on http{'s' if tls_cert else ''}://{host}:{port} "
                  f"(explorer at /explorer/, OpenAPI at /docs)")
    try:
        uvicorn.run(create_app(gw), host=host, port=port, log_level="info",
                    ssl_certfile=str(tls_cert) if tls_cert else None, ssl_keyfile=str(tls_key) if tls_key else None,
                    **extra)
    finally:
        s.close()


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
             add_help_option=False)
def node(ctx: typer.Context) -> None:
    """This organisation's node agent: `consortia node run --org … --consortium … --ledger … --data … --store …
    --state …` (the executor's command line; `consortia node --help` lists its options)."""
    from executor.node_agent import main as node_main
    raise typer.Exit(node_main(list(ctx.args)))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
             add_help_option=False)
def network(ctx: typer.Context) -> None:
    """A native Hyperledger Fabric network: `consortia network up|down|deploy|status|logs …`
    (ledger.fabric.network; `consortia network --help` lists its options)."""
    from ledger.fabric.network import main as network_main
    raise typer.Exit(network_main(list(ctx.args)))


def main(argv: Optional[list[str]] = None) -> None:
    app(argv)


if __name__ == "__main__":
    main()
