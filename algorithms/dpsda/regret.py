"""Regret of the online decisions (seed 002 eqs. (2), (3), (19); docs/dpsda.md).

    R(T) = Σ_{t≤T} f_t(x(t)) − min_{x} Σ_{t≤T} f_t(x)                                   (2)
    R̃(T) = Σ_{t≤T} f_t(x̃(t)) − min_{x} Σ_{t≤T} f_t(x),   x̃(t) = (1/t) Σ_{s≤t} x(s)          (19)

The comparator follows the authors' code: for least squares, the **unconstrained** minimiser
(``pinv``) recomputed for every horizon T. The pseudo-regret (3) is the mean of R over seeds.
"""

from __future__ import annotations

import math

import numpy as np

from algorithms.dpsda.losses import OnlineLoss, SquaredLoss


def instantaneous_losses(
    loss: OnlineLoss, decisions: np.ndarray, features: np.ndarray, labels: np.ndarray, batch_size: int = 1
) -> np.ndarray:
    """f_t(x(t)) for t = 1 … T (rows of ``decisions``)."""
    T = decisions.shape[0]
    if features.shape[0] < T * batch_size:
        raise ValueError(f"{T} decisions with batches of {batch_size} need {T * batch_size} rows")
    return np.array(
        [
            loss.value(
                decisions[t],
                features[t * batch_size : (t + 1) * batch_size],
                labels[t * batch_size : (t + 1) * batch_size],
            )
            for t in range(T)
        ]
    )


def running_average(decisions: np.ndarray) -> np.ndarray:
    """x̃(t) = (1/t) Σ_{s≤t} x(s) (eq. (19))."""
    return np.cumsum(decisions, axis=0) / np.arange(1, decisions.shape[0] + 1)[:, None]


def least_squares_comparator(
    features: np.ndarray, labels: np.ndarray, horizon: int, batch_size: int = 1
) -> np.ndarray:
    """min_x Σ_{t≤T} f_t(x) for T = 1 … horizon, f_t the batch-mean squared loss, x unconstrained."""
    out = np.zeros(horizon)
    for T in range(1, horizon + 1):
        a, b = features[: T * batch_size], labels[: T * batch_size]
        x, *_ = np.linalg.lstsq(a, b, rcond=None)
        r = a @ x - b
        out[T - 1] = 0.5 * float(r @ r) / batch_size
    return out


def regret_curve(losses: np.ndarray, comparator: np.ndarray) -> np.ndarray:
    """R(T) for T = 1 … len(losses) from f_t(x(t)) and the comparator values."""
    if losses.shape != comparator.shape:
        raise ValueError(f"losses {losses.shape} and comparator {comparator.shape} differ in length")
    return np.cumsum(losses) - comparator


def olr_regret(
    decisions: np.ndarray,
    features: np.ndarray,
    labels: np.ndarray,
    comparator: np.ndarray | None = None,
    batch_size: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """(R(T), R̃(T)) for T = 1 … len(decisions) on an OLR stream."""
    loss = SquaredLoss()
    T = decisions.shape[0]
    if comparator is None:
        comparator = least_squares_comparator(features, labels, T, batch_size)
    r = regret_curve(instantaneous_losses(loss, decisions, features, labels, batch_size), comparator)
    r_avg = regret_curve(
        instantaneous_losses(loss, running_average(decisions), features, labels, batch_size), comparator
    )
    return r, r_avg


def loglog_slope(regret: np.ndarray, t_low: int = 100, t_high: int = 500) -> float:
    """ln(R(t_high)/R(t_low)) / ln(t_high/t_low): the growth exponent of R (≈ 0.5 for O(√T))."""
    lo, hi = float(regret[t_low - 1]), float(regret[t_high - 1])
    if lo <= 0 or hi <= 0:
        return math.nan
    return math.log(hi / lo) / math.log(t_high / t_low)
