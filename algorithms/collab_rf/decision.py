"""Options for rare positives (not in seed 003; the paper's settings stay the default).

The paper's forests are regressors on 0/1 labels, unweighted, and a row is an anomaly iff
Φ(x) > 0.5 (seed 003 §II-A). With a few per cent of positives the leaves rarely reach 0.5, so
recall (and balanced accuracy) can fall even when the ranking quality (ROC AUC) rises. Three
hyper-parameters of :class:`algorithms.collab_rf.protocol.CollabRFParams` address this
(docs/collab_rf.md, "Rare positives"):

* ``positive_weight``: the weight of a positive row in FIT (scikit-learn ``sample_weight``;
  leaf values become weighted means). ``"balanced"`` is n_negative / n_positive of the
  organisation's own training rows (1 if they hold one class only: all labels are then equal
  and no weight changes a tree); ``1.0`` is the paper.
* ``vote="evidence"`` (default ``"mean"``, the paper's Φ(x) = (1/n) Σ φ^i(x)): every tree FIT makes
  carries its creator's class counts (n⁺, n⁻) of the rows it was trained on, and the model scores
  Φ_ω(x) = Σ_i ω_i φ^i(x) / Σ_i ω_i with ω_i = n⁺ n⁻ / (n⁺ + n⁻) of tree i's creator
  (:func:`evidence_weight`); a tree whose creator held one class gets ω = 0. The weights travel in
  the model payload (``"weights"``). With ``positive_weight="balanced"`` this is the rare-positive mode.
* ``decision_threshold="validation"``: each organisation holds out ``validation_size`` of its
  rows (stratified; never used by FIT or by a ranking) and, in the round that returns the
  model, picks the cut t that maximises balanced accuracy of its final ensemble on them.
  Without both classes among its validation rows it keeps 0.5. The cut travels in the model
  payload (``"threshold"``); ``"fixed"`` (the paper) is 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PAPER_THRESHOLD = 0.5
DECISIONS = ("fixed", "validation")
VOTES = ("mean", "evidence")


def resolve_positive_weight(spec: float | str, labels: np.ndarray) -> float:
    """The weight of a positive row for one organisation's training labels."""
    if spec == "balanced":
        y = np.asarray(labels)
        n_pos, n_neg = int(np.sum(y == 1)), int(np.sum(y != 1))
        # one class only: every label is equal, so no weight changes a tree; 1 (n_neg / n_pos = 0 is no weight)
        return n_neg / n_pos if n_pos and n_neg else 1.0
    w = float(spec)
    if not np.isfinite(w) or w <= 0:
        raise ValueError(f"positive_weight must be a positive number or 'balanced', got {spec!r}")
    return w


def validate_positive_weight(spec: float | str) -> None:
    if isinstance(spec, str):
        if spec != "balanced":
            raise ValueError(f"positive_weight must be a positive number or 'balanced', got {spec!r}")
        return
    if isinstance(spec, bool) or not isinstance(spec, (int, float)):
        raise ValueError(f"positive_weight must be a positive number or 'balanced', got {spec!r}")
    resolve_positive_weight(spec, np.zeros(0))


def validation_rows(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of the held-out rows: ``round(fraction · n_c)`` rows of each class c,
    at least one if the class has two rows or more (so the training part keeps one too)."""
    if not (0.0 < fraction < 1.0):
        raise ValueError(f"validation_size must be in (0, 1), got {fraction}")
    y = np.asarray(labels)
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        k = int(round(fraction * idx.size))
        if idx.size >= 2:
            k = min(max(k, 1), idx.size - 1)
        else:
            k = 0
        out.append(rng.permutation(idx)[:k])
    return np.sort(np.concatenate(out)).astype(np.int64) if out else np.zeros(0, dtype=np.int64)


def balanced_accuracy_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The cut t maximising BAcc of ``scores > t`` on (scores, labels).

    Candidates are 0.5 and the midpoints between consecutive distinct scores (plus one below
    the smallest); ties go to the candidate nearest 0.5, then the larger. Returns 0.5 if the
    labels do not hold both classes."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return PAPER_THRESHOLD
    u = np.unique(s)
    cands = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2.0, [PAPER_THRESHOLD]])
    order = np.argsort(s)
    s_sorted, y_sorted = s[order], y[order]
    # rows with score <= t are predicted negative: counts via searchsorted on the sorted scores
    k = np.searchsorted(s_sorted, cands, side="right")
    neg_below = np.concatenate([[0], np.cumsum(~y_sorted)])[k]
    pos_below = np.concatenate([[0], np.cumsum(y_sorted)])[k]
    bacc = 0.5 * ((n_pos - pos_below) / n_pos + neg_below / n_neg)
    best = bacc.max()
    tied = cands[bacc >= best - 1e-12]
    dist = np.abs(tied - PAPER_THRESHOLD)
    nearest = tied[dist == dist.min()]
    return float(nearest.max())


def class_counts(labels: np.ndarray) -> tuple[int, int]:
    """(n⁺, n⁻): positive (label 1) and other rows."""
    y = np.asarray(labels)
    n_pos = int(np.sum(y == 1))
    return n_pos, int(y.size) - n_pos


def evidence_weight(n_pos: int, n_neg: int) -> float:
    """ω = n⁺ n⁻ / (n⁺ + n⁻), the reciprocal of 1/n⁺ + 1/n⁻ (the variance factor of a comparison of the
    two classes' rows): 0 for a creator that held one class, ≈ n⁺ when positives are rare."""
    if n_pos < 0 or n_neg < 0:
        raise ValueError(f"class counts must be >= 0, got ({n_pos}, {n_neg})")
    total = n_pos + n_neg
    return n_pos * n_neg / total if total else 0.0


def vote_weights(estimators: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """ω_i of every tree of an ensemble for ``vote="evidence"`` (from the counts its creator recorded).

    Raises ValueError if a tree carries no counts (it was not made by a FIT with ``vote="evidence"``)."""
    out = np.empty(len(estimators))
    for i, e in enumerate(estimators):
        if "n_pos" not in e or "n_neg" not in e:
            raise ValueError(
                f"estimator {(e.get('creator'), e.get('counter'))} carries no class counts: "
                "vote='evidence' needs trees made with vote='evidence'"
            )
        out[i] = evidence_weight(int(e["n_pos"]), int(e["n_neg"]))
    return out
