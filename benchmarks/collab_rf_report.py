"""Report formatting of ``benchmarks.collab_rf``: the paper's Tables 2 and 3, the markdown report and the
estimator-origin picture (Fig. 5)."""

from __future__ import annotations

from pathlib import Path

from algorithms.datasets.creditcard import PAPER_TABLE1_TRAIN, PAPER_TEST

RESULTS = Path(__file__).resolve().parent / "results"
TOPOLOGIES = ("full", "pairwise", "random", "disconnected")
METRICS = ("bacc", "prec", "rec")

# Seed 003 Table 3: (mean, median) per metric, train and test; centralised: single values.
PAPER_TABLE3 = {
    "full": {
        "bacc": ((0.87, 0.87), (0.89, 0.89)),
        "prec": ((0.82, 0.88), (0.93, 0.92)),
        "rec": ((0.69, 0.73), (0.79, 0.79)),
    },
    "pairwise": {
        "bacc": ((0.88, 0.88), (0.89, 0.89)),
        "prec": ((0.86, 0.91), (0.92, 0.92)),
        "rec": ((0.71, 0.76), (0.77, 0.79)),
    },
    "random": {
        "bacc": ((0.88, 0.89), (0.88, 0.89)),
        "prec": ((0.88, 0.93), (0.93, 0.93)),
        "rec": ((0.71, 0.77), (0.75, 0.77)),
    },
    "disconnected": {
        "bacc": ((0.99, 1.00), (0.82, 0.84)),
        "prec": ((0.95, 1.00), (0.79, 0.83)),
        "rec": ((0.93, 1.00), (0.65, 0.68)),
    },
    "centralised": {
        "bacc": ((0.92, 0.92), (0.92, 0.92)),
        "prec": ((1.00, 1.00), (0.98, 0.98)),
        "rec": ((0.84, 0.84), (0.84, 0.84)),
    },
}
# Seed 003 Table 2: max and min test improvement over disconnected (value, node).
PAPER_TABLE2 = {
    "full": {
        "max": {"bacc": (0.395, 2), "prec": (0.918, 2), "rec": (0.789, 2)},
        "min": {"bacc": (-1.75e-2, 18), "prec": (-5.2e-2, None), "rec": (-3.5e-2, None)},
    },
    "pairwise": {
        "max": {"bacc": (0.395, 2), "prec": (0.938, 2), "rec": (0.789, 2)},
        "min": {"bacc": (3.5e-5, 7), "prec": (-7.9e-2, None), "rec": (0.0, None)},
    },
    "random": {
        "max": {"bacc": (0.333, 2), "prec": (0.974, 2), "rec": (0.667, 2)},
        "min": {"bacc": (-1.75e-2, 18), "prec": (-3.7e-2, None), "rec": (-3.5e-2, None)},
    },
}


def fmt_mean_median(x: tuple[float, float]) -> str:
    return f"{x[0]:.3f} / {x[1]:.3f}"


def write_reports(
    tag: str,
    split,
    summaries: dict,
    improvements: dict,
    origins: dict,
    orgs: list[str],
    timings: dict,
    getop: dict,
    fraction: float,
) -> list[Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    paths = []
    lines = [
        f"# Collaborative RF on credit-card fraud ({tag})",
        "",
        "Reproduction of seed 003 §VI (docs/collab_rf.md). "
        + (
            "Full data: 284,807 rows, N = 20, offset 0.7."
            if fraction == 1.0
            else f"SMOKE run: all frauds, {fraction:.0%} of the normal rows of each node (train and test); the numbers are not "
            "comparable to the paper's."
        ),
        "",
        "## Table 1: split (train samples / frauds per node; ours vs paper)",
        "",
        "| node | train (ours) | frauds (ours) | train (paper) | frauds (paper) |",
        "|---|---|---|---|---|",
    ]
    for (n, a, b), (pa, pb) in zip(split.table1(), PAPER_TABLE1_TRAIN):
        lines.append(f"| {n} | {a} | {b} | {pa} | {pb} |")
    lines.append(
        f"| common test | {len(split.y_test)} | {int(split.y_test.sum())} | {PAPER_TEST[0]} | {PAPER_TEST[1]} |"
    )
    for ranking, summ in summaries.items():
        lines += [
            "",
            f"## Table 3 ({ranking}): mean / median over the 20 nodes, ours | paper",
            "",
            "| topology | " + " | ".join(f"{s} {m}" for m in METRICS for s in ("train", "test")) + " |",
            "|---|" + "---|" * 6,
        ]
        for topo in (*TOPOLOGIES, "centralised"):
            if topo not in summ:
                continue
            cells = []
            for m in METRICS:
                for si, s in enumerate(("train", "test")):
                    cells.append(
                        f"{fmt_mean_median(summ[topo][f'{s}_{m}'])} \\| {fmt_mean_median(PAPER_TABLE3[topo][m][si])}"
                    )
            lines.append(f"| {topo} | " + " | ".join(cells) + " |")
        lines += [
            "",
            f"## Table 2 ({ranking}): test improvement over disconnected (node), ours | paper",
            "",
            "| topology | stat | " + " | ".join(METRICS) + " |",
            "|---|---|---|---|---|",
        ]
        for topo, imp in improvements[ranking].items():
            for stat in ("max", "min", "mean", "median"):
                cells = []
                for m in METRICS:
                    v, node = imp[stat][m]
                    ours = f"{v:+.3f}" + (f" (Node{node:02d})" if node is not None else "")
                    paper = PAPER_TABLE2.get(topo, {}).get(stat, {}).get(m)
                    ptxt = (
                        ""
                        if paper is None
                        else f"{paper[0]:+.3g}" + (f" (Node{paper[1]:02d})" if paper[1] is not None else "")
                    )
                    cells.append(f"{ours} \\| {ptxt}" if ptxt else ours)
                lines.append(f"| {topo} | {stat} | " + " | ".join(cells) + " |")
    lines += ["", "## Timings", "", "| run | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in timings.items()]
    lines += [
        "",
        f"GET_TOP (P-greedy tree kernel) on {getop['n_trees']} trees of depth {getop['min_depth']}–{getop['max_depth']} "
        f"({getop['mean_nodes']:.0f} nodes on average): top 10 in {getop['seconds_k10']:.3f} s, top 50 in {getop['seconds_k50']:.3f} s.",
        "",
        f"Estimator-origin matrices (Fig. 5): collab_rf_{tag}_origins.png."
        if tag != "quick"
        else "Estimator-origin matrices (Fig. 5): the quick run writes none; the P-greedy row of"
        " collab_rf_full_origins.png equals this run's if the full run used the same --tree-seed.",
    ]
    md = RESULTS / f"collab_rf_{tag}.md"
    md.write_text("\n".join(lines) + "\n")
    paths.append(md)
    if tag == "quick":  # its matrices are the P-greedy row of a full run with the same tree seed
        return paths

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rankings = list(origins)
    fig, axes = plt.subplots(
        len(rankings), len(TOPOLOGIES), figsize=(4 * len(TOPOLOGIES), 4 * len(rankings)), squeeze=False
    )
    for r, ranking in enumerate(rankings):
        for c, topo in enumerate(TOPOLOGIES):
            ax = axes[r][c]
            M = origins[ranking][topo]
            ax.imshow(M, cmap="viridis", vmin=0)
            ax.set_title(f"{topo} ({ranking})", fontsize=9)
            ax.set_xlabel("creator node")
            ax.set_ylabel("holder node")
            ax.set_xticks(range(0, len(orgs), 2))
            ax.set_yticks(range(0, len(orgs), 2))
    fig.tight_layout()
    png = RESULTS / f"collab_rf_{tag}_origins.png"
    fig.savefig(png, dpi=80)
    plt.close(fig)
    paths.append(png)
    return paths
