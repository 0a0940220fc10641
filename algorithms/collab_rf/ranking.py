"""GET_TOP rankings (seed 003 §III-D; docs/collab_rf.md): the paper's unsupervised tree-kernel P-greedy and
the authors' code's supervised bootstrap linear regression.

A ranking maps candidate estimators to the indices of the top ``k`` in rank order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from algorithms.collab_rf.estimators import estimator_id, predict_trees
from algorithms.collab_rf.pgreedy import p_greedy
from algorithms.collab_rf.tree_kernel import gram_matrix

RANKINGS = ("pgreedy_treekernel", "linreg_bootstrap")


@dataclass(frozen=True)
class PGreedyTreeKernelRanking:
    """Paper (seed 003 §III-D + Appendix): P-greedy on the tree-kernel Gram matrix.
    Unsupervised: local data are not used. Candidates are ordered by (creator, counter)
    before ranking [OURS, for determinism]."""

    decay: float = 1.0
    tol: float = 1e-12

    def top(
        self,
        estimators: Sequence[Mapping[str, Any]],
        k: int,
        X: np.ndarray | None = None,
        y: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> list[int]:
        n = len(estimators)
        if k >= n:
            return list(range(n))
        by_id = sorted(range(n), key=lambda i: estimator_id(estimators[i]))
        with threadpool_limits(limits=1, user_api="blas"):  # bit-identical everywhere
            K = gram_matrix([estimators[i] for i in by_id], decay=self.decay)
            order = p_greedy(K, k, tol=self.tol).order
        return [by_id[j] for j in order]


@dataclass(frozen=True)
class LinRegBootstrapRanking:
    """Authors' code (``ClassifierLinReg.get_top_estimators``): average over ``n_rep``
    random subsamples of size n - floor(n·val_size) of the least-squares weights w of
    y ≈ b + Σ_e w_e φ_e(x) on local data; rank by w_e^2 descending (stable)."""

    n_rep: int = 10
    val_size: float = 0.3

    def __post_init__(self) -> None:
        if self.n_rep < 1:
            raise ValueError(f"n_rep must be >= 1, got {self.n_rep}")
        if not (0.0 <= self.val_size < 1.0):
            raise ValueError(f"val_size must be in [0, 1), got {self.val_size}")

    def top(
        self,
        estimators: Sequence[Mapping[str, Any]],
        k: int,
        X: np.ndarray | None = None,
        y: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> list[int]:
        n_e = len(estimators)
        if k >= n_e:
            return list(range(n_e))
        if X is None or y is None or rng is None:
            raise ValueError("linreg_bootstrap ranking needs local X, y and an RNG")
        P = predict_trees(estimators, X)  # (n_e, n)
        n = P.shape[1]
        m = n - int(np.floor(n * self.val_size))
        y = np.asarray(y, dtype=np.float64)
        with threadpool_limits(limits=1, user_api="blas"):
            w = self._weights(P, y, m, rng)
        return [int(i) for i in np.argsort(-(w**2), kind="stable")[:k]]

    def _weights(self, P: np.ndarray, y: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        # one BLAS thread: bit-identical on any machine/thread count, and no oversubscription
        w = np.zeros(P.shape[0])
        n = P.shape[1]
        for _ in range(self.n_rep):
            idx = rng.permutation(n)[:m]
            A = P[:, idx].T
            A = A - A.mean(axis=0)  # LinearRegression(fit_intercept=True)
            b = y[idx] - y[idx].mean()
            # scipy's gelsd with sklearn's cutoff (numpy's lstsq fails to converge on some
            # rank-deficient prediction matrices that occur here)
            cond = max(A.shape) * np.finfo(np.float64).eps
            try:
                coef = scipy.linalg.lstsq(A, b, cond=cond, lapack_driver="gelsd")[0]
            except np.linalg.LinAlgError:
                # gelsd's SVD occasionally fails to converge on these rank-deficient
                # matrices (seen once in the full experiment): fall back, deterministically,
                # to the minimum-norm solution by complete orthogonal factorisation
                coef = scipy.linalg.lstsq(A, b, cond=cond, lapack_driver="gelsy")[0]
            w += coef
        return w / self.n_rep


def make_ranking(name: str, **options: Any):
    if name == "pgreedy_treekernel":
        return PGreedyTreeKernelRanking(**options)
    if name == "linreg_bootstrap":
        return LinRegBootstrapRanking(**options)
    raise ValueError(f"unknown ranking {name!r}; expected one of {RANKINGS}")
