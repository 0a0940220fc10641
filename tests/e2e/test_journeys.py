"""The new user's journeys through the ``consortia`` command line only, on the embedded ledger:
init -> image build -> CSV import (each organisation its own rows) -> process create --start ->
node agents -> watch -> provenance and verification -> model export -> prediction with the
exported model loaded in a Python that cannot import any Consortia package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
ORGS = ("Org1", "Org2", "Org3")
PID = "claims-rf"
HYPER = {
    "n_new": 3,
    "n_share": 2,
    "n_max": 8,
    "max_depth": 4,
    "n_rep": 2,
    "schedule": ["FIT", "SHARE", "GET"],
}
CONSORTIA_PACKAGES = ("algorithms", "api", "chaincode", "executor", "ledger", "benchmarks")


def consortia(home: Path, *args: str, code: int = 0, timeout: float = 300) -> dict | list:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONSORTIA_HOME": str(home)}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == code, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    consortia.seconds.append((" ".join(args[:2]), time.perf_counter() - t0))
    return json.loads(proc.stdout.strip().splitlines()[-1])


consortia.seconds = []


def claims(n: int, seed: int, shift: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    amount = rng.lognormal(3.0 + shift, 1.0, n)
    hour = rng.integers(0, 24, n)
    distance = rng.exponential(10.0, n)
    prior = rng.poisson(1.0, n)
    risk = 0.02 * amount / np.exp(3 + shift) + 0.15 * (hour < 5) + 0.02 * distance + 0.3 * prior
    fraud = (risk + rng.normal(0, 0.2, n) > 1.0).astype(int)
    return pd.DataFrame(
        {
            "amount": amount.round(2),
            "hour": hour,
            "distance_km": distance.round(3),
            "prior_claims": prior,
            "is_fraud": fraud,
        }
    )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the sandbox runtime needs bubblewrap")
def test_the_journeys_through_the_cli_only(tmp_path):
    home = tmp_path / "consortium"
    # 1. a consortium of three organisations
    init = consortia(home, "init", "--orgs", ",".join(ORGS), "--home", str(home))
    assert init["default_organisation"] == "Org1MSP"
    # 2. the algorithm image: built, digest checked, registered (by Org1, the home's default)
    image = consortia(home, "image", "build", "collab-rf")
    assert image["owner"] == "Org1MSP" and image["digest"].startswith("sha256:")
    # 3. each organisation imports its own CSV under the same dataset name
    for i, org in enumerate(ORGS):
        claims(260, seed=i, shift=0.2 * i).to_csv(tmp_path / f"{org}.csv", index=False)
        imported = consortia(
            home,
            "data",
            "import",
            str(tmp_path / f"{org}.csv"),
            "--dataset",
            "claims",
            "--label",
            "is_fraud",
            "--image",
            image["id"],
            "--org",
            org,
        )
        assert imported["rows"] == 260 and imported["classes"] == [0, 1]
    # 4. the process, started right away; each organisation's node agent runs its tasks
    created = consortia(
        home,
        "process",
        "create",
        PID,
        "--image",
        image["id"],
        "--consortium",
        ",".join(ORGS),
        "--topology",
        "complete",
        "--seed",
        "7",
        "--rounds",
        "3",
        "--dataset",
        "claims",
        "--hyperparameters",
        json.dumps(HYPER),
        "--start",
    )
    assert created["status"] == "running" and created["image_digest"] == image["digest"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "node",
                "run",
                "--org",
                org,
                "--home",
                str(home),
                "--runtime",
                "sandbox",
                "--process",
                PID,
                "--timeout",
                "300",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for org in ORGS
    ]
    for a in agents:
        out, err = a.communicate(timeout=400)
        assert a.returncode == 0, err[-3000:]
    watched = consortia(home, "process", "watch", PID, "--timeout", "30")
    assert watched["status"] == "completed" and watched["completed_tasks"] == 9
    # 5. provenance and verification, from the ledger
    model_id = f"{PID}:Org2MSP"
    lineage = consortia(home, "provenance", "model", model_id, "--org", "Org2")
    assert lineage["root"] == f"{PID}/3/Org2MSP" and lineage["image_digest"] == image["digest"]
    assert consortia(home, "model", "verify", model_id, "--org", "Org2")["ok"] is True
    # 6. the model, exported and used without Consortia
    export = tmp_path / "export"
    meta = consortia(home, "model", "export", model_id, "--out", str(export), "--org", "Org2")
    assert meta["model_digest"] == consortia(home, "model", "get", model_id, "--org", "Org2")["digest"]
    assert (
        meta["lineage"]["root_execution"] == f"{PID}/3/Org2MSP"
        and meta["lineage"]["image_digest"] == image["digest"]
    )
    assert meta["features"] == ["amount", "hour", "distance_km", "prior_claims"]
    assert meta["versions"]["scikit-learn"] and meta["format"] == "joblib"
    rows = claims(120, seed=99, shift=0.1)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    script = textwrap.dedent(f"""
        import importlib.abc, json, sys
        class NoConsortia(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {CONSORTIA_PACKAGES!r}:
                    raise ImportError("Consortia must not be imported: " + name)
        sys.meta_path.insert(0, NoConsortia())
        import joblib, pandas
        meta = json.load(open("export/metadata.json"))
        model = joblib.load("export/" + meta["file"])
        X = pandas.read_csv("rows.csv")[meta["features"]].to_numpy(dtype=float)
        scores = model.predict(X)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {CONSORTIA_PACKAGES!r})
        print(json.dumps({{"scores": scores.tolist(), "consortia_modules": loaded,
                          "estimator": type(model).__module__ + "." + type(model).__name__}}))
    """)
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONSORTIA_HOME")}
    proc = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outside = json.loads(proc.stdout)
    assert (
        outside["consortia_modules"] == []
        and outside["estimator"] == "sklearn.ensemble._voting.VotingRegressor"
    )
    # the exported model predicts exactly what the platform's own model does
    from algorithms import codec
    from algorithms.collab_rf.estimators import ensemble_scores

    blob = tmp_path / "model.bin"
    consortia(home, "model", "get", model_id, "--out", str(blob), "--org", "Org2")
    platform_scores = ensemble_scores(
        codec.decode(blob.read_bytes())["estimators"], rows[meta["features"]].to_numpy(dtype=float)
    )
    np.testing.assert_allclose(outside["scores"], platform_scores, rtol=0, atol=1e-12)
    predicted = consortia(home, "model", "predict", str(export), "--csv", str(tmp_path / "rows.csv"))
    assert [r["positive"] for r in predicted["rows"]] == (platform_scores > 0.5).astype(int).tolist()
    assert predicted["model_digest"] == meta["model_digest"]
    print("step seconds:", json.dumps(consortia.seconds))
