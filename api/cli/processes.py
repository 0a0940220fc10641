"""``consortia process``: create, list, get, accept, decline, terms, start, abort, watch learning processes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from api.cli.output import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    console,
    emit,
    err_console,
    fail,
    guarded,
    plain,
    say,
)
from api.cli.session import Session, journey
from wire import bounded_json

if TYPE_CHECKING:
    from ledger.client import MemberGain, ProcessPrivacy

group = typer.Typer(
    no_args_is_help=True, help="Learning processes: create, accept, decline, start, abort, watch."
)
ProcessArg = typer.Argument(..., help="The process id.")


@journey(group, "create")
def process_create(
    s: Session,
    process_id: str = ProcessArg,
    image_id: str = typer.Option(..., "--image", help="The image id (NAME:VERSION) the process pins."),
    consortium: str = typer.Option(..., help="Comma-separated organisations (names or MSP ids)."),
    topology: str = typer.Option("ring", help="Topology kind."),
    seed: int = typer.Option(0, help="The topology's seed."),
    rounds: int = typer.Option(..., min=1, help="Number of rounds."),
    hyperparameters: str = typer.Option("{}", help="JSON object."),
    epsilon: float | None = typer.Option(
        None, help="Privacy budget: rigorous ε (with --mechanism; at most the consortium's cap, 10)."
    ),
    mechanism: str = typer.Option("gaussian", help="Privacy mechanism of the budget."),
    delta: float | None = typer.Option(
        None, help="δ of the budget (needed by Gaussian rounds; at most the cap's δ, 1e-5)."
    ),
    start: bool = typer.Option(
        False,
        help="Start it right away: each member whose admin identity this home holds accepts it first "
        "(a one-machine home); the start is refused until every member has accepted.",
    ),
    dataset: str = typer.Option(
        "", help="The dataset name each member imported (`consortia data import`); default: 'default'."
    ),
    validation_fraction: float | None = typer.Option(
        None,
        min=0.0,
        max=0.99,
        help="Share of its own rows each member holds out to learn what collaboration bought it (its "
        "metric alone and together; `process get` shows it). Default: 0.2 where the image's algorithm "
        "can score a slice, else none; 0: none.",
    ),
) -> None:
    """Create (and optionally start) an audited learning process; the topology, hyper-parameters and
    dataset name are checked against what the image declares before anything is written
    (:func:`executor.process.launch`)."""
    from executor.images.declarations import InvalidProcessSpec
    from executor.process import ProcessSpec, launch

    try:
        hyper = bounded_json.loads(hyperparameters, "--hyperparameters")
    except ValueError as exc:
        fail(f"--hyperparameters is not JSON: {exc}", EXIT_USAGE, s.as_json, kind="bad input")
    # every member must be in this home: its agent and artifact service need their certificates
    members = tuple(s.member(m) for m in consortium.split(",") if m.strip())
    try:
        spec = ProcessSpec(
            process_id=process_id,
            image_id=image_id,
            consortium=members,
            topology={"kind": topology, "seed": seed},
            hyperparameters=hyper,
            rounds=rounds,
            dataset=dataset,
            privacy_budget=None if epsilon is None else budget_of(mechanism, epsilon, delta),
            validation_fraction=validation_fraction,
        )
        consent = s.local_admins(members) if start else None
        rec = guarded(lambda: launch(s.client, spec, start=start, consent=consent), s.as_json)
    except ValueError as exc:  # InvalidProcessSpec is one
        kind = "INVALID_ARGUMENT" if isinstance(exc, InvalidProcessSpec) else "bad input"
        fail(f"process {process_id} refused: {exc}", EXIT_USAGE, s.as_json, kind=kind)
    mine = s.dataset_dir(dataset)
    if s.msp_id in members and not (mine / "dataset.npz").is_file():  # the others' cannot be seen
        err_console.print(
            f"warning: {s.msp_id} has no dataset {dataset or 'default'!r} at {mine} yet "
            f"(import it with `consortia data import`); its tasks fail until it does",
            markup=False,
            highlight=False,
        )
    emit(rec, s.as_json, "learning process")


def budget_of(mechanism: str, epsilon: float, delta: float | None) -> dict[str, Any]:
    budget: dict[str, Any] = {"mechanism": mechanism, "epsilon": epsilon}
    if delta is not None:
        budget["delta"] = delta
    return budget


def privacy_text(p: ProcessPrivacy, short: bool = False) -> str:
    """The process's privacy as one line, the ledger's rigorous ε first; an ε that only an image
    reported is labelled as such (nominal, or not charged)."""
    if p.rigorous:
        delta = f"δ = {p.delta:g}" if p.delta is not None else "δ = 0"
        if short:
            return f"ε {p.epsilon_spent:.4g} / {p.epsilon_budget:g} ({delta}, rigorous)"
        text = (
            f"rigorous ε spent {p.epsilon_spent:.4g} of budget {p.epsilon_budget:g} ({delta}, {p.scope} "
            f"scope, {p.accounting} accounting; consortium cap ε ≤ {p.cap_epsilon:g} at δ ≤ {p.cap_delta:g})"
        )
    else:
        if short:
            return "none (no ε guaranteed)"
        text = "none: no privacy budget, no ε is guaranteed"
    if p.reported_epsilon is not None:
        label = "rigorous, not charged by the ledger" if p.reported_rigorous else "NOMINAL, not rigorous"
        text += f"; the image reports ε = {p.reported_epsilon:.4g} ({label})"
    return text


@journey(group, "list")
def process_list(s: Session) -> None:
    """The learning processes your organisation can see, each with its privacy (rigorous ε spent /
    budget, δ)."""
    processes = guarded(s.client.list_processes, s.as_json)
    rows = []
    for p in processes:
        privacy = guarded(lambda p=p: s.client.process_privacy(p), s.as_json)
        row = plain(p)
        row["privacy"] = privacy.to_dict() if s.as_json else privacy_text(privacy, short=True)
        rows.append(row)
    columns = ["id", "status", "privacy", "creator", "rounds", "image_id", "consortium"]
    emit(rows, s.as_json, "learning processes", columns)


def gain_text(g: MemberGain) -> str:
    """One member's gain over training alone as one line, a negative gain said in words."""
    text = f"{g.metric} {g.isolated:.4g} alone -> {g.collaborative:.4g} together: {g.gain:+.4g}"
    return text + (" (WORSE than training alone)" if g.negative else "")


def gain_rows(gains: Sequence[MemberGain]) -> list[dict[str, Any]]:
    """The gains table: per member its metric, alone, together, gain and a verdict."""
    return [
        {
            "organisation": g.organisation,
            "metric": g.metric,
            "isolated": f"{g.isolated:.4f}",
            "collaborative": f"{g.collaborative:.4f}",
            "gain": f"{g.gain:+.4f}",
            "verdict": "WORSE than training alone" if g.negative else "better" if g.gain > 0 else "same",
            "validation rows": g.rows,
        }
        for g in gains
    ]


@journey(group, "get")
def process_get(s: Session, process_id: str = ProcessArg) -> None:
    """One process: its privacy (the ledger's rigorous ε spent of its budget, δ) first, then image
    digest, consortium, topology, rounds, status and its reason; with a validation slice, what
    collaboration bought each member: its metric on its own validation slice alone and together, and
    the gain (from the last round's signed results)."""
    rec = guarded(lambda: s.client.get_process(process_id), s.as_json)
    privacy = guarded(lambda: s.client.process_privacy(rec), s.as_json)
    gains = guarded(lambda: s.client.process_gains(rec), s.as_json)
    views: dict[str, Any] = {"privacy": privacy}
    if rec.validation_fraction:
        views["gains"] = gains
    if s.as_json:
        emit(rec.view(**views), True)
        return
    rest = {k: v for k, v in plain(rec).items() if k not in ("privacy", "gains")}
    emit({"privacy": privacy_text(privacy), **rest}, False, f"learning process {process_id}")
    if not rec.validation_fraction:
        return
    if not gains:
        say(
            f"gain over training alone: each member's figures arrive with its result of round {rec.rounds} "
            f"(validation slice: {rec.validation_fraction:g} of its rows)"
        )
        return
    emit(
        gain_rows(gains),
        False,
        f"what collaboration bought each member (its own validation slice, {rec.validation_fraction:g} of its rows)",
        ["organisation", "metric", "isolated", "collaborative", "gain", "verdict"],
    )


@journey(group, "accept", user="Admin")
def process_accept(
    s: Session,
    process_id: str = ProcessArg,
    terms: str | None = typer.Option(
        None, help="The terms digest you reviewed (`process terms ID`); default: the terms as read now."
    ),
    approve_image: bool = typer.Option(
        False,
        "--approve-image",
        help="Approve the image the terms pin, at their digest, first (unless your approval already "
        "covers it for the process's dataset, or you own it): one command, one start-up.",
    ),
) -> None:
    """Accept a process your organisation is named in: its image digest, hyper-parameters, topology,
    rounds, privacy budget and dataset as recorded (the acceptance binds their digest; signed by your
    admin or a role your membership record names; docs/consent.md). With ``--approve-image`` the
    image's approval comes first (``executor.consent.consent_to``), as ``image approve`` gives it."""
    if approve_image:
        from executor.consent import consent_to

        rec = guarded(lambda: consent_to(s.client, process_id, terms), s.as_json)
    else:
        rec = guarded(lambda: s.client.accept_process(process_id, terms), s.as_json)
    emit(rec, s.as_json, "accepted")


@journey(group, "decline", user="Admin")
def process_decline(
    s: Session, process_id: str = ProcessArg, reason: str = typer.Option(..., help="Why (on the ledger).")
) -> None:
    """Decline a process your organisation is named in: it ends `declined`, with your reason."""
    emit(guarded(lambda: s.client.decline_process(process_id, reason), s.as_json), s.as_json, "declined")


@journey(group, "terms")
def process_terms(s: Session, process_id: str = ProcessArg) -> None:
    """What a member accepts (the terms as recorded), their digest, and each member's answer so far."""

    def read() -> dict:
        process = s.client.get_process(process_id)
        answers = s.client.process_acceptances(process_id)
        return {
            "id": process_id,
            "status": process.status,
            "terms": process.terms(),
            # bound by the terms through private_sha256 (docs/confidentiality.md): shown to review them
            "private_terms": {
                "hyperparameters": process.hyperparameters,
                "privacy_budget": None
                if process.privacy_budget is None
                else process.privacy_budget.json_object(),
                **({"description": process.description} if process.description_private else {}),
            },
            "terms_digest": process.terms_digest(),
            "answers": [a.to_dict() for a in answers],
            "waiting_for": sorted(set(process.consortium) - {a.organisation for a in answers}),
        }

    emit(guarded(read, s.as_json), s.as_json, f"terms of {process_id}")


@journey(group, "start")
def process_start(s: Session, process_id: str = ProcessArg) -> None:
    """Start a created process once every member accepted it: the members' node agents begin round 1."""
    emit(guarded(lambda: s.client.start_process(process_id), s.as_json), s.as_json, "started")


@journey(group, "abort")
def process_abort(
    s: Session, process_id: str = ProcessArg, reason: str = typer.Option("", help="Why it is aborted.")
) -> None:
    """Abort a process you created, with a reason."""
    emit(guarded(lambda: s.client.abort_process(process_id, reason), s.as_json), s.as_json, "aborted")


@journey(group, "watch")
def process_watch(
    s: Session,
    process_id: str = ProcessArg,
    timeout: float = typer.Option(600.0, help="Give up after this many seconds."),
) -> None:
    """Follow a process round by round until it completes, fails or is aborted (exit 1 unless it
    completed). One line per member says what the round waits for from it -- its task not registered
    (its node is down or cannot reach the ledger), registered but no result yet, failed -- with its
    last completed round and how long ago it last wrote a record; your own node's status file adds
    what it waits for (e.g. its ledger unreachable). While this host's ledger is unreachable the watch
    says so and keeps trying."""
    from rich.progress import BarColumn, Progress, TextColumn

    from executor.node.status import read_status
    from executor.node.supervisor import members_progress
    from ledger.errors import transient
    from ledger.outage import LedgerOutage

    process = guarded(lambda: s.client.get_process(process_id), s.as_json)
    total = process.rounds * len(process.consortium)
    deadline = time.monotonic() + timeout
    outage = LedgerOutage(f"watch {process_id}")
    own_state = s.layout.state_root / s.msp_id
    done, members = 0, []
    with Progress(
        TextColumn("{task.description}", markup=False),  # "[completed]" is printed as such
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        console=console,
        disable=s.as_json,
    ) as bar:
        task = bar.add_task(process_id, total=total)
        rows = {m: bar.add_task(f"  {m}", total=process.rounds) for m in process.consortium}
        while True:
            try:
                records = s.client.query_executions(process_id)
                process = s.client.get_process(process_id)
            except Exception as exc:
                if not transient(exc) or time.monotonic() > deadline:
                    raise
                delay = outage.failed(exc)
                bar.update(task, description=f"{process_id}: {outage.waiting_for()}; retrying")
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                continue
            outage.reached()
            done = sum(1 for e in records if e.status == "completed")
            bar.update(
                task,
                completed=done,
                description=f"{process_id} [{process.status}] round "
                f"{min(process.current_round or 1, process.rounds)}",
            )
            members = members_progress(process, records)
            own = read_status(own_state) if s.msp_id in rows else None
            for m in members:
                line = f"  {m.describe()}"
                if own is not None and m.organisation == s.msp_id and own.waiting_for:
                    line += f"; your node: {own.waiting_for}"
                bar.update(rows[m.organisation], completed=m.last_completed, description=line)
            if (
                process.status in ("completed", "failed", "aborted", "declined")
                or time.monotonic() > deadline
            ):
                break
            time.sleep(0.5)
    outcome = {
        "id": process_id,
        "status": process.status,
        "completed_tasks": done,
        "tasks": total,
        "reason": process.status_reason or "",
        "members": [
            {
                "organisation": m.organisation,
                "last_completed_round": m.last_completed,
                "task": m.task,
                "last_record_seconds": None
                if m.last_record_seconds is None
                else round(m.last_record_seconds, 1),
                "waiting_for": m.waiting_for,
            }
            for m in members
        ],
    }
    emit(outcome, s.as_json)
    raise typer.Exit(EXIT_OK if process.status == "completed" else EXIT_REFUSED)
