"""The ONNX form of an exported forest, written beside ``model.joblib`` by ``consortia model export``.

The scikit-learn ``VotingRegressor`` of :func:`api.model_export.forest_estimator` (one
``Pipeline(StandardScaler, DecisionTreeRegressor)`` per estimator, Φ(x) = (1/n) Σ_i φ^i(x), seed 003
§II-A) is converted by skl2onnx into one ONNX graph: per member a ``Scaler`` and a
``TreeEnsembleRegressor`` (``ai.onnx.ml``), averaged. The graph takes ``X`` as float32 ``[N, d]``
(the precision the trees compare in) and keeps each tree's learned routing of missing values
(NaN cells).

Before the file is kept, the export scores probe rows with onnxruntime and with the joblib
estimator: rows drawn around every member's scaler (N(mean, scale²) per feature, one cell in
fifty NaN). The largest absolute score difference and whether every decision (score > 0.5) agrees
are recorded in the manifest; the ONNX file is dropped (the reason recorded) when the difference
exceeds :data:`TOLERANCE` or a decision differs. The tolerance is float32 rounding of an average of
leaf values in [0, 1]: 1e-6.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

TOLERANCE = 1e-6
TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}
PROBE_ROWS = 2000


def probe_rows(est: Any, n: int = PROBE_ROWS, seed: int = 0) -> np.ndarray:
    """Rows around the members' scalers (every member's region of the input), some cells NaN."""
    rng = np.random.default_rng(seed)
    scalers = [p[0] for p in est.estimators_]
    pick = rng.integers(0, len(scalers), size=n)
    means = np.stack([s.mean_ for s in scalers])[pick]
    scales = np.stack([s.scale_ for s in scalers])[pick]
    X = means + scales * rng.standard_normal(means.shape) * 1.5
    X[rng.random(X.shape) < 0.02] = np.nan
    return X


def write_forest_onnx(
    est: Any, path: Path, versions: Callable[..., dict[str, str]], sha256: Callable[[Path], str]
) -> dict[str, Any]:
    """Convert ``est`` to ``path`` and check it; the manifest entry of the ONNX file (or why there is none)."""
    try:
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType
    except ImportError as exc:  # pragma: no cover - skl2onnx is a pinned dependency
        return {"format": "onnx", "skipped": f"skl2onnx is not installed ({exc})"}
    d = int(est.n_features_in_)
    try:
        onx = convert_sklearn(
            est, initial_types=[("X", FloatTensorType([None, d]))], target_opset=TARGET_OPSET
        )
    except Exception as exc:  # a tree the converter does not take: the joblib file still stands
        return {"format": "onnx", "skipped": f"skl2onnx could not convert the estimator: {exc}"}
    path.write_bytes(onx.SerializeToString())
    entry: dict[str, Any] = {
        "file": path.name,
        "format": "onnx",
        "opset": dict(TARGET_OPSET),
        "input": {"name": "X", "type": "float32", "shape": ["N", d]},
        "output": {"name": onx.graph.output[0].name, "type": "float32", "shape": ["N", 1]},
        "load": (
            "import onnxruntime as ort; s = ort.InferenceSession('model.onnx'); "
            "scores = s.run(None, {'X': X.astype('float32')})[0][:, 0]"
        ),
        "versions": versions("skl2onnx", "onnx"),
    }
    check = check_forest_onnx(est, path)
    entry["check"] = check
    if check.get("ok") is False:
        path.unlink()
        return {"format": "onnx", "skipped": f"ONNX scores differ from the estimator's: {check}"}
    entry["sha256"] = sha256(path)
    return entry


def check_forest_onnx(est: Any, path: Path) -> dict[str, Any]:
    """Scores of the ONNX file (onnxruntime) against the estimator's on :func:`probe_rows`."""
    try:
        import onnxruntime as ort
    except ImportError:
        return {"ok": None, "reason": "onnxruntime is not installed: not checked"}
    X = probe_rows(est)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"X": X.astype(np.float32)})[0][:, 0].astype(np.float64)
    want = est.predict(X)
    diff = float(np.max(np.abs(got - want))) if len(X) else 0.0
    same = bool(np.array_equal(got > 0.5, want > 0.5))
    return {
        "ok": diff <= TOLERANCE and same,
        "rows": len(X),
        "max_abs_diff": diff,
        "tolerance": TOLERANCE,
        "decisions_equal": same,
        "runtime": f"onnxruntime {ort.__version__}",
    }
