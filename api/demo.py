"""``consortia demo``: the README's main job -- a complete audited learning process among several
organisations on one machine, ending with provenance, verification and model quality.

1. an embedded consortium (X.509 identities per organisation, an embedded ledger file);
2. the ULB credit-card fraud data (docs/datasets.md) split unevenly among the organisations with
   the seed-003 split (docs/collab_rf.md "The paper's experiment": N nodes, offset 0.7; every fraud kept, a fraction of
   the normal rows so that it runs in minutes on 2 cores); each organisation maps the process's
   dataset name to its own rows;
3. the ``collab-rf`` image is built (sandbox bundle or container image) and registered;
4. a collaborative-random-forest process (seed 003 §III) is launched and every organisation's
   node agent runs its tasks, with a progress bar fed from the ledger;
5. the provenance summary (who ran what, with which image, on which inputs, producing what);
6. a full verification: the ledger's blocks and signatures (:mod:`audit.ledger_file`, embedded
   ledger), and every model with its lineage and artifacts (:func:`audit.verification.verify_model`),
   plus bit-identity with the simulator;
7. what collaboration bought each member: its metric alone and together on its own validation slice,
   from its signed last-round result (the process's default validation fraction, docs/models.md), and
   each organisation's model quality on the common test set, collaborative vs training alone;
8. plots and a report (markdown + JSON) in the output folder.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from algorithms import codec
from api.demo_report import markdown, plots, quality

DATASET = "creditcard"
IMAGE = "collab-rf"


def _settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "organisations": 3,
            "negatives_fraction": 0.02,
            "schedule": ["FIT", "SHARE", "GET"] * 2,
            "params": {"n_new": 4, "n_share": 3, "n_max": 12, "max_depth": 6, "n_rep": 3},
        }
    return {
        "organisations": 5,
        "negatives_fraction": 0.05,
        "schedule": ["FIT", "SHARE", "GET"] * 3,
        "params": {"n_new": 6, "n_share": 4, "n_max": 20, "max_depth": 8, "n_rep": 5},
    }


def _fresh(out: Path) -> Path:
    """The demo's working folder inside ``out`` (recreated: a demo run starts a new consortium)."""
    work = out / "consortium"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return work


def run_demo(
    out: Path,
    quick: bool = False,
    backend: str = "embedded",
    runtime: str = "sandbox",
    console: Any = None,
    warm: bool = True,
) -> int:
    """Run the main job; returns the exit code (0: completed, every check passed).

    ``warm``: one isolated worker (sandbox or container) per organisation kept across rounds, with
    a fresh task key per round (docs/executor.md "Warm mode"); ``False`` starts one per task."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from api.cli.output import table_console

    console = console or Console()
    whole = table_console(like=console)  # tables with whole ids and digests (never cut with "…")
    out = Path(out)
    if backend not in ("embedded", "fabric"):
        console.print(f"[red]unknown backend {backend!r}[/red]: use embedded or fabric")
        return 2
    if runtime not in ("sandbox", "container"):
        console.print(
            f"[red]runtime {runtime!r} is not supported by the demo[/red]: use sandbox or container"
        )
        return 2

    from algorithms.numeric_profile import NumericProfileError, selected
    from executor.errors import RuntimeUnavailable
    from executor.runtimes import get_runtime

    try:  # before any work: one line saying what to install, not an error per organisation
        get_runtime(runtime).check()
        profile = selected()  # the simulator's checks need the images' kernels (docs/reproducibility.md)
        if profile is not None:
            profile.require()
    except (RuntimeUnavailable, NumericProfileError) as exc:
        console.print(f"[red]cannot run the demo:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2

    from algorithms.collab_rf.algorithm import CollaborativeRandomForest
    from algorithms.datasets.creditcard import load_creditcard, split_nodes, subsample_split
    from algorithms.simulator import simulate
    from algorithms.step import LocalDataset
    from algorithms.topologies.static import complete, empty
    from algorithms.validation import split as split_validation
    from audit.ledger_file import verify_ledger_file
    from audit.verification import verify_model
    from executor.consent import give_consent
    from executor.images.resolver import ImageResolver
    from executor.node.supervisor import run_process
    from executor.process import (
        ProcessSpec,
        collect_models,
        estimator_origins,
        launch,
        map_dataset,
        prepare_image,
    )
    from home.layout import Layout
    from home.platform import Platform
    from home.settings import write_config
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    t_start = time.perf_counter()
    cfg = _settings(quick)
    n = cfg["organisations"]
    out.mkdir(parents=True, exist_ok=True)
    work = _fresh(out)
    layout = Layout(work.resolve())
    console.rule("[bold]Consortia demo: an audited collaborative learning process")

    # 1. consortium and ledger
    pid = "demo-collab-rf"
    if backend == "embedded":
        names = [f"Bank{i + 1}" for i in range(n)]
        # the consortium is a Consortia home (home/): `--home <out>/consortium` opens it
        consortium = Consortium.generate(layout.crypto, names)
        write_config(layout, consortium)
        ledger_path: Path | None = layout.ledger
        ledger = EmbeddedLedger(ledger_path, consortium)
        where = f"embedded ledger {ledger_path}"
    else:
        from ledger.fabric.gateway import FabricLedger
        from network import FabricNetwork, NetworkConfig

        net = FabricNetwork(NetworkConfig())
        if not net.is_up():
            with console.status("bringing the Fabric network up (fabric-network/network up)..."):
                net.up()
        consortium = net.consortium()
        ledger = FabricLedger.from_profile(net.profile_file)
        ledger_path = None
        n = len(consortium.msp_ids)
        pid = f"demo-collab-rf-{int(time.time())}"  # the Fabric ledger outlives a demo run
        where = f"Hyperledger Fabric network {net.profile_file} (organisations fixed by the network)"
    orgs = list(consortium.msp_ids)
    platform = Platform(ledger, consortium, work, ledger_path)
    console.print(f"consortium of {n} organisations: {', '.join(orgs)}; {where}")

    try:
        # 2. data, split unevenly; each organisation maps the dataset name to its own rows
        with console.status("loading the credit-card fraud data (downloaded once into the cache)..."):
            X, y = load_creditcard()
            split = subsample_split(split_nodes(X, y, n_agents=n), cfg["negatives_fraction"], seed=0)
        datasets = {}
        for org, node in zip(orgs, split.nodes):
            datasets[org] = LocalDataset(node.X_train, node.y_train, name=f"{DATASET}-{org}")
            map_dataset(platform.data_root, org, DATASET, datasets[org])
        table = Table(title="uneven split (seed 003 §V-A, offset 0.7)")
        for c in ("organisation", "train rows", "frauds"):
            table.add_column(c, justify="right" if c != "organisation" else "left")
        for org in orgs:
            table.add_row(org, str(len(datasets[org])), str(int(datasets[org].labels.sum())))
        table.add_row("common test", str(len(split.y_test)), str(int(split.y_test.sum())))
        console.print(table)

        # 3. image
        client = platform.client(orgs[0])
        with console.status(f"building and registering the {IMAGE} image ({runtime})..."):
            image = prepare_image(client, IMAGE, runtime)
        console.print(
            f"image [bold]{image.record.id}[/bold] digest {image.digest} ({image.reference}), "
            f"registered by {image.record.owner}"
        )

        # 4. launch and run
        params = dict(cfg["params"], schedule=cfg["schedule"])
        rounds = len(cfg["schedule"])
        spec = ProcessSpec(
            pid,
            image.record.id,
            tuple(orgs),
            {"kind": "complete", "seed": 2024},
            params,
            rounds,
            DATASET,
            description="collaborative random forests on credit-card fraud",
        )
        # each member's admin approves the image's digest for its data and accepts the process's terms
        # (here one machine acts as every organisation; in a deployment each does so on its own host)
        launch(client, spec, start=False)
        acceptances = give_consent(platform.admins(orgs), pid)
        consent = Table(title="consent (from the ledger)")
        for c in ("organisation", "image", "process", "signed by"):
            consent.add_column(c)
        approvals = {a.organisation: a for a in client.get_image(image.record.id).approvals}
        for answer in acceptances:
            org = answer.organisation
            approved = "owner" if org == image.record.owner else f"approved {approvals[org].created[:19]}"
            consent.add_row(org, approved, answer.decision, f"{answer.signed_by} ({answer.role})")
        console.print(consent)
        console.print("terms digest accepted by every member:")
        console.print(acceptances[0].terms_digest, highlight=False)
        client.start_process(pid)
        console.print(
            f"process [bold]{pid}[/bold]: {rounds} rounds {cfg['schedule']}, topology complete, "
            f"hyper-parameters {cfg['params']}; {runtime} runtime{' (warm workers)' if warm else ''}"
        )
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as bar:
            task = bar.add_task("tasks completed (organisation × round)", total=rounds * n)

            def on_progress(p):
                bar.update(
                    task,
                    completed=p.completed_tasks,
                    description=f"round {min(p.current_round, rounds)}/{rounds} · {p.status}",
                )

            outcome = run_process(
                platform, pid, lambda: get_runtime(runtime), on_progress=on_progress, timeout=3600, warm=warm
            )
        if outcome.status != "completed":
            console.print(f"[red]process {outcome.status}[/red]: {outcome.reason} {outcome.agent_errors}")
            return 1
        console.print(
            f"process completed in {outcome.wall_seconds:.1f} s "
            f"(algorithm's own step time {outcome.step_seconds:.1f} s)"
        )

        # 5. provenance summary, from the ledger
        records = client.query_executions(pid)
        prov = Table(title="provenance (from the ledger)")
        for c in ("org", "records", "image", "data commitment", "msgs out", "model", "estimators"):
            prov.add_column(c, no_wrap=True)
        provenance: dict[str, Any] = {}
        for org in orgs:
            mine = sorted((r for r in records if r.organisation == org), key=lambda r: r.round)
            model = platform.client(org).get_model(f"{pid}:{org}")
            sent = sum(len(r.result.outputs.messages) for r in mine if r.result)
            commitments = {r.result.inputs.data_commitment for r in mine if r.result}
            provenance[org] = {
                "records": len(mine),
                "runtime": sorted({r.runtime for r in mine}),
                "image_digest": sorted({r.image_digest for r in mine}),
                "data_commitments": sorted(commitments),
                "messages_sent": sent,
                "last_state": mine[-1].result.outputs.state if mine[-1].result else None,
                "model": model.digest,
                "model_size": model.size,
                "estimators": len(model.estimators),
                "tx": [r.completed_tx_id for r in mine],
            }
            prov.add_row(
                org,
                str(len(mine)),
                image.digest,
                next(iter(commitments)) + ("" if len(commitments) == 1 else " (varies!)"),
                str(sent),
                model.digest,
                str(len(model.estimators)),
            )
        whole.print(prov)

        # 6. verification
        if ledger_path is not None:
            ledger_stats = verify_ledger_file(ledger_path, consortium)
            console.print(
                f"[green]ledger verified[/green]: {ledger_stats['blocks']} blocks, "
                f"{ledger_stats['transactions']} transactions, every block hash and signature re-checked"
            )
        else:  # Fabric: the peers validated every block; the block height is what we can report here
            ledger_stats = {
                "blocks": ledger.block_height(consortium.identity(orgs[0])),
                "transactions": 0,
                "note": "Fabric peers validate blocks; records re-verified below",
            }
            console.print(f"Fabric ledger at height {ledger_stats['blocks']} (blocks validated by the peers)")
        resolver = ImageResolver(get_runtime(runtime))
        keys = {o: consortium.encryption_key(o) for o in orgs}
        verification = {}
        vt = Table(title="verification of every final model and its lineage")
        for c in ("model", "executions in lineage", "checks", "ok"):
            vt.add_column(c, no_wrap=c == "model")
        all_ok = True
        for org in orgs:
            rep = verify_model(
                platform.client(org),
                f"{pid}:{org}",
                store_root=platform.store_root,
                recipient_keys=keys,
                local_image_digest=resolver.local_digest,
            )
            verification[org] = {
                **rep.facts,
                "ok": rep.ok,
                "checks": rep.counts(),
                "failures": [c.row() for c in rep.failures],
            }
            all_ok &= rep.ok
            vt.add_row(
                f"{pid}:{org}",
                str(len(rep.facts["lineage"])),
                str(len(rep.checks)),
                "[green]yes[/green]" if rep.ok else f"[red]NO[/red] {rep.failures[:2]}",
            )
        whole.print(vt)
        models = collect_models(platform, pid)
        process = client.get_process(pid)
        sim = simulate(
            CollaborativeRandomForest(**params),
            datasets,
            rounds,
            spec.topology["seed"],
            complete(n),
            orgs,
            validation_fraction=process.validation_fraction,
        )
        gains = client.process_gains(process)
        identical = (
            all(models[o] == sim.models[o] for o in orgs)
            and all(
                r.result is not None and r.result.outputs.state == sim.state_digests[r.round][r.organisation]
                for r in records
            )
            and {g.organisation: [g.metric, g.collaborative, g.isolated, g.rows] for g in gains}
            == {
                o: [v["metric"], v["collaborative"], v["isolated"], v["rows"]]
                for o, v in sim.validation.items()
            }
        )
        console.print(
            ("[green]" if identical else "[red]")
            + f"models, states and gains bit-identical to the simulator: {identical}"
        )

        # what collaboration bought each member, from its signed last-round result on the ledger
        gt = Table(
            title=f"what collaboration bought each member (signed on the ledger; its own validation slice, "
            f"{process.validation_fraction:g} of its rows, same hyper-parameters alone → together)"
        )
        for c in ("org", "metric", "alone", "together", "gain", "rows"):
            gt.add_column(c, justify="right")
        for g in gains:
            gt.add_row(
                g.organisation.replace("MSP", ""),
                g.metric,
                f"{g.isolated:.3f}",
                f"{g.collaborative:.3f}",
                ("[red]" if g.negative else "[green]") + f"{g.gain:+.3f}" + (" WORSE" if g.negative else ""),
                str(g.rows),
            )
        whole.print(gt)

        # 7. quality: collaborative vs training alone (same trees budget, no sharing)
        alone_params = dict(params, schedule=["FIT"] * (rounds // 3))
        # alone on the same rows the members trained on (their validation slices held out)
        trained_on = {
            o: split_validation(datasets[o], process.validation_fraction, spec.topology["seed"], o)[0]
            if process.validation_fraction
            else datasets[o]
            for o in orgs
        }
        alone_sim = simulate(
            CollaborativeRandomForest(**alone_params),
            trained_on,
            len(alone_params["schedule"]),
            spec.topology["seed"],
            empty(n),
            orgs,
        )
        collab_q = {
            o: quality(codec.decode(models[o])["estimators"], split.X_test, split.y_test) for o in orgs
        }
        alone_q = {o: quality(alone_sim.model(o)["estimators"], split.X_test, split.y_test) for o in orgs}
        qt = Table(
            title=f"model quality on the common test set ({len(split.y_test)} rows, "
            f"{int(split.y_test.sum())} frauds): alone → audited collaborative"
        )
        for c in ("org", "balanced acc.", "ROC AUC", "recall", "precision"):
            qt.add_column(c, justify="right")
        for o in orgs:
            a, c = alone_q[o], collab_q[o]
            qt.add_row(
                o.replace("MSP", ""), *(f"{a[m]:.3f} → {c[m]:.3f}" for m in ("bacc", "auc", "rec", "prec"))
            )
        console.print(qt)
        _, matrix = estimator_origins(client, pid)

        # 8. report
        plot_files = plots(out, orgs, collab_q, alone_q, matrix)
        report = {
            "process_id": pid,
            "organisations": orgs,
            "quick": quick,
            "runtime": runtime,
            "backend": backend,
            "image": {"id": image.record.id, "digest": image.digest, "reference": image.reference},
            "rounds": rounds,
            "hyperparameters": params,
            "split": {o: [len(datasets[o]), int(datasets[o].labels.sum())] for o in orgs},
            "test": [len(split.y_test), int(split.y_test.sum())],
            "wall_seconds": {
                "process": outcome.wall_seconds,
                "algorithm_steps": outcome.step_seconds,
                "demo_total": time.perf_counter() - t_start,
            },
            "ledger": ledger_stats,
            "provenance": provenance,
            "verification": verification,
            "bit_identical_to_simulator": identical,
            "quality": {"audited": collab_q, "alone": alone_q},
            "validation_fraction": process.validation_fraction,
            "gains": {g.organisation: g.to_dict() for g in gains},
            "estimator_origins": matrix,
            "plots": [p.name for p in plot_files],
        }
        (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=float))
        (out / "report.md").write_text(markdown(report))
        ok = all_ok and identical
        console.rule("[green]all checks passed" if ok else "[red]some checks failed")
        console.print(
            f"report: {out / 'report.md'}, {out / 'report.json'}; plots: "
            + ", ".join(str(p) for p in plot_files)
            + f"; total {time.perf_counter() - t_start:.0f} s"
        )
        return 0 if ok else 1
    finally:
        ledger.close()
