"""Choice of the CollabDict GGM defaults τ, β, ν by held-out likelihood (issue 31 item 2; docs/collabdict.md).

    python -m benchmarks.collabdict_selection [--quick]

The settings are those of ``benchmarks.heldout`` (docs/heldout.md): breastw, satellite and shuttle, the
one-class and the contaminated protocol (:func:`benchmarks.heldout.collabdict_trains`), split seed 0, 10
organisations with per-class Dirichlet(0.5) shares. No label is used: each organisation holds out a
validation slice of 20 % of its rows (:func:`validation_slices`), the collaborative mixture is fitted on the
rest (K = 10) and every validation row is scored by ln p^s(x) under its own organisation's model
(:func:`heldout_log_likelihood`). Coordinate-wise search: τ, then β, then ν, each set to the value with the
best mean over the six settings of the held-out ln p per validation row, the others at their current choice
(start: τ = 0, β = 50, ν = 1). Quick: satellite subsampled to 3,000 rows and shuttle to 6,000, 20 EM
iterations; full: shuttle 20,000 rows, 40 EM iterations. Writes
``benchmarks/results/collabdict_selection[-quick].{json,md}``; the last line printed is the JSON choice.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.collabdict import ggm
from algorithms.collabdict.ggm import GGMHyperParameters
from benchmarks.heldout import PROTOCOLS, SIZES, collabdict_trains, make_data

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = ("breastw", "satellite", "shuttle")
GRID: dict[str, list[float]] = {
    "tau": [0.0, 0.1, 0.5, 2.0],
    "weight_prior": [0.0, 10.0, 50.0, 200.0],
    "shrinkage": [0.1, 1.0, 10.0],
}
START = {"tau": 0.0, "weight_prior": 50.0, "shrinkage": 1.0}


def validation_slices(
    trains: list[np.ndarray], seed: int, fraction: float = 0.2
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each organisation's rows split into a fitting part and a validation slice (``fraction`` of its rows,
    at least one; chosen from ``seed`` and the organisation's position)."""
    fits, vals = [], []
    for s, X in enumerate(trains):
        perm = np.random.default_rng([seed, s]).permutation(len(X))
        k = max(1, int(round(fraction * len(X))))
        fits.append(X[perm[k:]])
        vals.append(X[perm[:k]])
    return fits, vals


def heldout_log_likelihood(
    trains: list[np.ndarray], hyper: GGMHyperParameters, iterations: int, seed: int
) -> dict[str, Any]:
    """Held-out log-likelihood of the collaborative sparse-GGM mixture fitted on every organisation's fitting
    part: the mean ln p^s(x) per validation row over all organisations (``pooled``), the lowest organisation
    mean (``worst``) and the number of active components."""
    fits, vals = validation_slices(trains, seed)
    models = ggm.fit_collaborative(fits, iterations, seed, hyper)
    lls = [ggm.log_likelihood(m, V) for m, V in zip(models, vals, strict=True)]
    return {
        "pooled": float(np.concatenate(lls).mean()),
        "worst": float(min(ll.mean() for ll in lls)),
        "active": int(np.asarray(models[0]["active"]).sum()),
    }


def select(quick: bool, iterations: int) -> dict[str, Any]:
    """The coordinate-wise choice (split seed 0, algorithm seed 100) with every trial's figures."""
    max_rows = SIZES[quick]["max_rows"]
    settings = [
        (f"{d}/{p}", collabdict_trains(make_data(d, 0, max_rows.get(d)), p)[0])
        for d in DATASETS
        for p in PROTOCOLS
    ]
    choice = dict(START)
    table: list[dict[str, Any]] = []
    means: dict[str, dict[str, float]] = {}
    for name, values in GRID.items():
        scores = {}
        for v in values:
            hyper = GGMHyperParameters(**dict(choice, **{name: v}))
            rows = []
            for label, trains in settings:
                r = heldout_log_likelihood(trains, hyper, iterations, 100)
                rows.append(r)
                table.append({"parameter": name, "value": v, "setting": label, **r})
                print(
                    f"  {name}={v:<6} {label}: held-out ln p per row {r['pooled']:.3f} "
                    f"(worst organisation {r['worst']:.3f}), {r['active']} active components",
                    flush=True,
                )
            scores[v] = sum(r["pooled"] for r in rows) / len(rows)
        choice[name] = max(values, key=lambda v: scores[v])
        means[name] = {str(v): round(x, 4) for v, x in scores.items()}
        print(f"  -> {name} = {choice[name]} (mean held-out ln p per row: {scores})", flush=True)
    return {"choice": choice, "means": means, "table": table}


def markdown(sel: dict[str, Any], quick: bool, seconds: float) -> str:
    lines = [
        f"# Choice of the GGM defaults by held-out log-likelihood ({'quick' if quick else 'full'})",
        "",
        "Coordinate-wise: τ, then β, then ν, each at the value with the best mean over the six settings of the "
        "held-out ln p per validation row (the others at their current choice; start τ = 0, β = 50, ν = 1). "
        "Split seed 0, algorithm seed 100; each organisation's validation slice is 20 % of its rows, scored "
        "under its own collaborative model. `python -m benchmarks.collabdict_selection"
        f"{' --quick' if quick else ''}`, {seconds:.0f} s.",
        "",
        f"Chosen: {sel['choice']}; mean held-out ln p per row: {sel['means']}.",
        "",
        "| parameter | value | setting | ln p per validation row | worst organisation | active components |",
        "|---|---|---|---|---|---|",
    ]
    for r in sel["table"]:
        lines.append(
            f"| {r['parameter']} | {r['value']} | {r['setting']} | {r['pooled']:.3f} | {r['worst']:.3f} | "
            f"{r['active']} |"
        )
    return "\n".join(lines + [""])


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="satellite and shuttle subsampled, 20 EM iterations")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    iterations = SIZES[args.quick]["iterations"]["ggm"]
    print("[collabdict_selection] GGM defaults by held-out log-likelihood", flush=True)
    sel = select(args.quick, iterations)
    seconds = time.perf_counter() - t0
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "collabdict_selection" + ("-quick" if args.quick else "")
    report = dict(
        sel, quick=args.quick, iterations=iterations, seconds=seconds, python=platform.python_version()
    )
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{stem}.md").write_text(markdown(sel, args.quick, seconds))
    print(json.dumps({"choice": sel["choice"], "means": sel["means"]}, sort_keys=True))
    return dict(sel["choice"])


if __name__ == "__main__":
    main()
