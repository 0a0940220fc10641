"""The report of ``consortia demo`` (:mod:`api.demo`): model quality on the common test set, the
plots (quality, estimator origins) and the markdown summary written next to ``report.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def quality(estimators: list, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    from algorithms.collab_rf.estimators import ensemble_scores
    from algorithms.collab_rf.metrics import detection_scores

    s = ensemble_scores(estimators, X)
    out = detection_scores(y, (s > 0.5).astype(np.int64))
    out["auc"] = float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else float("nan")
    out["ap"] = float(average_precision_score(y, s)) if y.sum() else float("nan")
    return out


def plots(out: Path, orgs: list[str], collab: dict, alone: dict, matrix: list[list[int]]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(len(orgs))
    for ax, metric, title in ((axes[0], "bacc", "balanced accuracy"), (axes[1], "auc", "ROC AUC")):
        ax.bar(x - 0.2, [alone[o][metric] for o in orgs], 0.4, label="training alone")
        ax.bar(x + 0.2, [collab[o][metric] for o in orgs], 0.4, label="audited collaborative")
        ax.set_xticks(x, [o.replace("MSP", "") for o in orgs])
        ax.set_ylim(0.4, 1.0)
        ax.set_title(f"{title} on the common test set")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    paths.append(out / "quality.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4.6, 4))
    im = ax.imshow(np.array(matrix), cmap="Blues")
    ax.set_xticks(range(len(orgs)), [o.replace("MSP", "") for o in orgs], rotation=45)
    ax.set_yticks(range(len(orgs)), [o.replace("MSP", "") for o in orgs])
    ax.set_xlabel("creator of the estimator")
    ax.set_ylabel("owner of the final model")
    ax.set_title("estimator origins (from the ledger)")
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    paths.append(out / "estimator_origins.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A markdown table: ``| a | b |`` lines under a ``|---|---|`` rule."""
    return [
        "| " + " | ".join(header) + " |",
        "|---" * len(header) + "|",
        *("| " + " | ".join(str(v) for v in row) + " |" for row in rows),
    ]


def markdown(r: dict[str, Any]) -> str:
    """The demo's ``report.md``: split, provenance, verification, gains, quality and estimator origins."""
    orgs = r["organisations"]
    prov, ver = r["provenance"], r["verification"]
    alone, audited = r["quality"]["alone"], r["quality"]["audited"]
    lines = [
        f"# Consortia demo report: {r['process_id']}",
        "",
        f"Collaborative random forests (seed 003) among {len(orgs)} organisations on the {r['backend']} ledger, "
        f"runtime `{r['runtime']}`, {r['rounds']} rounds, image `{r['image']['id']}` "
        f"(`{r['image']['digest']}`).",
        "",
        f"Process wall time {r['wall_seconds']['process']:.1f} s (algorithm steps "
        f"{r['wall_seconds']['algorithm_steps']:.1f} s); demo total {r['wall_seconds']['demo_total']:.0f} s.",
        "",
        "## Split (train rows / frauds)",
        "",
        *_table(
            ["organisation", "rows", "frauds"],
            [[o, *r["split"][o]] for o in orgs] + [["common test", *r["test"]]],
        ),
        "",
        "## Provenance",
        "",
        *_table(
            ["organisation", "records", "image", "data commitment", "messages sent", "model", "estimators"],
            [
                [
                    o,
                    prov[o]["records"],
                    f"`{prov[o]['image_digest'][0]}`",
                    f"`{prov[o]['data_commitments'][0]}`",
                    prov[o]["messages_sent"],
                    f"`{prov[o]['model']}`",
                    prov[o]["estimators"],
                ]
                for o in orgs
            ],
        ),
        "",
        "## Verification",
        "",
        f"Ledger ({r['backend']}): {r['ledger']['blocks']} blocks, {r['ledger']['transactions']} transactions "
        f"re-verified{' (Fabric: blocks validated by the peers)' if r['backend'] == 'fabric' else ''}.",
        "",
        *_table(
            ["model", "executions in lineage", "checks", "ok"],
            [
                [
                    f"{r['process_id']}:{o}",
                    len(ver[o]["lineage"]),
                    sum(ver[o]["checks"].values()),
                    ver[o]["ok"],
                ]
                for o in orgs
            ],
        ),
        "",
        f"Models, states and gains bit-identical to the simulator: **{r['bit_identical_to_simulator']}**.",
        "",
        "## What collaboration bought each member",
        "",
        f"Each member's signed last-round result: its metric on its own validation slice "
        f"({r['validation_fraction']:g} of its rows, not used for training) for the model trained alone "
        "(same hyper-parameters and rounds) and for its collaborative model.",
        "",
        *_table(
            ["organisation", "metric", "alone", "together", "gain", "slice rows"],
            [
                [
                    o,
                    g["metric"],
                    f"{g['isolated']:.3f}",
                    f"{g['collaborative']:.3f}",
                    f"{g['gain']:+.3f}" + (" (worse)" if g["negative"] else ""),
                    g["rows"],
                ]
                for o, g in r["gains"].items()
            ],
        ),
        "",
        "## Quality on the common test set",
        "",
        *_table(
            ["organisation", "bacc alone", "bacc audited", "AUC alone", "AUC audited"],
            [
                [
                    o,
                    *(
                        f"{q[o][m]:.3f}"
                        for m, q in (("bacc", alone), ("bacc", audited), ("auc", alone), ("auc", audited))
                    ),
                ]
                for o in orgs
            ],
        ),
        "",
        "## Estimator origins (rows: model owner, columns: creator), from the ledger",
        "",
        "| | " + " | ".join(orgs) + " |",
        "|---" * (len(orgs) + 1) + "|",
        *(f"| {o} | " + " | ".join(map(str, row)) + " |" for o, row in zip(orgs, r["estimator_origins"])),
        "",
        "Plots: " + ", ".join(f"`{p}`" for p in r["plots"]),
        "",
    ]
    return "\n".join(lines)
