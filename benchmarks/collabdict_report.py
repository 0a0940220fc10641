"""Report formatting of ``benchmarks.collabdict``: the markdown tables and the last JSON line."""

from __future__ import annotations


def table(name: str, r: dict) -> list[str]:
    lines = [f"### {name}", "", "| training | mean AUC | worst org | per organisation |", "|---|---|---|---|"]
    for k in ("isolated", "collaborative", "centralised"):
        lines.append(
            f"| {k} (own test rows) | {r[k]['mean']:.4f} | {r[k]['worst']:.4f} | {r[k]['per_org']} |"
        )
    for k in ("isolated", "collaborative", "centralised"):
        m = r[f"{k}_merged"]
        lines.append(f"| {k} (merged test set) | {m['mean']:.4f} | {m['worst']:.4f} | {m['per_org']} |")
    return lines + [""]


def ggm_lines(name: str, g: dict) -> list[str]:
    """Both scores' AUC tables, the two aggregations (rounds, error vs centralised, time) and the isolated fits'
    time per iteration against organisation size."""
    lines = table(f"{name}, score eq. 20 (the paper's)", g["scores"]["eq20"])
    lines += table(f"{name}, score −ln p(x)", g["scores"]["nll"])
    lines += [
        "| aggregation | rounds / iteration | max relative error vs centralised | s / iteration | CPU s / iteration |",
        "|---|---|---|---|---|",
    ]
    for agg, a in g["aggregations"].items():
        lines.append(
            f"| {agg} | {a['rounds_per_iteration']} | {a['max_rel_error_vs_centralised']:.2e} | "
            f"{a['seconds_per_iteration']:.4f} | {a['cpu_seconds_per_iteration']:.4f} |"
        )
    lines.append(
        f"| centralised | – | – | {g['seconds_per_iteration_centralised']:.4f} | "
        f"{g['cpu_seconds_per_iteration_centralised']:.4f} |"
    )
    lines += [
        "",
        "| isolated fit: training rows | CPU s / iteration | of which M-step | active components |",
        "|---|---|---|---|",
    ]
    for n, t, m, k in zip(
        g["isolated_train_rows"],
        g["isolated_cpu_seconds_per_iteration"],
        g["isolated_mstep_cpu_seconds_per_iteration"],
        g["isolated_active_components"],
    ):
        lines.append(f"| {n} | {t:.4f} | {m:.4f} | {k} |")
    lines += [
        "",
        f"Collaborative model: {g['final_active_components']:.0f} of {g['n_components']} components "
        f"active (τ = {g['tau']} in {g['tau_units']} units).",
    ]
    return lines + [""]


def markdown(report: dict) -> str:
    """The whole report as markdown (consensus, shuttle per protocol, synthetic control, targets)."""
    args_quick, seed = report["quick"], report["seed"]
    cons, results, synthetic, targets = (
        report["consensus"],
        report["shuttle"],
        report["synthetic_control"],
        report["targets_met"],
    )
    md = [
        f"# CollabDict benchmark ({'quick' if args_quick else 'full'}, seed {seed})",
        "",
        "## Consensus iterations to 1e-6 relative error",
        "",
        "| graph / step | iterations |",
        "|---|---|",
    ]
    md += [f"| {k} | {v_} |" for k, v_ in cons.items()]
    for protocol, r in results.items():
        md += [
            "",
            f"## ODDS shuttle, {protocol} training, 5 organisations, training rows {r['train_rows']}",
            "",
        ]
        md += ggm_lines("GGM", r["ggm"]) + table("VAE", r["vae"])
    md += ["", f"## Synthetic control (not real data), training rows {synthetic['train_rows']}", ""]
    md += ggm_lines("GGM", synthetic["ggm"]) + table("VAE", synthetic["vae"])
    md += ["## Targets (shuttle)", ""] + [f"- {k}: {'met' if ok else 'NOT met'}" for k, ok in targets.items()]
    return "\n".join(md) + "\n"


def headline(report: dict, c3_error: float) -> dict:
    """The last printed JSON line: consensus figures, both scores' AUCs, timings, targets."""
    args_quick, cons, results, synthetic = (
        report["quick"],
        report["consensus"],
        report["shuttle"],
        report["synthetic_control"],
    )
    summary = {
        "benchmark": "collabdict",
        "quick": args_quick,
        "consensus_iters_cic_S31": cons["cic_degree_S31"],
        "consensus_iters_cic_S16381": cons["cic_degree_S16381"],
        "consensus_iters_ring_S31": cons["ring_S31"],
        "consensus_iters_ring_S16381_estimated": cons["ring_S16381_estimated"],
        "consensus_iters_cic_seed_step_S31": cons["cic_seed_step_S31"],
        "consensus_growth_31_to_16381": round(cons["cic_growth_31_to_16381"], 3),
        "consensus_c3_max_rel_error": float(f"{c3_error:.3g}"),
    }
    for protocol, r in results.items():
        for model in ("ggm", "vae"):
            for kind in ("isolated", "collaborative", "centralised"):
                for ev in ("", "_merged"):
                    for stat in ("mean", "worst"):
                        summary[f"{model}_{protocol}_auc_{kind}{ev}_{stat}"] = round(
                            r[model][kind + ev][stat], 4
                        )
        for kind in ("isolated", "collaborative", "centralised"):
            for ev in ("", "_merged"):
                summary[f"ggm_{protocol}_nll_auc_{kind}{ev}_mean"] = round(
                    r["ggm"]["scores"]["nll"][kind + ev]["mean"], 4
                )
        for name, a in r["ggm"]["aggregations"].items():
            summary[f"ggm_{protocol}_{name}_max_rel_error"] = float(
                f"{a['max_rel_error_vs_centralised']:.3g}"
            )
            summary[f"ggm_{protocol}_{name}_cpu_seconds_per_iteration"] = round(
                a["cpu_seconds_per_iteration"], 4
            )
        summary[f"ggm_{protocol}_isolated_cpu_seconds_per_iteration_by_rows"] = {
            str(n): round(t, 4)
            for n, t in zip(r["ggm"]["isolated_train_rows"], r["ggm"]["isolated_cpu_seconds_per_iteration"])
        }
        summary[f"ggm_{protocol}_final_active_components"] = r["ggm"]["final_active_components"]
        summary[f"ggm_{protocol}_time_ratio_decentralised_over_centralised"] = round(
            r["ggm"]["time_ratio_decentralised_over_centralised"], 3
        )
        summary[f"ggm_{protocol}_cpu_time_ratio_decentralised_over_centralised"] = round(
            r["ggm"]["cpu_time_ratio_decentralised_over_centralised"], 3
        )
    for model in ("ggm", "vae"):
        for kind in ("isolated", "collaborative", "centralised"):
            summary[f"synthetic_{model}_auc_{kind}_mean"] = round(synthetic[model][kind]["mean"], 4)
            summary[f"synthetic_{model}_auc_{kind}_worst"] = round(synthetic[model][kind]["worst"], 4)
    for kind in ("isolated", "collaborative", "centralised"):
        summary[f"synthetic_ggm_nll_auc_{kind}_mean"] = round(
            synthetic["ggm"]["scores"]["nll"][kind]["mean"], 4
        )
    summary["targets_met"] = report["targets_met"]
    summary["seconds"] = round(report["seconds"], 1)
    return summary
