"""How much of the Table 3 gap is the tree RNG? The --quick protocol under several tree seeds.

    python -m benchmarks.collab_rf_seeds                          # tree seeds 42, 0, 1 and 'process'
    python -m benchmarks.collab_rf_seeds --tree-seeds 42,7 --jobs 2
    python -m benchmarks.collab_rf_seeds --centralised-only       # add the centralised forest to the report

Same data, split (seed 45), P-greedy ranking, topologies and process seed as ``benchmarks.collab_rf
--quick``; only the forests' ``random_state`` changes: ``tree_seed=r`` gives every organisation's k-th
FIT ``random_state = r + k`` (the authors' scheme, seed 003 §VI; their code starts at 42, the
reproduction default), ``process`` (tree_seed None, the project's earlier default) draws it from
(process seed, position, k). Per run: the Table 3 test means and the largest |ours − paper| per metric
over the four topologies and the centralised forest; over the runs: mean, standard deviation and range
of those gaps. ``--centralised-only`` fits only the centralised forest (40 trees on 256k rows) per seed
and merges it into the runs already in the report. Writes benchmarks/results/collab_rf_seeds.{json,md};
the last line printed is the JSON summary.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from algorithms.datasets.creditcard import load_creditcard, split_nodes
from algorithms.step import LocalDataset
from benchmarks.collab_rf import QUICK_RANKINGS, evaluate, run_topology, summarise, table3_gaps
from benchmarks.collab_rf_report import METRICS, PAPER_TABLE3, RESULTS, TOPOLOGIES


def one_run(
    tree_seed: int | None,
    seed: int = 42,
    centralised: bool = True,
    max_depth: int = 10,
    topologies: tuple[str, ...] = TOPOLOGIES,
) -> dict:
    """The --quick protocol (paper's ranking, ``topologies`` and, unless ``centralised`` is False, the
    centralised forest: 40 trees on 256k rows) for one tree seed."""
    t0 = time.perf_counter()
    X, y = load_creditcard()
    split = split_nodes(X, y)
    datasets = {n.name: LocalDataset(n.X_train, n.y_train, name=n.name) for n in split.nodes}
    algo = dict(max_depth=max_depth, n_jobs=1, tree_seed=tree_seed)
    scores = {}
    for topo in topologies:
        r = run_topology(topo, datasets, QUICK_RANKINGS, seed, **algo)
        scores[topo] = evaluate(r["models"], datasets, split.X_test, split.y_test, r["thresholds"])
    if centralised:
        Xc, yc = split.centralised_train()
        central = {"central": LocalDataset(Xc, yc, name="central")}
        c = run_topology("disconnected", central, QUICK_RANKINGS, seed, **algo)
        scores["centralised"] = evaluate(c["models"], central, split.X_test, split.y_test, c["thresholds"])
    summ = {t: summarise(s) for t, s in scores.items()}
    out = {
        "tree_seed": tree_seed,
        "test_means": {t: {m: round(summ[t][f"test_{m}"][0], 4) for m in METRICS} for t in summ},
        "max_abs_gap": table3_gaps(summ),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out, sort_keys=True), flush=True)
    return out


def merge_runs(base: list[dict], extra: list[dict]) -> list[dict]:
    """``base`` runs with the rows of the ``extra`` run of the same tree seed added (e.g. the centralised
    forest of a --centralised-only sweep); each run's max gap is then the larger of both, per metric."""
    by_seed = {r["tree_seed"]: r for r in extra}
    out = []
    for r in base:
        e = by_seed.pop(r["tree_seed"], None)
        if e is not None:
            r = dict(r, test_means={**r["test_means"], **e["test_means"]})
            r["max_abs_gap"] = {m: max(r["max_abs_gap"][m], e["max_abs_gap"][m]) for m in METRICS}
        out.append(r)
    return out + list(by_seed.values())


def run_from_benchmark(path: Path, tree_seed: int | None) -> dict:
    """The centralised row of a ``benchmarks.collab_rf`` result (its last JSON line, P-greedy ranking) as
    a run of this sweep, for the ``tree_seed`` that run used (files from before the option lack it)."""
    means = json.loads(path.read_text())["test_means"]["pgreedy_treekernel"]
    row = {m: means["centralised"][m] for m in METRICS}
    gap = {m: round(abs(row[m] - PAPER_TABLE3["centralised"][m][1][0]), 4) for m in METRICS}
    return {"tree_seed": tree_seed, "test_means": {"centralised": row}, "max_abs_gap": gap}


def seed_label(tree_seed: int | None) -> str:
    return str(tree_seed) if tree_seed is not None else "process"


def spread(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    return {
        "mean": round(float(v.mean()), 4),
        "std": round(float(v.std(ddof=1)) if len(v) > 1 else 0.0, 4),
        "min": round(float(v.min()), 4),
        "max": round(float(v.max()), 4),
    }


def markdown(runs: list[dict], summary: dict) -> str:
    topos = list(summary["test_means"])
    lines = [
        "# Collaborative RF: Table 3 test means under several tree seeds",
        "",
        "`python -m benchmarks.collab_rf_seeds`: the `--quick` protocol (full data, split seed 45, P-greedy "
        "ranking, process seed 42), only the forests' `random_state` varied. Test means BAcc / Prec / Rec.",
        "",
        "| tree seed | " + " | ".join(topos) + " | max gap BAcc / Prec / Rec |",
        "|---|" + "---|" * (len(topos) + 1),
    ]
    for r in runs:
        cells = [" / ".join(f"{r['test_means'][t][m]:.3f}" for m in METRICS) for t in topos]
        gaps = " / ".join(f"{r['max_abs_gap'][m]:.3f}" for m in METRICS)
        lines.append(f"| {seed_label(r['tree_seed'])} | " + " | ".join(cells) + f" | {gaps} |")
    for r in runs:
        if r.get("source"):
            lines += [
                "",
                f"Row {seed_label(r['tree_seed'])}: from {r['source']}.",
            ]
    lines += [
        "",
        f"Largest |ours − paper| over the Table 3 rows above ({', '.join(topos)}), across the runs:",
        "",
    ]
    lines += ["| metric | mean | std | min | max |", "|---|---|---|---|---|"]
    for m in METRICS:
        s = summary["max_abs_gap"][m]
        lines.append(f"| {m} | {s['mean']:.4f} | {s['std']:.4f} | {s['min']:.4f} | {s['max']:.4f} |")
    lines += ["", "Test mean per topology across the runs (mean ± std; the paper's Table 3 in brackets):", ""]
    lines += ["| topology | " + " | ".join(METRICS) + " |", "|---|---|---|---|"]
    for t, per in summary["test_means"].items():
        lines.append(
            f"| {t} | "
            + " | ".join(
                f"{per[m]['mean']:.3f} ± {per[m]['std']:.3f} ({PAPER_TABLE3[t][m][1][0]:.2f})"
                for m in METRICS
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tree-seeds",
        default="process,42,0,1",
        help="comma-separated; 'process' = tree_seed None (the seeding before the authors' became the default)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (one process each)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--skip-centralised", action="store_true", help="the four topologies only")
    ap.add_argument(
        "--add-from",
        action="append",
        default=[],
        metavar="SEED=PATH",
        help="with --centralised-only: take that seed's centralised row from a benchmarks.collab_rf result "
        "JSON instead of fitting it ('process' for tree_seed None)",
    )
    ap.add_argument(
        "--centralised-only",
        action="store_true",
        help="only the centralised forest per seed, merged into the runs of the existing report",
    )
    ap.add_argument(
        "--from-runs",
        default=None,
        help="write the report from the per-run JSON lines an earlier (e.g. stopped) sweep printed",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.from_runs:
        lines = Path(args.from_runs).read_text().splitlines()
        runs = [json.loads(x) for x in lines if x.startswith('{"max_abs_gap"')]
        seeds = [r["tree_seed"] for r in runs]
    else:
        seeds = [None if s in ("process", "default") else int(s) for s in args.tree_seeds.split(",") if s]
        n = len(seeds)
        topos = [() if args.centralised_only else TOPOLOGIES] * n
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            runs = list(
                pool.map(one_run, seeds, [args.seed] * n, [not args.skip_centralised] * n, [10] * n, topos)
            )
        if args.centralised_only:
            for spec in args.add_from:
                label, path = spec.split("=", 1)
                runs.append(run_from_benchmark(Path(path), None if label == "process" else int(label)))
            runs = merge_runs(json.loads((RESULTS / "collab_rf_seeds.json").read_text())["runs"], runs)
            seeds = [r["tree_seed"] for r in runs]
    topos = [t for t in (*TOPOLOGIES, "centralised") if all(t in r["test_means"] for r in runs)]
    summary = {
        "benchmark": "collab_rf_seeds",
        "tree_seeds": seeds,
        "max_abs_gap": {m: spread([r["max_abs_gap"][m] for r in runs]) for m in METRICS},
        "test_means": {t: {m: spread([r["test_means"][t][m] for r in runs]) for m in METRICS} for t in topos},
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "collab_rf_seeds.json").write_text(
        json.dumps({"runs": runs, "summary": summary}, indent=1, sort_keys=True) + "\n"
    )
    (RESULTS / "collab_rf_seeds.md").write_text(markdown(runs, summary))
    print(json.dumps(summary, sort_keys=True))
    return summary


if __name__ == "__main__":
    main()
