"""Synthetic fraud-like data split over nodes (a stand-in for seed 003 §VI): rare positives
(0.2–0.5 %) that lie off the bulk of the normal data, one node optionally without positives,
and a common test set. Used by tests and demos; the real experiment uses
:mod:`algorithms.datasets.creditcard`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.step import LocalDataset


@dataclass(frozen=True)
class SyntheticFraud:
    nodes: dict[str, LocalDataset]  # train data per node
    X_test: np.ndarray  # common test set
    y_test: np.ndarray


def _draw(
    rng: np.random.Generator, n: int, n_pos: int, d: int, centres: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, d))
    y = np.zeros(n, dtype=np.int64)
    if n_pos:
        idx = rng.choice(n, size=n_pos, replace=False)
        k = rng.integers(0, len(centres), size=n_pos)
        X[idx] = centres[k] + 0.5 * rng.standard_normal((n_pos, d))
        y[idx] = 1
    return X, y


def synthetic_fraud(
    n_nodes: int = 20,
    n_per_node: int = 2000,
    positive_rate: float = 0.005,
    n_features: int = 6,
    zero_positive_node: int | None = 2,
    n_test: int = 20_000,
    seed: int = 0,
) -> SyntheticFraud:
    """Nodes ``Node00``.. with ``n_per_node`` train rows; positives come from a few clusters
    at distance 5 from the origin."""
    if n_nodes < 1 or n_per_node < 10:
        raise ValueError("need n_nodes >= 1 and n_per_node >= 10")
    if not (0.0 < positive_rate < 0.5):
        raise ValueError(f"positive_rate must be in (0, 0.5), got {positive_rate}")
    if zero_positive_node is not None and not (0 <= zero_positive_node < n_nodes):
        raise ValueError(f"zero_positive_node must be a node index, got {zero_positive_node}")
    rng = np.random.Generator(np.random.PCG64(seed))
    centres = rng.standard_normal((4, n_features))
    centres *= 5.0 / np.linalg.norm(centres, axis=1, keepdims=True)
    nodes = {}
    for i in range(n_nodes):
        n_pos = 0 if i == zero_positive_node else max(1, int(rng.binomial(n_per_node, positive_rate)))
        X, y = _draw(rng, n_per_node, n_pos, n_features, centres)
        nodes[f"Node{i:02d}"] = LocalDataset(X, y, name=f"Node{i:02d}")
    Xt, yt = _draw(rng, n_test, max(1, int(round(n_test * positive_rate))), n_features, centres)
    return SyntheticFraud(nodes=nodes, X_test=Xt, y_test=yt)
