"""The paper's tree kernel (seed 003, Appendix; docs/collab_rf.md), vectorised.

A decision tree is D = (T, X): each non-terminal node v has a label s(v) (split feature)
and a node feature x(v) (threshold). With h(v) the indicator of the labelled subtrees
(Collins–Duffy fragments) rooted at v,

    k_node(v, v') = h(v)^T h(v') = C(v, v')                                   (App., k_node)
    k(D, D')      = Σ_{v∈T, v'∈T'} x(v) x(v') C(v, v') = Σ h_x(v)^T h_x(v')     (App., last display)

C(v, v') = 0 if v or v' is a leaf or their productions (s(v), s(left v), s(right v)) differ
(a leaf child has the symbol ⊥); otherwise C(v, v') = λ Π_{c∈{left,right}} (1 + C(c(v), c(v')))
(λ = ``decay``, 1 in the paper), so a pre-terminal pair gets λ.

Missing values [OURS]. A tree trained on data with NaN can hold splits that send every present
value left and the missing ones right; scikit-learn stores them with threshold +inf. Such a
node has no finite x(v): it gets x(v) = 0 (its fragments carry no weight; the shapes below and
above it count as usual), so the kernel stays finite and PSD. See :func:`node_weights`.

Efficiency. C(v, v') depends only on the *labelled shapes* of the full subtrees below v and
v' (thresholds play no role), so nodes are interned into shape types: type(v) = (s(v),
type(left), type(right)), leaves = type 0. Then

    k(D, D') = Σ_{a,b} X_D[a] C(a, b) X_D'[b],   X_D[a] = Σ_{v∈D, type(v)=a} x(v)

i.e. the Gram matrix is K = X C X^T with X sparse (trees × types) and C sparse (types × types;
non-zero only for equal productions). C is filled level by level (by the larger height of
the pair), each level one vectorised lookup of the child pairs, so the cost is a handful of
numpy passes over the matching type pairs instead of |T|·|T'| Python operations per pair of
trees. Only the interning walks the nodes in Python, once per tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp


class KernelOverflow(ArithmeticError):
    """The subtree counts exceeded float64 (very deep, repetitive trees): use ``decay`` < 1."""


class _TypeTable:
    """Interned labelled shapes (type 0 = leaf)."""

    def __init__(self) -> None:
        self.index: dict[tuple[int, int, int], int] = {}
        self.feature = [-1]
        self.left = [0]
        self.right = [0]
        self.height = [0]

    def intern_tree(self, est: Mapping[str, Any]) -> np.ndarray:
        """Type of every node of ``est`` (0 for leaves)."""
        left = np.asarray(est["left"]).tolist()
        right = np.asarray(est["right"]).tolist()
        feature = np.asarray(est["feature"]).tolist()
        n = len(left)
        types = [0] * n
        index, feat, tl, tr, hg = self.index, self.feature, self.left, self.right, self.height
        for v in range(n - 1, -1, -1):  # sklearn numbers children after their parent
            lv = left[v]
            if lv < 0:
                continue
            a, b = types[lv], types[right[v]]
            key = (feature[v], a, b)
            t = index.get(key)
            if t is None:
                t = len(feat)
                index[key] = t
                feat.append(feature[v])
                tl.append(a)
                tr.append(b)
                hg.append(1 + max(hg[a], hg[b]))
            types[v] = t
        return np.asarray(types, dtype=np.int64)


def _subtree_counts(table: _TypeTable, decay: float) -> sp.csr_matrix:
    """Sparse C over type pairs with equal productions (Collins–Duffy recursion)."""
    U = len(table.feature)
    feat = np.asarray(table.feature, dtype=np.int64)
    tl = np.asarray(table.left, dtype=np.int64)
    tr = np.asarray(table.right, dtype=np.int64)
    height = np.asarray(table.height, dtype=np.int64)
    label = feat.copy()  # s(type); -1 (⊥) for the leaf type
    base = int(feat.max()) + 2 if U > 1 else 2
    prod = (feat + 1) * base * base + (label[tl] + 1) * base + (label[tr] + 1)
    internal = np.arange(1, U)
    order = internal[np.argsort(prod[internal], kind="stable")]
    if len(order) == 0:
        return sp.csr_matrix((U, U))
    p_sorted = prod[order]
    starts = np.flatnonzero(np.r_[True, p_sorted[1:] != p_sorted[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    g_of = np.repeat(sizes, sizes)  # group size of each sorted element
    gstart_of = np.repeat(starts, sizes)  # group start of each sorted element
    first = np.repeat(np.arange(len(order)), g_of)
    within = np.arange(len(first)) - np.repeat(np.cumsum(g_of) - g_of, g_of)
    a = order[first]
    b = order[np.repeat(gstart_of, g_of) + within]
    keys = a * U + b
    srt = np.argsort(keys, kind="stable")
    a, b, keys = a[srt], b[srt], keys[srt]
    C = np.zeros(len(keys))
    level = np.maximum(height[a], height[b])
    la, lb, ra, rb = tl[a], tl[b], tr[a], tr[b]

    def child_counts(ca: np.ndarray, cb: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ca))
        both = (ca > 0) & (cb > 0)
        if both.any():
            k = ca[both] * U + cb[both]
            pos = np.searchsorted(keys, k)
            pos = np.minimum(pos, len(keys) - 1)
            hit = keys[pos] == k
            vals = np.where(hit, C[pos], 0.0)
            out[both] = vals
        return out

    with np.errstate(over="ignore", invalid="ignore"):
        for h in range(1, int(level.max()) + 1):
            m = np.flatnonzero(level == h)
            if len(m) == 0:
                continue
            C[m] = decay * (1.0 + child_counts(la[m], lb[m])) * (1.0 + child_counts(ra[m], rb[m]))
    if not np.all(np.isfinite(C)):
        raise KernelOverflow("common-subtree counts overflow float64; pass decay < 1 or use shallower trees")
    return sp.csr_matrix((C, (a, b)), shape=(U, U))


def node_weights(est: Mapping[str, Any]) -> np.ndarray:
    """x(v) for every node: the threshold, or 0 where it is not finite (a missing-vs-present split)."""
    thr = np.asarray(est["threshold"], dtype=np.float64)
    return np.where(np.isfinite(thr), thr, 0.0)


def gram_matrix(estimators: Sequence[Mapping[str, Any]], decay: float = 1.0) -> np.ndarray:
    """K[i, j] = k(D_i, D_j) for the given trees (Appendix; symmetric PSD)."""
    if not (0.0 < decay <= 1.0):
        raise ValueError(f"decay must be in (0, 1], got {decay}")
    n = len(estimators)
    if n == 0:
        return np.zeros((0, 0))
    table = _TypeTable()
    rows, cols, vals = [], [], []
    for i, est in enumerate(estimators):
        types = table.intern_tree(est)
        internal = types > 0
        rows.append(np.full(int(internal.sum()), i, dtype=np.int64))
        cols.append(types[internal])
        vals.append(node_weights(est)[internal])
    U = len(table.feature)
    X = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, U))
    C = _subtree_counts(table, decay)
    K = (X @ C @ X.T).toarray()
    if not np.all(np.isfinite(K)):
        raise KernelOverflow("tree kernel overflows float64; pass decay < 1 or use shallower trees")
    return 0.5 * (K + K.T)


# ---- explicit feature map (small trees only; used to check the kernel) -------------------


def _fragments(v: int, left, right, feature) -> list[tuple]:
    """All Collins–Duffy fragments rooted at internal node v, as nested tuples."""

    def child_options(c: int) -> list[Any]:
        if left[c] < 0:
            return ["⊥"]
        return [("stub", int(feature[c]))] + _fragments(c, left, right, feature)

    return [(int(feature[v]), l, r) for l in child_options(left[v]) for r in child_options(right[v])]


def explicit_feature_map(est: Mapping[str, Any]) -> Counter:
    """h_x(D) = Σ_v x(v) h(v), as {fragment: weight} (exponential size: small trees only)."""
    left, right = np.asarray(est["left"]), np.asarray(est["right"])
    feature, thr = np.asarray(est["feature"]), node_weights(est)
    h: Counter = Counter()
    for v in range(len(left)):
        if left[v] >= 0:
            for frag in _fragments(v, left, right, feature):
                h[frag] += float(thr[v])
    return h


def explicit_kernel(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """k(D, D') = <h_x(D), h_x(D')> computed by enumerating the fragments."""
    ha, hb = explicit_feature_map(a), explicit_feature_map(b)
    return float(sum(w * hb[f] for f, w in ha.items() if f in hb))
