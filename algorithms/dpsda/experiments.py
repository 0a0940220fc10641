"""The experiments of seed 002 §6 (docs/dpsda.md): synthetic online linear regression (OLR) and online binary
classification (OBC) with the logistic loss, plus the centralised baselines they are compared with.

OLR [CODE ``Synthetic_main.m``]: a_t ∈ R^m with entries U[−0.5, 0.5], x_0 ~ N(0, I_m),
b_t = a_t^T x_0 + 0.04·N(0, 1), f_t(x) = ½(a_t^T x − b_t)², X = [−5, 5]^m, m = 21, n = 7, T = 500.
(numpy's generator replaces MATLAB's ``rand``/``randn``, so only qualitative agreement is expected.)

OBC [SEED prose; RECON formulas]: f_t(x) = (1/|B_t|) Σ_{k∈B_t} ln(1 + e^{−b_k a_k^T x}) over a batch of
|B_t| training samples revealed at time t (a seeded permutation of the training set), x in a box of
radius r; accuracy of the final decision sign(a^T x(T)) on the training and test sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.dpsda.framework import step_size
from algorithms.dpsda.losses import OnlineLoss
from algorithms.dpsda.projection import BoxProjection


@dataclass(frozen=True)
class OnlineStream:
    """Rows of (features, labels) in arrival order; f_t uses rows (t−1)B … tB−1."""

    features: np.ndarray
    labels: np.ndarray
    truth: np.ndarray | None = None  # x_0 of the synthetic OLR model, if known


def synthetic_olr(
    seed: int, dimension: int = 21, horizon: int = 500, noise_std: float = 0.04
) -> OnlineStream:
    """The synthetic OLR stream of seed 002 §6 (one row per time step)."""
    if dimension < 1 or horizon < 1:
        raise ValueError(f"dimension and horizon must be ≥ 1, got {dimension}, {horizon}")
    if noise_std < 0:
        raise ValueError(f"noise_std must be ≥ 0, got {noise_std}")
    rng = np.random.default_rng(seed)
    a = 0.5 - rng.random((horizon, dimension))
    x0 = rng.standard_normal(dimension)
    b = a @ x0 + noise_std * rng.standard_normal(horizon)
    return OnlineStream(a, b, x0)


def classification_stream(
    features: np.ndarray, labels: np.ndarray, horizon: int, batch_size: int, seed: int
) -> OnlineStream:
    """T·B training samples in a seeded random order (without replacement while the set lasts)."""
    n = features.shape[0]
    need = horizon * batch_size
    if need < 1:
        raise ValueError("horizon and batch_size must be ≥ 1")
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-need // n))])[:need]
    return OnlineStream(features[order], labels[order])


def private_feature_mean(
    features: np.ndarray, mu: float, rng: np.random.Generator, lower: float = 0.0, upper: float = 1.0
) -> np.ndarray:
    """A μ-GDP estimate of the feature mean, for centring features without leaking their exact mean
    (docs/dpsda.md "The Gaussian mode"): rows clipped to [lower, upper]^m, their sum released with the Gaussian
    mechanism of std √m·(upper − lower)/μ (the ℓ2 sensitivity of the sum when one row is added, removed or
    replaced), divided by the row count N, which is taken as public."""
    if not (mu > 0 and np.isfinite(mu)):
        raise ValueError(f"μ must be positive and finite, got {mu}")
    if not upper > lower:
        raise ValueError(f"need lower < upper, got [{lower}, {upper}]")
    rows, m = features.shape
    if rows < 1:
        raise ValueError("the mean of no rows is undefined")
    total = np.clip(features, lower, upper).sum(axis=0)
    std = np.sqrt(m) * (upper - lower) / mu
    return (total + std * rng.standard_normal(m)) / rows


def accuracy(x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples with sign(a^T x) = b (a score of exactly 0 counts as +1)."""
    pred = np.where(features @ x >= 0, 1.0, -1.0)
    return float(np.mean(pred == labels))


def centralised_projected_sgd(
    loss: OnlineLoss, stream: OnlineStream, horizon: int, batch_size: int, box: BoxProjection
) -> np.ndarray:
    """Baseline: x(1) = 0, x(t+1) = P_X(x(t) − α(t) ∇f_t(x(t))), α(t) = 1/√t; returns x(1) … x(T)."""
    m = stream.features.shape[1]
    xs = np.zeros((horizon, m))
    x = np.zeros(m)
    for t in range(1, horizon):
        a = stream.features[(t - 1) * batch_size : t * batch_size]
        b = stream.labels[(t - 1) * batch_size : t * batch_size]
        x = np.clip(x - step_size(t) * loss.gradient(x, a, b), box.lower, box.upper)
        xs[t] = x
    return xs


def centralised_dual_averaging(
    loss: OnlineLoss, stream: OnlineStream, horizon: int, batch_size: int, box: BoxProjection
) -> np.ndarray:
    """The non-private centralised template DPCDA with σ = 0: z(t+1) = z(t) + ∇f_t(x(t)),
    x(t+1) = Π(z(t+1), α(t)) (Protocol 1); returns x(1) … x(T) with x(1) = 0."""
    m = stream.features.shape[1]
    xs = np.zeros((horizon, m))
    x = np.zeros(m)
    z = np.zeros(m)
    for t in range(1, horizon):
        a = stream.features[(t - 1) * batch_size : t * batch_size]
        b = stream.labels[(t - 1) * batch_size : t * batch_size]
        z = z + loss.gradient(x, a, b)
        x = box(z, step_size(t))
        xs[t] = x
    return xs
