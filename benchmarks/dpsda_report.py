"""Report formatting of ``benchmarks.dpsda``: markdown tables, the regret figure, the ε of the last JSON line.

The constants shared with the experiment (σ grids, variants, δ, n) live here so both modules use one copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs

SIGMAS = (0.0, 1.0, 2.0, 5.0)
MNIST_SIGMAS = (0.0, 0.5, 1.0, 2.0, 5.0)  # ε = ∞, 2, 1, 0.5, 0.2
VARIANTS = (("C", dpsda_graphs), ("PS", dpsda_digraphs))
DELTA = 1e-5
N_NODES = 7


def eps_label(sigma: float) -> str:
    return "inf" if sigma == 0 else f"{1.0 / sigma:g}"


def fmt_eps(value: float | None) -> str:
    return "∞" if value is None else f"{value:.4g}"


def plot_regret(summary: dict, horizon: int, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(1, horizon + 1)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, (variant, _) in enumerate(VARIANTS):
        for row, (key, label) in enumerate((("curve_R_over_T", "R(T)/T"), ("curve_Ravg_over_T", "R̃(T)/T"))):
            ax = axes[row, col]
            for sigma in SIGMAS:
                lab = "non-private" if sigma == 0 else f"σ = {sigma:g} (ε = {1 / sigma:g})"
                ax.semilogy(t, summary["per_variant"][variant][eps_label(sigma)][key], label=lab)
            ax.set_title(f"DPSDA-{variant}: {label}")
            ax.set_xlabel("T")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def accuracy_rows(accs: dict[str, list[dict]]) -> list[str]:
    """One table row per variant: its runs' test / train accuracy."""
    return [
        f"| DPSDA-{v} | " + " | ".join(f"{a['test']:.4f} / {a['train']:.4f}" for a in runs) + " |"
        for v, runs in accs.items()
    ]


def markdown(report: dict) -> str:
    lines = [
        f"# DPSDA benchmark ({report['mode']})",
        "",
        f"OLR: m = 21, n = 7, T = {report['olr']['horizon']}, X = [-5,5]^21, seeds {report['olr']['seeds']}, "
        f"{'code convention (lookahead, frozen noise)' if report['olr']['lookahead'] else 'correct online protocol'}.",
        "",
        "| alg | σ | nominal ε/step | R(100)/100 | R(500)/T [min–max] | R̃(500)/T | slope mean (max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant, rows in report["olr"]["per_variant"].items():
        for e, row in rows.items():
            lines.append(
                f"| {variant} | {row['sigma']:g} | {e} | {row['R100_over_T']:.3f} | {row['R_over_T']:.3f} "
                f"[{row['R_over_T_min']:.2f}–{row['R_over_T_max']:.2f}] | {row['Ravg_over_T']:.3f} | "
                f"{row['loglog_slope_mean']:.3f} ({row['loglog_slope_max']:.3f}) |"
            )
    lines += ["", "Checks: " + json.dumps(report["olr"]["checks"]), ""]
    lines += privacy_markdown(
        "OLR",
        {e: row["privacy"] for e, row in report["olr"]["per_variant"]["C"].items()},
        report["olr"]["horizon"],
    )
    if "olr_lookahead" in report:
        lines += [
            "Code convention (lookahead=True, frozen gradient noise):",
            "",
            "| alg | σ | R(500)/T | R̃(500)/T |",
            "|---|---|---|---|",
        ]
        for variant, rows in report["olr_lookahead"]["per_variant"].items():
            for row in rows.values():
                lines.append(
                    f"| {variant} | {row['sigma']:g} | {row['R_over_T']:.3f} | {row['Ravg_over_T']:.3f} |"
                )
        lines += ["", "Checks: " + json.dumps(report["olr_lookahead"]["checks"]), ""]
    m = report.get("mnist")
    if m:
        lines += [
            f"MNIST OBC: T = {m['horizon']}, |B_t| = {m['batch']}, box radius {m['radius']}, seeds {m['seeds']}; "
            "accuracy of the final decision x(T) (test / train).",
            "",
        ]
        for task, s in m["tasks"].items():
            lines += [
                f"## {task} (train {s['n_train']}, test {s['n_test']}); centralised projected SGD: "
                f"test {s['psgd']['test']:.4f}, train {s['psgd']['train']:.4f}",
                "",
                "| alg | "
                + " | ".join(f"σ = {sg:g} (nominal ε/step {eps_label(sg)})" for sg in MNIST_SIGMAS)
                + " |",
                "|---|" + "---|" * len(MNIST_SIGMAS),
            ]
            lines += accuracy_rows({v: [s[v][eps_label(sg)] for sg in MNIST_SIGMAS] for v, _ in VARIANTS})
            lines += [
                "",
                "gap to PSGD (points): "
                + ", ".join(f"{v} {s[f'{v}_nonprivate_gap_to_psgd_points']:.2f}" for v, _ in VARIANTS),
                "",
            ]
            cal = m["calibrated_privacy"]
            lines += [
                "At the σ that a rigorous network ε requires (test / train accuracy):",
                "",
                "| alg | " + " | ".join(f"ε_net = {t} (σ = {cal[t]['sigma']:.4g})" for t in cal) + " |",
                "|---|" + "---|" * len(cal),
            ]
            lines += accuracy_rows({v: [s[f"{v}_calibrated"][t] for t in cal] for v, _ in VARIANTS})
            lines.append("")
        lines += privacy_markdown("MNIST", m["privacy"], m["horizon"])
    return "\n".join(lines) + "\n"


def privacy_markdown(name: str, rows: dict, horizon: int) -> list[str]:
    """The ε every run of one experiment spends (the same for both variants: same n, T, Δ, σ)."""
    first = next(r for r in rows.values() if r["nominal"] is not None)
    lines = [
        f"Privacy spent by every {name} run (T = {horizon}: {horizon - 1} releases per node, "
        f"{N_NODES * (horizon - 1)} on the network; rigorous: L̂ = {first['gradient_clip']:.4g}, "
        f"Δ = 2nL̂√d = {first['sensitivity']:.4g}, δ = {DELTA:g}, the tightest of basic / zCDP / RDP):",
        "",
        "| σ | nominal ε/step | nominal ε (basic) | rigorous ε/step | node ε | network ε | network ε: basic / zCDP / RDP |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        if r["nominal"] is None:
            lines.append(f"| {r['sigma']:g} | ∞ | ∞ | ∞ | ∞ | ∞ | non-private |")
            continue
        net = r["network"]
        lines.append(
            f"| {r['sigma']:.4g} | {r['nominal_per_step']:.4g} | {r['nominal']:.4g} | "
            f"{r['node']['epsilon_per_release']:.4g} | {r['rigorous_node']:.4g} | {r['rigorous_network']:.4g} | "
            f"{net['basic']:.4g} / {net['zcdp']:.4g} / {net['rdp']:.4g} |"
        )
    return lines + [""]


def eps_headline(row: dict) -> dict:
    """Nominal and rigorous ε of one run, rounded for the last JSON line (None = non-private, ε = ∞)."""

    def r(v):
        return None if v is None else float(f"{v:.5g}")

    return {
        "nominal": r(row["nominal"]),
        "rigorous_node": r(row["rigorous_node"]),
        "rigorous_network": r(row["rigorous_network"]),
    }


def gaussian_markdown(gs: dict) -> str:
    """The Gaussian mode's section of the report: accuracy per sampling scheme, algorithm and ε, and what every
    calibrated run spends."""
    lines = [
        f"## Gaussian mode, MNIST {gs['task']} (train {gs['n_train']}, test {gs['n_test']}), T = {gs['horizon']}, "
        f"seeds {gs['seeds']}",
        "",
        f"Per-example clipping L̂ = {gs['gradient_clip']:g}; pixels centred by a μ = {gs['mean_mu']:g} Gaussian-private "
        f"mean (the exact mean without noise); ε is the rigorous network ε at δ = {gs['delta']:g}, private mean "
        "included. Test / train accuracy of x(T):",
        "",
    ]
    for name, sch in gs["schemes"].items():
        labels = list(next(iter(sch["accuracy"].values())))
        head = [
            "no noise" if e == "inf" else f"ε = {e} (z = {sch['privacy'][e]['noise_multiplier']:.4g})"
            for e in labels
        ]
        lines += [
            f"{name} (q = {sch['rate']:g}, b = {sch['batch']}, {sch['releases']} composed release(s)):",
            "",
            "| alg | " + " | ".join(head) + " |",
            "|---|" + "---|" * len(head),
        ]
        lines += accuracy_rows({v: [runs[e] for e in labels] for v, runs in sch["accuracy"].items()})
        lines += [
            "",
            "| target ε | z | s/L̂ per coordinate | ρ (zCDP) | ε zCDP | ε RDP (order) | ε reported |",
            "|---|---|---|---|---|---|---|",
        ]
        factor = (2.0 if name == "stream" else 1.0) * N_NODES**0.5 / sch["batch"]
        for e, p in sch["privacy"].items():
            lines.append(
                f"| {e} | {p['noise_multiplier']:.4g} | {p['noise_multiplier'] * factor:.4g} | {p['rho']:.4g} | "
                f"{p['zcdp']:.4g} | {p['rdp']:.4g} ({p['rdp_order']:g}) | {p['epsilon']:.4g} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
