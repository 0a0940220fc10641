"""Held-out evaluation splits: one common test set, and the rest dealt to organisations in skewed shares.

The setting of the project's held-out evaluation (issue 31; docs/collabdict.md, "Held-out evaluation"):
a stratified test set common to all organisations is set aside first; the remaining *training pool* is
shuffled and cut into S shares whose sizes follow a Dirichlet(α·1_S) draw (α = 0.5: a few large and many
small organisations), each organisation getting at least ``min_rows`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HeldOutSplit:
    """Row indices: the common test set and the pool the organisations' training shares come from."""

    test: np.ndarray
    pool: np.ndarray


def heldout_split(
    y: np.ndarray, seed: int, test_fraction: float = 0.3, max_rows: int | None = None
) -> HeldOutSplit:
    """Stratified split of the rows of a labelled dataset into a common test set and a training pool.

    ``max_rows`` first subsamples the dataset (stratified) for quick runs."""
    y = np.asarray(y)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    test, pool = [], []
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        if max_rows is not None:
            idx = idx[: max(2, int(round(max_rows * idx.size / y.size)))]
        n_test = max(1, int(round(test_fraction * idx.size)))
        test.append(idx[:n_test])
        pool.append(idx[n_test:])
    return HeldOutSplit(np.sort(np.concatenate(test)), np.sort(np.concatenate(pool)))


def _dealt_rows(rows: np.ndarray, S: int, alpha: float, min_rows: int) -> np.ndarray:
    """``rows`` as an array, once a Dirichlet(α·1_S) deal of them to S organisations of at least
    ``min_rows`` rows each is possible; otherwise a ValueError naming what is not."""
    rows = np.asarray(rows)
    if S < 1:
        raise ValueError(f"need at least one organisation, got {S}")
    if not alpha > 0:
        raise ValueError(f"Dirichlet concentration must be > 0, got {alpha}")
    if min_rows < 1 or rows.size < S * min_rows:
        raise ValueError(f"{rows.size} rows cannot give {S} organisations {min_rows} rows each")
    return rows


def dirichlet_shares(
    rows: np.ndarray, S: int, alpha: float, seed: int, min_rows: int = 5
) -> list[np.ndarray]:
    """Deal ``rows`` (indices) to S organisations: shares p ~ Dirichlet(α·1_S), each organisation at least
    ``min_rows`` rows, the remainder in proportion to p (largest remainders first); disjoint, sorted."""
    rows = _dealt_rows(rows, S, alpha, min_rows)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(S, float(alpha)))
    spare = rows.size - S * min_rows
    exact = p * spare
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: spare - counts.sum()]] += 1
    counts += min_rows
    perm = rng.permutation(rows)
    cuts = np.concatenate([[0], np.cumsum(counts)])
    return [np.sort(perm[cuts[s] : cuts[s + 1]]) for s in range(S)]


def dirichlet_label_shares(
    y: np.ndarray,
    rows: np.ndarray,
    S: int,
    alpha: float,
    seed: int,
    min_rows: int = 5,
    max_draws: int = 1_000,
) -> list[np.ndarray]:
    """Deal ``rows`` (indices into ``y``) to S organisations with label *and* size skew: for every class c
    independently, shares q_c ~ Dirichlet(α·1_S) and class c's rows (shuffled) cut in proportion to q_c
    (Hsu, Qi & Brown 2019). Draws are repeated from the same generator until every organisation holds at
    least ``min_rows`` rows; an organisation may hold one class only. Disjoint, sorted."""
    rows = _dealt_rows(rows, S, alpha, min_rows)
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    classes = [rows[y[rows] == c] for c in np.unique(y[rows])]
    for _ in range(max_draws):
        parts: list[list[np.ndarray]] = [[] for _ in range(S)]
        for members in classes:
            q = rng.dirichlet(np.full(S, float(alpha)))
            cuts = np.round(np.cumsum(q)[:-1] * members.size).astype(int)
            for s, part in enumerate(np.split(rng.permutation(members), cuts)):
                parts[s].append(part)
        shares = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(s) for s in shares) >= min_rows:
            return shares
    raise ValueError(f"no Dirichlet({alpha}) draw in {max_draws} gave every organisation {min_rows} rows")
