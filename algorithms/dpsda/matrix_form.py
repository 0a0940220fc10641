"""DPSDA-C and DPSDA-PS in direct matrix form: all n nodes in one process (seed 002 Algorithms 1 and 2; docs/dpsda.md).

State after k updates: Z (n × m) duals, Y (n × m) primal estimates, w (n) push-sum weights.
Update k = 1 … T−1 on the graph G(k) with weight matrix W(k):

    DPSDA-C  (eqs. (11)–(14)):  H = Z + N(k);  Z ← W H + n E ĝ;                 Y_i = Π(Z_i, α(k))
    DPSDA-PS (eqs. (20)–(22)):  w ← W w;  H = Z + N(k);  Z ← W H + n E ĝ;       Y_i = Π(Z_i / w_i, α(k))

and the decision x(k+1) stacks the blocks [Y_i]_{B_i}. In the Gaussian mode N(k) = 0 and ĝ is eq. (G1)
(:func:`~algorithms.dpsda.framework.scaled_block_gradient`). ``W H`` is :func:`~algorithms.dpsda.weights.mix`
(fixed summation order) and the per-node pieces are the kernels of :mod:`~algorithms.dpsda.framework`,
so :func:`run_dpsda` is bit-identical to :func:`algorithms.simulator.simulate` of the step function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from algorithms.dpsda.framework import (
    DPSDAConfig,
    check_stream,
    gradient_data_index,
    initial_decision,
    perturb,
    primal,
    scaled_block_gradient,
)
from algorithms.dpsda.privacy import GaussianComposition, PrivacyAccountant
from algorithms.dpsda.weights import circulation_weights, metropolis_weights, mix, push_sum_weights
from algorithms.step import TaskContext
from algorithms.topologies.base import Topology


@dataclass
class DPSDATrace:
    """What a run produced. Rows of ``decisions`` are x(1) … x(T); x(t) is scored on f_t."""

    decisions: np.ndarray  # (T, m)
    estimates: np.ndarray  # (n, m): x_i(T), every node's estimate of the whole vector
    duals: np.ndarray  # (n, m): z_i(T)
    push_sum_weights: np.ndarray  # (T, n): w(t) (all ones for DPSDA-C)
    epsilon_per_round: np.ndarray  # (T,): ε released by each node in round t (0 in the last round; NaN in
    # the Gaussian mode, which has no pure ε per round: see ``gaussian``)
    messages: list[np.ndarray] = field(default_factory=list)  # H(k) (n × m) per update k, if recorded
    dual_history: list[np.ndarray] = field(default_factory=list)  # Z(k+1) (n × m) per update k, if recorded
    estimate_history: list[np.ndarray] = field(
        default_factory=list
    )  # Y(k+1) (n × m) per update k, if recorded
    gaussian: GaussianComposition | None = None  # the network's privacy of a private Gaussian-mode run

    @property
    def epsilon_total(self) -> float:
        return float(np.sum(self.epsilon_per_round))


def weight_matrix(cfg: DPSDAConfig, adjacency: np.ndarray) -> np.ndarray:
    """W(k) of the configured variant and weighting rule."""
    if cfg.variant == "PS":
        return push_sum_weights(adjacency)
    if cfg.weights == "metropolis":
        return metropolis_weights(adjacency)
    return circulation_weights(adjacency)


def default_consortium(n: int) -> tuple[str, ...]:
    return tuple(f"node{i + 1}" for i in range(n))


def _ctx(seed: int, rnd: int, rounds: int, consortium: tuple[str, ...], i: int) -> TaskContext:
    return TaskContext(
        process_seed=seed, round=rnd, rounds=rounds, organisation=consortium[i], consortium=consortium
    )


def run_dpsda(
    cfg: DPSDAConfig,
    features: np.ndarray,
    labels: np.ndarray,
    topology: Topology,
    horizon: int,
    seed: int,
    consortium: Sequence[str] | None = None,
    record: bool = False,
    sampling_key: np.ndarray | None = None,
) -> DPSDATrace:
    """Run T = ``horizon`` time steps (T−1 updates) of DPSDA-C or DPSDA-PS on the stream (features, labels).

    Every node sees the same stream (f_t is revealed to all nodes, seed 002 §2.2); ``consortium`` names the nodes
    only to derive their RNG streams exactly as the step function's :class:`TaskContext` does.
    ``record`` keeps every released message H(k) and every dual matrix Z(k+1) and estimate matrix Y(k+1)
    (for tests and audits). With Poisson sampling (Gaussian mode) ``features``/``labels`` are the data set
    that every node holds and ``sampling_key`` the secret key the samples come from.
    """
    if horizon < 1:
        raise ValueError(f"the horizon T must be ≥ 1, got {horizon}")
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    key = check_stream(cfg, features, labels, horizon, sampling_key)
    n, m = cfg.n_nodes, cfg.dimension
    if topology.size != n:
        raise ValueError(f"the topology has {topology.size} nodes, the configuration {n}")
    names = tuple(consortium) if consortium is not None else default_consortium(n)
    if len(names) != n or len(set(names)) != n:
        raise ValueError(f"need {n} distinct node names, got {names}")

    accountant = None if cfg.gaussian else PrivacyAccountant(cfg.accounting_sensitivity, cfg.laplace_scale)
    Z = np.zeros((n, m))
    Y = np.zeros((n, m))
    w = np.ones(n)
    decisions = np.zeros((horizon, m))
    decisions[0] = initial_decision(cfg, _ctx(seed, 0, horizon, names, 0))
    w_hist = np.ones((horizon, n))
    eps = np.zeros(horizon)
    messages: list[np.ndarray] = []
    duals: list[np.ndarray] = []
    estimates: list[np.ndarray] = []

    for k in range(1, horizon):
        ctxs = [_ctx(seed, k, horizon, names, i) for i in range(n)]
        W = weight_matrix(cfg, topology.adjacency(k))
        t_data = gradient_data_index(cfg, k)
        grads = [scaled_block_gradient(cfg, Y[i], features, labels, t_data, ctxs[i], key) for i in range(n)]
        H = np.stack([perturb(cfg, Z[i], ctxs[i]) for i in range(n)])
        if record:
            messages.append(H.copy())
        eps[k - 1] = accountant.release() if accountant is not None else math.nan
        if cfg.variant == "PS":
            w = mix(W, w)  # (21a)
        Z = mix(W, H)  # (12) / (20)
        for i in range(n):
            Z[i, cfg.block(i)] += grads[i]  # + n E_i ĝ_i
            Y[i] = primal(cfg, Z[i], float(w[i]), k)  # (13) / (22)
            decisions[k, cfg.block(i)] = Y[i, cfg.block(i)]
        w_hist[k] = w
        if record:
            duals.append(Z.copy())
            estimates.append(Y.copy())
    if accountant is None:
        eps[horizon - 1] = math.nan
    return DPSDATrace(
        decisions=decisions,
        estimates=Y,
        duals=Z,
        push_sum_weights=w_hist,
        epsilon_per_round=eps,
        messages=messages,
        dual_history=duals,
        estimate_history=estimates,
        gaussian=cfg.gaussian_composition(horizon - 1) if cfg.gaussian and cfg.private else None,
    )
