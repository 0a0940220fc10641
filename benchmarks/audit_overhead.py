"""Cost of auditing: wall time of an audited learning process over the simulator's for the same work.

    python -m benchmarks.audit_overhead [--quick] [--container] [--algorithms collab-rf,dpsda,...]

For every algorithm (collaborative RF on the credit-card data; CollabDict GGM and VAE, DPSDA-C on
small synthetic data) it runs the same data, seed and rounds

* in the simulator (:func:`algorithms.simulator.simulate`, all organisations in one process), and
* as an audited process on the embedded ledger (:func:`executor.node.supervisor.run_process`: one node
  agent thread per organisation, every task isolated, signed, recorded; messages sealed off chain)
  with the sandbox runtime (one sandbox per task, and ``warm``: one sandbox per organisation
  kept across rounds), with ``--container`` the container runtime (warm), and with ``--fabric`` on the
real Fabric network (sandbox, warm; the network's three organisations, so use ``--orgs 3``);

and prints, per algorithm and runtime, audited / simulated wall time, the ledger's share of the
agents' time (seconds inside Ledger.submit/evaluate summed over agent threads, over wall time ×
organisations), and whether the audited models are bit-identical to the simulator's. Reports go to
``benchmarks/results/audit_overhead[-quick][-fabric].{json,md}``; the last line printed is JSON.

The simulator runs before the first audited run and again after each one, and each ratio divides by
the mean of the two simulator runs around it: on these shared machines the same work's CPU time drifts
by tens of percent within minutes (docs/audited-process.md), and bracketing measures both sides under
the same conditions. Both simulator times are reported with each ratio. With ``--repeat N`` each
audited run is repeated N times (each bracketed so); the run with the median ratio is reported, with
every ratio beside it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from algorithms.simulator import simulate
from algorithms.topologies.static import complete, ring
from benchmarks.audit_overhead_cases import CASES
from executor.node.scratch import task_scratch
from executor.runtimes.warm import reaped
from wire import timing

RESULTS = Path(__file__).resolve().parent / "results"
TOPOLOGIES = {"complete": complete, "ring": ring}


class TimedLedger:
    """A Ledger whose submit/evaluate calls are timed as :mod:`wire.timing` sections
    (``ledger_submit`` / ``ledger_evaluate`` of the calling thread); everything else passes."""

    def __init__(self, inner: Any):
        self._inner = inner

    def submit(self, *a: Any, **kw: Any) -> Any:
        with timing.section("ledger_submit"):
            return self._inner.submit(*a, **kw)

    def evaluate(self, *a: Any, **kw: Any) -> Any:
        with timing.section("ledger_evaluate"):
            return self._inner.evaluate(*a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def agent_profile(prof: timing.Profile, orgs: list[str], wall: float) -> dict[str, dict[str, float]]:
    """Seconds per organisation's agent and category; ``other`` is the rest of the run's wall time
    (the agent's own bookkeeping, the GIL, and time outside any timed section)."""
    per = prof.per_thread("agent-")
    out = {}
    for o in orgs:
        row = {c: per.get(o, {}).get(c, 0.0) for c in timing.CATEGORIES}
        row["other"] = max(0.0, wall - sum(row.values()))
        out[o] = row
    return out


def cpu_breakdown(
    prof: timing.Profile, orgs: list[str], process_cpu: float, workers: float
) -> dict[str, float]:
    """Where the CPU went, in CPU seconds: each category's thread CPU summed over the agents' threads,
    ``rest of the process`` (this process's CPU outside them: the embedded orderer's validation and
    commits, the main thread) and ``workers`` (the warm workers' own report: the tasks and their I/O)."""
    per = prof.per_thread("agent-", cpu=True)
    out = {c: sum(per.get(o, {}).get(c, 0.0) for o in orgs) for c in timing.CATEGORIES}
    out = {c: v for c, v in out.items() if c != "wait_round" or v > 0}
    out["rest of the process"] = max(0.0, process_cpu - sum(out.values()))
    out["workers"] = workers
    return {c: round(v, 2) for c, v in out.items()}


def top3(profile: dict[str, dict[str, float]]) -> list[list[Any]]:
    """The three categories with the most seconds summed over agents, as [category, seconds]."""
    totals: dict[str, float] = {}
    for row in profile.values():
        for c, v in row.items():
            totals[c] = totals.get(c, 0.0) + v
    return [[c, round(v, 2)] for c, v in sorted(totals.items(), key=lambda kv: -kv[1])[:3]]


def profile_table(profile: dict[str, dict[str, float]]) -> list[str]:
    """The per-agent profile as Markdown table lines (seconds)."""
    cats = [*timing.CATEGORIES, "other"]
    lines = ["| agent | " + " | ".join(cats) + " |", "|---" * (len(cats) + 1) + "|"]
    for org, row in profile.items():
        lines.append(f"| {org} | " + " | ".join(f"{row[c]:.2f}" for c in cats) + " |")
    return lines


# --------------------------------------------------------------------------- runs


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its reaped children (one-shot sandboxes,
    containers' runtime clients; not the container engine's own work, not warm workers': worker_cpu)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def worker_cpu(root: Path, wait: float = 15.0) -> tuple[float, float]:
    """CPU seconds of the warm workers under ``root``, as each reports its own (:mod:`algorithms.task_worker`:
    ``out/STARTED`` after start-up, ``out/CPU`` at exit; a sandbox's CPU does not show in this process's
    ``RUSAGE_CHILDREN``): (the spare workers' start-up, done before the clock started; all of it). Waits up
    to ``wait`` s for every started worker's exit report (a killed one's start-up report stands in)."""

    def read(f: Path) -> float | None:
        try:
            return float(f.read_text())
        except (OSError, ValueError):  # absent, or being written
            return None

    started = {f.parent: read(f) or 0.0 for f in root.rglob("STARTED") if f.parent.name == "out"}
    deadline = time.monotonic() + wait
    while any(read(d / "CPU") is None for d in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    spares = sum(v for d, v in started.items() if "-spare-" in d.parent.name)
    return spares, sum(max(read(d / "CPU") or 0.0, v) for d, v in started.items())


def run_simulated(case: dict[str, Any]) -> tuple[float, Any, float]:
    """One simulator run: (wall seconds, result, CPU seconds). The in-process memo of fitted trees is
    emptied first, so every run fits its trees as the audited workers must."""
    from algorithms.collab_rf.training import forget_fits

    forget_fits()
    topo = TOPOLOGIES[case["topology"]["kind"]](len(case["orgs"]))
    c0, t0 = cpu_seconds(), time.perf_counter()
    sim = simulate(
        case["cls"](**case["params"]),
        case["data"],
        case["rounds"],
        case["topology"]["seed"],
        topo,
        case["orgs"],
    )
    return time.perf_counter() - t0, sim, cpu_seconds() - c0


def run_audited(
    case: dict[str, Any],
    runtime: str,
    warm: bool,
    sim: Any,
    engine: Any = None,
    backend: str = "embedded",
    agents: str = "threads",
) -> dict[str, Any]:
    from executor.node.supervisor import run_process
    from executor.process import (
        ProcessSpec,
        collect_models,
        launch,
        map_dataset,
        prepare_image,
    )
    from executor.runtimes import get_runtime
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    orgs = case["orgs"]
    pid = "bench"
    with tempfile.TemporaryDirectory(prefix="audit-overhead-") as tmp:
        root = Path(tmp)
        if backend == "fabric":  # the network's own organisations Org1MSP..; a fresh process id per run
            from tests.support.fabric import start_shared_network

            fab = start_shared_network()
            consortium = fab.consortium
            missing = set(orgs) - set(consortium.msp_ids)
            if missing:
                raise SystemExit(f"the Fabric network has no organisations {sorted(missing)} (use --orgs 3)")
            inner = fab.ledger()
            pid = f"bench-{int(time.time() * 1000)}"
        else:
            consortium = Consortium.generate(root / "crypto", [o[:-3] for o in orgs])
            inner = EmbeddedLedger(root / "ledger.sqlite", consortium)
        ledger = TimedLedger(inner)
        platform = Platform(ledger, consortium, root / "nodes", root / "ledger.sqlite")
        client = platform.client(orgs[0])
        image = prepare_image(client, case["image"], runtime, engine=engine)
        for o in orgs:
            map_dataset(platform.data_root, o, "bench", case["data"][o])
        launch(
            client,
            ProcessSpec(
                pid,
                image.record.id,
                tuple(orgs),
                case["topology"],
                case["params"],
                case["rounds"],
                "bench",
                validation_fraction=0.0,  # every row trains, as in the simulator run it is compared with
            ),
            consent=platform.admins(orgs),  # every member approves and accepts before round 1
        )
        c0 = cpu_seconds()
        factory = (
            (lambda: get_runtime("container", client=engine))
            if runtime == "container"
            else (lambda: get_runtime(runtime))
        )
        with timing.recording() as prof:
            # warm: the agents and their spare workers start before the clock (prewarm_seconds), as an
            # organisation's node runs before a process is launched; wall_seconds is the run after that
            out = run_process(platform, pid, factory, agents=agents, warm=warm, timeout=7200, prewarm=warm)
            wall = out.wall_seconds
        reaped()  # every worker has ended and reported its CPU time
        # the workers' directories: under the agents' task scratch (executor.node.scratch), this run's own
        scratch = {d for d in (task_scratch(platform.state_root / o) for o in orgs) if root not in d.parents}
        prewarm_cpu, workers_cpu = map(sum, zip(*(worker_cpu(d) for d in (root, *scratch))))
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)  # on a memory filesystem: not left behind
        process_cpu = cpu_seconds() - c0
        cpu = process_cpu + workers_cpu - prewarm_cpu
        models = collect_models(platform, pid) if out.status == "completed" else {}
        inner.close()
    profile = agent_profile(prof, orgs, wall)
    ledger_seconds = sum(r["ledger_submit"] + r["ledger_evaluate"] for r in profile.values())
    return {
        "status": out.status,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "prewarm_seconds": out.prewarm_seconds,
        "prewarm_cpu_seconds": prewarm_cpu,
        "worker_cpu_seconds": workers_cpu - prewarm_cpu,  # the warm workers' share of cpu_seconds
        "step_seconds": out.step_seconds,
        "ledger_seconds": ledger_seconds,
        "ledger_share": ledger_seconds / (wall * len(orgs)) if wall > 0 else 0.0,
        "profile": profile,
        "profile_top3": top3(profile),
        "cpu_profile": cpu_breakdown(prof, orgs, process_cpu, workers_cpu - prewarm_cpu),
        "bit_identical": bool(models) and all(models[o] == sim.models[o] for o in orgs),
        "tasks": len(orgs) * case["rounds"],
        "errors": out.agent_errors,
    }


def bracket(a: dict[str, Any], key: str, single: float) -> str:
    """``before / after`` simulator seconds of an audited run (one figure in older reports)."""
    pair = a.get(key)
    return f"{pair[0]:.2f} / {pair[1]:.2f}" if pair else f"{single:.2f}"


def runs_note(a: dict[str, Any]) -> str:
    """`` (runs: [...])`` when the mode was run more than once (``--repeat``)."""
    return f" (runs: {', '.join(f'{r:.2f}' for r in a['ratios'])})" if len(a.get("ratios", [])) > 1 else ""


def write_reports(tag: str, results: dict[str, Any]) -> list[Path]:
    RESULTS.mkdir(exist_ok=True)
    j = RESULTS / f"audit_overhead{tag}.json"
    j.write_text(json.dumps(results, indent=2, sort_keys=True))
    lines = [
        f"# Audit overhead{' (--' + tag.strip('-').replace('-', ', --') + ')' if tag else ''}",
        "",
        "Audited (embedded ledger, one agent thread per organisation, isolated tasks) over simulated "
        "(one process, in memory) wall time for the same data, seed and rounds; the simulator runs right "
        "before and right after each audited run, and the ratio divides by the mean of the two (both "
        "shown as before / after). Ledger share: seconds "
        "in Ledger.submit/evaluate summed over agents / (wall × organisations). Machine: 2 shared cores; "
        f"load average at start {results['load_average']}.",
        "",
        "CPU: user+system seconds of the run's process and its reaped children, plus what each warm worker "
        "reports for itself at exit (a sandbox worker's CPU does not show among the reaped children; a "
        "container engine's own work is not counted), a load-independent view of the work done.",
        "",
        "Prewarm (warm runs): the agents and one spare worker each start before the clock starts, as an "
        "organisation's node runs before a process is launched; their start-up is reported apart (wall "
        "seconds, and the CPU seconds the spare workers report for their own start-up, which are not in "
        "the audited CPU) and is not in the ratio.",
        "",
        "| algorithm | orgs × rounds | simulated s before / after (CPU) | runtime | prewarm s (CPU) | audited s | ratio | "
        "audited CPU s | CPU ratio | ledger share | bit-identical | load after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for algo, r in results["algorithms"].items():
        for mode, a in r["audited"].items():
            lines.append(
                f"| {algo} | {r['organisations']} × {r['rounds']} | {bracket(a, 'simulated_bracket', r['simulated_seconds'])} "
                f"({bracket(a, 'simulated_cpu_bracket', r['simulated_cpu_seconds'])}) | {mode} | {a.get('prewarm_seconds', 0.0):.1f} "
                f"({a.get('prewarm_cpu_seconds', 0.0):.1f}) | {a['wall_seconds']:.1f} | {a['ratio']:.2f}{runs_note(a)} | "
                f"{a['cpu_seconds']:.1f} | {a['cpu_ratio']:.2f} | {a['ledger_share']:.3f} | "
                f"{a['bit_identical']} | {a.get('load_average', '')} |"
            )
    lines += ["", "## Where the agents' time goes", ""]
    lines.append(
        "Seconds per agent (exclusive timers in the node agent; ``other`` = wall time outside them). "
        "wait_round: waiting for the round to open; ledger_submit/evaluate: inside Ledger calls; "
        "sealing: sealing/unsealing; worker_start: a warm worker starting up (its first task waits for the "
        "imports) or taking its task; task: the task in its sandbox/container; artifact_io: artifacts, "
        "indexes, journal."
    )
    for algo, r in results["algorithms"].items():
        for mode, a in r["audited"].items():
            lines += [
                "",
                f"### {algo}, {mode} (top 3: {a['profile_top3']})",
                "",
                *profile_table(a["profile"]),
                "",
                f"CPU seconds by category: {a.get('cpu_profile', {})}",
            ]
    if not any(k.startswith("fabric") for r in results["algorithms"].values() for k in r["audited"]):
        lines += ["", "Real Fabric: not measured in this run (``--fabric``).", ""]
    m = RESULTS / f"audit_overhead{tag}.md"
    m.write_text("\n".join(lines))
    return [j, m]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small cases (minutes)")
    ap.add_argument("--container", action="store_true", help="also run the container runtime (Podman)")
    ap.add_argument(
        "--algorithms", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES)
    )
    ap.add_argument("--orgs", type=int, default=None, help="override the number of organisations")
    ap.add_argument(
        "--fabric", action="store_true", help="also run on the real Fabric network (3 organisations)"
    )
    ap.add_argument("--no-cold", action="store_true", help="skip the one-sandbox-per-task runs")
    ap.add_argument(
        "--repeat", type=int, default=1, help="audited runs per mode; the median ratio is reported, with all"
    )
    ap.add_argument(
        "--agents",
        choices=("threads", "processes"),
        default="threads",
        help="agents as threads of this process (profiled) or as OS processes (embedded ledger; no profile)",
    )
    args = ap.parse_args(argv)
    engine = None
    if args.container:
        from executor.images.engine import engine_client

        engine = engine_client()
    results: dict[str, Any] = {
        "quick": args.quick,
        "load_average": [round(x, 2) for x in os.getloadavg()],  # at the start
        "algorithms": {},
    }
    for name in [a for a in args.algorithms.split(",") if a]:
        case = CASES[name](args.quick, args.orgs)
        sim_s, sim, sim_cpu = run_simulated(case)
        before = (sim_s, sim_cpu)
        entry = {
            "organisations": len(case["orgs"]),
            "rounds": case["rounds"],
            "simulated_seconds": sim_s,
            "simulated_cpu_seconds": sim_cpu,
            "audited": {},
        }
        print(
            f"{name}: {len(case['orgs'])} organisations × {case['rounds']} rounds; simulated {sim_s:.2f} s "
            f"(CPU {sim_cpu:.2f} s)",
            flush=True,
        )
        modes = [] if args.no_cold else [("sandbox", False, "embedded")]
        modes.append(("sandbox", True, "embedded"))
        if args.container and "container" in case.get("runtimes", ("container", "sandbox")):
            modes.append(("container", True, "embedded"))
        if args.fabric:
            modes.append(("sandbox", True, "fabric"))
        for runtime, warm, backend in modes:
            runs = []
            for _ in range(args.repeat):
                a = run_audited(case, runtime, warm, sim, engine, backend, args.agents)
                after_s, _, after_cpu = run_simulated(case)  # the simulator again, right after (module doc)
                a["simulated_bracket"] = [round(before[0], 3), round(after_s, 3)]
                a["simulated_cpu_bracket"] = [round(before[1], 3), round(after_cpu, 3)]
                mean_s, mean_cpu = (before[0] + after_s) / 2, (before[1] + after_cpu) / 2
                a["ratio"] = a["wall_seconds"] / mean_s if mean_s > 0 else float("inf")
                a["cpu_ratio"] = a["cpu_seconds"] / mean_cpu if mean_cpu > 0 else float("inf")
                before = (after_s, after_cpu)
                runs.append(a)
            # the run with the median ratio stands for the mode (its profile with it); all ratios are kept
            a = sorted(runs, key=lambda r: r["ratio"])[(len(runs) - 1) // 2]
            a["ratios"] = [round(r["ratio"], 3) for r in runs]
            a["bit_identical"] = all(r["bit_identical"] for r in runs)
            a["load_average"] = [round(x, 2) for x in os.getloadavg()]  # at the end of this run
            label = ("fabric-" if backend == "fabric" else "") + runtime + ("-warm" if warm else "")
            label += "-processes" if args.agents == "processes" else ""
            entry["audited"][label] = a
            print(
                f"  {label:15s} prewarm {a['prewarm_seconds']:5.1f} s (CPU {a['prewarm_cpu_seconds']:.1f} s)  "
                f"audited {a['wall_seconds']:7.1f} s  simulated before/after {a['simulated_bracket']} s  "
                f"ratio {a['ratio']:7.2f} (runs {a['ratios']})  "
                f"CPU {a['cpu_seconds']:7.1f} s (workers {a['worker_cpu_seconds']:.1f} s)  CPU ratio {a['cpu_ratio']:6.2f}  "
                f"ledger share {a['ledger_share']:.3f}  step {a['step_seconds']:.1f} s  "
                f"bit-identical {a['bit_identical']}  load {a['load_average']}  {a['status']} {a['errors'] or ''}",
                flush=True,
            )
            print("\n".join("    " + line for line in profile_table(a["profile"])), flush=True)
            print(f"    CPU seconds by category: {a['cpu_profile']}", flush=True)
        results["algorithms"][name] = entry
    # a --fabric run (a few organisations, both hosts) keeps its own report beside the 20-organisation one
    paths = write_reports(("-quick" if args.quick else "") + ("-fabric" if args.fabric else ""), results)
    print("reports:", ", ".join(str(p) for p in paths))
    summary = {
        name: {
            mode: {
                "ratio": round(a["ratio"], 3),
                "ratios": a["ratios"],
                "simulated_bracket": a["simulated_bracket"],
                "prewarm_seconds": round(a["prewarm_seconds"], 2),
                "cpu_ratio": round(a["cpu_ratio"], 3),
                "ledger_share": round(a["ledger_share"], 4),
                "bit_identical": a["bit_identical"],
                "profile_top3": a["profile_top3"],
                "cpu_profile": a["cpu_profile"],
                "load_average": a["load_average"],
            }
            for mode, a in e["audited"].items()
        }
        for name, e in results["algorithms"].items()
    }
    print(json.dumps({"audit_overhead": summary}, sort_keys=True))
    return results


if __name__ == "__main__":
    from algorithms.numeric_profile import reexec_selected

    reexec_selected()  # simulate() computes under the images' numeric profile (docs/reproducibility.md)
    main()
