"""The ONNX form of an exported forest, written beside ``model.joblib`` by ``consortia model export``.

The graph computes what the scikit-learn ``VotingRegressor`` of :func:`api.model_export.forest_estimator`
computes, and in the same precision, so that its decisions are the platform's: Φ(x) = (1/n) Σ_i φ^i(x)
(seed 003 §II-A), fraud iff Φ(x) > 0.5. Input ``X``: float64 ``[N, d]``; per member i

    z_i = float32((X - mean_i) / scale_i)          # StandardScaler in float64, cast as the tree does
    t_i = TreeEnsembleRegressor_i(z_i)             # ai.onnx.ml, thresholds and leaves from skl2onnx

and ``scores = (Σ_i float64(t_i)) / n``, shape ``[N, 1]``. Each member's tree node is what skl2onnx
converts its ``DecisionTreeRegressor`` to (its thresholds are rounded to the float32 the tree compares
in); skl2onnx sends every missing value to the false branch, so :func:`route_missing` writes the tree's
learned ``missing_go_to_left`` into ``nodes_missing_value_tracks_true`` (NaN takes the ``z <= t``
branch, the left child) and NaN cells go where the platform sends them. (skl2onnx's converter of
the whole pipeline scales in float32, which moves a value lying within a float32 rounding of a
threshold to the other side: about one row in 3,000 on claims data.)

Before the file is kept, the export scores probe rows with onnxruntime and with the joblib
estimator: rows drawn around every member's scaler (N(mean, (1.5 scale)²) per feature, one cell in
fifty NaN). The largest absolute score difference and whether every decision (score > 0.5) agrees
are recorded in the manifest; the ONNX file is dropped (the reason recorded) when the difference
exceeds :data:`TOLERANCE` or a decision differs. The tolerance covers the leaf values, which ONNX
stores as float32 (values in [0, 1]): 1e-6.
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


def route_missing(node: Any, tree: Any) -> None:
    """Set ``nodes_missing_value_tracks_true`` of the one-tree ``TreeEnsembleRegressor`` ``node``
    from the sklearn ``tree`` (``Tree``) it was converted from."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ids = [int(i) for i in attrs["nodes_nodeids"]]
    if set(attrs["nodes_treeids"]) != {0} or sorted(ids) != list(range(tree.node_count)):
        raise ValueError(f"{node.name}: expected the {tree.node_count} nodes of one tree")
    tracks = [
        0 if mode == b"LEAF" else int(tree.missing_go_to_left[i])
        for i, mode in zip(ids, attrs["nodes_modes"])
    ]
    kept = [a for a in node.attribute if a.name != "nodes_missing_value_tracks_true"]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute("nodes_missing_value_tracks_true", tracks)])


def _tree_node(tree_est: Any, d: int, k: int, z: str, t: str) -> Any:
    """skl2onnx's ``TreeEnsembleRegressor`` of one fitted ``DecisionTreeRegressor``, reading ``z``."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    onx = convert_sklearn(
        tree_est, initial_types=[("z", FloatTensorType([None, d]))], target_opset=TARGET_OPSET
    )
    trees = [n for n in onx.graph.node if n.op_type == "TreeEnsembleRegressor"]
    if len(trees) != 1 or len(onx.graph.node) != 1:
        raise ValueError(f"skl2onnx wrote {[n.op_type for n in onx.graph.node]} for one tree")
    node = trees[0]
    route_missing(node, tree_est.tree_)
    del node.input[:]
    node.input.append(z)
    del node.output[:]
    node.output.append(t)
    node.name = f"tree_{k}"
    return node


def forest_graph(est: Any) -> Any:
    """The ONNX model of the ``VotingRegressor`` ``est`` (see the module docstring)."""
    from onnx import TensorProto, helper, numpy_helper

    d = int(est.n_features_in_)
    nodes, inits, parts = [], [], []
    for k, pipe in enumerate(est.estimators_):
        scaler, tree = pipe[0], pipe[-1]
        inits += [
            numpy_helper.from_array(np.asarray(scaler.mean_, dtype=np.float64), f"mean_{k}"),
            numpy_helper.from_array(np.asarray(scaler.scale_, dtype=np.float64), f"scale_{k}"),
        ]
        nodes += [
            helper.make_node("Sub", ["X", f"mean_{k}"], [f"centred_{k}"]),
            helper.make_node("Div", [f"centred_{k}", f"scale_{k}"], [f"scaled_{k}"]),
            helper.make_node("Cast", [f"scaled_{k}"], [f"z_{k}"], to=TensorProto.FLOAT),
            _tree_node(tree, d, k, f"z_{k}", f"t_{k}"),
            helper.make_node("Cast", [f"t_{k}"], [f"u_{k}"], to=TensorProto.DOUBLE),
        ]
        parts.append(f"u_{k}")
    inits.append(numpy_helper.from_array(np.array(float(len(parts))), "n_members"))
    nodes += [
        helper.make_node("Sum", parts, ["total"]),
        helper.make_node("Div", ["total", "n_members"], ["scores"]),
    ]
    graph = helper.make_graph(
        nodes,
        "consortia_collab_rf",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, d])],
        [helper.make_tensor_value_info("scores", TensorProto.DOUBLE, [None, 1])],
        inits,
    )
    opsets = [helper.make_opsetid(domain, v) for domain, v in TARGET_OPSET.items()]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="consortia model export")
    model.ir_version = 8
    return model


def write_forest_onnx(
    est: Any, path: Path, versions: Callable[..., dict[str, str]], sha256: Callable[[Path], str]
) -> dict[str, Any]:
    """Convert ``est`` to ``path`` and check it; the manifest entry of the ONNX file (or why there is none)."""
    try:
        import onnx

        onx = forest_graph(est)
        onnx.checker.check_model(onx)
    except ImportError as exc:  # pragma: no cover - skl2onnx and onnx are pinned dependencies
        return {"format": "onnx", "skipped": f"skl2onnx/onnx are not installed ({exc})"}
    except Exception as exc:  # a tree the converter does not take: the joblib file still stands
        return {"format": "onnx", "skipped": f"skl2onnx could not convert the estimator: {exc}"}
    path.write_bytes(onx.SerializeToString())
    d = int(est.n_features_in_)
    entry: dict[str, Any] = {
        "file": path.name,
        "format": "onnx",
        "opset": dict(TARGET_OPSET),
        "input": {"name": "X", "type": "float64", "shape": ["N", d]},
        "output": {"name": "scores", "type": "float64", "shape": ["N", 1]},
        "decision": "fraud (positive) iff scores > 0.5",
        "load": (
            "import onnxruntime as ort; s = ort.InferenceSession('model.onnx'); "
            "scores = s.run(None, {'X': X.astype('float64')})[0][:, 0]"
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
    got = session.run(None, {"X": X.astype(np.float64)})[0][:, 0]
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
