"""Decentralised aggregation primitives of CollabDict (seed 000 eqs. (2)–(6); docs/collabdict.md).

Three ways for S participants to learn the sum (or average) of private quantities ξ^s:

* **Dynamical (average) consensus**, eq. (3)::

      ξ^s(t+1) = ξ^s(t) + ε Σ_j A_{s,j} [ξ^j(t) − ξ^s(t)]

  i.e. ξ(t+1) = W ξ(t) with W = I − ε L, L = D − A (eq. 4). Two step sizes: the seed's ε = 1/S
  (``step="seed"``) and the degree-scaled ε = 1/(d_max + 1) (``step="degree"``, our default; it gives
  the O(ln S) iteration count on expanders that the seed claims). The fixed point is the
  average (eq. 5); sums are S times the average.
* **Random chunking** (seed 000 §4.2, eq. 6): each participant splits ξ^s into C random chunks summing to ξ^s,
  one consensus session per chunk, with a fresh relabelling of participants → graph positions per
  session; the chunk averages add up to the average.
* **Exact one-shot random-chunk sum** (docs/collabdict.md, "exact" aggregation): each participant splits ξ^s into
  random shares sent to random peers (message round 1); each peer publishes the sum of the shares it
  received (message round 2); everybody adds the published partial sums. The result is the exact sum
  up to floating-point rounding, and no single message reveals a ξ^s.

Everything here operates element-wise on arrays of any shape and is deterministic given the
``numpy.random.Generator`` passed in. The functions are vectorised over participants (axis 0) for
the simulator and the benchmarks; :func:`local_consensus_update` is the per-participant form that
step functions use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

STEP_MODES = ("seed", "degree")

Adjacency = Any
"""A symmetric 0/1 adjacency matrix with a zero diagonal: a dense ``numpy`` array or a ``scipy.sparse`` matrix."""


# ----------------------------------------------------------------------------- graphs → W


def _check_adjacency(adjacency: Adjacency) -> sparse.csr_matrix:
    A = sparse.csr_matrix(adjacency, dtype=np.float64)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"adjacency must be square, got shape {A.shape}")
    if A.shape[0] < 1:
        raise ValueError("adjacency must have at least one node")
    if abs(A - A.T).sum() != 0:
        raise ValueError("dynamical consensus needs an undirected (symmetric) adjacency")
    if A.diagonal().any():
        raise ValueError("adjacency must have a zero diagonal (no self-loops)")
    return A


def laplacian(adjacency: Adjacency) -> sparse.csr_matrix:
    """Graph Laplacian L = D − A, D = diag(A 1) (eq. 4)."""
    A = _check_adjacency(adjacency)
    d = np.asarray(A.sum(axis=1)).ravel()
    return (sparse.diags(d) - A).tocsr()


def step_size(adjacency: Adjacency, step: str | float = "degree") -> float:
    """Consensus step ε: ``"seed"`` → 1/S (eq. 3), ``"degree"`` → 1/(d_max+1) (our default), or a number.

    Any ε in (0, 1/d_max] keeps W = I − εL symmetric, doubly stochastic and non-negative.
    """
    A = _check_adjacency(adjacency)
    S = int(A.shape[0])
    if isinstance(step, str):
        if step == "seed":
            return 1.0 / S
        if step == "degree":
            d_max = float(np.asarray(A.sum(axis=1)).max()) if S > 1 else 0.0
            return 1.0 / (d_max + 1.0)
        raise ValueError(f"unknown consensus step {step!r}; expected one of {STEP_MODES} or a number")
    eps = float(step)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"consensus step must be a positive number, got {step!r}")
    return eps


def mixing_matrix(adjacency: Adjacency, step: str | float = "degree") -> sparse.csr_matrix:
    """W = I − ε L (eq. 4), as a sparse matrix."""
    L = laplacian(adjacency)
    eps = step_size(adjacency, step)
    return (sparse.identity(L.shape[0], format="csr") - eps * L).tocsr()


def mixing_rate(adjacency: Adjacency, step: str | float = "degree") -> float:
    """ρ(W) = max(|1 − ελ_2(L)|, |1 − ελ_S(L)|): the contraction factor of the disagreement.

    Dense eigen-decomposition: meant for S up to a few thousand.
    """
    L = laplacian(adjacency).toarray()
    lam = np.linalg.eigvalsh(L)
    eps = step_size(adjacency, step)
    if lam.size < 2:
        return 0.0
    return float(max(abs(1 - eps * lam[1]), abs(1 - eps * lam[-1])))


def algebraic_connectivity(adjacency: Adjacency) -> float:
    """λ_2(L), the second-smallest Laplacian eigenvalue (> 0 iff the graph is connected)."""
    lam = np.linalg.eigvalsh(laplacian(adjacency).toarray())
    return float(lam[1]) if lam.size > 1 else 0.0


def rounds_for_tolerance(rho: float, S: int, tol: float = 1e-8) -> int:
    """k_max = ⌈ln(√S / tol) / ln(1/ρ)⌉ (the default), from ||ξ(k) − ξ̄1|| ≤ ρ^k ||ξ(0) − ξ̄1||."""
    if not 0 <= rho < 1:
        raise ValueError(f"mixing rate must be in [0, 1) (connected graph), got {rho}")
    if S < 1 or tol <= 0:
        raise ValueError("S must be ≥ 1 and tol > 0")
    if rho == 0:
        return 1
    return max(1, math.ceil(math.log(math.sqrt(S) / tol) / math.log(1.0 / rho)))


# ----------------------------------------------------------------------------- dynamical consensus


def _as_matrix(values: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 1:
        raise ValueError("values must have a participant axis (axis 0)")
    return v.reshape(v.shape[0], -1), v.shape


def consensus_iterate(
    values: np.ndarray, adjacency: Adjacency, step: str | float = "degree", iterations: int = 1
) -> np.ndarray:
    """Run ``iterations`` steps of eq. (3) on ``values`` (participants on axis 0); return ξ(iterations)."""
    if iterations < 0:
        raise ValueError(f"iterations must be ≥ 0, got {iterations}")
    X, shape = _as_matrix(values)
    W = mixing_matrix(adjacency, step)
    if W.shape[0] != X.shape[0]:
        raise ValueError(f"graph has {W.shape[0]} nodes but values have {X.shape[0]} participants")
    for _ in range(iterations):
        X = W @ X
    return X.reshape(shape)


def consensus_average(
    values: np.ndarray,
    adjacency: Adjacency,
    step: str | float = "degree",
    iterations: int | None = None,
    tol: float = 1e-8,
) -> np.ndarray:
    """Every participant's estimate of the average (1/S)Σ_s ξ^s after dynamical consensus.

    ``iterations=None`` uses :func:`rounds_for_tolerance` with ρ(W) (dense eigenvalues: small S).
    """
    if iterations is None:
        S = np.asarray(values).shape[0]
        iterations = rounds_for_tolerance(mixing_rate(adjacency, step), S, tol)
    return consensus_iterate(values, adjacency, step, iterations)


def consensus_sum(
    values: np.ndarray,
    adjacency: Adjacency,
    step: str | float = "degree",
    iterations: int | None = None,
    tol: float = 1e-8,
) -> np.ndarray:
    """Σ_s ξ^s as S × the consensus average; one estimate per participant."""
    S = int(np.asarray(values).shape[0])
    total: np.ndarray = S * consensus_average(values, adjacency, step, iterations, tol)
    return total


def local_consensus_update(own: np.ndarray, neighbour_values: Sequence[np.ndarray], eps: float) -> np.ndarray:
    """One participant's step of eq. (3): ξ^s + ε Σ_{j ∈ N(s)} (ξ^j − ξ^s)."""
    own = np.asarray(own, dtype=np.float64)
    acc = np.zeros_like(own)
    for v in neighbour_values:
        acc += np.asarray(v, dtype=np.float64) - own
    return own + eps * acc


def iterations_to_tolerance(
    values: np.ndarray,
    adjacency: Adjacency,
    step: str | float = "degree",
    rel_tol: float = 1e-6,
    max_iterations: int = 1_000_000,
) -> int:
    """Smallest k with max_s |ξ^s(k) − ξ̄| ≤ rel_tol · max_s |ξ^s(0) − ξ̄|.

    Raises ``RuntimeError`` if not reached within ``max_iterations`` (e.g. a disconnected graph).
    """
    X, _ = _as_matrix(values)
    W = mixing_matrix(adjacency, step)
    mean = X.mean(axis=0, keepdims=True)
    target = rel_tol * float(np.abs(X - mean).max())
    k = 0
    while float(np.abs(X - mean).max()) > target:
        if k >= max_iterations:
            raise RuntimeError(f"consensus did not reach {rel_tol} in {max_iterations} iterations")
        X = W @ X
        k += 1
    return k


# ----------------------------------------------------------------------------- random chunking (seed 000 §4.2)

KAPPA_FACTOR = 10.0
"""Chunk noise scale relative to the statistic it hides: κ = KAPPA_FACTOR·max|ξ_segment| (default 10)."""


def segment_scales(
    xi: np.ndarray, segments: Sequence[int] | None = None, factor: float = KAPPA_FACTOR
) -> np.ndarray:
    """Per-element chunk scale κ for a flat statistic vector split into contiguous ``segments``.

    Each segment (e.g. one N_k, one m_k, one C_k of eq. 13, or the log-likelihood) gets its own
    κ_seg = factor·max|ξ_seg|, so the chunk noise of a small statistic is not set by the largest one in the
    packed vector. A segment that is all zeros borrows the largest segment's scale (1 if ξ = 0). Non-finite
    entries are ignored for the scale (they stay non-finite in the sum, as without chunking). ``segments``
    None → one segment (the whole vector). Returns an array of ξ's shape.
    """
    v = np.asarray(xi, dtype=np.float64)
    flat = np.abs(v.ravel())
    if segments is None:
        segments = [flat.size]
    lengths = [int(n) for n in segments]
    if any(n < 1 for n in lengths) or sum(lengths) != flat.size:
        raise ValueError(
            f"segments {lengths[:8]}… must be positive lengths summing to the vector size {flat.size}"
        )
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"chunk scale factor must be a positive number, got {factor}")
    finite = np.where(np.isfinite(flat), flat, 0.0)  # NaN/inf entries (a diverged model) pass through the sum
    overall = float(finite.max(initial=0.0))
    fallback = factor * overall if 0 < factor * overall < np.inf else 1.0
    scales = np.empty_like(flat)
    start = 0
    for n in lengths:
        peak = float(finite[start : start + n].max())
        scales[start : start + n] = factor * peak if 0 < factor * peak < np.inf else fallback
        start += n
    return scales.reshape(v.shape)


def random_chunks(
    xi: np.ndarray, chunks: int, rng: np.random.Generator, kappa: float | np.ndarray | None = None
) -> np.ndarray:
    """Split ξ into C chunks with Σ_l ξ^{[l]} = ξ (eq. 6 set-up; the split is our own).

    Chunks 1..C−1 are element-wise N(0, κ²), the last is ξ − Σ_{l<C} ξ^{[l]}. ``kappa`` is a number, an
    array of ξ's shape (per-element scale, e.g. from :func:`segment_scales`), or None → κ = 10·max|ξ| (the default;
    1 if ξ = 0). Returns an array of shape (C, *ξ.shape).
    """
    if int(chunks) != chunks or chunks < 1:
        raise ValueError(f"number of chunks must be a positive integer, got {chunks!r}")
    xi = np.asarray(xi, dtype=np.float64)
    if kappa is None:
        kappa = segment_scales(xi)
    kappa = np.broadcast_to(np.asarray(kappa, dtype=np.float64), xi.shape)
    if not (np.all(kappa > 0) and np.all(np.isfinite(kappa))):
        raise ValueError("chunk scale kappa must be > 0 and finite")
    out = np.empty((int(chunks),) + xi.shape)
    if chunks > 1:
        out[:-1] = rng.standard_normal(size=(int(chunks) - 1,) + xi.shape) * kappa
    out[-1] = xi - out[:-1].sum(axis=0)
    return out


def chunked_rounds_for_tolerance(
    rho: float, S: int, chunks: int, tol: float = 1e-8, kappa_factor: float = KAPPA_FACTOR
) -> int:
    """k_max for C chunked sessions whose chunks are κ = kappa_factor·|ξ| in scale (eq. 6).

    After k rounds each participant's estimate of a session's average is off by ≤ ρ^k·||ξ^{[l]}(0) − mean||₂
    ≤ ρ^k·√S·max_s|ξ^{s,[l]}|, and its estimate of the sum (S × average) by S times that. The chunks
    are ≈ kappa_factor times the statistic they hide, and a sum can be as small as its largest term (one
    dominant participant), so over C sessions the error relative to the sum is ≲ ρ^k·√S·(S·kappa_factor·C).
    Hence k_max = ⌈ln(√S·g/tol)/ln(1/ρ)⌉ with g = S·kappa_factor·C (g = 1 for C = 1, which is
    :func:`rounds_for_tolerance`).
    """
    if int(chunks) != chunks or chunks < 1:
        raise ValueError(f"number of chunks must be a positive integer, got {chunks!r}")
    gain = 1.0 if chunks == 1 else S * float(kappa_factor) * int(chunks)
    return rounds_for_tolerance(rho, S, tol / gain)


def session_relabellings(S: int, sessions: int, rng: np.random.Generator) -> np.ndarray:
    """One random permutation per aggregation session: ``perm[l, s]`` = graph position of participant s
    in session l (seed 000 §4.2: "randomly change the node labels for each aggregation session"). ``rng`` must be
    common to all participants (e.g. ``TaskContext.shared_rng``)."""
    if S < 1 or sessions < 1:
        raise ValueError("S and sessions must be ≥ 1")
    return np.stack([rng.permutation(S) for _ in range(sessions)])


def chunked_consensus_sum(
    values: np.ndarray,
    adjacency: Adjacency,
    chunks: int,
    rngs: Sequence[np.random.Generator],
    relabel_rng: np.random.Generator | None = None,
    step: str | float = "degree",
    iterations: int | None = None,
    tol: float = 1e-8,
    kappa: float | None = None,
) -> np.ndarray:
    """Σ_s ξ^s by C chunked consensus sessions with per-session relabelling (seed 000 §4.2, eq. 6).

    ``rngs[s]`` is participant s's private generator (its chunks); ``relabel_rng`` the common one
    (identity labels if None); ``kappa`` as in :func:`random_chunks`; ``iterations`` None →
    :func:`chunked_rounds_for_tolerance`. Returns every participant's estimate of the sum, shape = values.shape.
    """
    X = np.asarray(values, dtype=np.float64)
    S = X.shape[0]
    if len(rngs) != S:
        raise ValueError(f"need one generator per participant ({S}), got {len(rngs)}")
    parts = np.stack([random_chunks(X[s], chunks, rngs[s], kappa) for s in range(S)], axis=1)  # (C, S, ...)
    perms = (
        session_relabellings(S, chunks, relabel_rng)
        if relabel_rng is not None
        else np.tile(np.arange(S), (chunks, 1))
    )
    if iterations is None:
        iterations = chunked_rounds_for_tolerance(mixing_rate(adjacency, step), S, chunks, tol)
    total = np.zeros_like(X)
    for l in range(chunks):
        pos = perms[l]  # participant s sits at graph position pos[s]
        placed = np.empty_like(parts[l])
        placed[pos] = parts[l]
        avg = consensus_iterate(placed, adjacency, step, iterations)
        total += S * avg[pos]  # back to participant order
    return total


# ----------------------------------------------------------------------------- exact one-shot sum


def split_shares(
    xi: np.ndarray, shares: int, rng: np.random.Generator, kappa: float | np.ndarray | None = None
) -> np.ndarray:
    """Random additive shares of ξ (same construction as :func:`random_chunks`)."""
    return random_chunks(xi, shares, rng, kappa)


def share_recipients(S: int, me: int, shares: int, rng: np.random.Generator) -> np.ndarray:
    """Positions receiving participant ``me``'s shares, aligned with the output of :func:`split_shares`:
    ``me`` plus ``shares − 1`` distinct random peers, in random order (so the share a participant keeps,
    and the peer that gets the share carrying ξ − Σ(noise), are random)."""
    if not 1 <= shares <= S:
        raise ValueError(f"shares must be in [1, S={S}], got {shares}")
    others = np.array([j for j in range(S) if j != me], dtype=np.int64)
    peers = rng.choice(others, size=shares - 1, replace=False) if shares > 1 else np.empty(0, np.int64)
    return rng.permutation(np.concatenate([[me], peers]).astype(np.int64))


def one_shot_sum(
    values: np.ndarray,
    rngs: Sequence[np.random.Generator],
    shares: int | None = None,
    kappa: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised reference of the two-round exact random-chunk sum.

    Round 1: participant s draws ``shares`` (default S) additive shares of ξ^s and sends them to
    :func:`share_recipients`; round 2: each participant publishes the sum of shares it holds (in sender
    order); everyone adds the published partial sums in participant order. Returns (sum, partial sums).
    """
    X = np.asarray(values, dtype=np.float64)
    S = X.shape[0]
    shares = S if shares is None else int(shares)
    held: list[list[np.ndarray | None]] = [[None] * S for _ in range(S)]  # held[receiver][sender]
    for s in range(S):
        parts = split_shares(X[s], shares, rngs[s], kappa)
        recips = share_recipients(S, s, shares, rngs[s])
        for part, r in zip(parts, recips):
            held[int(r)][s] = part
    partials = np.stack([sum_in_order([h for h in held[r] if h is not None], X.shape[1:]) for r in range(S)])
    return sum_in_order(list(partials), X.shape[1:]), partials


def sum_in_order(arrays: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Left-to-right float64 sum (a fixed order makes every participant's total bit-identical)."""
    acc = np.zeros(shape, dtype=np.float64)
    for a in arrays:
        acc = acc + np.asarray(a, dtype=np.float64)
    return acc
