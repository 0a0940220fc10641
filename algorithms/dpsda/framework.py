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

The Gaussian mode (``mechanism="gaussian"``, ours; docs/dpsda.md "The Gaussian mode") keeps eqs. (5)–(6)
and moves the noise to where the data enters: η ≡ 0 in (4), so h_i(t) = z_i(t), and

    (G1) ĝ_i(t) = (1/b) Σ_{k∈B_t} clip_L̂(c_k [a_k]_{B_i}) + ζ_i(t) + ξ_i(t),   ξ_i(t) ~ N(0, s² I_d),

per-example clipping to ‖·‖₂ ≤ L̂, the public normaliser b = ``batch_size``, s = z·Δ₂ (eq. (G2)). B_t is the
stream's rows of f_t (``sampling="stream"``) or a Poisson sample of rate q of the node's data set
(``sampling="poisson"``), drawn from a secret sampling key that every node holds with the data.

Randomness: every draw comes from a :class:`~algorithms.step.TaskContext` RNG of (process seed,
organisation, round, purpose) — the Laplace or Gaussian noise and fresh gradient noise from the node's
private RNG of round t, the frozen gradient noise and the initial decision from the shared RNG of round 0
— except the Poisson samples, which come from the sampling key (the process seed is not secret).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from algorithms.dpsda.losses import OnlineLoss, get_loss
from algorithms.dpsda.privacy import (
    NORMALISED_SENSITIVITY,
    GaussianComposition,
    gaussian_noise,
    gaussian_sensitivity,
    laplace_noise,
    sensitivity_bound,
)
from algorithms.dpsda.projection import BallProjection, BlockBallProjection, BoxProjection, Projection
from algorithms.step import TaskContext

VARIANTS = ("C", "PS")
GRAD_NOISE_MODES = ("fresh", "frozen", "none")
WEIGHT_RULES = ("uniform", "metropolis")
INITIAL_DECISIONS = ("uniform", "zero")
DOMAINS = ("box", "block_ball")
MECHANISMS = ("laplace", "gaussian")
SAMPLINGS = ("stream", "poisson")
SAMPLING_KEY = "sampling_key"  # the LocalDataset extra that holds the secret Poisson sampling key
MIN_KEY_WORDS = 4  # 128 bits


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
    mechanism        "laplace": the paper's Laplace perturbation of the released dual, eq. (4); "gaussian": the
                     Gaussian mode, eq. (G1) (example-level adjacency, per-example clipping; needs ``gradient_clip``)
    laplace_scale    σ of the Laplace perturbation (0 = non-private; Laplace mechanism only)
    noise_multiplier z of the Gaussian mode: ξ_i ~ N(0, s² I_d), s = z·Δ₂ (0 = non-private)
    sampling         "stream": f_t is rows (t−1)B … tB−1 of the stream; "poisson": B_t is a Poisson sample of rate
                     ``sampling_rate`` of the node's data set (Gaussian mode only; the data carries the sampling key)
    sampling_rate    q of the Poisson sampling
    privacy_delta    δ at which the Gaussian mode reports its running ε
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
    batch_size       |B_t|: rows of the stream revealed per time step; with Poisson sampling the public normaliser
                     b of eq. (G1) (choose ≈ q·N)
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
    mechanism: str = "laplace"
    noise_multiplier: float = 0.0
    sampling: str = "stream"
    sampling_rate: float | None = None
    privacy_delta: float = 1e-5

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
        self._check_mechanism()

    def _check_mechanism(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if not (self.noise_multiplier >= 0 and math.isfinite(self.noise_multiplier)):
            raise ValueError(f"noise_multiplier must be finite and ≥ 0, got {self.noise_multiplier}")
        if not (0 < self.privacy_delta < 1):
            raise ValueError(f"privacy_delta must lie in (0, 1), got {self.privacy_delta}")
        if self.mechanism == "laplace":
            if self.noise_multiplier != 0 or self.sampling != "stream" or self.sampling_rate is not None:
                raise ValueError(
                    "noise_multiplier, Poisson sampling and sampling_rate belong to the Gaussian mode "
                    '(mechanism="gaussian")'
                )
            return
        if self.gradient_clip is None:
            raise ValueError(
                "the Gaussian mode clips every example's block gradient: it needs gradient_clip (L̂)"
            )
        if self.laplace_scale != 0 or self.sensitivity is not None:
            raise ValueError(
                "laplace_scale and sensitivity belong to the Laplace mechanism; the Gaussian mode's noise "
                "is noise_multiplier × its ℓ2 sensitivity"
            )
        if self.sampling == "poisson":
            if self.sampling_rate is None or not (0 < self.sampling_rate <= 1):
                raise ValueError(
                    f"Poisson sampling needs a sampling_rate in (0, 1], got {self.sampling_rate}"
                )
        elif self.sampling_rate is not None:
            raise ValueError("sampling_rate applies to Poisson sampling only")

    # -- derived quantities -------------------------------------------------------------------
    @property
    def block_size(self) -> int:
        """d = m / n coordinates per node."""
        return self.dimension // self.n_nodes

    @property
    def rigorous_privacy(self) -> bool:
        """True when ĝ is clipped, so Δ is a proven bound and ε = Δ/σ a guarantee (not the nominal Δ = 1).
        The Gaussian mode always clips."""
        return self.gradient_clip is not None

    @property
    def gaussian(self) -> bool:
        return self.mechanism == "gaussian"

    @property
    def private(self) -> bool:
        """Whether any noise protects the releases (σ > 0, or z > 0 in the Gaussian mode)."""
        return self.noise_multiplier > 0 if self.gaussian else self.laplace_scale > 0

    @property
    def gaussian_sensitivity(self) -> float:
        """Δ₂ of one network step in the Gaussian mode (eq. (G2)): √n·c·L̂/b, c = 2 (stream) or 1 (Poisson)."""
        if not self.gaussian or self.gradient_clip is None:
            raise ValueError("the ℓ2 sensitivity belongs to the Gaussian mode")
        return gaussian_sensitivity(self.n_nodes, self.gradient_clip, self.batch_size, self.sampling)

    @property
    def gaussian_noise_std(self) -> float:
        """s = z·Δ₂: the std of ξ_i on every coordinate of the node's block gradient (eq. (G1))."""
        return self.noise_multiplier * self.gaussian_sensitivity

    def gaussian_composition(self, releases: int) -> GaussianComposition:
        """The network's privacy after ``releases`` time steps have released a gradient (docs/dpsda.md, eq.
        (G3)): with a stream every row enters one step only, so the steps compose in parallel and the run
        is one Gaussian release; with Poisson sampling every step is a sampled Gaussian mechanism on the
        whole data set and the steps compose sequentially."""
        if releases < 0:
            raise ValueError(f"the number of releases must be ≥ 0, got {releases}")
        if self.sampling == "poisson":
            return GaussianComposition(self.noise_multiplier, releases, float(self.sampling_rate))
        return GaussianComposition(self.noise_multiplier, min(releases, 1), 1.0)

    @property
    def accounting_sensitivity(self) -> float:
        """Δ of the accounting: the given value, else 2nL̂√d if clipped, else the nominal Δ = 1 (Laplace,
        ℓ1); the network ℓ2 sensitivity Δ₂ in the Gaussian mode."""
        if self.gaussian:
            return self.gaussian_sensitivity
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
    """Rows of stream needed for T = ``horizon`` steps (f_1 … f_T are scored); Poisson sampling needs one."""
    return 1 if cfg.sampling == "poisson" else horizon * cfg.batch_size


def check_sampling_key(cfg: DPSDAConfig, key: np.ndarray | None) -> np.ndarray | None:
    """The secret Poisson sampling key as uint32 words (None for a stream); refuses a missing or short key."""
    if cfg.sampling != "poisson":
        return None
    if key is None:
        raise ValueError(
            f"Poisson sampling needs a secret sampling key with the data (LocalDataset extra "
            f"{SAMPLING_KEY!r}): the process seed is public, and a sample known to the observer gives no "
            "amplification"
        )
    words = np.asarray(key)
    if words.ndim != 1 or words.size < MIN_KEY_WORDS or not np.issubdtype(words.dtype, np.integer):
        raise ValueError(f"the sampling key must be ≥ {MIN_KEY_WORDS} integer words, got {words!r}")
    if np.any(words < 0) or np.any(words >= 2**32):
        raise ValueError("the sampling key's words must lie in [0, 2^32)")
    return words.astype(np.uint32)


def check_stream(
    cfg: DPSDAConfig,
    features: np.ndarray,
    labels: np.ndarray | None,
    horizon: int,
    sampling_key: np.ndarray | None = None,
) -> np.ndarray | None:
    """Validates the stream (or, with Poisson sampling, the data set and its key); returns the key's words."""
    if features.ndim != 2 or features.shape[1] != cfg.dimension:
        raise ValueError(f"the stream must have shape (rows, {cfg.dimension}), got {features.shape}")
    if labels is None or labels.shape != (features.shape[0],):
        raise ValueError("the stream needs one label per row")
    key = check_sampling_key(cfg, sampling_key)
    if features.shape[0] < required_rows(cfg, horizon):
        raise ValueError(
            f"T = {horizon} steps with batches of {cfg.batch_size} need "
            f"{required_rows(cfg, horizon)} rows, the stream has {features.shape[0]}"
        )
    if cfg.loss == "logistic" and not np.all(np.isin(labels, (-1.0, 1.0))):
        raise ValueError("the logistic loss needs labels in {−1, +1}")
    return key


# -- node-level kernels (shared by both forms) ---------------------------------------------------
LAPLACE_PURPOSE = "dpsda-laplace"
GAUSSIAN_PURPOSE = "dpsda-gaussian"
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
        if not cfg.private:  # the code adds no gradient noise to non-private runs
            return np.zeros(d)
        return cfg.grad_noise_std * ctx.shared_rng(GRAD_NOISE_PURPOSE, round=0).standard_normal(d)
    return cfg.grad_noise_std * ctx.rng(GRAD_NOISE_PURPOSE).standard_normal(d)


def poisson_mask(key: np.ndarray, t: int, rows: int, rate: float) -> np.ndarray:
    """Which of the ``rows`` examples step t samples: independently with probability q, from the sampling
    key and t only (identical at every node, independent of the data). Row k's draw does not depend on
    how many rows follow it, so removing the last row leaves every other row's inclusion unchanged."""
    words = [int(w) for w in key] + [int(t)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words))).random(rows) < rate


def example_batch(
    cfg: DPSDAConfig, features: np.ndarray, labels: np.ndarray, t: int, sampling_key: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """B_t: the stream rows of f_t, or step t's Poisson sample of the data set."""
    if cfg.sampling == "poisson":
        if sampling_key is None:
            raise ValueError("Poisson sampling needs the sampling key")
        mask = poisson_mask(sampling_key, t, features.shape[0], float(cfg.sampling_rate))
        return features[mask], labels[mask]
    return stream_batch(cfg, features, labels, t)


def clipped_block_mean(
    cfg: DPSDAConfig, estimate: np.ndarray, features: np.ndarray, labels: np.ndarray, position: int
) -> np.ndarray:
    """(1/b) Σ_k clip_L̂(c_k [a_k]_{B_i}): every example's block gradient clipped to ‖·‖₂ ≤ L̂, summed, divided
    by the public b (eq. (G1)). An empty batch gives 0."""
    if cfg.gradient_clip is None:
        raise ValueError("per-example clipping needs gradient_clip")
    block = features[:, cfg.block(position)]
    coef = cfg.loss_function.coefficients(estimate, features, labels)
    norms = np.abs(coef) * np.linalg.norm(block, axis=1)
    over = norms > cfg.gradient_clip
    scale = np.ones_like(norms)
    scale[over] = cfg.gradient_clip / norms[over]
    return ((coef * scale) @ block) / cfg.batch_size


def scaled_block_gradient(
    cfg: DPSDAConfig,
    estimate: np.ndarray,
    features: np.ndarray,
    labels: np.ndarray,
    t_data: int,
    ctx: TaskContext,
    sampling_key: np.ndarray | None = None,
) -> np.ndarray:
    """n · ĝ_i(t): the block-i gradient of f_{t_data} at the node's own estimate x_i(t), plus ζ, clipped to
    ‖ĝ‖₂ ≤ L̂ if configured (eqs. (5), (14)); in the Gaussian mode eq. (G1), per-example clipping and ξ."""
    if cfg.gaussian:
        a, b = example_batch(cfg, features, labels, t_data, sampling_key)
        g = clipped_block_mean(cfg, estimate, a, b, ctx.position) + gradient_noise(cfg, ctx)
        g = g + gaussian_noise(ctx.rng(GAUSSIAN_PURPOSE), cfg.gaussian_noise_std, cfg.block_size)
        return cfg.n_nodes * g
    a, b = stream_batch(cfg, features, labels, t_data)
    g = cfg.loss_function.gradient(estimate, a, b)[cfg.block(ctx.position)] + gradient_noise(cfg, ctx)
    if cfg.gradient_clip is not None:
        norm = float(np.linalg.norm(g))
        if norm > cfg.gradient_clip:
            g = g * (cfg.gradient_clip / norm)
    return cfg.n_nodes * g


def perturb(cfg: DPSDAConfig, dual: np.ndarray, ctx: TaskContext) -> np.ndarray:
    """h_i(t) = z_i(t) + η_i(t), η ~ Lap(σ)^m (eqs. (4), (11), (20)); η ≡ 0 (σ = 0) in the Gaussian mode."""
    return dual + laplace_noise(ctx.rng(LAPLACE_PURPOSE), cfg.laplace_scale, cfg.dimension)


def primal(cfg: DPSDAConfig, dual: np.ndarray, push_sum_weight: float, k: int) -> np.ndarray:
    """x_i(k+1) = Π^ψ_X(z_i(k+1) [/ w_i(k+1)], α(k)) (eqs. (6), (13), (22))."""
    z = dual / push_sum_weight if cfg.variant == "PS" else dual
    return cfg.projection(z, step_size(k))


def gradient_data_index(cfg: DPSDAConfig, k: int) -> int:
    """Which f feeds the k-th update: f_k (online protocol) or f_{k+1} (the code's look-ahead)."""
    return k + 1 if cfg.lookahead else k
