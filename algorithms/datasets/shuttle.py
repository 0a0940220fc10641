"""ODDS *shuttle* (docs/datasets.md): 49,097 × 9, 3,511 anomalies, bundled in the ``river==0.26.1`` wheel.

The file ``river/datasets/shuttle.csv.gz`` (columns f1..f9, anomaly) is read from the installed ``river``
package (a pinned dependency); if river is not installed, the wheel is downloaded once into the data cache
(:func:`algorithms.datasets.cache.pip_download`) and the file read from the zip. Nothing is committed.

Also here: a stratified, uneven split of a labelled dataset across organisations (the CollabDict benchmark
setting: a few large and several small organisations) and a data-independent heavy-tail transform.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from dataclasses import dataclass
from importlib import util as importlib_util
from pathlib import Path

import numpy as np

from algorithms.datasets.cache import DatasetUnavailable, pip_download

RIVER_REQUIREMENT = "river==0.26.1"
MEMBER = "river/datasets/shuttle.csv.gz"
N_ROWS, N_FEATURES, N_ANOMALIES = 49_097, 9, 3_511


def _installed_path() -> Path | None:
    spec = importlib_util.find_spec("river")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "shuttle.csv.gz"
    return p if p.is_file() else None


def _read_csv_gz(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    text = gzip.decompress(raw).decode("utf-8")
    lines = text.strip().splitlines()
    header = [h.strip() for h in lines[0].split(",")]
    if header != [f"f{i}" for i in range(1, 10)] + ["anomaly"]:
        raise DatasetUnavailable(f"unexpected shuttle header {header}")
    data = np.loadtxt(io.StringIO("\n".join(lines[1:])), delimiter=",", dtype=np.float64)
    return data[:, :-1], data[:, -1].astype(np.int64)


def load_shuttle(prefer_installed: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (49097, 9), y int64 ∈ {0, 1} with 3,511 anomalies (checked)."""
    path = _installed_path() if prefer_installed else None
    if path is not None:
        raw = path.read_bytes()
    else:
        wheel = pip_download(RIVER_REQUIREMENT, "river-0.26.1")
        with zipfile.ZipFile(wheel) as z:
            raw = z.read(MEMBER)
    X, y = _read_csv_gz(raw)
    if X.shape != (N_ROWS, N_FEATURES) or int(y.sum()) != N_ANOMALIES:
        raise DatasetUnavailable(
            f"shuttle has shape {X.shape} and {int(y.sum())} anomalies; expected "
            f"({N_ROWS}, {N_FEATURES}) and {N_ANOMALIES}"
        )
    return X, y


def signed_log(X: np.ndarray) -> np.ndarray:
    """x ↦ sign(x) ln(1 + |x|): tames shuttle's heavy tails without using any data statistics."""
    X = np.asarray(X, dtype=np.float64)
    return np.sign(X) * np.log1p(np.abs(X))


@dataclass(frozen=True)
class OrganisationSplit:
    """Row indices of one organisation's training and test data."""

    train: np.ndarray
    test: np.ndarray


def uneven_proportions(S: int, skew: float) -> np.ndarray:
    """Share of the data held by each organisation: p_s ∝ skew^{−s} (skew = 1: even)."""
    if S < 1:
        raise ValueError(f"need at least one organisation, got {S}")
    if not skew >= 1.0:
        raise ValueError(f"skew must be ≥ 1, got {skew}")
    w = skew ** -np.arange(S, dtype=np.float64)
    return w / w.sum()


def uneven_split(
    y: np.ndarray,
    S: int,
    seed: int,
    skew: float = 2.0,
    test_fraction: float = 0.3,
    max_rows: int | None = None,
) -> list[OrganisationSplit]:
    """Disjoint, stratified, uneven split of rows across S organisations.

    Normal and anomalous rows are shuffled and cut separately with the proportions of
    :func:`uneven_proportions`, so each organisation has the overall anomaly rate (up to rounding) and at
    least one row of each class; each organisation's rows are then split into train/test (stratified).
    ``max_rows`` subsamples the dataset first (stratified), for quick runs.
    """
    y = np.asarray(y)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    props = uneven_proportions(S, skew)
    parts: list[list[np.ndarray]] = [[] for _ in range(S)]
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        if max_rows is not None:
            idx = idx[: max(S * 2, int(round(max_rows * idx.size / y.size)))]
        if idx.size < 2 * S:
            raise ValueError(f"class {label} has {idx.size} rows, too few for {S} organisations")
        counts = np.maximum(2, np.floor(props * idx.size).astype(int))
        counts[0] = idx.size - counts[1:].sum()
        cuts = np.concatenate([[0], np.cumsum(counts)])
        for s in range(S):
            parts[s].append(idx[cuts[s] : cuts[s + 1]])
    out = []
    for s in range(S):
        train, test = [], []
        for block in parts[s]:
            n_test = max(1, int(round(test_fraction * block.size)))
            test.append(block[:n_test])
            train.append(block[n_test:])
        out.append(OrganisationSplit(np.sort(np.concatenate(train)), np.sort(np.concatenate(test))))
    return out
