"""Cost of secure execution: per-task overhead of the container and sandbox runtimes.

    python -m benchmarks.executor [--quick] [--repeats N]

For the same trivial step (one round of ``average-consensus`` on 16x3 synthetic data) it measures

* ``inprocess_s``: the algorithm's own ``init`` + ``step`` called in-process (no files, no keys,
  no ledger) -- the work itself;
* ``warm_container_overhead_s`` / ``warm_sandbox_overhead_s``: the same per round with a warm
  worker per (process, organisation) (stretch target < 0.1 s);
* ``container_overhead_s`` / ``sandbox_overhead_s``: wall time of the node agent's whole task
  for one organisation and round -- image verification, task key generation and registration on
  the embedded ledger (``create_task``), input preparation, the isolated run, output verification,
  storing outputs, sealing messages, ``complete_task`` -- minus the step's own time measured
  inside the task.

Medians over ``--repeats`` processes (each a fresh learning process on the same ledger). Targets
(issue 4): container <= 1.0 s, sandbox <= 0.25 s. Writes benchmarks/results/executor.{json,md}
and ends with one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from algorithms.step import LocalDataset
from algorithms.task_runtime import save_dataset

RESULTS = Path(__file__).resolve().parent / "results"
AVERAGE_DIR = Path(__file__).resolve().parent.parent / "algorithm-images" / "average-consensus"
TARGETS = {"container_overhead_s": 1.0, "sandbox_overhead_s": 0.25}


def _dataset(seed: int) -> LocalDataset:
    import numpy as np

    return LocalDataset(np.random.default_rng(seed).normal(size=(16, 3)))


def inprocess_seconds(repeats: int) -> float:
    """The trivial step's own time: init + step, in-process (median)."""
    if str(AVERAGE_DIR) not in sys.path:
        sys.path.insert(0, str(AVERAGE_DIR))
    from average_consensus import AverageConsensus

    from algorithms.simulator import context
    from algorithms.topologies.static import ring

    algo, data, orgs = AverageConsensus(eps=0.25), _dataset(1), ("Org1MSP", "Org2MSP")
    times = []
    for _ in range(max(repeats, 20)):
        t = time.perf_counter()
        state = algo.init(data, context(0, 0, 2, orgs[0], orgs, None))
        algo.step(state, {}, data, context(0, 1, 2, orgs[0], orgs, ring(2)))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _setup(runtime_name: str, root: Path):
    """Consortium of two, embedded ledger, registered image, data for both organisations."""
    from executor.images.bundle import build_bundle
    from executor.images.engine import build_image
    from executor.images.recipe import ImageRecipe
    from executor.runtimes import get_runtime
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2"])
    ledger = EmbeddedLedger(root / "ledger.sqlite", consortium)
    runtime = get_runtime(runtime_name)
    if not runtime.available():
        raise SystemExit(f"runtime {runtime_name} unavailable (run scripts/install-container-engine)")
    recipe = ImageRecipe.named("average-consensus")
    built = build_bundle(recipe) if runtime_name == "sandbox" else build_image(runtime.client, recipe)
    admin = consortium.identity("Org1")
    ledger.submit(
        admin,
        "Image:register",
        json.dumps(
            {
                "id": "avg:1",
                "name": "avg",
                "version": "1",
                "algorithm": recipe.algorithm,
                "digest": built.digest,
                "reference": built.reference,
            }
        ),
    )
    for o in consortium.msp_ids:
        (root / "data" / o / "default").mkdir(parents=True)
        save_dataset(root / "data" / o / "default" / "dataset.npz", _dataset(1))
    return consortium, ledger, runtime


def _consent(consortium, ledger, pid: str) -> None:
    """Every member's admin approves the image and accepts the process (docs/consent.md)."""
    from executor.consent import give_consent
    from ledger.client import ConsortiaClient

    give_consent(
        {o: ConsortiaClient(ledger, consortium.identity(o, "Admin")) for o in consortium.msp_ids}, pid
    )


def _agent(root: Path, consortium, ledger, runtime, org: str, warm: bool = False, hosted=None):
    """``org``'s node agent with its data, store and state under ``root`` (started), built the one way
    (:func:`home.agent.build_agent`) on the shared ``ledger``; ``hosted``: the services of the agents of
    this process, through which they reach each other's stores (default: its own, in memory)."""
    from exchange.service import HostedServices
    from home.agent import NodePlaces, build_agent

    places = NodePlaces(org, consortium, root / "data" / org, root / "store", root / "state")
    node = build_agent(places, runtime=runtime, warm=warm, ledger=ledger, hosted=hosted or HostedServices())
    return node.agent.start()


def _summary(walls: list[float], steps: list[float], repeats: int) -> dict[str, float]:
    over = [w - s for w, s in zip(walls, steps)]
    return {
        "overhead_s": statistics.median(over),
        "overhead_min_s": min(over),
        "overhead_max_s": max(over),
        "wall_s": statistics.median(walls),
        "step_s": statistics.median(steps),
        "repeats": repeats,
    }


def agent_overheads(runtime_name: str, repeats: int, work: Path) -> dict[str, float]:
    """Median (and spread) of agent task wall time minus in-task step time, one runtime, cold
    (a new container / sandbox per task): round 1 of ``repeats`` fresh processes."""
    root = work / runtime_name
    consortium, ledger, runtime = _setup(runtime_name, root)
    admin = consortium.identity("Org1")
    agent = _agent(root, consortium, ledger, runtime, "Org1MSP")
    walls, steps = [], []
    for i in range(repeats + 1):  # the first run warms caches and is not counted
        pid = f"bench-{i}"
        from ledger.client import ConsortiaClient

        ConsortiaClient(ledger, admin).create_process(
            pid,
            "avg:1",
            list(consortium.msp_ids),
            {"kind": "ring", "seed": 0},
            2,
            hyperparameters={"eps": 0.25},
        )
        _consent(consortium, ledger, pid)
        ledger.submit(admin, "LearningProcess:start", pid)
        t = time.perf_counter()
        outcome = agent.run_process_round(pid)
        wall = time.perf_counter() - t
        if outcome.status != "completed":
            raise SystemExit(f"{runtime_name} task did not complete: {outcome}")
        if i:
            walls.append(wall)
            steps.append(outcome.step_seconds)
    ledger.close()
    return _summary(walls, steps, repeats)


def warm_overheads(runtime_name: str, repeats: int, work: Path) -> dict[str, float]:
    """Per-round overhead with warm workers: one process of ``repeats + 1`` rounds, both
    organisations warm; Org1's rounds 2.. are timed (round 1 starts the worker). Each timed round
    includes fetching and decrypting the inbox, a fresh key registered, sealing the outbox and
    completing the record."""
    from exchange.service import HostedServices

    root = work / f"warm-{runtime_name}"
    consortium, ledger, runtime = _setup(runtime_name, root)
    hosted = HostedServices()  # both agents run here: each reaches the other's store in this process
    agents = [
        _agent(root, consortium, ledger, runtime, o, warm=True, hosted=hosted) for o in consortium.msp_ids
    ]
    admin = consortium.identity("Org1")
    rounds = repeats + 1
    from ledger.client import ConsortiaClient

    ConsortiaClient(ledger, admin).create_process(
        "warm",
        "avg:1",
        list(consortium.msp_ids),
        {"kind": "ring", "seed": 0},
        rounds,
        hyperparameters={"eps": 0.25},
    )
    _consent(consortium, ledger, "warm")
    ledger.submit(admin, "LearningProcess:start", "warm")
    walls, steps = [], []
    try:
        for rnd in range(1, rounds + 1):
            for i, a in enumerate(agents):
                t = time.perf_counter()
                outcome = a.run_process_round("warm")
                wall = time.perf_counter() - t
                if outcome.status != "completed" or outcome.round != rnd:
                    raise SystemExit(f"warm {runtime_name} round {rnd} did not complete: {outcome}")
                if i == 0 and rnd > 1:
                    walls.append(wall)
                    steps.append(outcome.step_seconds)
    finally:
        for a in agents:
            a.close()
        ledger.close()
    return _summary(walls, steps, repeats)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.executor")
    p.add_argument("--quick", action="store_true", help="5 repeats per runtime (default 20)")
    p.add_argument("--repeats", type=int)
    p.add_argument("--runtimes", default="container,sandbox")
    p.add_argument("--no-warm", action="store_true", help="skip the warm-worker measurements")
    args = p.parse_args(argv)
    repeats = args.repeats or (5 if args.quick else 20)
    runtimes = [r for r in args.runtimes.split(",") if r]

    if "container" in runtimes:
        import subprocess

        root = Path(__file__).resolve().parent.parent
        proc = subprocess.run(
            [str(root / "scripts" / "install-container-engine")], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise SystemExit(f"container engine unavailable: {proc.stderr[-500:]}")
        os.environ.setdefault("CONSORTIA_DOCKER_HOST", proc.stdout.strip().splitlines()[-1])

    inproc = inprocess_seconds(repeats)
    print(f"in-process step (init+step), median: {inproc * 1e3:.3f} ms")
    details = {}
    with tempfile.TemporaryDirectory(prefix="consortia-bench-") as tmp:
        for rt in runtimes:
            d = agent_overheads(rt, repeats, Path(tmp))
            details[rt] = d
            target = TARGETS.get(f"{rt}_overhead_s")
            verdict = (
                ""
                if target is None
                else (f" (target <= {target:.2f} s: {'met' if d['overhead_s'] <= target else 'MISSED'})")
            )
            print(
                f"{rt:9s} task overhead, median of {repeats}: {d['overhead_s']:.3f} s "
                f"[min {d['overhead_min_s']:.3f}, max {d['overhead_max_s']:.3f}; wall {d['wall_s']:.3f} s, "
                f"step inside {d['step_s'] * 1e3:.3f} ms]{verdict}"
            )
        if not args.no_warm:
            for rt in runtimes:
                d = warm_overheads(rt, repeats, Path(tmp))
                details[f"warm_{rt}"] = d
                print(
                    f"warm {rt:9s} per-round overhead, median of {repeats}: {d['overhead_s']:.3f} s "
                    f"[min {d['overhead_min_s']:.3f}, max {d['overhead_max_s']:.3f}] "
                    f"(stretch target < 0.10 s: {'met' if d['overhead_s'] < 0.1 else 'MISSED'})"
                )
    load = os.getloadavg()[0]
    print(
        f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} cores -- the figures scale with it"
    )
    summary = {
        "benchmark": "executor",
        "quick": bool(args.quick),
        "repeats": repeats,
        "inprocess_s": round(inproc, 6),
        "load_average": round(load, 2),
    }
    for rt in runtimes:
        summary[f"{rt}_overhead_s"] = round(details[rt]["overhead_s"], 4)
        if f"warm_{rt}" in details:
            summary[f"warm_{rt}_overhead_s"] = round(details[f"warm_{rt}"]["overhead_s"], 4)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "executor-quick" if args.quick else "executor"
    (RESULTS / f"{name}.json").write_text(
        json.dumps(
            {
                "summary": summary,
                "details": details,
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "targets": TARGETS,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    lines = [
        f"# Executor overhead ({'quick, ' if args.quick else ''}{repeats} repeats)",
        "",
        "| runtime | overhead median (s) | min | max | wall (s) | target (s) |",
        "|---|---|---|---|---|---|",
    ]
    for rt in [k for k in details]:
        d = details[rt]
        lines.append(
            f"| {rt} | {d['overhead_s']:.3f} | {d['overhead_min_s']:.3f} | {d['overhead_max_s']:.3f} | "
            f"{d['wall_s']:.3f} | {TARGETS.get(rt + '_overhead_s', 0.1 if rt.startswith('warm_') else '')} |"
        )
    lines += [
        "",
        f"In-process init+step: {inproc * 1e3:.3f} ms. Load average at the end: {load:.1f} "
        f"on {os.cpu_count()} shared cores.",
        "",
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
