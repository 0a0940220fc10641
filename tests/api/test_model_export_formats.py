"""The converted forms of an export: the forest as ONNX (onnxruntime scores equal the joblib
estimator's within 1e-6, every decision equal, NaN routing kept) and the VAE as TorchScript (equal to
the platform's anomaly score for the same draws), each loaded by a Python that imports no Consortia
package, each listed in the manifest with its sha256, library versions and check."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

from algorithms import codec
from algorithms.collabdict.vae_model import init_decoder, init_encoder, reconstruction_score
from api.model_export import export_model
from api.model_onnx import TOLERANCE
from tests.api.test_model_export import _record
from tests.e2e.test_journeys import NO_CONSORTIA, claims


def _outside(script: str, cwd) -> dict:
    proc = subprocess.run(
        [sys.executable, "-I", "-c", NO_CONSORTIA + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _claims_forest():
    """Three creators' trees on claims-like data, as the platform fits them (float32 scaled input)."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.preprocessing import StandardScaler

    from algorithms.collab_rf.estimators import from_sklearn_tree

    ests = []
    for c in range(3):
        frame = claims(260, c, 0.2 * c)
        X, y = frame.drop(columns="is_fraud").to_numpy(float), frame["is_fraud"].to_numpy(float)
        sc = StandardScaler().fit(X)
        rf = RandomForestRegressor(3, max_depth=4, random_state=c).fit(sc.transform(X).astype(np.float32), y)
        ests += [
            from_sklearn_tree(t, f"Org{c + 1}MSP", i, sc.mean_, sc.scale_)
            for i, t in enumerate(rf.estimators_)
        ]
    return ests


def test_forest_onnx_scores_equal_the_joblib_estimator(tmp_path):
    ests = _claims_forest()  # their learned NaN routing goes both ways; skl2onnx alone sends NaN right
    assert {int(v) for e in ests for v in e["missing_left"]} == {0, 1}
    rng = np.random.default_rng(3)
    payload = codec.encode({"estimators": ests})
    done = export_model(payload, _record(payload), tmp_path / "out", features=list("abcd"), label="y")
    files = {f["format"]: f for f in done.metadata["files"]}
    onnx = files["onnx"]
    assert onnx["file"] == "model.onnx" and onnx["sha256"].startswith("sha256:")
    assert onnx["check"]["ok"] is True and onnx["check"]["max_abs_diff"] <= TOLERANCE
    assert done.metadata["versions"]["skl2onnx"] and done.metadata["versions"]["onnx"]
    assert files["joblib"]["sha256"] == done.metadata["file_sha256"]
    X = claims(3000, 42, 0.1).drop(columns="is_fraud").to_numpy(float)
    X[rng.random(X.shape) < 0.1] = np.nan  # learned missing-value routing
    np.save(tmp_path / "rows.npy", X)
    out = _outside(
        """
        import joblib, numpy, onnxruntime
        X = numpy.load("rows.npy")
        s = onnxruntime.InferenceSession("out/model.onnx", providers=["CPUExecutionProvider"])
        onnx = s.run(None, {"X": X})[0][:, 0]
        est = joblib.load("out/model.joblib").predict(X)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("api", "algorithms", "executor"))
        print(json.dumps({"onnx": onnx.tolist(), "joblib": est.tolist(), "consortia": loaded}))
        """,
        tmp_path,
    )
    assert out["consortia"] == []
    onnx_scores, joblib_scores = np.array(out["onnx"]), np.array(out["joblib"])
    np.testing.assert_allclose(onnx_scores, joblib_scores, rtol=0, atol=TOLERANCE)
    np.testing.assert_array_equal(onnx_scores > 0.5, joblib_scores > 0.5)


def test_vae_torchscript_equals_the_platform_score(tmp_path):
    rng = np.random.default_rng(5)
    theta, phi = init_decoder(2, 8, 3, rng), init_encoder(3, 8, 2, rng)
    theta = {k: v + 0.1 * rng.normal(size=v.shape) for k, v in theta.items()}  # non-zero biases
    payload = codec.encode({"theta": theta, "phi": phi, "iteration": 2, "mc_score": 8})
    done = export_model(payload, _record(payload), tmp_path / "vae")
    ts = {f["format"]: f for f in done.metadata["files"]}["torchscript"]
    assert ts["file"] == "model.torchscript.pt" and ts["check"]["ok"] is True
    assert done.metadata["model_digest"] == _record(payload)["digest"]
    X = rng.normal(size=(50, 3))
    V = np.random.default_rng(9).standard_normal((8, 50, 2))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "v.npy", V)
    out = _outside(
        """
        import numpy, torch
        m = torch.jit.load("vae/model.torchscript.pt")
        s = m(torch.from_numpy(numpy.load("x.npy")), torch.from_numpy(numpy.load("v.npy")))
        print(json.dumps({"scores": s.tolist()}))
        """,
        tmp_path,
    )
    want = reconstruction_score(theta, phi, X, 8, np.random.default_rng(9))
    np.testing.assert_allclose(out["scores"], want, rtol=1e-12, atol=0)
