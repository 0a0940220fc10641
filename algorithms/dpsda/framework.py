"""The DPSDA framework (seed 002 Protocol 1, eqs. (4)–(7); docs/dpsda.md): configuration and the
node-level kernels that the direct matrix form (:mod:`~algorithms.dpsda.matrix_form`) and the step
function (:mod:`~algorithms.dpsda.step_function`) both call, so that they compute bit-identically.

One time step t of the online protocol, at node i (which owns the coordinate block B_i of x ∈ R^m):

    (4)  h_i(t)   = z_i(t) + η_i(t),               η_i(t) ~ Lap(σ) i.i.d., released to the neighbours
    (5)  z_i(t+1) = Σ_j a_ij(t) h_j(t) + n E_i ĝ_i(t)
    (14) ĝ_i(t)   = [∇f(x_i(t))]_{B_i} + ζ_i(t)     (f = f_t; f_{t+1} in the code's look-ahead convention)
    (6)  x_i(t+1) = Π^ψ_X(z_i(t+1) / w_i(t+1), α(t)),  α(t) = 1/√t     (w ≡ 1 for DPSDA-C)
         decision x^i(t+1) = [x_i(t+1)]_{B_i}

Initialisation [CODE]: z_i = 0, x_i = 0, w_i = 1; the decision at t = 1 is U[0,1]^m (only scores f_1).

Randomness: every draw comes from a :class:`~algorithms.step.TaskContext` RNG of (process seed,
organisation, round, purpose) — the Laplace noise and fresh gradient noise from the node's private
RNG of round t, the frozen gradient noise and the initial decision from the shared RNG of round 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from algorithms.dpsda.losses import OnlineLoss, get_loss
from algorithms.dpsda.privacy import NORMALISED_SENSITIVITY, laplace_noise, sensitivity_bound
from algorithms.dpsda.projection import BallProjection, BlockBallProjection, BoxProjection, Projection
from algorithms.step import TaskContext

VARIANTS = ("C", "PS")
GRAD_NOISE_MODES = ("fresh", "frozen", "none")
WEIGHT_RULES = ("uniform", "metropolis")
INITIAL_DECISIONS = ("uniform", "zero")
DOMAINS = ("box", "block_ball")


@dataclass(frozen=True)
class DPSDAConfig:
    """Hyper-parameters of DPSDA-C / DPSDA-PS (defaults: the authors' MATLAB experiments, except
    where docs/dpsda.md "Conventions and deviations" says otherwise).

    variant          "C" (circulation, row-stochastic, undirected graphs) or "PS" (push-sum, column-stochastic, digraphs)
    n_nodes          n; node i controls block i of an equal split of the m coordinates (m % n == 0)
    dimension        m
    domain           "box": X = [lower, upper]^m (the code); "block_ball": X = product of d-dimensional balls of
                     radius ``radius`` (one per node block)
    lower, upper     the box bounds
    radius           the block-ball radius (domain "block_ball" only)
    laplace_scale    σ of the Laplace perturbation (0 = non-private)
    sensitivity      Δ used for accounting, ε(t) = Δ/σ. None (default): the proven bound 2nL̂√d when
                     ``gradient_clip`` is set (rigorous accounting), else the paper's normalisation Δ = 1
                     (σ = 1/ε; a nominal ε). A value given with clipping must be ≥ 2nL̂√d.
    lookahead        False: the correct online protocol; True: the authors' code (gradient of f_{t+1} before playing x(t+1))
    grad_noise       "fresh" ζ ~ N(0, std² I_d) each step (paper); "frozen" one draw per run shared by all nodes and
                     zero when σ = 0 (the code); "none"
    grad_noise_std   std of ζ (0.01)
    gradient_clip    L̂: clip ĝ_i to ℓ2 norm ≤ L̂ so the sensitivity bound 2nL̂√d holds; None = no clipping,
                     and then no bound holds: the ε is nominal (a learning process with a privacy budget
                     refuses such a configuration)
    loss             "squared" (OLR) or "logistic" (OBC)
    batch_size       |B_t|: rows of the stream revealed per time step
    weights          "uniform" (the code) or "metropolis" (symmetric, DPSDA-C only; for the circulation test)
    initial_decision "uniform" U[0,1]^m as the code, or "zero"
    """

    variant: str = "C"
    n_nodes: int = 7
    dimension: int = 21
    lower: float = -5.0
    upper: float = 5.0
    domain: str = "box"
    radius: float | None = None
    laplace_scale: float = 0.0
    sensitivity: float | None = None
    lookahead: bool = False
    grad_noise: str = "fresh"
    grad_noise_std: float = 0.01
    gradient_clip: float | None = None
    loss: str = "squared"
    batch_size: int = 1
    weights: str = "uniform"
    initial_decision: str = "uniform"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if not (isinstance(self.n_nodes, int) and self.n_nodes >= 1):
            raise ValueError(f"n_nodes must be a positive integer, got {self.n_nodes!r}")
        if not (isinstance(self.dimension, int) and self.dimension >= 1):
            raise ValueError(f"dimension must be a positive integer, got {self.dimension!r}")
        if self.dimension % self.n_nodes != 0:
            raise ValueError(
                f"dimension m = {self.dimension} must split into n = {self.n_nodes} equal blocks"
            )
        BoxProjection(self.lower, self.upper)  # validates the box
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {self.domain!r}")
        if self.domain == "block_ball":
            if self.radius is None:
                raise ValueError("the block_ball domain needs a radius")
            BallProjection(self.radius)
        elif self.radius is not None:
            raise ValueError("radius applies to the block_ball domain only")
        if not (self.laplace_scale >= 0 and math.isfinite(self.laplace_scale)):
            raise ValueError(f"laplace_scale must be finite and ≥ 0, got {self.laplace_scale}")
        if self.sensitivity is not None and not (self.sensitivity > 0 and math.isfinite(self.sensitivity)):
            raise ValueError(f"sensitivity must be positive and finite or None, got {self.sensitivity}")
        if self.grad_noise not in GRAD_NOISE_MODES:
            raise ValueError(f"grad_noise must be one of {GRAD_NOISE_MODES}, got {self.grad_noise!r}")
        if not (self.grad_noise_std >= 0 and math.isfinite(self.grad_noise_std)):
            raise ValueError(f"grad_noise_std must be finite and ≥ 0, got {self.grad_noise_std}")
        if self.gradient_clip is not None and not (
            self.gradient_clip > 0 and math.isfinite(self.gradient_clip)
        ):
            raise ValueError(f"gradient_clip must be positive and finite or None, got {self.gradient_clip}")
        if self.gradient_clip is not None and self.sensitivity is not None:
            bound = sensitivity_bound(self.n_nodes, self.gradient_clip, self.block_size)
            if self.sensitivity < bound * (1 - 1e-12):
                raise ValueError(
                    f"sensitivity {self.sensitivity} is below the proven bound 2nL̂√d = {bound:.6g} "
                    f"for n = {self.n_nodes}, L̂ = {self.gradient_clip}, d = {self.block_size}"
                )
        get_loss(self.loss)
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.weights not in WEIGHT_RULES:
            raise ValueError(f"weights must be one of {WEIGHT_RULES}, got {self.weights!r}")
        if self.weights == "metropolis" and self.variant != "C":
            raise ValueError("Metropolis weights are symmetric and apply to DPSDA-C only")
        if self.initial_decision not in INITIAL_DECISIONS:
            raise ValueError(
                f"initial_decision must be one of {INITIAL_DECISIONS}, got {self.initial_decision!r}"
            )

    # -- derived quantities -------------------------------------------------------------------
    @property
    def block_size(self) -> int:
        """d = m / n coordinates per node."""
        return self.dimension // self.n_nodes

    @property
    def rigorous_privacy(self) -> bool:
        """True when ĝ is clipped, so Δ is a proven bound and ε = Δ/σ a guarantee (not the nominal Δ = 1)."""
        return self.gradient_clip is not None

    @property
    def accounting_sensitivity(self) -> float:
        """Δ of the accounting: the given value, else 2nL̂√d if clipped, else the nominal Δ = 1."""
        if self.sensitivity is not None:
            return float(self.sensitivity)
        if self.gradient_clip is not None:
            return sensitivity_bound(self.n_nodes, self.gradient_clip, self.block_size)
        return NORMALISED_SENSITIVITY

    def block(self, i: int) -> slice:
        """B_i: the coordinates node i controls (its E_i of eq. (5))."""
        if not 0 <= i < self.n_nodes:
            raise ValueError(f"node index {i} outside 0..{self.n_nodes - 1}")
        d = self.block_size
        return slice(i * d, (i + 1) * d)

    @property
    def projection(self) -> Projection:
        """Π^ψ_X of eq. (7) for the configured X (a product over the node blocks)."""
        if self.domain == "block_ball":
            return BlockBallProjection(float(self.radius), self.block_size)
        return BoxProjection(self.lower, self.upper, self.dimension)

    @property
    def loss_function(self) -> OnlineLoss:
        return get_loss(self.loss)

    def params(self) -> dict:
        return asdict(self)


def step_size(k: int) -> float:
    """α(k) = 1/√k for the k-th update (k ≥ 1) [CODE: ``step(t−1)`` at loop index t]."""
    if k < 1:
        raise ValueError(f"the update index must be ≥ 1, got {k}")
    return 1.0 / math.sqrt(k)


def stream_batch(
    cfg: DPSDAConfig, features: np.ndarray, labels: np.ndarray, t: int
) -> tuple[np.ndarray, np.ndarray]:
    """The rows that define f_t (t ≥ 1): rows (t−1)B … tB−1 of the stream."""
    b = cfg.batch_size
    lo, hi = (t - 1) * b, t * b
    if t < 1 or hi > features.shape[0]:
        raise ValueError(f"f_{t} needs rows {lo}..{hi - 1}, the stream has {features.shape[0]} rows")
    return features[lo:hi], labels[lo:hi]


def required_rows(cfg: DPSDAConfig, horizon: int) -> int:
    """Rows of stream needed for T = ``horizon`` steps (f_1 … f_T are scored)."""
    return horizon * cfg.batch_size


def check_stream(cfg: DPSDAConfig, features: np.ndarray, labels: np.ndarray | None, horizon: int) -> None:
    if features.ndim != 2 or features.shape[1] != cfg.dimension:
        raise ValueError(f"the stream must have shape (rows, {cfg.dimension}), got {features.shape}")
    if labels is None or labels.shape != (features.shape[0],):
        raise ValueError("the stream needs one label per row")
    if features.shape[0] < required_rows(cfg, horizon):
        raise ValueError(
            f"T = {horizon} steps with batches of {cfg.batch_size} need "
            f"{required_rows(cfg, horizon)} rows, the stream has {features.shape[0]}"
        )
    if cfg.loss == "logistic" and not np.all(np.isin(labels, (-1.0, 1.0))):
        raise ValueError("the logistic loss needs labels in {−1, +1}")


# -- node-level kernels (shared by both forms) ---------------------------------------------------
LAPLACE_PURPOSE = "dpsda-laplace"
GRAD_NOISE_PURPOSE = "dpsda-gradient-noise"
INITIAL_DECISION_PURPOSE = "dpsda-initial-decision"


def initial_decision(cfg: DPSDAConfig, ctx: TaskContext) -> np.ndarray:
    """x(1): U[0,1]^m from the shared RNG of round 0 (identical at every node; the authors' code), or 0."""
    if cfg.initial_decision == "zero":
        return np.zeros(cfg.dimension)
    return ctx.shared_rng(INITIAL_DECISION_PURPOSE, round=0).uniform(0.0, 1.0, cfg.dimension)


def gradient_noise(cfg: DPSDAConfig, ctx: TaskContext) -> np.ndarray:
    """ζ_i(t) of Assumption 2 (eq. (14))."""
    d = cfg.block_size
    if cfg.grad_noise == "none" or cfg.grad_noise_std == 0:
        return np.zeros(d)
    if cfg.grad_noise == "frozen":
        if cfg.laplace_scale == 0:  # the code adds no gradient noise to non-private runs
            return np.zeros(d)
        return cfg.grad_noise_std * ctx.shared_rng(GRAD_NOISE_PURPOSE, round=0).standard_normal(d)
    return cfg.grad_noise_std * ctx.rng(GRAD_NOISE_PURPOSE).standard_normal(d)


def scaled_block_gradient(
    cfg: DPSDAConfig,
    estimate: np.ndarray,
    features: np.ndarray,
    labels: np.ndarray,
    t_data: int,
    ctx: TaskContext,
) -> np.ndarray:
    """n · ĝ_i(t): the block-i gradient of f_{t_data} at the node's own estimate x_i(t), plus ζ, clipped to
    ‖ĝ‖₂ ≤ L̂ if configured (eqs. (5), (14))."""
    a, b = stream_batch(cfg, features, labels, t_data)
    g = cfg.loss_function.gradient(estimate, a, b)[cfg.block(ctx.position)] + gradient_noise(cfg, ctx)
    if cfg.gradient_clip is not None:
        norm = float(np.linalg.norm(g))
        if norm > cfg.gradient_clip:
            g = g * (cfg.gradient_clip / norm)
    return cfg.n_nodes * g


def perturb(cfg: DPSDAConfig, dual: np.ndarray, ctx: TaskContext) -> np.ndarray:
    """h_i(t) = z_i(t) + η_i(t), η ~ Lap(σ)^m (eqs. (4), (11), (20))."""
    return dual + laplace_noise(ctx.rng(LAPLACE_PURPOSE), cfg.laplace_scale, cfg.dimension)


def primal(cfg: DPSDAConfig, dual: np.ndarray, push_sum_weight: float, k: int) -> np.ndarray:
    """x_i(k+1) = Π^ψ_X(z_i(k+1) [/ w_i(k+1)], α(k)) (eqs. (6), (13), (22))."""
    z = dual / push_sum_weight if cfg.variant == "PS" else dual
    return cfg.projection(z, step_size(k))


def gradient_data_index(cfg: DPSDAConfig, k: int) -> int:
    """Which f feeds the k-th update: f_k (online protocol) or f_{k+1} (the code's look-ahead)."""
    return k + 1 if cfg.lookahead else k
