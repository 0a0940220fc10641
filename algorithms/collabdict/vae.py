"""CollabDict with a multi-task VAE as a step function (docs/collabdict.md; seed 000 Algorithm 1, eqs. 33–36).

Per iteration, participant s (encoder φ^s private, decoder θ shared):

    local_update  φ^s ← φ^s + η ∂L^s/∂φ^s                                   (33)
                  θ^s = ∂L^s(φ^s_new, θ)/∂θ                                  (34)
    consensus     ∂θ = Σ_s θ^s                                               (35)  — one aggregation session
    optimize      θ ← θ + η ∂θ, the same step at every participant          (36)

``optimizer="sgd", normalise=False`` is the seed's raw-sum gradient ascent (used for the equivalence test);
the default is Adam on gradients divided by N^s (encoder) and by N̄ = Σ_s N^s (decoder, N̄ obtained by a first
aggregation session) (our choice). The Monte-Carlo draws v of iteration i at participant s come from a
generator seeded by (process seed, s, i), so :func:`fit_centralised` — gradient ascent on Σ_s L^s computed in
one place — uses exactly the same draws. The state machine is the one of :mod:`algorithms.collabdict.ggm`:
phase ``init`` (aggregate N^s), then one session per iteration, 2 rounds each with exact aggregation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from algorithms.collabdict import aggregation
from algorithms.collabdict.aggregation import AggregationConfig
from algorithms.collabdict.vae_model import (
    DECODER_KEYS,
    ENCODER_KEYS,
    AdamAscent,
    elbo_gradients,
    flatten,
    init_decoder,
    init_encoder,
    reconstruction_score,
    unflatten,
)
from algorithms.step import LocalDataset, StepResult, TaskContext

OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class VAEHyperParameters:
    """Defaults: d = 4, hidden = 64, η = 1e-3 (Adam), J_train = 1, J_score = 64."""

    latent: int = 4
    hidden: int = 64
    lr: float = 1e-3
    optimizer: str = "adam"
    normalise: bool = True
    mc_train: int = 1
    mc_score: int = 64
    batch_size: int | None = None

    def __post_init__(self):
        for name in ("latent", "hidden", "mc_train", "mc_score"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {self.batch_size}")


def iteration_rng(seed: int, S: int, position: int, iteration: int, purpose: str) -> np.random.Generator:
    """Generator of participant ``position`` for ``iteration`` (independent of the platform round)."""
    consortium = tuple(f"p{i}" for i in range(S))
    return TaskContext(
        process_seed=seed, round=iteration, rounds=0, organisation=consortium[position], consortium=consortium
    ).rng(purpose)


def shared_decoder_init(seed: int, features: int, h: VAEHyperParameters) -> dict[str, np.ndarray]:
    """The identical initial θ of every participant."""
    ctx = TaskContext(process_seed=seed, round=0, rounds=0, organisation="_", consortium=("_",))
    return init_decoder(h.latent, h.hidden, features, ctx.shared_rng("collabdict-vae-decoder", round=0))


def encoder_init(
    seed: int, S: int, position: int, features: int, h: VAEHyperParameters
) -> dict[str, np.ndarray]:
    return init_encoder(
        features, h.hidden, h.latent, iteration_rng(seed, S, position, 0, "collabdict-vae-encoder")
    )


def local_update(
    X: np.ndarray, theta: dict, phi: dict, phi_opt: dict, h: VAEHyperParameters, rng: np.random.Generator
) -> tuple[dict, dict, np.ndarray, float]:
    """Eqs. (33)–(34). Returns (new φ^s, new encoder-optimizer state, ∂L^s/∂θ as a flat vector, L^s(φ_new, θ)).

    With a mini-batch of b of the N^s rows, the θ-gradient and ELBO are scaled by N^s/b (unbiased sums)."""
    N = X.shape[0]
    if h.batch_size is not None and int(h.batch_size) < N:
        idx = np.sort(rng.choice(N, size=int(h.batch_size), replace=False))
        Xb = X[idx]
    else:
        Xb = X
    b = Xb.shape[0]
    V = rng.standard_normal((h.mc_train, b, h.latent))
    _, g_phi = elbo_gradients(theta, phi, Xb, V, "phi")
    g = flatten(g_phi, ENCODER_KEYS)
    if h.normalise:
        g = g / b
    x = flatten(phi, ENCODER_KEYS)
    if h.optimizer == "sgd":
        x, phi_opt = x + h.lr * g, phi_opt
    else:
        x, phi_opt = AdamAscent(h.lr).update(x, g, phi_opt)
    new_phi = unflatten(x, phi, ENCODER_KEYS)
    value, g_theta = elbo_gradients(theta, new_phi, Xb, V, "theta")
    scale = N / b
    return new_phi, phi_opt, scale * flatten(g_theta, DECODER_KEYS), scale * value


def optimize(
    theta: dict, theta_opt: dict, grad_sum: np.ndarray, n_total: float, h: VAEHyperParameters
) -> tuple[dict, dict]:
    """Eq. (36): θ ← θ + η ∂θ (or an Adam step), identical at every participant."""
    g = grad_sum / n_total if h.normalise else grad_sum
    x = flatten(theta, DECODER_KEYS)
    if h.optimizer == "sgd":
        return unflatten(x + h.lr * g, theta, DECODER_KEYS), theta_opt
    x, theta_opt = AdamAscent(h.lr).update(x, g, theta_opt)
    return unflatten(x, theta, DECODER_KEYS), theta_opt


def rounds_for(iterations: int, S: int, config: AggregationConfig) -> int:
    """Platform rounds after which every participant holds θ after ``iterations`` iterations."""
    return 1 + aggregation.rounds_per_session(config, S) * (int(iterations) + 1)


class CollabDictVAE:
    """CollabDict multi-task VAE anomaly detector as an :class:`algorithms.step.Algorithm`."""

    name = "collabdict-vae"

    def __init__(
        self,
        latent: int = 4,
        hidden: int = 64,
        lr: float = 1e-3,
        optimizer: str = "adam",
        normalise: bool = True,
        mc_train: int = 1,
        mc_score: int = 64,
        batch_size: int | None = None,
        aggregation: Mapping[str, Any] | None = None,
    ):
        self.hyper = VAEHyperParameters(
            int(latent),
            int(hidden),
            float(lr),
            optimizer,
            bool(normalise),
            int(mc_train),
            int(mc_score),
            None if batch_size is None else int(batch_size),
        )
        self.agg = AggregationConfig(**dict(aggregation or {}))

    def params(self) -> dict[str, Any]:
        return dict(asdict(self.hyper), aggregation=self.agg.to_dict())

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        X = np.asarray(data.features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1:
            raise ValueError("CollabDict VAE needs a non-empty (n, M) feature matrix")
        M = X.shape[1]
        theta = shared_decoder_init(ctx.process_seed, M, self.hyper)
        phi = encoder_init(ctx.process_seed, ctx.size, ctx.position, M, self.hyper)
        return {
            "phase": "init",
            "iteration": 0,
            "session": 0,
            "agg": None,
            "pending": np.array([float(X.shape[0])]),
            "theta": theta,
            "phi": phi,
            "n_total": 0.0,
            "theta_opt": AdamAscent.initial_state(flatten(theta, DECODER_KEYS).size),
            "phi_opt": AdamAscent.initial_state(flatten(phi, ENCODER_KEYS).size),
        }

    def step(self, state: dict, inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext) -> StepResult:
        if state["agg"] is None:
            agg_state, outbox = aggregation.start(self.agg, state["pending"], 0, ctx)
            return StepResult(state=dict(state, agg=agg_state, pending=None), outbox=outbox)
        agg_state, outbox, total = aggregation.advance(self.agg, state["agg"], inbox, ctx)
        if total is None:
            return StepResult(state=dict(state, agg=agg_state), outbox=outbox)
        metrics: dict[str, float] = {}
        if state["phase"] == "init":
            state = dict(state, phase="train", n_total=float(total[0]))
            metrics = {"iteration": 0.0}
        else:
            theta, theta_opt = optimize(
                state["theta"], state["theta_opt"], total[:-1], state["n_total"], self.hyper
            )
            it = state["iteration"] + 1
            state = dict(state, theta=theta, theta_opt=theta_opt, iteration=it)
            metrics = {
                "iteration": float(it),
                "elbo": float(total[-1]),
                "elbo_per_sample": float(total[-1]) / state["n_total"],
                "elbo_local": state["elbo_local"],
            }
        model = self.model_of(state)
        X = np.asarray(data.features, dtype=np.float64)
        rng = iteration_rng(
            ctx.process_seed, ctx.size, ctx.position, state["iteration"] + 1, "collabdict-vae-draws"
        )
        phi, phi_opt, g_theta, value = local_update(
            X, state["theta"], state["phi"], state["phi_opt"], self.hyper, rng
        )
        session = state["session"] + 1
        segments = [int(np.size(state["theta"][k])) for k in DECODER_KEYS] + [1]  # each decoder tensor, ELBO
        agg_state, outbox = aggregation.start(
            self.agg, np.concatenate([g_theta, [value]]), session, ctx, segments=segments
        )
        state = dict(state, phi=phi, phi_opt=phi_opt, agg=agg_state, session=session, elbo_local=float(value))
        return StepResult(state=state, outbox=outbox, metrics=metrics, model=model)

    def model_of(self, state: dict) -> dict:
        """θ after ``iteration`` updates and the participant's encoder used to compute them."""
        return {
            "theta": state["theta"],
            "phi": state["phi"],
            "iteration": state["iteration"],
            "mc_score": self.hyper.mc_score,
        }


def score(model: Mapping[str, Any], X: np.ndarray, seed: int = 0, draws: int | None = None) -> np.ndarray:
    """Anomaly score (eq. 39) of a participant's model payload; Monte-Carlo draws from ``seed``."""
    J = int(model.get("mc_score", 64)) if draws is None else int(draws)
    return reconstruction_score(model["theta"], model["phi"], X, J, np.random.default_rng(seed))


# ------------------------------------------------------------------------------------------- reference


@dataclass
class CentralisedVAEFit:
    thetas: list[dict] = field(default_factory=list)  # θ after each iteration (index 0: initial)
    phis: list[list[dict]] = field(default_factory=list)  # per iteration, every participant's φ^s
    elbos: list[float] = field(default_factory=list)  # Σ_s L^s(φ^s_new, θ) of each iteration


def fit_centralised(
    datasets: Sequence[np.ndarray], iterations: int, seed: int, hyper: VAEHyperParameters | None = None
) -> CentralisedVAEFit:
    """Gradient ascent on Σ_s L^s with per-participant encoders and one decoder, computed in one place with
    the same initial weights and Monte-Carlo draws as the decentralised run."""
    h = hyper or VAEHyperParameters()
    Xs = [np.asarray(X, dtype=np.float64) for X in datasets]
    S, M = len(Xs), Xs[0].shape[1]
    theta = shared_decoder_init(seed, M, h)
    phis = [encoder_init(seed, S, s, M, h) for s in range(S)]
    theta_opt = AdamAscent.initial_state(flatten(theta, DECODER_KEYS).size)
    phi_opts = [AdamAscent.initial_state(flatten(p, ENCODER_KEYS).size) for p in phis]
    n_total = float(sum(X.shape[0] for X in Xs))
    fit = CentralisedVAEFit(thetas=[theta], phis=[list(phis)])
    for it in range(1, iterations + 1):
        grad, total = 0.0, 0.0
        for s, X in enumerate(Xs):
            rng = iteration_rng(seed, S, s, it, "collabdict-vae-draws")
            phis[s], phi_opts[s], g, value = local_update(X, theta, phis[s], phi_opts[s], h, rng)
            grad, total = grad + g, total + value
        theta, theta_opt = optimize(theta, theta_opt, grad, n_total, h)
        fit.thetas.append(theta)
        fit.phis.append(list(phis))
        fit.elbos.append(total)
    return fit
