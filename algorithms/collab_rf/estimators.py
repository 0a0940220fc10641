"""Decision trees as codec payloads, with estimator ids (seed 003 §III-A; docs/collab_rf.md).

A shared estimator is a plain dict of arrays, so :mod:`algorithms.codec` encodes it
deterministically and every message, state and model can be hashed:

    {"creator": str, "counter": int,                     # estimator id (v_j, i), seed §III-C
     "left", "right": int32[n_nodes],                    # child indices, -1 at leaves
     "feature": int32[n_nodes],                          # split feature s(v), -2 at leaves
     "threshold": float64[n_nodes],                      # split value x(v), -2 at leaves
     "value": float64[n_nodes],                          # regression output at every node
     "missing_left": uint8[n_nodes],                     # 1: a missing (NaN) value goes left
     "scaler_mean", "scaler_scale": float64[d],          # the creator's StandardScaler
     "n_pos", "n_neg": int}                              # only with vote="evidence": the creator's
                                                         # class counts of the rows FIT used

The tree is sklearn's ``tree_`` of one member of a ``RandomForestRegressor`` (as in the authors' code);
like the authors' ``Pipeline(scaler, tree)`` it carries its creator's scaler, and a
prediction first standardises x with that scaler. Predictions are computed here from the
arrays (vectorised over trees and samples) and equal sklearn's ``tree.predict`` exactly:
the standardised input is cast to float32 and compared with the float64 threshold by
``x <= t`` (go left), as sklearn's tree does.

Missing values are routed as scikit-learn (≥ 1.3; pinned 1.9.1) routes them: a NaN feature value
goes to the left child iff ``tree_.missing_go_to_left`` of the node is set (learned when the
training data had NaN; otherwise the child that received more training samples), and a split
that separates missing from present values has threshold +inf (present values go left). The
scaler maps NaN to NaN, so standardising first changes nothing. Payloads made before this
field existed lack ``missing_left``; they still predict NaN-free rows, and refuse NaN rows with
:class:`MissingRoutingUnknown` instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from algorithms import codec

Estimator = dict  # the payload described above
EstimatorId = tuple[str, int]

_ARRAYS = ("left", "right", "feature", "threshold", "value")


class MissingRoutingUnknown(ValueError):
    """X has missing values but an estimator carries no learned missing-value routing."""


def estimator_id(est: Mapping[str, Any]) -> EstimatorId:
    """(creator, counter) of an estimator payload."""
    return (str(est["creator"]), int(est["counter"]))


def from_sklearn_tree(
    tree: Any, creator: str, counter: int, scaler_mean: np.ndarray, scaler_scale: np.ndarray
) -> Estimator:
    """Payload of a fitted sklearn ``DecisionTreeRegressor`` (single output)."""
    t = tree.tree_
    if t.n_outputs != 1:
        raise ValueError("only single-output regression trees are supported")
    if counter < 0:
        raise ValueError(f"estimator counter must be >= 0, got {counter}")
    est = {
        "creator": str(creator),
        "counter": int(counter),
        "left": t.children_left.astype(np.int32),
        "right": t.children_right.astype(np.int32),
        "feature": t.feature.astype(np.int32),
        "threshold": t.threshold.astype(np.float64),
        "value": t.value[:, 0, 0].astype(np.float64),
        "missing_left": np.asarray(t.missing_go_to_left).astype(np.uint8),
        "scaler_mean": np.asarray(scaler_mean, dtype=np.float64).copy(),
        "scaler_scale": np.asarray(scaler_scale, dtype=np.float64).copy(),
    }
    return canonical(est)


def canonical(est: Mapping[str, Any]) -> Estimator:
    """The payload with keys in sorted order. ``codec.encode`` orders the header's keys but
    lays out array blobs in dict insertion order, so only a key-sorted dict encodes to the
    same bytes as its own decoded copy (decoding yields sorted keys)."""
    return {k: est[k] for k in sorted(est)}


def validate_estimator(est: Mapping[str, Any]) -> None:
    """Raise ValueError if ``est`` is not a well-formed estimator payload."""
    for k in ("creator", "counter", *_ARRAYS, "scaler_mean", "scaler_scale"):
        if k not in est:
            raise ValueError(f"estimator payload lacks {k!r}")
    n = len(est["left"])
    for k in _ARRAYS + (("missing_left",) if "missing_left" in est else ()):
        if len(est[k]) != n:
            raise ValueError(
                f"estimator {estimator_id(est)}: array {k!r} has length {len(est[k])}, expected {n}"
            )
    left, right = np.asarray(est["left"]), np.asarray(est["right"])
    internal = left >= 0
    if np.any((right >= 0) != internal):
        raise ValueError(f"estimator {estimator_id(est)}: a node has exactly one child")
    if np.any(left[internal] >= n) or np.any(right[internal] >= n):
        raise ValueError(f"estimator {estimator_id(est)}: child index out of range")


_MEMO: list[dict[int, tuple[Mapping[str, Any], str]]] = []  # the innermost digest_memo scope


@contextmanager
def digest_memo() -> Iterator[None]:
    """While inside, an estimator object's digest is computed once however many payloads carry it
    (a SHARE round sends the same estimators to every neighbour). Keyed by the object, held alive by
    the memo so its identity cannot be reused: use it around one task's finished outputs only."""
    _MEMO.append({})
    try:
        yield
    finally:
        _MEMO.pop()


def estimator_digest(est: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical encoding of one estimator payload."""
    memo = _MEMO[-1] if _MEMO else None
    hit = memo.get(id(est)) if memo is not None else None
    if hit is not None and hit[0] is est:
        return hit[1]
    digest = codec.digest(codec.encode(canonical(est)))
    if memo is not None:
        memo[id(est)] = (est, digest)
    return digest


def estimator_digests(payload: Mapping[str, Any]) -> list[tuple[EstimatorId, str]]:
    """(id, digest) of every estimator in a message or model payload (both hold
    ``"estimators"``), in payload order. This is what the ledger records per estimator."""
    if "estimators" not in payload:
        raise ValueError("payload holds no 'estimators' list (not a collab-RF message or model)")
    return [(estimator_id(e), estimator_digest(e)) for e in payload["estimators"]]


def depth_of(est: Mapping[str, Any]) -> int:
    """Number of edges on the longest root-to-leaf path."""
    left, right = np.asarray(est["left"]), np.asarray(est["right"])
    depth = np.zeros(len(left), dtype=np.int64)
    for v in range(len(left)):  # sklearn numbers children after their parent
        if left[v] >= 0:
            depth[left[v]] = depth[right[v]] = depth[v] + 1
    return int(depth.max()) if len(depth) else 0


def predict_trees(estimators: Sequence[Mapping[str, Any]], X: np.ndarray) -> np.ndarray:
    """Outputs of each tree on each row of raw X: shape (n_trees, n_samples).

    All trees are traversed together: their node arrays are concatenated with offsets and
    one vectorised descent step per level moves every (tree, sample) pointer."""
    X = np.asarray(X, dtype=np.float64)
    n_t, n = len(estimators), X.shape[0]
    if n_t == 0:
        return np.zeros((0, n))
    offsets = np.cumsum([0] + [len(e["left"]) for e in estimators[:-1]])
    left = np.concatenate(
        [
            np.where(np.asarray(e["left"]) >= 0, np.asarray(e["left"]) + o, -1)
            for e, o in zip(estimators, offsets)
        ]
    )
    right = np.concatenate(
        [
            np.where(np.asarray(e["right"]) >= 0, np.asarray(e["right"]) + o, -1)
            for e, o in zip(estimators, offsets)
        ]
    )
    feature = np.concatenate([np.asarray(e["feature"]) for e in estimators]).astype(np.int64)
    threshold = np.concatenate([np.asarray(e["threshold"]) for e in estimators])
    value = np.concatenate([np.asarray(e["value"]) for e in estimators])
    has_nan = bool(np.isnan(X).any())
    if has_nan:
        unknown = [estimator_id(e) for e in estimators if "missing_left" not in e]
        if unknown:
            raise MissingRoutingUnknown(
                f"X has missing values but estimators {unknown[:5]} carry no missing-value "
                "routing (made before 'missing_left' was recorded); impute X first"
            )
        missing_left = np.concatenate([np.asarray(e["missing_left"]) for e in estimators]).astype(bool)
    out = np.empty((n_t, n))
    # Group trees by creator scaler so each standardisation is done once.
    groups: dict[bytes, list[int]] = {}
    for t, e in enumerate(estimators):
        key = np.asarray(e["scaler_mean"]).tobytes() + np.asarray(e["scaler_scale"]).tobytes()
        groups.setdefault(key, []).append(t)
    chunk = max(1, 2_000_000 // max(1, n_t))
    for idxs in groups.values():
        e0 = estimators[idxs[0]]
        Z = ((X - np.asarray(e0["scaler_mean"])) / np.asarray(e0["scaler_scale"])).astype(np.float32)
        roots = offsets[idxs]
        for a in range(0, n, chunk):
            Zc = Z[a : a + chunk]
            rows = np.arange(Zc.shape[0])
            node = np.repeat(roots[:, None], Zc.shape[0], axis=1)
            while True:
                f = feature[node]
                active = left[node] >= 0
                if not active.any():
                    break
                r = np.broadcast_to(rows, node.shape)
                fa = np.where(active, f, 0)
                z = Zc[r, fa]
                go_left = z <= threshold[node]
                if has_nan:
                    go_left = np.where(np.isnan(z), missing_left[node], go_left)
                node = np.where(active, np.where(go_left, left[node], right[node]), node)
            out[idxs, a : a + chunk] = value[node]
    return out


def ensemble_scores(
    estimators: Sequence[Mapping[str, Any]], X: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Φ(x) = (1/n) Σ_i φ^i(x) (seed §II-A); 0 for an empty ensemble. With ``weights`` ω (the
    ``vote="evidence"`` option, :func:`algorithms.collab_rf.decision.vote_weights`):
    Φ_ω(x) = Σ_i ω_i φ^i(x) / Σ_i ω_i, or the plain mean if every ω_i is 0."""
    X = np.asarray(X, dtype=np.float64)
    if len(estimators) == 0:
        return np.zeros(X.shape[0])
    P = predict_trees(estimators, X)
    if weights is None:
        return P.mean(axis=0)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(estimators),) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"vote weights must be {len(estimators)} finite numbers >= 0, got {w!r}")
    total = float(w.sum())
    return P.mean(axis=0) if total == 0.0 else (w @ P) / total


def ensemble_predict(
    estimators: Sequence[Mapping[str, Any]],
    X: np.ndarray,
    threshold: float = 0.5,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Anomaly iff Φ(x) > threshold; 0.5 is the paper's (seed §II-A; equals the repo's
    ``np.round`` since 0.5 rounds to 0)."""
    return (ensemble_scores(estimators, X, weights) > threshold).astype(np.int64)


def model_scores(model: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    """Φ of a model payload on X, weighted by its ``"weights"`` if it records them."""
    w = model.get("weights")
    return ensemble_scores(model["estimators"], X, None if w is None else np.asarray(w))


def model_predict(model: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    """Predictions of a model payload with its own threshold (0.5 if it records none) and vote weights
    (the plain mean if it records none)."""
    return (model_scores(model, X) > float(model.get("threshold", 0.5))).astype(np.int64)
