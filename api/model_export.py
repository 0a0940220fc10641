"""Final models in standard formats a data scientist loads without Consortia.

``consortia model export MODEL --out DIR`` writes, beside a ``metadata.json``:

* **collaborative random forests** (seed 003): ``model.joblib``, a scikit-learn
  ``VotingRegressor`` whose members are ``Pipeline(StandardScaler, DecisionTreeRegressor)``, one
  per estimator of the model, each with its creator's scaler and its learned missing-value routing
  (``missing_left``) -- the platform's own prediction
  (``algorithms.collab_rf.estimators``): Φ(x) = (1/n) Σ_i φ^i(x) (seed 003 §II-A), fraud iff
  Φ(x) > 0.5. The trees are rebuilt node for node (children, split feature, threshold, leaf
  value) from the payload; the scaler output is cast to float32 by the tree as on the platform.
  Load it with ``joblib.load`` under the scikit-learn version ``metadata.json`` records.
  Beside it ``model.onnx``, the same ensemble converted by skl2onnx and checked against the
  joblib estimator with onnxruntime (:mod:`api.model_onnx`; float32, scores within 1e-6).
* **CollabDict VAE** (seeds 000/001): ``model.pt``, a PyTorch ``state_dict`` (``theta.<name>``:
  the shared decoder θ, ``phi.<name>``: the owner's encoder φ) saved with ``torch.save``, and
  ``model.torchscript.pt``, a TorchScript module scoring rows (eq. 39) that ``torch.jit.load``
  loads without its source (:mod:`api.model_torchscript`).
* **any other model** (an algorithm written with the SDK): ``model.npz`` (every array of the payload
  under its path, ``numpy.load`` without pickle), ``model.json`` (the payload's structure, arrays named by
  their npz key) and ``model.payload`` (the exact codec bytes the ledger's digest covers).

``metadata.json`` carries the model's id, owner, process, the model digest recorded on the
ledger (the sha256 of the decrypted payload the export was made from, checked before export),
its lineage reference (root execution, image digest, the command that re-verifies it), the
feature columns (from the owner's ``consortia data import`` schema when there is one), the
sha256 of the exported file and the exact versions of Python and the libraries it needs.
``files`` lists every file of the export (format, sha256, how to load it, the versions of the
libraries that wrote it and, for the converted forms, the check against the primary file).
"""

from __future__ import annotations

import json
import os
import platform as _platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from executor.images.recipe import sha256_file
from wire.canonical import sha256_digest

DECISION = "fraud (positive) iff predict(X) > 0.5"


class ModelExportError(Exception):
    code = "MODEL_EXPORT"


@dataclass(frozen=True)
class Exported:
    folder: Path
    file: Path
    metadata: dict[str, Any]


def _versions(*names: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": _platform.python_version()}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            pass
    return out


def _sha256(path: Path) -> str:
    return "sha256:" + sha256_file(path)


# ---------------------------------------------------------------------------- random forests


def _tree(est: Mapping[str, Any], n_features: int):
    """A fitted ``DecisionTreeRegressor`` with exactly the nodes of one estimator payload."""
    from sklearn.tree import DecisionTreeRegressor
    from sklearn.tree._tree import NODE_DTYPE, Tree

    left = np.asarray(est["left"], dtype=np.int64)
    n = len(left)
    nodes = np.zeros(n, dtype=NODE_DTYPE)
    nodes["left_child"] = left
    nodes["right_child"] = np.asarray(est["right"], dtype=np.int64)
    nodes["feature"] = np.asarray(est["feature"], dtype=np.int64)
    nodes["threshold"] = np.asarray(est["threshold"], dtype=np.float64)
    if "missing_left" in est:  # learned routing of missing values (payloads that carry it)
        nodes["missing_go_to_left"] = np.asarray(est["missing_left"], dtype=np.uint8)
    nodes["n_node_samples"] = 1
    nodes["weighted_n_node_samples"] = 1.0
    values = np.asarray(est["value"], dtype=np.float64).reshape(n, 1, 1)
    depth = np.zeros(n, dtype=np.int64)
    for v in range(n):  # sklearn numbers children after their parent
        if left[v] >= 0:
            depth[left[v]] = depth[nodes["right_child"][v]] = depth[v] + 1
    tree = Tree(n_features, np.array([1], dtype=np.intp), 1)
    tree.__setstate__(
        {"max_depth": int(depth.max()) if n else 0, "node_count": n, "nodes": nodes, "values": values}
    )
    reg = DecisionTreeRegressor()
    reg.tree_ = tree
    reg.n_outputs_ = 1
    reg.n_features_in_ = n_features
    reg.max_features_ = n_features
    return reg


def _scaler(mean: np.ndarray, scale: np.ndarray):
    from sklearn.preprocessing import StandardScaler

    s = StandardScaler()
    s.mean_ = np.asarray(mean, dtype=np.float64).copy()
    s.scale_ = np.asarray(scale, dtype=np.float64).copy()
    s.var_ = s.scale_**2
    s.n_features_in_ = len(s.mean_)
    s.n_samples_seen_ = 1
    return s


def forest_estimator(estimators: Sequence[Mapping[str, Any]]):
    """The sklearn ``VotingRegressor`` equal to the platform's ensemble of ``estimators``."""
    from sklearn.ensemble import VotingRegressor
    from sklearn.pipeline import Pipeline
    from sklearn.utils import Bunch

    if not estimators:
        raise ModelExportError("the model holds no estimators")
    d = len(estimators[0]["scaler_mean"])
    members = []
    for e in estimators:
        name = f"{e['creator']}-{int(e['counter'])}"
        members.append(
            (name, Pipeline([("scale", _scaler(e["scaler_mean"], e["scaler_scale"])), ("tree", _tree(e, d))]))
        )
    vote = VotingRegressor(members)
    vote.estimators_ = [m for _, m in members]
    vote.named_estimators_ = Bunch(**dict(members))
    return vote


# ---------------------------------------------------------------------------- export


def export_model(
    payload: bytes,
    record: Mapping[str, Any],
    out: str | os.PathLike,
    *,
    features: Sequence[str] | None = None,
    label: str | None = None,
    classes: Sequence[Any] | None = None,
    lineage: Mapping[str, Any] | None = None,
) -> Exported:
    """Write the model ``payload`` (decrypted, codec-encoded) of ledger ``record`` into ``out``."""
    from algorithms import codec

    digest = sha256_digest(payload)
    if digest != record.get("digest"):
        raise ModelExportError(
            f"payload digest {digest} is not the model digest {record.get('digest')} on the ledger"
        )
    model = codec.decode(payload)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ModelExportError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "model_id": record.get("id"),
        "owner": record.get("owner"),
        "process_id": record.get("process_id"),
        "model_digest": digest,
        "lineage": dict(lineage or {}),
        "features": list(features) if features else None,
        "label": label,
        "classes": list(classes) if classes else None,
    }
    if not (isinstance(model, dict) and ("estimators" in model or ("theta" in model and "phi" in model))):
        return _export_payload(payload, model, out, meta)
    if isinstance(model, dict) and "estimators" in model:
        import joblib

        est = forest_estimator(model["estimators"])
        if features is not None and len(features) != est.n_features_in_:
            raise ModelExportError(
                f"the model takes {est.n_features_in_} features, the dataset schema names {len(features)}"
            )
        file = out / "model.joblib"
        joblib.dump(est, file)
        meta.update(
            kind="collab-rf",
            format="joblib",
            estimator="sklearn.ensemble.VotingRegressor",
            members=len(model["estimators"]),
            n_features=est.n_features_in_,
            decision=DECISION,
            load="import joblib; m = joblib.load('model.joblib'); scores = m.predict(X)",
            versions=_versions("scikit-learn", "numpy", "scipy", "joblib"),
        )
        from api.model_onnx import write_forest_onnx

        extra = write_forest_onnx(est, out / "model.onnx", _versions, _sha256)
    else:
        import torch

        state = {f"theta.{k}": torch.from_numpy(np.array(v)) for k, v in sorted(model["theta"].items())}
        state |= {f"phi.{k}": torch.from_numpy(np.array(v)) for k, v in sorted(model["phi"].items())}
        file = out / "model.pt"
        torch.save(state, file)
        meta.update(
            kind="collabdict-vae",
            format="torch-state_dict",
            iteration=int(model.get("iteration", 0)),
            mc_score=int(model.get("mc_score", 64)),
            load="import torch; state = torch.load('model.pt')",
            versions=_versions("torch", "numpy"),
        )
        from api.model_torchscript import write_vae_torchscript

        extra = write_vae_torchscript(model, out / "model.torchscript.pt", _versions, _sha256)
    meta["file"] = file.name
    meta["file_sha256"] = _sha256(file)
    primary = {k: meta[k] for k in ("format", "load", "versions")}
    meta["files"] = [{"file": file.name, "sha256": meta["file_sha256"], **primary}, extra]
    meta["versions"] = {**meta["versions"], **extra.get("versions", {})}
    (out / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return Exported(out, file, meta)


def _payload_arrays(value: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    """The payload's structure with every array (and bytes value) replaced by a reference into ``arrays``
    under its path (``coef``, ``layers/0/weight``)."""
    if isinstance(value, np.ndarray):
        arrays[path] = value
        return {"array": path, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, bytes):
        arrays[path] = np.frombuffer(value, dtype=np.uint8)
        return {"bytes": path, "length": len(value)}
    if isinstance(value, dict):
        return {k: _payload_arrays(v, f"{path}/{k}" if path else str(k), arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_payload_arrays(v, f"{path}/{i}" if path else str(i), arrays) for i, v in enumerate(value)]
    return value


def _export_payload(payload: bytes, model: Any, out: Path, meta: dict[str, Any]) -> Exported:
    """Any other model (an algorithm written with the SDK, docs/sdk.md): its arrays in ``model.npz``
    (``numpy.load``, no pickle), its structure in ``model.json`` (each array named by its key in the npz,
    with dtype and shape), and the exact payload the ledger's digest covers in ``model.payload``
    (``consortia_sdk.decode`` reads it; its sha256 is the model digest)."""
    arrays: dict[str, np.ndarray] = {}
    # a container's entries are named by their paths; a bare array or bytes value is named "model"
    structure = _payload_arrays(model, "" if isinstance(model, dict | list) else "model", arrays)
    file = out / "model.npz"
    with file.open("wb") as f:
        np.savez(f, **arrays)
    (out / "model.json").write_text(json.dumps(structure, indent=2, sort_keys=True, default=str) + "\n")
    (out / "model.payload").write_bytes(payload)
    meta.update(
        kind="sdk-payload",
        format="npz",
        arrays=len(arrays),
        load="import numpy as np, json; arrays = np.load('model.npz'); structure = json.load(open('model.json'))",
        versions=_versions("numpy"),
    )
    meta["file"] = file.name
    meta["file_sha256"] = _sha256(file)
    meta["files"] = [
        {"file": file.name, "sha256": meta["file_sha256"], "format": "npz", "load": meta["load"]},
        {
            "file": "model.json",
            "sha256": _sha256(out / "model.json"),
            "format": "json",
            "load": "the payload's structure; each array is {'array': key in model.npz, 'dtype', 'shape'}",
        },
        {
            "file": "model.payload",
            "sha256": _sha256(out / "model.payload"),
            "format": "consortia codec",
            "load": "consortia_sdk.decode(open('model.payload', 'rb').read()); its sha256 is model_digest",
        },
    ]
    (out / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return Exported(out, file, meta)


def predict_csv(folder: str | os.PathLike, csv: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, dict]:
    """Scores and decisions of an exported forest on the rows of ``csv`` (feature columns by name
    when the export names them, else every column but the label)."""
    import joblib
    import pandas as pd

    folder = Path(folder)
    meta = json.loads((folder / "metadata.json").read_text())
    if meta.get("kind") != "collab-rf":
        raise ModelExportError(f"`model predict` runs exported forests; this export is {meta.get('kind')}")
    file = folder / meta["file"]
    if _sha256(file) != meta["file_sha256"]:
        raise ModelExportError(f"{file} does not match the sha256 in {folder / 'metadata.json'}")
    frame = pd.read_csv(csv)
    features = meta.get("features")
    if features:
        missing = [c for c in features if c not in frame.columns]
        if missing:
            raise ModelExportError(f"{csv} lacks the feature columns {missing} (the model uses {features})")
        X = frame[features]
    else:
        X = frame.drop(columns=[c for c in (meta.get("label"),) if c and c in frame.columns])
        if X.shape[1] != meta["n_features"]:
            raise ModelExportError(
                f"{csv} has {X.shape[1]} feature columns, the model takes {meta['n_features']}"
            )
    values = X.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.argwhere(~np.isfinite(values))
    if len(bad):
        r, c = bad[0]
        raise ModelExportError(
            f"{csv}: row {r + 1}, column {X.columns[c]!r} is not a finite number ({len(bad)} such cells)"
        )
    scores = joblib.load(file).predict(values)
    return scores, (scores > 0.5).astype(np.int64), meta
