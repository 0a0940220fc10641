"""Model export formats: forests equal the platform's ensemble, the VAE is a torch state_dict; the
export refuses a payload that is not the ledger's model and a model it has no format for."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.preprocessing import StandardScaler

from algorithms import codec
from algorithms.collab_rf.estimators import ensemble_scores, from_sklearn_tree
from api.model_export import ModelExportError, export_model, forest_estimator, predict_csv


def _forest(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 4)) * [1, 10, 100, 0.1] + [0, 5, -3, 1]
    y = (X[:, 0] + 5 * X[:, 3] > 1).astype(float)
    ests = []
    for c in range(3):  # three creators, each with its own scaler
        part = slice(100 * c, 100 * (c + 1))
        sc = StandardScaler().fit(X[part])
        rf = RandomForestRegressor(5, max_depth=6, random_state=c).fit(sc.transform(X[part]), y[part])
        ests += [
            from_sklearn_tree(t, f"Org{c + 1}MSP", i, sc.mean_, sc.scale_)
            for i, t in enumerate(rf.estimators_)
        ]
    return ests, rng


def _record(payload: bytes, **kw):
    return {
        "id": "p:Org1MSP",
        "owner": "Org1MSP",
        "process_id": "p",
        "digest": "sha256:" + hashlib.sha256(payload).hexdigest(),
        **kw,
    }


def test_forest_export_predicts_exactly_the_platform_ensemble(tmp_path):
    ests, rng = _forest()
    Xt = rng.normal(size=(2000, 4)) * [1, 10, 100, 0.1] + [0, 5, -3, 1]
    np.testing.assert_array_equal(forest_estimator(ests).predict(Xt), ensemble_scores(ests, Xt))
    routing = [
        t.tree_.missing_go_to_left.tolist() for _, p in forest_estimator(ests).estimators for t in [p[-1]]
    ]
    assert routing == [np.asarray(e["missing_left"]).tolist() for e in ests]
    payload = codec.encode({"estimators": ests})
    done = export_model(payload, _record(payload), tmp_path / "out", features=["a", "b", "c", "d"], label="y")
    assert done.metadata["members"] == 15 and done.metadata["versions"]["scikit-learn"]
    import pandas as pd

    pd.DataFrame(Xt[:50], columns=["a", "b", "c", "d"]).assign(y=0).to_csv(tmp_path / "rows.csv", index=False)
    scores, decisions, _ = predict_csv(tmp_path / "out", tmp_path / "rows.csv")
    np.testing.assert_array_equal(scores, ensemble_scores(ests, Xt[:50]))
    pd.DataFrame(Xt[:5], columns=["a", "b", "c", "x"]).to_csv(tmp_path / "wrong.csv", index=False)
    with pytest.raises(ModelExportError, match=r"lacks the feature columns \['d'\]"):
        predict_csv(tmp_path / "out", tmp_path / "wrong.csv")
    (tmp_path / "out" / "model.joblib").write_bytes(b"tampered")
    with pytest.raises(ModelExportError, match="does not match the sha256"):
        predict_csv(tmp_path / "out", tmp_path / "rows.csv")


def test_vae_export_is_a_torch_state_dict_loaded_without_consortia(tmp_path):
    rng = np.random.default_rng(1)
    theta = {"W1": rng.normal(size=(8, 2)), "b1": rng.normal(size=8)}
    phi = {"W1": rng.normal(size=(8, 3)), "b1": rng.normal(size=8)}
    payload = codec.encode({"theta": theta, "phi": phi, "iteration": 4, "mc_score": 16})
    done = export_model(payload, _record(payload), tmp_path / "vae")
    assert done.file.name == "model.pt" and done.metadata["format"] == "torch-state_dict"
    script = (
        "import json, sys, torch; s = torch.load(sys.argv[1]); "
        "print(json.dumps({k: v.tolist() for k, v in s.items()}))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script, str(done.file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    state = json.loads(out.stdout)
    assert sorted(state) == ["phi.W1", "phi.b1", "theta.W1", "theta.b1"]
    np.testing.assert_array_equal(np.array(state["theta.W1"]), theta["W1"])


def test_export_refuses_a_payload_that_is_not_the_ledgers_model_or_has_no_format(tmp_path):
    payload = codec.encode({"estimators": _forest()[0]})
    with pytest.raises(ModelExportError, match="is not the model digest"):
        export_model(payload, _record(b"other"), tmp_path / "a")
    assert not (tmp_path / "a").exists()  # nothing half-written


def test_any_other_model_exports_its_arrays_structure_and_the_ledgers_exact_payload(tmp_path):
    """A model of an algorithm written with the SDK: arrays in model.npz (loaded without pickle), the
    structure in model.json, the payload whose sha256 is the ledger's digest in model.payload."""
    model = {
        "coef": np.arange(6, dtype=np.float64).reshape(2, 3),
        "layers": [{"weight": np.ones((2, 2), dtype=np.float32)}, {"bias": np.zeros(2)}],
        "classes": [0, 1],
        "note": "sgd",
        "blob": b"\x00\x01",
    }
    payload = codec.encode(model)
    out = export_model(payload, _record(payload), tmp_path / "m", features=["a", "b", "c"], label="y")
    assert out.metadata["kind"] == "sdk-payload" and out.file.name == "model.npz"
    with np.load(out.file, allow_pickle=False) as arrays:
        assert sorted(arrays.files) == ["blob", "coef", "layers/0/weight", "layers/1/bias"]
        np.testing.assert_array_equal(arrays["coef"], model["coef"])
        assert arrays["layers/0/weight"].dtype == np.float32
        assert arrays["blob"].tobytes() == b"\x00\x01"
    structure = json.loads((tmp_path / "m" / "model.json").read_text())
    assert structure["coef"] == {"array": "coef", "dtype": "<f8", "shape": [2, 3]}
    assert structure["classes"] == [0, 1] and structure["note"] == "sgd"
    raw = (tmp_path / "m" / "model.payload").read_bytes()
    assert (
        "sha256:" + hashlib.sha256(raw).hexdigest()
        == out.metadata["model_digest"]
        == _record(payload)["digest"]
    )
    meta = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert {f["file"] for f in meta["files"]} == {"model.npz", "model.json", "model.payload"}
    for f in meta["files"]:
        assert (
            f["sha256"] == "sha256:" + hashlib.sha256((tmp_path / "m" / f["file"]).read_bytes()).hexdigest()
        )
    assert meta["features"] == ["a", "b", "c"]
