"""Decentralised sums as message rounds: the aggregation state machine shared by the CollabDict step functions.

A CollabDict participant needs Σ_s ξ^s of a vector of statistics (eq. 14) or gradients (eq. 35). This module
runs one such *aggregation session* across platform rounds, one message exchange per round
(docs/collabdict.md, "Step functions as state machines"):

* ``mode="consensus"`` (default; the seed's mechanism, seed 000 §4.2) — dynamical consensus eq. (3) on a graph rebuilt
  by every participant from ``graph`` and the process seed, ``k_max`` rounds, with C = 3 random chunks (eq. 6)
  and a fresh common relabelling participants → graph positions per chunk session. ``graph="auto"`` is the
  seed's cycle with inverse chord when S is prime and the complete graph otherwise. Each participant ends
  with its own estimate S·ξ̄^s of the sum.
* ``mode="exact"`` — the exact one-shot random-chunk sum, two rounds: shares go to random peers
  (:func:`algorithms.consensus.share_recipients`), then every participant publishes the sum of the shares it
  holds; everybody adds the published partial sums in consortium order, so all participants hold the same
  bits. Communication is all-to-all regardless of the process topology.

Chunks and shares are scaled per *segment* of the vector (``segments``: e.g. one per N_k, m_k, C_k and the
log-likelihood), κ_seg = 10·max|ξ_seg| (:func:`algorithms.consensus.segment_scales`), and the default k_max
accounts for that scale (:func:`algorithms.consensus.chunked_rounds_for_tolerance`), so every statistic is
recovered to ~tol relative to its own size rather than to the largest entry of the packed vector.

:func:`start` opens a session (returns the state and the first outbox); :func:`advance` consumes one inbox and
returns the next state, outbox, and the sum once the session is complete. States and messages are plain
payloads (dicts of arrays) that :mod:`algorithms.codec` can encode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from algorithms.consensus import (
    chunked_rounds_for_tolerance,
    mixing_rate,
    random_chunks,
    segment_scales,
    session_relabellings,
    share_recipients,
    split_shares,
    step_size,
    sum_in_order,
)
from algorithms.step import TaskContext
from algorithms.topologies.random_graphs import RandomLinkTopology
from algorithms.topologies.static import complete, cycle_with_inverse_chord, ring

GRAPHS = ("auto", "cic", "ring", "complete", "random-link")
MODES = ("exact", "consensus")


class AggregationError(RuntimeError):
    """A message of an aggregation session is missing or does not belong to the session."""


@dataclass(frozen=True)
class AggregationConfig:
    """How CollabDict aggregates (seed 000 eqs. (2)–(6); defaults in docs/collabdict.md).

    Defaults are the seed's mechanism: CIC consensus with C = 3 chunks (seed 000 §4.2, eq. 6).
    mode: ``"consensus"`` (k_max rounds of eq. 3) or ``"exact"`` (two rounds, all-to-all).
    graph: consensus graph kind (``cic`` needs S prime; ``auto`` = cic if S is prime, else complete).
    step: ``"degree"`` (1/(d_max+1)), ``"seed"`` (1/S) or ε.
    rounds: k_max; None → ⌈ln(√S·g/tol)/ln(1/ρ)⌉, g = S·10·C for C > 1 (static graphs only). chunks: C random
    chunks per statistic. relabel: fresh participant → position permutation per chunk session. shares: shares
    per participant in exact mode (None → S). kappa: one chunk/share scale for the whole vector (None → 10·max|ξ|
    per segment of the vector, see :func:`start`).
    """

    mode: str = "consensus"
    graph: str = "auto"
    step: str | float = "degree"
    rounds: int | None = None
    chunks: int = 3
    relabel: bool = True
    shares: int | None = None
    kappa: float | None = None
    tol: float = 1e-8

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"aggregation mode must be one of {MODES}, got {self.mode!r}")
        if self.graph not in GRAPHS:
            raise ValueError(f"consensus graph must be one of {GRAPHS}, got {self.graph!r}")
        if not isinstance(self.step, str) and not float(self.step) > 0:
            raise ValueError(
                f"consensus step must be 'degree', 'seed' or a positive number, got {self.step!r}"
            )
        if self.rounds is not None and int(self.rounds) < 1:
            raise ValueError(f"consensus rounds k_max must be ≥ 1, got {self.rounds}")
        if int(self.chunks) < 1:
            raise ValueError(f"chunks must be ≥ 1, got {self.chunks}")
        if self.shares is not None and int(self.shares) < 1:
            raise ValueError(f"shares must be ≥ 1, got {self.shares}")
        if self.kappa is not None and not self.kappa > 0:
            raise ValueError(f"kappa must be > 0, got {self.kappa}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


@lru_cache(maxsize=64)
def consensus_topology(graph: str, S: int, seed: int):
    """The consensus graph every participant rebuilds from (graph kind, S, process seed)."""
    if graph == "auto":
        graph = "cic" if _prime(S) else "complete"
    if graph == "cic":
        return cycle_with_inverse_chord(S)
    if graph == "ring":
        return ring(S)
    if graph == "complete":
        return complete(S)
    if graph == "random-link":
        return RandomLinkTopology(S, seed)
    raise ValueError(f"unknown consensus graph {graph!r}")


@lru_cache(maxsize=64)
def _default_rounds(graph: str, S: int, step: str | float, tol: float, chunks: int) -> int:
    A = consensus_topology(graph, S, 0).adjacency(1)
    return chunked_rounds_for_tolerance(mixing_rate(A, step), S, chunks, tol)


def rounds_per_session(cfg: AggregationConfig, S: int) -> int:
    """Platform rounds one aggregation session takes: 2 (exact) or k_max (consensus)."""
    if cfg.mode == "exact":
        return 2
    if cfg.rounds is not None:
        return int(cfg.rounds)
    if cfg.graph == "random-link":
        raise ValueError("consensus on a random time-varying graph needs an explicit number of rounds")
    return _default_rounds(cfg.graph, S, cfg.step, cfg.tol, int(cfg.chunks))


def _positions(perms: np.ndarray, A: np.ndarray, me: int) -> list[np.ndarray]:
    """For each session l, the participants adjacent to ``me`` once participants are placed by perms[l]."""
    out = []
    for perm in perms:
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        out.append(np.sort(inv[np.flatnonzero(A[perm[me]])]))
    return out


def _consensus_outbox(state: dict, cfg: AggregationConfig, ctx: TaskContext) -> dict[str, Any]:
    S, me = ctx.size, ctx.position
    A = consensus_topology(cfg.graph, S, ctx.process_seed).adjacency(state["graph_round"])
    per_peer: dict[int, list[int]] = {}
    for l, nbrs in enumerate(_positions(state["perms"], A, me)):
        for q in nbrs:
            per_peer.setdefault(int(q), []).append(l)
    out = {}
    for q, sessions in sorted(per_peer.items()):
        out[ctx.consortium[q]] = {
            "agg": "xi",
            "session": state["session"],
            "t": state["t"],
            "chunks": np.array(sessions, dtype=np.int64),
            "values": state["xi"][sessions],
        }
    return out


def start(
    cfg: AggregationConfig,
    vector: np.ndarray,
    session: int,
    ctx: TaskContext,
    segments: Sequence[int] | None = None,
) -> tuple[dict, dict]:
    """Open aggregation session ``session`` of this participant's ``vector``; return (state, outbox).

    ``segments`` — lengths of the contiguous statistics packed in ``vector`` (None: one); each gets its own
    chunk/share scale unless ``cfg.kappa`` fixes one for all.
    """
    vec = np.asarray(vector, dtype=np.float64).ravel()
    S, me = ctx.size, ctx.position
    kappa = cfg.kappa if cfg.kappa is not None else segment_scales(vec, segments)
    if cfg.mode == "exact":
        n_sh = S if cfg.shares is None else min(int(cfg.shares), S)
        rng = ctx.rng(f"collabdict-shares-{session}")
        parts = split_shares(vec, n_sh, rng, kappa)
        recips = share_recipients(S, me, n_sh, rng)
        outbox, own = {}, None
        for part, r in zip(parts, recips):
            if int(r) == me:
                own = part
            else:
                outbox[ctx.consortium[int(r)]] = {"agg": "share", "session": session, "value": part}
        return {"mode": "exact", "stage": "share", "session": session, "own": own}, outbox
    perms = (
        session_relabellings(S, cfg.chunks, ctx.shared_rng(f"collabdict-relabel-{session}", round=0))
        if cfg.relabel
        else np.tile(np.arange(S), (int(cfg.chunks), 1))
    )
    xi = random_chunks(vec, int(cfg.chunks), ctx.rng(f"collabdict-chunks-{session}"), kappa)
    state = {
        "mode": "consensus",
        "session": session,
        "t": 0,
        "xi": xi,
        "perms": perms,
        "graph_round": ctx.round,
        "k_max": rounds_per_session(cfg, S),
    }
    return state, _consensus_outbox(state, cfg, ctx)


def _check(msg: Any, kind: str, session: int, sender: str) -> None:
    if not isinstance(msg, dict) or msg.get("agg") != kind or msg.get("session") != session:
        raise AggregationError(f"message from {sender} is not a {kind!r} of aggregation session {session}")


def advance(
    cfg: AggregationConfig, state: dict, inbox: Mapping[str, Any], ctx: TaskContext
) -> tuple[dict, dict, np.ndarray | None]:
    """Consume one round's inbox; return (state, outbox, sum or None while the session is open)."""
    S, me, session = ctx.size, ctx.position, state["session"]
    if state["mode"] == "exact":
        kind = "share" if state["stage"] == "share" else "partial"
        for sender, msg in inbox.items():
            _check(msg, kind, session, sender)
        values = []
        for j, org in enumerate(ctx.consortium):
            if j == me:
                if state["own"] is not None:
                    values.append(state["own"])
            elif org in inbox:
                values.append(inbox[org]["value"])
            elif kind == "partial":
                raise AggregationError(f"no partial sum from {org} in aggregation session {session}")
        shape = np.asarray(values[0]).shape if values else np.asarray(state["own"]).shape
        total = sum_in_order(values, shape)
        if kind == "share":
            outbox = {
                org: {"agg": "partial", "session": session, "value": total}
                for j, org in enumerate(ctx.consortium)
                if j != me
            }
            return {"mode": "exact", "stage": "partial", "session": session, "own": total}, outbox, None
        return state, {}, total

    A = consensus_topology(cfg.graph, S, ctx.process_seed).adjacency(state["graph_round"])
    eps = step_size(A, cfg.step)
    xi = np.array(state["xi"], dtype=np.float64)
    new = xi.copy()
    for l, nbrs in enumerate(_positions(state["perms"], A, me)):
        acc = np.zeros_like(xi[l])
        for q in nbrs:
            org = ctx.consortium[int(q)]
            msg = inbox.get(org)
            if msg is None:
                raise AggregationError(
                    f"no consensus message from {org} in session {session}, t={state['t']}"
                )
            _check(msg, "xi", session, org)
            if msg["t"] != state["t"]:
                raise AggregationError(
                    f"consensus message from {org} is for t={msg['t']}, expected {state['t']}"
                )
            where = np.flatnonzero(np.asarray(msg["chunks"]) == l)
            if where.size != 1:
                raise AggregationError(f"consensus message from {org} lacks chunk session {l}")
            acc += np.asarray(msg["values"])[where[0]] - xi[l]
        new[l] = xi[l] + eps * acc  # eq. (3)
    state = dict(state, xi=new, t=state["t"] + 1, graph_round=ctx.round)
    if state["t"] >= state["k_max"]:
        return state, {}, S * sum_in_order(list(new), new.shape[1:])  # Σ = S·ξ̄, eq. (6)
    return state, _consensus_outbox(state, cfg, ctx), None
