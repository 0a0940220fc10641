"""The report of ``consortia demo`` (:mod:`api.demo`): model quality on the common test set, the
plots (quality, estimator origins) and the markdown summary written next to ``report.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def short(d: str | None, n: int = 12) -> str:
    return "-" if not d else (d[7 : 7 + n] if d.startswith("sha256:") else d[:n])


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


def markdown(r: dict[str, Any]) -> str:
    orgs = r["organisations"]
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
        "| organisation | rows | frauds |",
        "|---|---|---|",
    ]
    lines += [f"| {o} | {r['split'][o][0]} | {r['split'][o][1]} |" for o in orgs]
    lines += [
        f"| common test | {r['test'][0]} | {r['test'][1]} |",
        "",
        "## Provenance",
        "",
        "| organisation | records | image | data commitment | messages sent | model | estimators |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in orgs:
        p = r["provenance"][o]
        lines.append(
            f"| {o} | {p['records']} | `{short(p['image_digest'][0])}` | `{short(p['data_commitments'][0])}` "
            f"| {p['messages_sent']} | `{short(p['model'])}` | {p['estimators']} |"
        )
    lines += [
        "",
        "## Verification",
        "",
        f"Ledger ({r['backend']}): {r['ledger']['blocks']} blocks, {r['ledger']['transactions']} transactions "
        f"re-verified{' (Fabric: blocks validated by the peers)' if r['backend'] == 'fabric' else ''}.",
        "",
        "| model | records in lineage | checks | ok |",
        "|---|---|---|---|",
    ]
    for o in orgs:
        v = r["verification"][o]
        lines.append(
            f"| {r['process_id']}:{o} | {len(v['records'])} | {sum(v['checks'].values())} | {v['ok']} |"
        )
    lines += [
        "",
        f"Models and states bit-identical to the simulator: **{r['bit_identical_to_simulator']}**.",
        "",
        "## Quality on the common test set",
        "",
        "| organisation | bacc alone | bacc audited | AUC alone | AUC audited |",
        "|---|---|---|---|---|",
    ]
    for o in orgs:
        a, c = r["quality"]["alone"][o], r["quality"]["audited"][o]
        lines.append(f"| {o} | {a['bacc']:.3f} | {c['bacc']:.3f} | {a['auc']:.3f} | {c['auc']:.3f} |")
    lines += ["", "## Estimator origins (rows: model owner, columns: creator), from the ledger", ""]
    lines += ["| | " + " | ".join(orgs) + " |", "|---" * (len(orgs) + 1) + "|"]
    lines += [f"| {o} | " + " | ".join(map(str, row)) + " |" for o, row in zip(orgs, r["estimator_origins"])]
    lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in r["plots"]), ""]
    return "\n".join(lines)
