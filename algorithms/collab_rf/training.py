"""FIT's learner: n_new regression trees of a random forest on local, standardised data
(as in the authors' code, docs/collab_rf.md: ``RandomForestRegressor(n_estimators=n_new, max_depth)`` on
StandardScaler-transformed X; bootstrap on; ``max_features=1.0``, i.e. no feature bagging).
``positive_weight`` ≠ 1 passes ``sample_weight`` (w for positive rows, 1 otherwise; an option
for rare positives, not the paper's).

Fitting is a pure function of (data, hyper-parameters, random_state), so results are
memoised in-process (keyed by a digest of the data): the same organisation's k-th FIT gives
the same trees under every topology, and benchmarks comparing topologies fit them once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.preprocessing import StandardScaler

from algorithms.collab_rf.estimators import Estimator, from_sklearn_tree

_MEMO: OrderedDict[tuple, list[Estimator]] = OrderedDict()
_MEMO_SIZE = 2048


def forget_fits() -> None:
    """Empty the in-process memo of fitted trees, so that the next FITs are computed (a benchmark
    timing the same work twice in one process must not find the first run's trees)."""
    _MEMO.clear()


@dataclass(frozen=True)
class Scaler:
    """The creator's StandardScaler (fitted on its train set), carried by its trees."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, X: np.ndarray) -> Scaler:
        s = StandardScaler().fit(np.asarray(X, dtype=np.float64))
        return cls(mean=s.mean_.astype(np.float64), scale=s.scale_.astype(np.float64))

    def transform(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.mean) / self.scale


def fit_seed(process_seed: int, position: int, fit_index: int) -> int:
    """random_state of an organisation's ``fit_index``-th FIT (independent of the round)."""
    ss = np.random.SeedSequence([int(process_seed), int(position), int(fit_index), 0xF17])
    return int(ss.generate_state(1)[0] & 0x7FFFFFFF)


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def fit_trees(
    X: np.ndarray,
    y: np.ndarray,
    scaler: Scaler,
    n_new: int,
    max_depth: int | None,
    random_state: int,
    creator: str,
    first_counter: int,
    n_jobs: int = 1,
    positive_weight: float = 1.0,
) -> list[Estimator]:
    """Train ``n_new`` trees; ids (creator, first_counter .. first_counter+n_new-1)."""
    if n_new < 1:
        raise ValueError(f"n_new must be >= 1, got {n_new}")
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth must be >= 1 or None, got {max_depth}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or len(X) != len(y) or len(X) == 0:
        raise ValueError(f"FIT needs non-empty X (n, d) and y (n,), got {X.shape} and {y.shape}")
    if not (np.isfinite(positive_weight) and positive_weight > 0):
        raise ValueError(f"positive_weight must be a positive number, got {positive_weight}")
    key = (_digest(X, y, scaler.mean, scaler.scale), n_new, max_depth, random_state, float(positive_weight))
    cached = _MEMO.get(key)
    if cached is None:
        rf = RandomForestRegressor(
            n_estimators=n_new,
            max_depth=max_depth,
            max_features=1.0,
            bootstrap=True,
            random_state=random_state,
            n_jobs=n_jobs,
        )
        weights = None if positive_weight == 1.0 else np.where(y == 1, float(positive_weight), 1.0)
        rf.fit(scaler.transform(X), y, sample_weight=weights)
        cached = [from_sklearn_tree(t, "", 0, scaler.mean, scaler.scale) for t in rf.estimators_]
        _MEMO[key] = cached
        if len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(key)
    out = []
    for i, t in enumerate(cached):
        e = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in t.items()}
        e["creator"] = str(creator)
        e["counter"] = int(first_counter + i)
        out.append(e)
    return out
