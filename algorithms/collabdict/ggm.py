"""CollabDict with a sparse GGM mixture as a step function (docs/collabdict.md; seed 000 Algorithm 1, eqs. 10–20).

Each participant s keeps its data D^s and mixing weights π^s private; θ = {μ_k, Λ_k} is global. One EM
iteration of Algorithm 1 is

    local_update  r^s (12), N_k^s, m_k^s, C_k^s (13), π^s          — private
    consensus     N̄_k = Σ_s N_k^s, m̄_k, C̄_k (14)                   — one aggregation session
    optimize      μ_k (15), Σ_k and Λ_k (16, graphical lasso)        — every participant, same inputs

Two departures from the seed, both off with ``shrinkage=0, weight_prior=0`` (docs/collabdict.md):
Λ_k solves eq. (16') — (16) on the covariance shrunk towards the pooled variances with ν pseudo-rows, so
that a component with one row or an organisation with fewer rows than features keeps a positive-definite
Λ_k — and the π^s update counts β pseudo-rows of the consortium's weights N̄_k/ΣN̄ (personalised weights
that a small organisation borrows and a large one overrides).

The step function is a small state machine: the state holds the phase (``init`` = one aggregation of the
pooled moments for the identical initialisation; ``em`` = EM iterations), the open aggregation session
(:mod:`algorithms.collabdict.aggregation`) and the current θ, π^s. A session takes 2 rounds with the exact
random-chunk sum and k_max rounds with dynamical consensus; when it completes, the participant runs
optimize, then local_update, and opens the next session in the same round. So after round
``1 + rounds_per_session·(n+1)`` every participant holds θ after n EM iterations (:func:`rounds_for`).

Every completed iteration reports metrics: the global MAP objective of the previous θ (its log-likelihood
term is aggregated along with the statistics), the number of active components, the entropy ℓ-diversity
E^s (eq. 48, max and min variants) and, when ``dp_radius`` R is given, the Rényi-DP ε of Theorem 1 (eq. 46)
with the empirical B and with the Appendix-B bound.

:func:`fit_centralised` is the centralised computation on pooled data with per-source π^s and the same
initialisation; with exact aggregation the step function reproduces it (tests, to 1e-8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from algorithms.collabdict import aggregation
from algorithms.collabdict.aggregation import AggregationConfig
from algorithms.collabdict.mixture import (
    TAU_UNITS,
    CovariancePrior,
    MixtureParameters,
    diagonal_target,
    initial_parameters,
    l0_penalty,
    local_statistics,
    log_prior,
    optimize,
    pooled_moments,
    responsibilities,
    update_mixing_weights,
)
from algorithms.collabdict.privacy import (
    appendix_b_precision_bound,
    empirical_precision_bound,
    entropy_l_diversity,
    renyi_dp_epsilon,
)
from algorithms.collabdict.scores import anomaly_score, has_both_classes, roc_auc
from algorithms.step import LocalDataset, StepResult, TaskContext

INIT_PURPOSE = "collabdict-ggm-init"


@dataclass(frozen=True)
class GGMHyperParameters:
    """Model hyper-parameters (defaults: docs/collabdict.md). ``m0=None`` → pooled mean; ``rho=None`` → 0.05·N_total/K.

    ``tau`` (ℓ0 penalty on π^s, in ``tau_units``), ``weight_prior`` β (pseudo-rows of the consortium's weights
    in each π^s) and ``shrinkage`` ν (pseudo-rows of the diagonal covariance target in eq. 16') default to the
    values chosen by held-out likelihood: τ = 0, β = 200, ν = 0.1. The seed's mode: ``weight_prior=0,
    shrinkage=0`` (τ as wanted)."""

    n_components: int = 10
    lam0: float = 1.0
    m0: tuple[float, ...] | None = None
    rho: float | None = None
    tau: float = 0.0
    eps_pi: float = 1e-8
    delta: float = 1.0
    init_precision: str = "pooled"
    tau_units: str = "bic"
    shrinkage: float = 0.1
    weight_prior: float = 200.0

    def __post_init__(self):
        if int(self.n_components) < 1:
            raise ValueError(f"n_components must be ≥ 1, got {self.n_components}")
        if not self.lam0 > 0:
            raise ValueError(f"lam0 must be > 0 (prior strength λ_0), got {self.lam0}")
        if self.rho is not None and self.rho < 0:
            raise ValueError(f"rho must be ≥ 0, got {self.rho}")
        if self.tau < 0:
            raise ValueError(f"tau must be ≥ 0, got {self.tau}")
        if self.delta < 0:
            raise ValueError(f"delta must be ≥ 0, got {self.delta}")
        if not self.shrinkage >= 0:
            raise ValueError(
                f"shrinkage ν must be ≥ 0 (pseudo-rows of the covariance prior), got {self.shrinkage}"
            )
        if not self.weight_prior >= 0:
            raise ValueError(
                f"weight_prior β must be ≥ 0 (pseudo-rows of the consortium's weights), got {self.weight_prior}"
            )
        if self.tau_units not in TAU_UNITS:
            raise ValueError(f"tau_units must be one of {TAU_UNITS}, got {self.tau_units!r}")
        if self.init_precision not in ("pooled", "identity"):
            raise ValueError(f"init_precision must be 'pooled' or 'identity', got {self.init_precision!r}")


def shared_init_rng(seed: int) -> np.random.Generator:
    """The common generator of the initial means, identical at every participant and in the reference."""
    return TaskContext(process_seed=seed, round=0, rounds=0, organisation="_", consortium=("_",)).shared_rng(
        INIT_PURPOSE, round=0
    )


def _resolve(
    h: GGMHyperParameters, n_total: float, xbar: np.ndarray, V: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """(m_0, ρ, shrinkage target diag(V)) from the pooled moments."""
    m0 = xbar.copy() if h.m0 is None else np.asarray(h.m0, dtype=np.float64)
    if m0.shape != xbar.shape:
        raise ValueError(f"m0 has {m0.size} entries, data have {xbar.size} features")
    rho = 0.05 * n_total / h.n_components if h.rho is None else float(h.rho)
    return m0, rho, diagonal_target(V)


def covariance_prior(h: GGMHyperParameters, target: np.ndarray) -> CovariancePrior | None:
    """The regularised covariance of eq. (16) (:class:`~algorithms.collabdict.mixture.CovariancePrior`), None for ν = 0."""
    return CovariancePrior(h.shrinkage, np.asarray(target, dtype=np.float64)) if h.shrinkage > 0 else None


def _restrict_pi(pi: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Drop pruned components from π^s and renormalise."""
    pi = np.where(active, pi, 0.0)
    s = pi.sum()
    return pi / s if s > 0 else np.where(active, 1.0 / active.sum(), 0.0)


def consortium_weights(N_bar: np.ndarray, active: np.ndarray) -> np.ndarray:
    """π̄ = N̄_k / Σ_l N̄_l over active components (uniform before the first aggregation)."""
    N_bar = np.where(active, np.maximum(np.asarray(N_bar, dtype=np.float64), 0.0), 0.0)
    total = N_bar.sum()
    return N_bar / total if total > 0 else np.where(active, 1.0 / max(int(active.sum()), 1), 0.0)


def local_update(
    X: np.ndarray,
    pi: np.ndarray,
    params: MixtureParameters,
    h: GGMHyperParameters,
    N_bar: np.ndarray | None = None,
):
    """local_update of Algorithm 1: eqs. (12)–(13) and the π^s update (ℓ0 with the penalty of
    :func:`~algorithms.collabdict.mixture.l0_penalty`); also Σ_n ln p^s(x^(n)) at the current
    (π^s, θ) for the global objective. Returns (N, m, C, loglik, new π^s).

    With ``h.weight_prior`` β > 0 the π^s update counts N_k^s + β π̄_k, π̄ the consortium's weights from the
    last aggregation ``N_bar`` (a Dirichlet(β π̄ + 1) prior on π^s): an organisation with few rows borrows the
    consortium's weights, one with many keeps its own (docs/collabdict.md, "Personalised mode")."""
    r, logp = responsibilities(X, pi, params)
    N, m, C = local_statistics(X, r)
    tau = l0_penalty(h.tau, X.shape[1], X.shape[0], h.tau_units)
    counts = N
    if h.weight_prior > 0:
        prior = consortium_weights(np.zeros_like(N) if N_bar is None else N_bar, params.active)
        counts = N + h.weight_prior * prior
    new_pi = update_mixing_weights(counts, params.active, tau, h.eps_pi)
    return N, m, C, float(logp.sum()), new_pi


def _pack(N, m, C, loglik) -> np.ndarray:
    return np.concatenate([N, m.ravel(), C.ravel(), [loglik]])


def _segments(K: int, M: int) -> list[int]:
    """One chunk-scale segment per statistic of the packed vector: each N_k, m_k, C_k, and the log-likelihood."""
    return [1] * K + [M] * K + [M * M] * K + [1]


def _unpack(v: np.ndarray, K: int, M: int):
    N = v[:K]
    m = v[K : K + K * M].reshape(K, M)
    C = v[K + K * M : K + K * M + K * M * M].reshape(K, M, M)
    return N, m, C, float(v[-1])


def rounds_for(iterations: int, S: int, config: AggregationConfig) -> int:
    """Platform rounds after which every participant holds θ after ``iterations`` EM iterations."""
    return 1 + aggregation.rounds_per_session(config, S) * (int(iterations) + 1)


class CollabDictGGM:
    """CollabDict sparse-GGM-mixture anomaly detector as an :class:`algorithms.step.Algorithm`."""

    name = "collabdict-ggm"
    # imported lazily by mixture.solve_precision (first M-step with a graphical lasso); a warm worker
    # imports it before its first task instead (algorithms.task_worker), not inside a round
    warm_imports = ("sklearn.covariance",)

    def __init__(
        self,
        n_components: int = 10,
        lam0: float = 1.0,
        m0: Sequence[float] | None = None,
        rho: float | None = None,
        tau: float = GGMHyperParameters.tau,
        eps_pi: float = 1e-8,
        delta: float = 1.0,
        init_precision: str = "pooled",
        tau_units: str = "bic",
        shrinkage: float = GGMHyperParameters.shrinkage,
        weight_prior: float = GGMHyperParameters.weight_prior,
        aggregation: Mapping[str, Any] | None = None,
        dp_radius: float | None = None,
        l_diversity_variant: str = "density",
    ):
        self.hyper = GGMHyperParameters(
            int(n_components),
            float(lam0),
            None if m0 is None else tuple(map(float, m0)),
            None if rho is None else float(rho),
            float(tau),
            float(eps_pi),
            float(delta),
            init_precision,
            tau_units,
            float(shrinkage),
            float(weight_prior),
        )
        self.agg = AggregationConfig(**dict(aggregation or {}))
        if dp_radius is not None and not dp_radius > 0:
            raise ValueError(f"dp_radius R must be > 0, got {dp_radius}")
        if l_diversity_variant not in ("density", "responsibility"):
            raise ValueError(
                f"l_diversity_variant must be 'density' or 'responsibility', got {l_diversity_variant!r}"
            )
        self.dp_radius = dp_radius
        self.l_diversity_variant = l_diversity_variant

    def params(self) -> dict[str, Any]:
        d = asdict(self.hyper)
        d["m0"] = None if d["m0"] is None else list(d["m0"])
        d.update(
            aggregation=self.agg.to_dict(),
            dp_radius=self.dp_radius,
            l_diversity_variant=self.l_diversity_variant,
        )
        return d

    @staticmethod
    def validation_score(model: Mapping[str, Any], data: LocalDataset, seed: int) -> tuple[str, float]:
        """A member's model on its validation slice (:mod:`algorithms.validation`): ROC-AUC of the anomaly
        score (eq. 20) when the slice's labels hold normal rows and anomalies, else the mean held-out
        log-likelihood ln p^s(x) (unlabelled or one-class slice)."""
        X = np.asarray(data.features, dtype=np.float64)
        if has_both_classes(data.labels):
            return "roc_auc", roc_auc(np.asarray(data.labels), score(model, X))
        return "mean_log_likelihood", float(np.mean(log_likelihood(model, X)))

    # -- step interface ------------------------------------------------------------------------------
    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        X = np.asarray(data.features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1:
            raise ValueError("CollabDict GGM needs a non-empty (n, M) feature matrix")
        moments = np.concatenate([[X.shape[0]], X.sum(axis=0), (X.T @ X).ravel()])
        return {"phase": "init", "iteration": 0, "pending": moments, "agg": None, "session": 0}

    def step(self, state: dict, inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext) -> StepResult:
        if state["agg"] is None:  # round 1: open the initial session
            M = np.asarray(data.features).shape[1]  # pending = [N, Σx (M), Σxxᵀ (M²)]
            agg_state, outbox = aggregation.start(self.agg, state["pending"], 0, ctx, segments=[1, M, M * M])
            return StepResult(state=dict(state, agg=agg_state, pending=None), outbox=outbox)
        agg_state, outbox, total = aggregation.advance(self.agg, state["agg"], inbox, ctx)
        if total is None:
            return StepResult(state=dict(state, agg=agg_state), outbox=outbox)
        X = np.asarray(data.features, dtype=np.float64)
        if state["phase"] == "init":
            state, metrics = self._initialise(state, total, X, ctx)
        else:
            state, metrics = self._optimize(state, total, X, ctx)
        model = self.model_of(state)  # θ_n with the π^s of the same iteration
        N, m, C, loglik, new_pi = local_update(
            X, state["pi"], self._params(state), self.hyper, np.asarray(state["N_bar"])
        )
        session = state["session"] + 1
        agg_state, outbox = aggregation.start(
            self.agg, _pack(N, m, C, loglik), session, ctx, segments=_segments(*m.shape)
        )
        state = dict(state, pi=new_pi, agg=agg_state, session=session)
        return StepResult(state=state, outbox=outbox, metrics=metrics, model=model)

    # -- phases --------------------------------------------------------------------------------------
    def _initialise(self, state: dict, total: np.ndarray, X: np.ndarray, ctx: TaskContext):
        M = X.shape[1]
        n = float(total[0])
        xbar, V = pooled_moments(n, total[1 : 1 + M], total[1 + M :].reshape(M, M))
        m0, rho, target = _resolve(self.hyper, n, xbar, V)
        p = initial_parameters(
            xbar,
            V,
            self.hyper.n_components,
            shared_init_rng(ctx.process_seed),
            self.hyper.init_precision,
            shrinkage=(n, self.hyper.shrinkage),
        )
        K = self.hyper.n_components
        state = dict(
            state,
            phase="em",
            iteration=0,
            means=p.means,
            precisions=p.precisions,
            active=p.active,
            pi=np.full(K, 1.0 / K),
            m0=m0,
            rho=rho,
            target=target,
            n_total=n,
            N_bar=np.zeros(K),
        )
        return state, {"iteration": 0.0, "n_active": float(K)}

    def _optimize(self, state: dict, total: np.ndarray, X: np.ndarray, ctx: TaskContext):
        K, M = self.hyper.n_components, X.shape[1]
        N_bar, m_sum, C_sum, loglik_total = _unpack(total, K, M)
        prev = self._params(state)
        prior = covariance_prior(self.hyper, state["target"])
        objective = loglik_total + log_prior(prev, state["m0"], self.hyper.lam0, state["rho"], prior)
        new = optimize(
            N_bar, m_sum, C_sum, prev, state["m0"], self.hyper.lam0, state["rho"], self.hyper.delta, prior
        )
        pi = _restrict_pi(np.asarray(state["pi"]), new.active)
        it = state["iteration"] + 1
        state = dict(
            state,
            iteration=it,
            means=new.means,
            precisions=new.precisions,
            active=new.active,
            pi=pi,
            N_bar=np.asarray(N_bar, dtype=np.float64),
        )
        metrics = {
            "iteration": float(it),
            "objective": float(objective),
            "n_active": float(new.active.sum()),
            "l_diversity": entropy_l_diversity(X, new, pi, "max", self.l_diversity_variant),
            "l_diversity_min": entropy_l_diversity(X, new, pi, "min", self.l_diversity_variant),
            "l_diversity_bound": float(np.log(X.shape[0])),
        }
        if self.dp_radius is not None:
            n_act = int(new.active.sum())
            B = empirical_precision_bound(new)
            metrics["dp_epsilon"] = renyi_dp_epsilon(n_act, B, self.dp_radius, self.hyper.lam0)
            if state["rho"] > 0 and self.hyper.delta > 0:
                Bb = max(
                    appendix_b_precision_bound(
                        _sigma_of(N_bar[k], m_sum[k], C_sum[k], state["m0"], self.hyper.lam0),
                        float(N_bar[k]),
                        M,
                        self.hyper.delta,
                        state["rho"],
                        ctx.size,
                        int(state["n_total"]),
                    )
                    for k in np.flatnonzero(new.active)
                )
                metrics["dp_epsilon_appendix_b"] = renyi_dp_epsilon(
                    n_act, Bb, self.dp_radius, self.hyper.lam0
                )
        return state, metrics

    @staticmethod
    def _params(state: dict) -> MixtureParameters:
        return MixtureParameters(
            np.asarray(state["means"]),
            np.asarray(state["precisions"]),
            np.asarray(state["active"], dtype=bool),
        )

    def model_of(self, state: dict) -> dict:
        """The model a participant keeps: θ, its own π^s and the prior used (payload for the platform)."""
        return {
            "means": state["means"],
            "precisions": state["precisions"],
            "active": state["active"],
            "pi": state["pi"],
            "m0": state["m0"],
            "lam0": self.hyper.lam0,
            "rho": state["rho"],
            "shrinkage": self.hyper.shrinkage,
            "target": state["target"],
            "iteration": state["iteration"],
            "N_bar": state["N_bar"],
        }


def _sigma_of(n: float, m_sum: np.ndarray, C_sum: np.ndarray, m0: np.ndarray, lam0: float) -> np.ndarray:
    mbar, Cbar = m_sum / n, C_sum / n
    d = mbar - m0
    return Cbar - np.outer(mbar, mbar) + lam0 / (lam0 + n) * np.outer(d, d)


def score(model: Mapping[str, Any], X: np.ndarray, kind: str = "eq20") -> np.ndarray:
    """Anomaly score of a participant's model payload: the seed's a^s(x) (eq. 20, default) or ``kind="nll"``,
    −ln p^s(x) (:mod:`algorithms.collabdict.scores`)."""
    params = MixtureParameters(
        np.asarray(model["means"]), np.asarray(model["precisions"]), np.asarray(model["active"], dtype=bool)
    )
    return anomaly_score(X, np.asarray(model["pi"]), params, kind)


def max_relative_deviation(model: Mapping[str, Any], params: MixtureParameters, pi: np.ndarray) -> float:
    """How far a participant's model is from reference θ, π^s: the largest of max|ΔΛ_k|/max|Λ_k|,
    max|Δμ_k|/max(max|μ_k|, 1) over active components and max|Δπ_k|; ∞ if the active sets differ."""
    if not np.array_equal(np.asarray(model["active"], dtype=bool), params.active):
        return float("inf")
    worst = float(np.abs(np.asarray(model["pi"]) - pi).max())
    for k in np.flatnonzero(params.active):
        ref_L, ref_m = params.precisions[k], params.means[k]
        worst = max(
            worst,
            float(np.abs(np.asarray(model["precisions"])[k] - ref_L).max() / np.abs(ref_L).max()),
            float(np.abs(np.asarray(model["means"])[k] - ref_m).max() / max(np.abs(ref_m).max(), 1.0)),
        )
    return worst


# ------------------------------------------------------------------------------------------- reference


@dataclass
class CentralisedFit:
    """Trajectory of the centralised computation: θ and every π^s after each EM iteration."""

    params: list[MixtureParameters] = field(default_factory=list)
    pis: list[np.ndarray] = field(default_factory=list)  # (S, K) per iteration
    objectives: list[float] = field(default_factory=list)  # MAP objective of θ before each iteration
    m0: np.ndarray | None = None
    rho: float = 0.0
    target: np.ndarray | None = None
    hyper: GGMHyperParameters = field(default_factory=GGMHyperParameters)

    def model(self, s: int, iteration: int = -1) -> dict:
        """Participant s's model payload after ``iteration`` (the keys of :meth:`CollabDictGGM.model_of`)."""
        p = self.params[iteration]
        return {
            "means": p.means,
            "precisions": p.precisions,
            "active": p.active,
            "pi": self.pis[iteration][s],
            "m0": self.m0,
            "lam0": self.hyper.lam0,
            "rho": self.rho,
            "shrinkage": self.hyper.shrinkage,
            "target": self.target,
            "iteration": len(self.params) - 1 if iteration == -1 else iteration,
        }


def fit_centralised(
    datasets: Sequence[np.ndarray], iterations: int, seed: int, hyper: GGMHyperParameters | None = None
) -> CentralisedFit:
    """Algorithm 1 computed centrally on pooled data with per-source π^s and the identical initialisation.

    ``datasets`` is the list of per-participant matrices (the pooled data keep their source labels);
    ``iterations=0`` gives the initial parameters only. With ``datasets = [X]`` it is plain MAP-EM.
    """
    h = hyper or GGMHyperParameters()
    Xs = [np.asarray(X, dtype=np.float64) for X in datasets]
    pooled = np.concatenate(Xs)
    n = float(pooled.shape[0])
    xbar, V = pooled_moments(n, pooled.sum(axis=0), pooled.T @ pooled)
    m0, rho, target = _resolve(h, n, xbar, V)
    prior = covariance_prior(h, target)
    params = initial_parameters(
        xbar, V, h.n_components, shared_init_rng(seed), h.init_precision, shrinkage=(n, h.shrinkage)
    )
    K = h.n_components
    pis = [np.full(K, 1.0 / K) for _ in Xs]
    fit = CentralisedFit(m0=m0, rho=rho, target=target, hyper=h)
    fit.params.append(params)
    fit.pis.append(np.stack(pis))
    last_N_bar = np.zeros(K)  # the consortium's counts of the last aggregation (none yet)
    M = pooled.shape[1]
    for _ in range(iterations):
        N_bar, m_sum, C_sum, ll = np.zeros(K), np.zeros((K, M)), np.zeros((K, M, M)), 0.0
        for s, X in enumerate(Xs):
            N, m, C, loglik, pis[s] = local_update(X, pis[s], params, h, last_N_bar)
            N_bar, m_sum, C_sum, ll = N_bar + N, m_sum + m, C_sum + C, ll + loglik
        last_N_bar = N_bar
        fit.objectives.append(ll + log_prior(params, m0, h.lam0, rho, prior))
        params = optimize(N_bar, m_sum, C_sum, params, m0, h.lam0, rho, h.delta, prior)
        pis = [_restrict_pi(p, params.active) for p in pis]
        fit.params.append(params)
        fit.pis.append(np.stack(pis))
    return fit


def fit_isolated(X: np.ndarray, iterations: int, seed: int, hyper: GGMHyperParameters | None = None) -> dict:
    """The model an organisation gets from its own data alone under the same hyper-parameters (Algorithm 1
    with S = 1): the baseline against which it judges its collaborative model."""
    return fit_centralised([X], iterations, seed, hyper).model(0)


def fit_collaborative(
    datasets: Sequence[np.ndarray], iterations: int, seed: int, hyper: GGMHyperParameters | None = None
) -> list[dict]:
    """Every participant's collaborative model payload, computed centrally (:func:`fit_centralised`, which
    the step function reproduces with exact aggregation)."""
    fit = fit_centralised(datasets, iterations, seed, hyper)
    return [fit.model(s) for s in range(len(datasets))]


def log_likelihood(model: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    """ln p^s(x) of each row under a participant's model (held-out likelihood)."""
    return -score(model, X, kind="nll")
