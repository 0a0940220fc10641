"""What collaboration bought each member, as a process reports it, against what it bought on unseen data
(docs/models.md "What collaboration bought you").

    python -m benchmarks.gain [--quick] [--datasets breastw,spam,pc1] [--runs N]

The held-out procedure of :mod:`benchmarks.heldout` (a common stratified 30 % test set; the rest dealt to
10 organisations with per-class Dirichlet(0.5) shares; split seed i, algorithm seed 100 + i), run through
the platform's step function in the simulator with the default validation slice
(:data:`algorithms.validation.DEFAULT_FRACTION`): each member trains on the rest of its rows and, after the
last round, reports the balanced accuracy of its collaborative model and of the model trained alone on its
own validation slice (the figures its signed result carries, ``SimulationResult.validation``). The same two
models are then scored on the common test set, which no member saw.

Collaborative random forests in the rare-positive mode on a ring (the held-out headline variant). Per
dataset, over runs and members: the mean reported gain, the mean test-set gain, the members whose reported
gain is negative, how often the sign of the reported gain agrees with the test-set one (gains within ±0.01
count as "no change"), the correlation of the two, and the slice sizes. Writes
``benchmarks/results/gain[-quick].{json,md}``; the last line printed is the JSON summary.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.collab_rf.protocol import DEFAULT_SCHEDULE
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from algorithms.validation import DEFAULT_FRACTION, split, train_alone
from benchmarks.heldout import ORGANISATIONS, make_data

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = ("breastw", "spam", "pc1")
TIE = 0.01


def _sign(gain: float) -> int:
    return 0 if abs(gain) <= TIE else (1 if gain > 0 else -1)


def run(dataset: str, i: int, max_rows: int | None) -> list[dict[str, Any]]:
    """Every member of run ``i``: its reported (validation-slice) and its test-set figures."""
    data = make_data(dataset, i, max_rows)
    orgs = {
        f"org{s:02d}": LocalDataset(data.X[r], data.y[r], name=f"org{s:02d}")
        for s, r in enumerate(data.shares())
    }
    # the rare-positive mode (the held-out evaluation's headline variant)
    alg = CollaborativeRandomForest(
        schedule=DEFAULT_SCHEDULE, tree_seed=None, positive_weight="balanced", vote="evidence"
    )
    seed = 100 + i
    sim = simulate(
        alg, orgs, alg.rounds, seed, {"kind": "ring", "seed": seed}, validation_fraction=DEFAULT_FRACTION
    )
    test = LocalDataset(data.X_test, data.y_test)
    members = []
    for org, d in orgs.items():
        train, _ = split(d, DEFAULT_FRACTION, seed, org)
        reported = sim.validation[org]
        _, test_collab = alg.validation_score(sim.model(org), test, seed)
        _, test_alone = alg.validation_score(train_alone(alg, train, seed, alg.rounds, org), test, seed)
        members.append(
            {
                "organisation": org,
                "metric": reported["metric"],
                "rows": len(d),
                "positives": int(np.asarray(d.labels).sum()),
                "slice_rows": reported["rows"],
                "reported_isolated": reported["isolated"],
                "reported_collab": reported["collaborative"],
                "reported_gain": reported["collaborative"] - reported["isolated"],
                "test_isolated": test_alone,
                "test_collab": test_collab,
                "test_gain": test_collab - test_alone,
            }
        )
    return members


def summarise(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of ``members``, and the same restricted to the members whose slice holds both classes
    (``two_class``: the reported metric is the balanced accuracy)."""
    out = _figures(members)
    both = [m for m in members if m.get("metric") == "balanced_accuracy"]
    out["two_class"] = _figures(both) if both else None
    return out


def _figures(members: list[dict[str, Any]]) -> dict[str, Any]:
    rep = np.array([m["reported_gain"] for m in members])
    tst = np.array([m["test_gain"] for m in members])
    agree = [_sign(a) == _sign(b) for a, b in zip(rep, tst)]
    return {
        "members": len(members),
        "mean_reported_gain": round(float(rep.mean()), 4),
        "mean_test_gain": round(float(tst.mean()), 4),
        "reported_negative": int((rep < 0).sum()),
        "test_negative": int((tst < 0).sum()),
        "reported_negative_but_test_positive": int(((rep < 0) & (tst > TIE)).sum()),
        "sign_agreement": round(float(np.mean(agree)), 3),
        "correlation": round(float(np.corrcoef(rep, tst)[0, 1]), 3)
        if rep.std() > 0 and tst.std() > 0
        else None,
        "median_slice_rows": float(np.median([m["slice_rows"] for m in members])),
    }


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# What collaboration bought each member ({'quick' if summary['quick'] else 'full'})",
        "",
        f"`python -m benchmarks.gain{' --quick' if summary['quick'] else ''}`: collaborative RF (rare-positive "
        f"mode, ring), {ORGANISATIONS} organisations with Dirichlet(0.5) shares, {summary['runs']} runs, "
        f"validation fraction {DEFAULT_FRACTION}. *Reported*: the balanced accuracy gain a member's signed "
        "result carries (its own validation slice); *test*: the same two models on the common 30 % test set. "
        f"Signs agree when both gains are above {TIE}, both below −{TIE} or both within ±{TIE}.",
        "",
        "A member whose slice holds one class only reports `one_class_accuracy` (the balanced accuracy on one "
        "class is that class's accuracy); *two-class* rows count only the members whose slice holds both.",
        "",
        "| dataset | members | mean reported gain | mean test gain | reported < 0 | test < 0 | "
        "reported < 0, test > 0 | sign agreement | correlation | median slice rows |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d, entry in summary["datasets"].items():
        for label, s in ((d, entry), (f"{d}, two-class", entry["two_class"])):
            if s is None:
                continue
            lines.append(
                f"| {label} | {s['members']} | {s['mean_reported_gain']:+.3f} | {s['mean_test_gain']:+.3f} | "
                f"{s['reported_negative']} | {s['test_negative']} | {s['reported_negative_but_test_positive']} | "
                f"{s['sign_agreement']:.2f} | {s['correlation']} | {s['median_slice_rows']:g} |"
            )
    lines += ["", f"CPU {summary['cpu_seconds']} s, wall {summary['wall_seconds']} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 runs instead of 3")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    datasets = [d for d in args.datasets.split(",") if d]
    runs = args.runs or (2 if args.quick else 3)
    t0, c0 = time.perf_counter(), time.process_time()
    per: dict[str, list[dict[str, Any]]] = {}
    for d in datasets:
        for i in range(runs):
            members = run(d, i, None)
            per.setdefault(d, []).extend(dict(m, run=i) for m in members)
            s = summarise(members)
            print(
                f"  {d} run {i}: mean reported gain {s['mean_reported_gain']:+.3f}, test {s['mean_test_gain']:+.3f}, "
                f"sign agreement {s['sign_agreement']:.2f}",
                flush=True,
            )
    summary = {
        "quick": args.quick,
        "runs": runs,
        "validation_fraction": DEFAULT_FRACTION,
        "datasets": {d: summarise(ms) for d, ms in per.items()},
        "per_member": per,
        "cpu_seconds": round(time.process_time() - c0, 1),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
    }
    if not args.no_write:
        stem = "gain-quick" if args.quick else "gain"
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=1) + "\n")
        (RESULTS / f"{stem}.md").write_text(markdown(summary))
    print(json.dumps({"datasets": summary["datasets"], "runs": runs, "cpu_seconds": summary["cpu_seconds"]}))
    return summary


if __name__ == "__main__":
    main()
