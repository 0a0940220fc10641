"""Ensembles and their atomic operations ADD / GET_TOP / CROP (seed 003 §III-A; docs/collab_rf.md).

An ensemble is an ordered list of estimator payloads with unique ids (creator, counter);
the order is insertion order (the authors' dict order), which also breaks ranking ties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from algorithms.collab_rf.estimators import estimator_id


def add(ensemble: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[dict]:
    """ADD(Φ, {φ}) = Ens(Estim(Φ) ∪ {φ}). Estimators whose id is already present are skipped
    (CODE: ``set(received) - set(own)``), so ADD never duplicates an id."""
    out = list(ensemble)
    seen = {estimator_id(e) for e in out}
    for e in new:
        i = estimator_id(e)
        if i not in seen:
            seen.add(i)
            out.append(e)
    return out


def get_top(
    ensemble: Sequence[Mapping[str, Any]],
    k: int,
    ranking: Any,
    X: np.ndarray | None = None,
    y: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> list[dict]:
    """GET_TOP(Φ, k): the top k estimators by ``ranking``, or all of them if |Φ| <= k."""
    if k < 0:
        raise ValueError(f"GET_TOP needs k >= 0, got {k}")
    if len(ensemble) <= k:
        return list(ensemble)
    return [ensemble[i] for i in ranking.top(ensemble, k, X=X, y=y, rng=rng)]


def crop(
    ensemble: Sequence[Mapping[str, Any]],
    k: int,
    ranking: Any,
    X: np.ndarray | None = None,
    y: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> list[dict]:
    """CROP(Φ, k): Φ = Ens(GET_TOP(Φ, k))."""
    return get_top(ensemble, k, ranking, X=X, y=y, rng=rng)
