"""The multi-task VAE of CollabDict (docs/collabdict.md; seed 000 §5, eqs. 21–40), in PyTorch (float64, CPU).

* Decoder θ (shared, global): g = ReLU(W1 z + b1), μ_θ(z) = W2 g + b2, σ_θ(z) = softplus(W3 g + b3)   (21–24)
  [SEED-FIX: softplus, not "softmax"].
* Encoder φ^s (private, per participant): g = ReLU(V1 x + c1), m(x) = V2 g + c2, h(x) = softplus(V3 g + c3),
  with m, h ∈ R^d (27) [SEED-FIX: h has length d].
* Local ELBO with the reparameterisation z = h ⊙ v + m, v ~ N(0, I_d)                               (30)–(32)

      L^s = ½ Σ_n {ln|H_n| + d − Tr H_n − ||m_n||²}
          + ½ Σ_n (1/J) Σ_j {−M ln 2π − ln|Σ_θ(z_nj)| − (x_n − μ_θ(z_nj))^T Σ_θ(z_nj)^{-1} (x_n − μ_θ(z_nj))}

  [SEED-FIX: −||m||²]. H_n = diag(h(x_n))², Σ_θ = diag(σ_θ)².
* Anomaly score (37)–(40): a^s(x) = −(1/J) Σ_j ln N(x | μ_θ(z_j), Σ_θ(z_j)), z_j ~ N(m(x), H(x)).

Parameters travel as dicts of float64 numpy arrays (codec payloads); all randomness (initialisation, the
Monte-Carlo draws v) comes from numpy generators given by the caller, so results are reproducible from a
seed. Computation runs single-threaded with ``torch.use_deterministic_algorithms(True)``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F

DECODER_KEYS = ("W1", "b1", "W2", "b2", "W3", "b3")
ENCODER_KEYS = ("V1", "c1", "V2", "c2", "V3", "c3")
LOG_2PI = math.log(2 * math.pi)


@contextlib.contextmanager
def deterministic_torch() -> Iterator[None]:
    """Single thread + deterministic kernels, restored afterwards (bit-identical across runs)."""
    threads = torch.get_num_threads()
    was = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(was)


def _glorot(rng: np.random.Generator, fan_out: int, fan_in: int) -> np.ndarray:
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in))


# softplus⁻¹(1): the σ / h heads start at exactly 1 (our choice, see init_decoder)
UNIT_SOFTPLUS = math.log(math.e - 1.0)


def init_decoder(latent: int, hidden: int, features: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """θ: Glorot-uniform W1, W2, zero b1, b2; the σ head starts at σ_θ(z) = 1 for every z (W3 = 0,
    b3 = softplus⁻¹(1)); identical at all participants when ``rng`` is common.

    Why not Glorot for W3 too: with ReLU features g of a few units, W3 g + b3 reaches −5 for some z, so
    σ_θ ≈ 0.007 and the likelihood term of eq. (32) and its gradient (∝ 1/σ³) explode: the small e2e case
    (3 participants, 24–40 rows, raw-sum SGD at η = 1e-3) started at an ELBO of −15,000 per row with
    ‖∂L/∂φ‖∞ ≈ 2e6, took a step of ≈ 2,000 in V1 and overflowed to NaN in its first iteration. Starting at
    unit variance it is finite (−10.4 per row at iteration 1, −5.2 after 30), and Adam converges faster too."""
    return {
        "W1": _glorot(rng, hidden, latent),
        "b1": np.zeros(hidden),
        "W2": _glorot(rng, features, hidden),
        "b2": np.zeros(features),
        "W3": np.zeros((features, hidden)),
        "b3": np.full(features, UNIT_SOFTPLUS),
    }


def init_encoder(features: int, hidden: int, latent: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """φ^s: Glorot-uniform V1, V2, zero c1, c2; h(x) starts at 1 (V3 = 0, c3 = softplus⁻¹(1)), the prior's
    scale, so ln h in the KL term of eq. (30) starts at 0 rather than near a pole (see init_decoder)."""
    return {
        "V1": _glorot(rng, hidden, features),
        "c1": np.zeros(hidden),
        "V2": _glorot(rng, latent, hidden),
        "c2": np.zeros(latent),
        "V3": np.zeros((latent, hidden)),
        "c3": np.full(latent, UNIT_SOFTPLUS),
    }


def _t(params: Mapping[str, np.ndarray], keys, grad: bool) -> dict[str, torch.Tensor]:
    return {
        k: torch.tensor(np.asarray(params[k], dtype=np.float64), dtype=torch.float64, requires_grad=grad)
        for k in keys
    }


def encode(phi: Mapping[str, torch.Tensor], X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder (27): m(x), h(x)."""
    g = F.relu(X @ phi["V1"].T + phi["c1"])
    return g @ phi["V2"].T + phi["c2"], F.softplus(g @ phi["V3"].T + phi["c3"])


def decode(theta: Mapping[str, torch.Tensor], Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder (23): μ_θ(z), σ_θ(z)."""
    g = F.relu(Z @ theta["W1"].T + theta["b1"])
    return g @ theta["W2"].T + theta["b2"], F.softplus(g @ theta["W3"].T + theta["b3"])


def gaussian_log_likelihood(X: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """ln N(x | μ, diag σ²) = −½ {M ln 2π + ln|Σ| + (x−μ)^T Σ^{-1} (x−μ)} per row (last axis)."""
    M = X.shape[-1]
    return -0.5 * (M * LOG_2PI + 2.0 * torch.log(sigma).sum(-1) + (((X - mu) / sigma) ** 2).sum(-1))


def elbo_terms(
    theta: Mapping[str, torch.Tensor], phi: Mapping[str, torch.Tensor], X: torch.Tensor, V: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(−KL term, MC log-likelihood term) of eq. (30), each summed over n. V has shape (J, n, d)."""
    m, h = encode(phi, X)
    d = m.shape[-1]
    neg_kl = 0.5 * (2.0 * torch.log(h).sum(-1) + d - (h**2).sum(-1) - (m**2).sum(-1))  # corrected sign
    Z = h.unsqueeze(0) * V + m.unsqueeze(0)  # (J, n, d)
    mu, sigma = decode(theta, Z)
    loglik = gaussian_log_likelihood(X.unsqueeze(0), mu, sigma).mean(0)  # (32)
    return neg_kl.sum(), loglik.sum()


def elbo(theta, phi, X: np.ndarray, V: np.ndarray) -> float:
    """L^s(φ^s, θ) of eq. (30) for numpy parameters and draws."""
    with deterministic_torch(), torch.no_grad():
        a, b = elbo_terms(
            _t(theta, DECODER_KEYS, False),
            _t(phi, ENCODER_KEYS, False),
            torch.tensor(X, dtype=torch.float64),
            torch.tensor(V, dtype=torch.float64),
        )
        return float(a + b)


def elbo_gradients(
    theta: Mapping[str, np.ndarray], phi: Mapping[str, np.ndarray], X: np.ndarray, V: np.ndarray, wrt: str
) -> tuple[float, dict[str, np.ndarray]]:
    """(L^s, ∂L^s/∂θ) for ``wrt="theta"`` (eq. 34), (L^s, ∂L^s/∂φ^s) for ``wrt="phi"`` (eq. 33), or both
    (keys of the decoder and the encoder) for ``wrt="both"`` (the shared-encoder mode)."""
    if wrt not in ("theta", "phi", "both"):
        raise ValueError(f"wrt must be 'theta', 'phi' or 'both', got {wrt!r}")
    with deterministic_torch():
        th = _t(theta, DECODER_KEYS, wrt in ("theta", "both"))
        ph = _t(phi, ENCODER_KEYS, wrt in ("phi", "both"))
        a, b = elbo_terms(th, ph, torch.tensor(X, dtype=torch.float64), torch.tensor(V, dtype=torch.float64))
        value = a + b
        target = {"theta": th, "phi": ph, "both": {**th, **ph}}[wrt]
        keys = list(target)
        grads = torch.autograd.grad(value, [target[k] for k in keys])
        return float(value.detach()), {k: g.detach().numpy().copy() for k, g in zip(keys, grads)}


class TrainingDiverged(FloatingPointError):
    """A non-finite ELBO, gradient or parameter: training has diverged (e.g. raw-sum SGD with too large a
    step). Names the iteration, the participant and what went non-finite; the run must stop, not return
    a NaN model."""

    def __init__(self, what: str, iteration: int, participant: str | int | None = None):
        self.what, self.iteration, self.participant = what, int(iteration), participant
        where = "" if participant is None else f" at participant {participant}"
        super().__init__(
            f"CollabDict VAE diverged in iteration {self.iteration}{where}: non-finite {what} "
            "(lower the learning rate, or use optimizer='adam' with normalise=True)"
        )


def check_finite(what: str, value, iteration: int, participant: str | int | None = None) -> None:
    """Raise :class:`TrainingDiverged` unless every entry of ``value`` (a number, an array or a dict of
    arrays) is finite."""
    parts = value.values() if isinstance(value, Mapping) else (value,)
    for v in parts:
        if not np.all(np.isfinite(np.asarray(v, dtype=np.float64))):
            raise TrainingDiverged(what, iteration, participant)


def reconstruction_score(theta, phi, X: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Eq. (39): a^s(x) = −(1/J) Σ_j ln N(x | μ_θ(z_j), Σ_θ(z_j)), z_j ~ N(m_φ(x), H_φ(x)). Higher = more anomalous."""
    if draws < 1:
        raise ValueError(f"need at least one Monte-Carlo draw, got {draws}")
    X = np.asarray(X, dtype=np.float64)
    V = rng.standard_normal((draws, X.shape[0], np.asarray(phi["c2"]).shape[0]))
    with deterministic_torch(), torch.no_grad():
        th, ph = _t(theta, DECODER_KEYS, False), _t(phi, ENCODER_KEYS, False)
        Xt = torch.tensor(X, dtype=torch.float64)
        m, h = encode(ph, Xt)
        Z = h.unsqueeze(0) * torch.tensor(V, dtype=torch.float64) + m.unsqueeze(0)
        mu, sigma = decode(th, Z)
        return (-gaussian_log_likelihood(Xt.unsqueeze(0), mu, sigma).mean(0)).numpy().copy()


def flatten(params: Mapping[str, np.ndarray], keys) -> np.ndarray:
    return np.concatenate([np.asarray(params[k], dtype=np.float64).ravel() for k in keys])


def unflatten(vec: np.ndarray, like: Mapping[str, np.ndarray], keys) -> dict[str, np.ndarray]:
    out, i = {}, 0
    for k in keys:
        shape = np.asarray(like[k]).shape
        n = int(np.prod(shape))
        out[k] = np.asarray(vec[i : i + n], dtype=np.float64).reshape(shape)
        i += n
    if i != vec.size:
        raise ValueError(f"vector has {vec.size} entries, parameters need {i}")
    return out


class AdamAscent:
    """Adam for gradient *ascent* on flat float64 vectors (Kingma & Ba), state as plain arrays."""

    def __init__(self, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        if not lr > 0:
            raise ValueError(f"learning rate must be > 0, got {lr}")
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps

    @staticmethod
    def initial_state(n: int) -> dict:
        return {"m": np.zeros(n), "v": np.zeros(n), "t": 0}

    def update(self, x: np.ndarray, g: np.ndarray, state: dict) -> tuple[np.ndarray, dict]:
        t = int(state["t"]) + 1
        m = self.beta1 * state["m"] + (1 - self.beta1) * g
        v = self.beta2 * state["v"] + (1 - self.beta2) * g * g
        mhat = m / (1 - self.beta1**t)
        vhat = v / (1 - self.beta2**t)
        return x + self.lr * mhat / (np.sqrt(vhat) + self.eps), {"m": m, "v": v, "t": t}
