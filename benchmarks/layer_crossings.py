"""Layer crossings of one round: which project packages one organisation's node agent calls into, and
how often, while it runs one middle round of an audited learning process (issue 30, "Must show").

    python -m benchmarks.layer_crossings [--quick] [--warm] [--tag NAME] [--compare OLD.json] [--self-check]

It runs ONE audited process on the embedded ledger (3 organisations, the ``average-consensus``
reference image on 16x3 synthetic data, 3 rounds, sandbox runtime, one agent thread per organisation:
:func:`run_one_process`, the only function that knows the project's set-up API) and profiles the agent
threads (``sys.setprofile`` + ``threading.setprofile``). A *window* is one call of the agent's
``run_process_round`` (:data:`ROUND_METHOD`) that returns round :data:`ROUND` completed: from the moment
the agent reads the process and sees round 2 open until its record of round 2 is completed (key
registered, inputs gathered, task run in its sandbox, outputs stored and sealed, ``complete_task``
committed). ``--quick`` traces Org2MSP's window; without it every organisation's (the headline stays
Org2MSP's, the others show the spread).

The wait for the round to open (``executor.round_events``, between two such calls) is not in the window.

Counted (:mod:`benchmarks.layer_trace`): every entry into a Python function on the agent's thread inside
the window (a call, or a generator resumed). A function belongs to the top-level project package whose
directory holds its file (:data:`LAYERS`, bottom-up); code generated at run time (dataclass
``__init__``/``__eq__``, named tuples: file ``<string>``) belongs to the package of its class. Anything else
(stdlib, site-packages, C code) is *external* and transparent: project package A calling through external
code into project package B counts as A -> B. A *crossing* is an entry whose callee's package differs
from its caller's; DOWN when the callee's layer is lower, UP when higher (a callback). Figures: distinct
crossing edges (caller function -> callee function), distinct module edges (caller file -> callee file:
the imports the round uses), dynamic crossings (entries), each split DOWN/UP and by package pair; per
target package the distinct callee functions by module.

The embedded ledger simulates and endorses the agent's own transactions on the agent's thread (on
Fabric, a peer's work in its own process): crossings made beneath :data:`HOST_MODULES` (ledger ->
chaincode -> wire, the chaincode's stub calls back into the simulator) are counted, and the figures are
also given without them ("outside the ledger host"). Those are the same in every run; the host's vary by
a crossing or a few, as the contracts scan records that the other organisations commit concurrently.
Not counted: the sandboxed task (another process, running the algorithm image), the embedded ledger's
orderer thread (block validation and commit) and background reaper threads.

Reports: ``benchmarks/results/layer_crossings[-TAG][-warm][-quick].{json,md}`` (command, date, commit,
every edge); the last line printed is JSON. ``--compare OLD.json`` adds the change of the headline.
``--self-check`` checks the counting on a synthetic example counted by hand.

After modules move (issue 30), what may need adapting, all here: the set-up API in :func:`run_one_process`
(today ``executor.process``: Platform, prepare_image, map_dataset, ProcessSpec, launch;
``executor.node.supervisor.run_process``, ``executor.runtimes.get_runtime``, ``ledger.embedded.EmbeddedLedger``, ``ledger.identity.Consortium``);
:data:`ROUND_METHOD` if the agent's round method is renamed (the window also reads the agent's ``org``
and the outcome's ``round`` and ``status``); :data:`HOST_MODULES` if the embedded host leaves
``ledger/embedded/``. A top-level package not in :data:`LAYERS` counts as external.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.layer_trace import FIGURES, Classifier, CrossingTracer, self_check, summarise

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
LAYERS = (
    "wire",
    "chaincode",
    "algorithms",
    "ledger",
    "exchange",
    "executor",
    "audit",
    "network",
    "home",
    "api",
    "benchmarks",
)
ROUND_METHOD = "run_process_round"  # the agent's method that runs (at most) one round of one process
ROUND = 2  # the middle round of ROUNDS
ROUNDS = 3
ORGS = ("Org1", "Org2", "Org3")
HEADLINE = "Org2MSP"
# the embedded ledger host: simulating and endorsing the agent's own transactions on its thread (on Fabric,
# a peer's work in its own process); crossings made beneath it are reported apart as "in the ledger host"
HOST_MODULES = ("ledger/embedded/",)


# --------------------------------------------------------------------------- figures


def figure_line(s: dict[str, Any]) -> str:
    return "; ".join(
        f"{k.replace('_', ' ')} {v['total']} (down {v['down']}, up {v['up']})"
        for k, v in s.items()
        if k in FIGURES
    )


def table(s: dict[str, Any]) -> list[str]:
    lines = [
        f"- all: {figure_line(s)}",
        f"- outside the ledger host ({', '.join(HOST_MODULES)}): {figure_line(s['outside_ledger_host'])}",
        f"- project function entries {s['project_calls']}, external {s['external_calls']}, "
        f"shadow-stack repairs {s['stack_resyncs']}",
        "",
        "| caller -> callee | direction | distinct edges | dynamic crossings | of which in the ledger host |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {k} | {v['direction']} | {v['edges']} | {v['events']} | {v['in_host']} |"
        for k, v in s["by_pair"].items()
    ]
    for scope, f in (("all", s), ("outside the ledger host", s["outside_ledger_host"])):
        lines += [
            "",
            f"| target package ({scope}) | distinct callee functions | by module |",
            "|---|---|---|",
        ]
        for pkg, t in f["targets"].items():
            mods = ", ".join(f"{m} {n}" for m, n in t["by_module"].items())
            lines.append(f"| {pkg} | {t['functions']} | {mods} |")
    return lines


# --------------------------------------------------------------------------- the process


def run_one_process(root: Path, tracer: CrossingTracer, warm: bool) -> str:
    """Set up and run one audited process under ``tracer`` (only ``run_process`` is traced); its status.

    The one place that uses the project's set-up API (executor.process, executor.node.supervisor, executor.runtimes,
    ledger.embedded, ledger.identity): after modules move, adapt these imports and calls, nothing else."""
    import numpy as np

    from algorithms.step import LocalDataset
    from executor.node.supervisor import run_process
    from executor.process import ProcessSpec, launch, map_dataset, prepare_image
    from executor.runtimes import get_runtime
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    consortium = Consortium.generate(root / "crypto", list(ORGS))
    ledger = EmbeddedLedger(root / "ledger.sqlite", consortium)
    try:
        platform = Platform(ledger, consortium, root / "home", root / "ledger.sqlite")
        orgs = list(consortium.msp_ids)
        client = platform.client(orgs[0])
        image = prepare_image(client, "average-consensus", "sandbox")
        for i, o in enumerate(orgs):
            features = np.random.default_rng(i).normal(size=(16, 3))
            map_dataset(platform.data_root, o, "default", LocalDataset(features, name=o))
        topology = {"kind": "complete", "seed": 1}
        launch(
            client,
            ProcessSpec("crossings", image.record.id, tuple(orgs), topology, {"eps": 0.25}, ROUNDS),
            consent=platform.admins(orgs),
        )
        with tracer:
            out = run_process(platform, "crossings", lambda: get_runtime("sandbox"), warm=warm, prewarm=warm)
        if out.agent_errors:
            raise SystemExit(f"agents failed: {out.agent_errors}")
        return out.status
    finally:
        ledger.close()


# --------------------------------------------------------------------------- main


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    return head + ("+dirty" if dirty else "")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"trace {HEADLINE}'s round only")
    ap.add_argument("--warm", action="store_true", help="warm workers (prewarmed), as `node run --warm`")
    ap.add_argument("--tag", default="", help="report name: layer_crossings[-TAG][-warm][-quick]")
    ap.add_argument(
        "--compare", type=Path, help="an earlier report (.json): print the change of the headline"
    )
    ap.add_argument("--self-check", action="store_true", help="check the counting on a synthetic example")
    args = ap.parse_args(argv)
    if args.self_check:
        return self_check()
    orgs = {HEADLINE} if args.quick else {f"{o}MSP" for o in ORGS}
    tracer = CrossingTracer(Classifier(ROOT, LAYERS), orgs, ROUND, ROUND_METHOD, HOST_MODULES)
    with tempfile.TemporaryDirectory(prefix="layer-crossings-") as tmp:
        status = run_one_process(Path(tmp), tracer, args.warm)
    missing = orgs - set(tracer.windows)
    if missing:
        raise SystemExit(f"no completed round {ROUND} traced for {sorted(missing)} (process {status})")
    windows = {o: summarise(tracer.windows[o], LAYERS) for o in sorted(tracer.windows)}
    cmd = "python -m benchmarks.layer_crossings " + " ".join(argv if argv is not None else sys.argv[1:])
    results = {
        "command": cmd.strip(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "runtime": "sandbox" + ("-warm" if args.warm else ""),
        "round": ROUND,
        "rounds": ROUNDS,
        "headline": HEADLINE,
        "process_status": status,
        "windows": windows,
    }
    lines = [f"# Layer crossings of one round ({results['runtime']}, round {ROUND} of {ROUNDS})", ""]
    lines += [f"`{results['command']}` at {results['commit']}, {results['date']}.", ""]
    lines += [
        "Method: benchmarks/layer_crossings.py (module doc). Layers bottom-up: " + " < ".join(LAYERS) + ".",
        "",
    ]
    for s in windows.values():
        lines += ["## " + s["organisation"], "", *table(s), ""]
    head = windows[HEADLINE]
    if args.compare:
        old = json.loads(args.compare.read_text())["windows"][HEADLINE]
        lines += [f"## Change of {HEADLINE} against {args.compare.name}", ""]
        for scope, o, n in (
            ("all", old, head),
            ("outside the ledger host", *(x["outside_ledger_host"] for x in (old, head))),
        ):
            for k in FIGURES:
                change = ", ".join(f"{w} {o[k][w]} -> {n[k][w]}" for w in ("total", "down", "up"))
                lines.append(f"- {scope}, {k.replace('_', ' ')}: {change}")
        lines.append("")
    print("\n".join(lines), flush=True)
    RESULTS.mkdir(exist_ok=True)
    stem = "layer_crossings" + "".join(
        f"-{part}" for part, on in ((args.tag, args.tag), ("warm", args.warm), ("quick", args.quick)) if on
    )
    (RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{stem}.md").write_text("\n".join(lines))
    print(f"reports: {RESULTS / stem}.json, .md")
    summary = {
        o: {
            **{k: s[k]["total"] for k in FIGURES},
            "down_up": {k: [s[k]["down"], s[k]["up"]] for k in FIGURES},
            "outside_ledger_host": {
                k: [s["outside_ledger_host"][k][w] for w in ("total", "down", "up")] for k in FIGURES
            },
            "targets": {p: t["functions"] for p, t in s["targets"].items()},
            "targets_outside_ledger_host": {
                p: t["functions"] for p, t in s["outside_ledger_host"]["targets"].items()
            },
        }
        for o, s in windows.items()
    }
    print(json.dumps({"layer_crossings": {"commit": results["commit"], "headline": HEADLINE, **summary}}))
    return results


if __name__ == "__main__":
    main()
