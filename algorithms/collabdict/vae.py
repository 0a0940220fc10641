"""CollabDict with a multi-task VAE as a step function (docs/collabdict.md; seed 000 Algorithm 1, eqs. 33–36).

Per iteration, participant s (encoder φ^s private, decoder θ shared), ``encoder="local"`` (the seed's):

    local_update  φ^s ← φ^s + η ∂L^s/∂φ^s                                   (33)
                  θ^s = ∂L^s(φ^s_new, θ)/∂θ                                  (34)
    consensus     ∂θ = Σ_s θ^s                                               (35)  — one aggregation session
    optimize      θ ← θ + η ∂θ, the same step at every participant          (36)

``encoder="shared"`` (the default, docs/collabdict.md "VAE on real data") treats the encoder as a global
parameter too: the participant sends ∂L^s/∂(φ, θ) at the current (φ, θ), the sums of both are aggregated
in the same session, and every participant takes the same step on both — gradient ascent on Σ_s L^s with one
encoder, i.e. the pooled-data VAE. A private encoder is fitted on the organisation's rows alone; on
held-out data an organisation with a few rows then encodes unseen normal rows badly, and the shared,
sharper decoder turns that into high anomaly scores (the collaborative model fell below isolated training).

``validation`` > 0 holds out that fraction of each participant's rows (chosen from the process seed); the
validation ELBO of every iterate is summed in the next session, and the model a participant keeps is the
iterate with the best consortium validation ELBO so far (early stopping without stopping the fixed
schedule). A non-finite ELBO, gradient or parameter raises :class:`~algorithms.collabdict.vae_model.TrainingDiverged`
naming the iteration.

``optimizer="sgd", normalise=False, encoder="local", validation=0`` is the seed's raw-sum gradient ascent
(used for the equivalence test); the default is Adam on gradients divided by the number of training rows
(N^s for a private encoder, N̄ = Σ_s N^s for shared parameters, N̄ obtained by a first aggregation
session). The Monte-Carlo draws v of iteration i at participant s come from a generator seeded by
(process seed, s, i), so :func:`fit_centralised` — gradient ascent on Σ_s L^s computed in one place — uses
exactly the same draws. The state machine is the one of :mod:`algorithms.collabdict.ggm`: phase ``init``
(aggregate the row counts), then one session per iteration, 2 rounds each with exact aggregation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from algorithms.collabdict import aggregation
from algorithms.collabdict.aggregation import AggregationConfig
from algorithms.collabdict.scores import has_both_classes, roc_auc
from algorithms.collabdict.vae_model import (
    DECODER_KEYS,
    ENCODER_KEYS,
    AdamAscent,
    check_finite,
    elbo,
    elbo_gradients,
    flatten,
    init_decoder,
    init_encoder,
    reconstruction_score,
    unflatten,
)
from algorithms.step import LocalDataset, StepResult, TaskContext

OPTIMIZERS = ("adam", "sgd")
ENCODERS = ("shared", "local")
VALIDATION_DRAWS = 8
"""Monte-Carlo draws of the validation ELBO (fixed per participant, so iterates are compared on the same draws)."""


@dataclass(frozen=True)
class VAEHyperParameters:
    """Defaults: d = 4, hidden = 64, η = 1e-3 (Adam), J_train = 1, J_score = 64; shared encoder, no early
    stopping (``validation`` = the fraction of each participant's rows held out for it; docs/collabdict.md,
    "VAE on real data")."""

    latent: int = 4
    hidden: int = 64
    lr: float = 1e-3
    optimizer: str = "adam"
    normalise: bool = True
    mc_train: int = 1
    mc_score: int = 64
    batch_size: int | None = None
    encoder: str = "shared"
    validation: float = 0.0

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
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if not 0 <= self.validation < 1:
            raise ValueError(f"validation fraction must be in [0, 1), got {self.validation}")


def iteration_rng(seed: int, S: int, position: int, iteration: int, purpose: str) -> np.random.Generator:
    """Generator of participant ``position`` for ``iteration`` (independent of the platform round)."""
    consortium = tuple(f"p{i}" for i in range(S))
    return TaskContext(
        process_seed=seed, round=iteration, rounds=0, organisation=consortium[position], consortium=consortium
    ).rng(purpose)


def _shared_rng(seed: int, purpose: str) -> np.random.Generator:
    ctx = TaskContext(process_seed=seed, round=0, rounds=0, organisation="_", consortium=("_",))
    return ctx.shared_rng(purpose, round=0)


def shared_decoder_init(seed: int, features: int, h: VAEHyperParameters) -> dict[str, np.ndarray]:
    """The identical initial θ of every participant."""
    return init_decoder(h.latent, h.hidden, features, _shared_rng(seed, "collabdict-vae-decoder"))


def encoder_init(
    seed: int, S: int, position: int, features: int, h: VAEHyperParameters
) -> dict[str, np.ndarray]:
    """The initial encoder: participant ``position``'s own (``encoder="local"``) or the common one (``"shared"``)."""
    if h.encoder == "shared":
        return init_encoder(features, h.hidden, h.latent, _shared_rng(seed, "collabdict-vae-encoder"))
    return init_encoder(
        features, h.hidden, h.latent, iteration_rng(seed, S, position, 0, "collabdict-vae-encoder")
    )


def validation_split(
    X: np.ndarray, seed: int, S: int, position: int, h: VAEHyperParameters
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training rows, validation rows, validation draws v) of participant ``position``: round(fraction·n)
    rows (at least 1, never all; none for n < 2 or fraction 0) chosen from the process seed, and
    :data:`VALIDATION_DRAWS` fixed draws for them."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    k = 0 if h.validation == 0 or n < 2 else min(n - 1, max(1, int(round(h.validation * n))))
    rng = iteration_rng(seed, S, position, 0, "collabdict-vae-validation")
    held = np.zeros(n, dtype=bool)
    held[rng.permutation(n)[:k]] = True
    draws = rng.standard_normal((VALIDATION_DRAWS, k, h.latent))
    return X[~held], X[held], draws


def validation_elbo(theta: dict, phi: dict, X_val: np.ndarray, draws: np.ndarray) -> float:
    """L^s(φ, θ) of eq. (30) on the held-out rows (0 without any)."""
    return elbo(theta, phi, X_val, draws) if X_val.shape[0] else 0.0


def local_update(
    X: np.ndarray,
    theta: dict,
    phi: dict,
    phi_opt: dict,
    h: VAEHyperParameters,
    rng: np.random.Generator,
    iteration: int = 0,
    participant: str | int | None = None,
) -> tuple[dict, dict, np.ndarray, float]:
    """Eqs. (33)–(34). Returns (new φ^s, new encoder-optimizer state, the gradient to aggregate as a flat
    vector, L^s(φ_new, θ)). The gradient is ∂L^s/∂θ for a private encoder; for a shared one it is
    ∂L^s/∂(φ, θ) at the current (φ, θ) (encoder keys first) and φ is left to :func:`optimize`.

    With a mini-batch of b of the N^s rows, the gradient and ELBO are scaled by N^s/b (unbiased sums).
    A non-finite ELBO, gradient or encoder raises :class:`~algorithms.collabdict.vae_model.TrainingDiverged`."""
    N = X.shape[0]
    if h.batch_size is not None and int(h.batch_size) < N:
        idx = np.sort(rng.choice(N, size=int(h.batch_size), replace=False))
        Xb = X[idx]
    else:
        Xb = X
    b = Xb.shape[0]
    scale = N / b
    V = rng.standard_normal((h.mc_train, b, h.latent))
    if h.encoder == "shared":
        value, g_both = elbo_gradients(theta, phi, Xb, V, "both")
        check_finite("ELBO", value, iteration, participant)
        grad = np.concatenate([flatten(g_both, ENCODER_KEYS), flatten(g_both, DECODER_KEYS)])
        check_finite("gradient", grad, iteration, participant)
        return phi, phi_opt, scale * grad, scale * value
    value, g_phi = elbo_gradients(theta, phi, Xb, V, "phi")
    check_finite("ELBO", value, iteration, participant)
    g = flatten(g_phi, ENCODER_KEYS)
    check_finite("encoder gradient", g, iteration, participant)
    if h.normalise:
        g = g / b
    x = flatten(phi, ENCODER_KEYS)
    if h.optimizer == "sgd":
        x, phi_opt = x + h.lr * g, phi_opt
    else:
        x, phi_opt = AdamAscent(h.lr).update(x, g, phi_opt)
    check_finite("encoder parameters", x, iteration, participant)
    new_phi = unflatten(x, phi, ENCODER_KEYS)
    value, g_theta = elbo_gradients(theta, new_phi, Xb, V, "theta")
    check_finite("ELBO", value, iteration, participant)
    grad = flatten(g_theta, DECODER_KEYS)
    check_finite("decoder gradient", grad, iteration, participant)
    return new_phi, phi_opt, scale * grad, scale * value


def _step(x: np.ndarray, g: np.ndarray, opt: dict, h: VAEHyperParameters) -> tuple[np.ndarray, dict]:
    if h.optimizer == "sgd":
        return x + h.lr * g, opt
    return AdamAscent(h.lr).update(x, g, opt)


def optimize(
    theta: dict,
    theta_opt: dict,
    grad_sum: np.ndarray,
    n_total: float,
    h: VAEHyperParameters,
    phi: dict | None = None,
    phi_opt: dict | None = None,
    iteration: int = 0,
) -> tuple[dict, dict, dict | None, dict | None]:
    """Eq. (36): θ ← θ + η ∂θ (or an Adam step), identical at every participant; with a shared encoder
    ``grad_sum`` = [∂φ, ∂θ] and φ takes the same kind of step. Returns (θ, θ-optimizer state, φ, φ-optimizer
    state); raises :class:`~algorithms.collabdict.vae_model.TrainingDiverged` on a non-finite parameter."""
    g = grad_sum / n_total if h.normalise else grad_sum
    if h.encoder == "shared":
        if phi is None or phi_opt is None:
            raise ValueError("a shared encoder needs φ and its optimizer state")
        n_phi = flatten(phi, ENCODER_KEYS).size
        x, phi_opt = _step(flatten(phi, ENCODER_KEYS), g[:n_phi], phi_opt, h)
        check_finite("encoder parameters", x, iteration)
        phi = unflatten(x, phi, ENCODER_KEYS)
        g = g[n_phi:]
    x, theta_opt = _step(flatten(theta, DECODER_KEYS), g, theta_opt, h)
    check_finite("decoder parameters", x, iteration)
    return unflatten(x, theta, DECODER_KEYS), theta_opt, phi, phi_opt


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
        encoder: str = "shared",
        validation: float = 0.0,
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
            encoder,
            float(validation),
        )
        self.agg = AggregationConfig(**dict(aggregation or {}))

    def params(self) -> dict[str, Any]:
        return dict(asdict(self.hyper), aggregation=self.agg.to_dict())

    def validation_score(self, model: Mapping[str, Any], data: LocalDataset, seed: int) -> tuple[str, float]:
        """A member's model on its validation slice (:mod:`algorithms.validation`): ROC-AUC of the anomaly
        score (eq. 39, Monte-Carlo draws from ``seed``) when the slice's labels hold normal rows and
        anomalies, else the mean ELBO per row (eq. 30, :data:`VALIDATION_DRAWS` draws from ``seed``)."""
        X = np.asarray(data.features, dtype=np.float64)
        if has_both_classes(data.labels):
            return "roc_auc", roc_auc(np.asarray(data.labels), score(model, X, seed=seed))
        draws = np.random.default_rng(seed).standard_normal((VALIDATION_DRAWS, X.shape[0], self.hyper.latent))
        return "mean_elbo", elbo(model["theta"], model["phi"], X, draws) / X.shape[0]

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        X = np.asarray(data.features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1:
            raise ValueError("CollabDict VAE needs a non-empty (n, M) feature matrix")
        M = X.shape[1]
        X_train, X_val, _ = validation_split(X, ctx.process_seed, ctx.size, ctx.position, self.hyper)
        theta = shared_decoder_init(ctx.process_seed, M, self.hyper)
        phi = encoder_init(ctx.process_seed, ctx.size, ctx.position, M, self.hyper)
        return {
            "phase": "init",
            "iteration": 0,
            "session": 0,
            "agg": None,
            "pending": np.array([float(X_train.shape[0]), float(X_val.shape[0])]),
            "theta": theta,
            "phi": phi,
            "n_total": 0.0,
            "n_validation": 0.0,
            "theta_opt": AdamAscent.initial_state(flatten(theta, DECODER_KEYS).size),
            "phi_opt": AdamAscent.initial_state(flatten(phi, ENCODER_KEYS).size),
            "candidate": None,  # the model whose validation ELBO the open session sums
            "best": None,  # the model with the best consortium validation ELBO so far
            "best_validation": 0.0,
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
            state = dict(state, phase="train", n_total=float(total[0]), n_validation=float(total[1]))
            metrics = {"iteration": 0.0}
        else:
            it = state["iteration"] + 1
            check_finite("aggregated gradient or ELBO", total, it, ctx.organisation)
            grad, elbo_sum, validation_sum = total[:-2], float(total[-2]), float(total[-1])
            if state["n_validation"] > 0 and (
                state["best"] is None or validation_sum > state["best_validation"]
            ):
                state = dict(state, best=state["candidate"], best_validation=validation_sum)
            theta, theta_opt, phi, phi_opt = optimize(
                state["theta"],
                state["theta_opt"],
                grad,
                state["n_total"],
                self.hyper,
                state["phi"],
                state["phi_opt"],
                it,
            )
            state = dict(state, theta=theta, theta_opt=theta_opt, phi=phi, phi_opt=phi_opt, iteration=it)
            metrics = {
                "iteration": float(it),
                "elbo": elbo_sum,
                "elbo_per_sample": elbo_sum / state["n_total"],
                "elbo_local": state["elbo_local"],
            }
            if state["n_validation"] > 0:
                metrics["validation_elbo_per_sample"] = validation_sum / state["n_validation"]
                metrics["best_iteration"] = float(state["best"]["iteration"])
        current = self.model_of(state)
        X = np.asarray(data.features, dtype=np.float64)
        X_train, X_val, draws = validation_split(X, ctx.process_seed, ctx.size, ctx.position, self.hyper)
        validation = validation_elbo(state["theta"], state["phi"], X_val, draws)
        check_finite("validation ELBO", validation, state["iteration"], ctx.organisation)
        rng = iteration_rng(
            ctx.process_seed, ctx.size, ctx.position, state["iteration"] + 1, "collabdict-vae-draws"
        )
        phi, phi_opt, grad, value = local_update(
            X_train,
            state["theta"],
            state["phi"],
            state["phi_opt"],
            self.hyper,
            rng,
            state["iteration"] + 1,
            ctx.organisation,
        )
        session = state["session"] + 1
        agg_state, outbox = aggregation.start(
            self.agg,
            np.concatenate([grad, [value, validation]]),
            session,
            ctx,
            segments=self._segments(state),
        )
        model = current if state["best"] is None else state["best"]
        state = dict(
            state,
            phi=phi,
            phi_opt=phi_opt,
            agg=agg_state,
            session=session,
            elbo_local=float(value),
            candidate=current,
        )
        return StepResult(state=state, outbox=outbox, metrics=metrics, model=model)

    def _segments(self, state: dict) -> list[int]:
        """Chunk-scale segments of the aggregated vector: each gradient tensor, the ELBO, the validation ELBO."""
        keys = [("phi", k) for k in ENCODER_KEYS] if self.hyper.encoder == "shared" else []
        keys += [("theta", k) for k in DECODER_KEYS]
        return [int(np.size(state[part][k])) for part, k in keys] + [1, 1]

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
    validation_elbos: list[float] = field(default_factory=list)  # Σ_s L^s_val of iterate i (i = 0..n−1)
    best_iteration: int | None = None  # the iterate with the best validation ELBO (None: no validation)
    hyper: VAEHyperParameters = field(default_factory=VAEHyperParameters)

    def model(self, s: int) -> dict:
        """Participant s's model payload: the best iterate by validation ELBO, else the last one (the model
        the step function holds after the same number of iterations)."""
        i = len(self.thetas) - 1 if self.best_iteration is None else self.best_iteration
        return {
            "theta": self.thetas[i],
            "phi": self.phis[i][s],
            "iteration": i,
            "mc_score": self.hyper.mc_score,
        }


def fit_centralised(
    datasets: Sequence[np.ndarray], iterations: int, seed: int, hyper: VAEHyperParameters | None = None
) -> CentralisedVAEFit:
    """Gradient ascent on Σ_s L^s with per-participant (or one shared) encoders and one decoder, computed in
    one place with the same initial weights, validation rows and Monte-Carlo draws as the decentralised run."""
    h = hyper or VAEHyperParameters()
    S, M = len(datasets), np.asarray(datasets[0]).shape[1]
    splits = [validation_split(X, seed, S, s, h) for s, X in enumerate(datasets)]
    theta = shared_decoder_init(seed, M, h)
    phis = [encoder_init(seed, S, s, M, h) for s in range(S)]
    theta_opt = AdamAscent.initial_state(flatten(theta, DECODER_KEYS).size)
    phi_opts = [AdamAscent.initial_state(flatten(p, ENCODER_KEYS).size) for p in phis]
    n_total = float(sum(Xt.shape[0] for Xt, _, _ in splits))
    validating = sum(Xv.shape[0] for _, Xv, _ in splits) > 0
    fit = CentralisedVAEFit(thetas=[theta], phis=[list(phis)], hyper=h)
    best = None
    for it in range(1, iterations + 1):
        validation = sum(validation_elbo(theta, phis[s], Xv, V) for s, (_, Xv, V) in enumerate(splits))
        check_finite("validation ELBO", validation, it - 1)
        if validating and (best is None or validation > best):
            best, fit.best_iteration = validation, it - 1
        fit.validation_elbos.append(validation)
        grad, total = np.zeros(0), 0.0
        for s, (Xt, _, _) in enumerate(splits):
            rng = iteration_rng(seed, S, s, it, "collabdict-vae-draws")
            phis[s], phi_opts[s], g, value = local_update(Xt, theta, phis[s], phi_opts[s], h, rng, it, s)
            grad, total = (g if s == 0 else grad + g), total + value
        if h.encoder == "shared":
            theta, theta_opt, phi, phi_opt = optimize(
                theta, theta_opt, grad, n_total, h, phis[0], phi_opts[0], it
            )
            assert phi is not None and phi_opt is not None  # a shared encoder is always returned
            phis = [phi] * S
            phi_opts = [phi_opt] * S
        else:
            theta, theta_opt, _, _ = optimize(theta, theta_opt, grad, n_total, h, iteration=it)
        fit.thetas.append(theta)
        fit.phis.append(list(phis))
        fit.elbos.append(total)
    return fit


def fit_isolated(X: np.ndarray, iterations: int, seed: int, hyper: VAEHyperParameters | None = None) -> dict:
    """The model an organisation gets from its own data alone under the same hyper-parameters (S = 1)."""
    return fit_centralised([X], iterations, seed, hyper).model(0)


def fit_collaborative(
    datasets: Sequence[np.ndarray], iterations: int, seed: int, hyper: VAEHyperParameters | None = None
) -> list[dict]:
    """Every participant's collaborative model payload, computed centrally (:func:`fit_centralised`, which
    the step function reproduces with exact aggregation)."""
    fit = fit_centralised(datasets, iterations, seed, hyper)
    return [fit.model(s) for s in range(len(datasets))]
