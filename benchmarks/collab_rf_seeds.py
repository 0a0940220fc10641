"""How much of the Table 3 gap is the tree RNG? The --quick protocol under several tree seeds.

    python -m benchmarks.collab_rf_seeds                          # tree seeds 42, 0, 1 (+ the default scheme)
    python -m benchmarks.collab_rf_seeds --tree-seeds 42,7 --jobs 2

Same data, split (seed 45), P-greedy ranking, topologies and process seed as ``benchmarks.collab_rf
--quick``; only the forests' ``random_state`` changes: ``tree_seed=r`` gives every organisation's k-th
FIT ``random_state = r + k`` (the authors' scheme; their code starts at 42), ``default`` draws it from
(process seed, position, k). Per run: the Table 3 test means and the largest |ours − paper| per metric;
over the runs: mean, standard deviation and range of those gaps. No seed is chosen from these numbers:
the reproduction default stays ``tree_seed=None``. Writes benchmarks/results/collab_rf_seeds.{json,md};
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


def one_run(tree_seed: int | None, seed: int = 42, centralised: bool = True, max_depth: int = 10) -> dict:
    """The --quick protocol (paper's ranking, four topologies and, unless ``centralised`` is False, the
    centralised forest: 40 trees on 256k rows, most of a run's CPU time) for one tree seed."""
    t0 = time.perf_counter()
    X, y = load_creditcard()
    split = split_nodes(X, y)
    datasets = {n.name: LocalDataset(n.X_train, n.y_train, name=n.name) for n in split.nodes}
    algo = dict(max_depth=max_depth, n_jobs=1, tree_seed=tree_seed)
    scores = {}
    for topo in TOPOLOGIES:
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
        lines.append(
            f"| {r['tree_seed'] if r['tree_seed'] is not None else 'default'} | "
            + " | ".join(cells)
            + f" | {gaps} |"
        )
    for r in runs:
        if r.get("source"):
            lines += [
                "",
                f"Row {r['tree_seed'] if r['tree_seed'] is not None else 'default'}: from {r['source']}.",
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
        "--tree-seeds", default="default,42,0,1", help="comma-separated; 'default' = tree_seed None"
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (one process each)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--skip-centralised", action="store_true", help="the four topologies only")
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
        seeds = [None if s == "default" else int(s) for s in args.tree_seeds.split(",") if s]
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            n = len(seeds)
            runs = list(pool.map(one_run, seeds, [args.seed] * n, [not args.skip_centralised] * n))
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
