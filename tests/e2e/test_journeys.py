"""The new user's journeys through the ``consortia`` command line only, on the embedded ledger and on
the real Fabric network (marked ``fabric``): init -> image build -> CSV import (each organisation its
own rows) -> process create --start -> node agents -> watch -> provenance and verification -> model
export -> prediction with the exported model (joblib and ONNX) loaded in a Python that cannot import
any Consortia package. Each step's wall time is printed (``-s``) for the closing note.

On Fabric the home is the running test network's (tests.support.fabric): its crypto, and
``[ledger] backend = "fabric"`` with the network's connection profile; every command then opens the
ledger from the home's configuration (``home.ledger.open_ledger``). The network persists across
sessions, so the process and image ids carry a random suffix there."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.ci import require_program

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
CONSORTIA_PACKAGES = (
    "wire",
    "algorithms",
    "api",
    "chaincode",
    "executor",
    "ledger",
    "network",
    "home",
    "benchmarks",
)
ONNX_ATOL = 1e-6  # the ONNX graph stores leaf values as float32 (api.model_onnx)


def consortia(home: Path, *args: str, code: int = 0, timeout: float = 300) -> dict | list:
    """One ``consortia ... --json`` command in its own process; its parsed JSON answer."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONSORTIA_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == code, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


class Stopwatch:
    """Wall seconds of each journey step, printed at the end of the test."""

    def __init__(self, backend: str):
        self.backend, self.seconds = backend, {}

    @contextlib.contextmanager
    def step(self, name: str):
        t0 = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def report(self) -> str:
        rows = [f"  {k:<42} {v:7.1f} s" for k, v in self.seconds.items()]
        total = sum(self.seconds.values())
        return "\n".join(
            [f"journey step seconds ({self.backend} ledger):", *rows, f"  {'total':<42} {total:7.1f} s"]
        )


def fabric_home(home: Path) -> tuple[str, ...]:
    """``consortia init`` of a home on the running Fabric test network: its identities and its
    connection profile (nothing generated, no ledger created)."""
    from tests.support.fabric import shared_fabric

    fab = shared_fabric()
    made = consortia(
        home,
        "init",
        "--home",
        str(home),
        "--crypto",
        str(fab.network.crypto),
        "--fabric-profile",
        str(fab.network.profile_file),
    )
    assert made["backend"] == "fabric" and made["ledger"] == str(Path(fab.network.profile_file).resolve())
    return tuple(o.name for o in fab.consortium.organisations)


@pytest.fixture(params=["embedded", pytest.param("fabric", marks=pytest.mark.fabric)])
def backend(request):
    if request.param == "fabric":
        from tests.support.fabric import shared_fabric

        shared_fabric()  # the network is up (or the test skips) before any step is timed
    return request.param


def agents(home: Path, orgs, pid: str) -> list[subprocess.Popen]:
    """Each organisation's node agent as its own OS process, following only ``pid``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "api.cli", "node", "run", "--home", str(home), "--runtime", "sandbox"]
    return [
        subprocess.Popen(
            [*cmd, "--org", org, "--process", pid, "--timeout", "300"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for org in orgs
    ]


def wait(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    """Each agent's exit code (0: its tasks all done, 1: not) and the tail of its log."""
    out = []
    for a in procs:
        _, err = a.communicate(timeout=400)
        out.append((a.returncode, err[-3000:]))
    return out


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


NO_CONSORTIA = f"""
import importlib.abc, json, sys
class NoConsortia(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {CONSORTIA_PACKAGES!r}:
            raise ImportError("Consortia must not be imported: " + name)
sys.meta_path.insert(0, NoConsortia())
"""

OUTSIDE = NO_CONSORTIA + textwrap.dedent("""
    import joblib, onnxruntime, pandas
    meta = json.load(open("export/metadata.json"))
    model = joblib.load("export/" + meta["file"])
    X = pandas.read_csv("rows.csv")[meta["features"]].to_numpy(dtype=float)
    scores = model.predict(X)
    session = onnxruntime.InferenceSession("export/model.onnx", providers=["CPUExecutionProvider"])
    onnx = session.run(None, {"X": X})[0][:, 0]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in CONSORTIA)
    print(json.dumps({"scores": scores.tolist(), "onnx": onnx.tolist(), "consortia_modules": loaded,
                      "estimator": type(model).__module__ + "." + type(model).__name__}))
""").replace("CONSORTIA", repr(CONSORTIA_PACKAGES))


def outside_consortia(cwd: Path) -> dict:
    """Load the export with joblib and onnxruntime in ``python -I`` (no PYTHONPATH, no Consortia)."""
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONSORTIA_HOME")}
    proc = subprocess.run(
        [sys.executable, "-I", "-c", OUTSIDE],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=clean_env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.timeout(1800)  # twelve steps; on a loaded shared machine more than the default 600 s
def test_the_journeys_through_the_cli_only(tmp_path, backend):
    require_program("bwrap", "the sandbox runtime")
    home = tmp_path / "consortium"
    clock = Stopwatch(backend)
    suffix = "" if backend == "embedded" else "-" + secrets.token_hex(3)  # the Fabric ledger persists
    pid = PID + suffix
    # 1. a consortium of three organisations (on Fabric: the home of the running network)
    with clock.step("1 init"):
        if backend == "embedded":
            init = consortia(home, "init", "--orgs", ",".join(ORGS), "--home", str(home))
            assert init["default_organisation"] == "Org1MSP"
            orgs = ORGS
        else:
            orgs = fabric_home(home)[:3]
    org1, org2 = orgs[0], orgs[1]
    owner = f"{org2}MSP"
    # 2. the algorithm image: built, digest checked, registered (by the home's default organisation)
    with clock.step("2 image build"):
        image = consortia(
            home, "image", "build", "collab-rf", *(["--id", f"collab-rf:j{suffix}"] if suffix else [])
        )
    assert image["owner"] == f"{org1}MSP" and image["digest"].startswith("sha256:")
    # 3. each organisation imports its own CSV under the same dataset name
    for i, org in enumerate(orgs):
        claims(260, seed=i, shift=0.2 * i).to_csv(tmp_path / f"{org}.csv", index=False)
        with clock.step("3 data import (3 organisations)"):
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
    with clock.step("4 process create --start"):
        created = consortia(
            home,
            "process",
            "create",
            pid,
            "--image",
            image["id"],
            "--consortium",
            ",".join(orgs),
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
    with clock.step("5 node agents (3 rounds) + watch"):
        ran = wait(agents(home, orgs, pid))
        assert all(code == 0 for code, _ in ran), ran
        watched = consortia(home, "process", "watch", pid, "--timeout", "30")
    assert watched["status"] == "completed" and watched["completed_tasks"] == 9
    # what collaboration bought each member: the process declared the default validation slice, and every
    # member's signed last-round result carries its figures (docs/models.md)
    got = consortia(home, "process", "get", pid)
    assert got["validation_fraction"] == 0.2
    assert sorted(g["organisation"] for g in got["gains"]) == sorted(f"{o}MSP" for o in orgs)
    assert all(g["gain"] == g["collaborative"] - g["isolated"] for g in got["gains"])
    # 5. provenance and verification, from the ledger
    model_id = f"{pid}:{owner}"
    with clock.step("6 provenance + verify"):
        lineage = consortia(home, "provenance", "model", model_id, "--org", org2)
        verified = consortia(home, "model", "verify", model_id, "--org", org2)
    assert lineage["root"] == f"{pid}/3/{owner}" and lineage["image_digest"] == image["digest"]
    assert verified["ok"] is True
    # 6. the model, exported and used without Consortia
    export = tmp_path / "export"
    with clock.step("7 model export (joblib + ONNX)"):
        meta = consortia(home, "model", "export", model_id, "--out", str(export), "--org", org2)
    assert meta["model_digest"] == consortia(home, "model", "get", model_id, "--org", org2)["digest"]
    assert (
        meta["lineage"]["root_execution"] == f"{pid}/3/{owner}"
        and meta["lineage"]["image_digest"] == image["digest"]
    )
    assert meta["features"] == ["amount", "hour", "distance_km", "prior_claims"]
    assert meta["versions"]["scikit-learn"] and meta["versions"]["skl2onnx"] and meta["format"] == "joblib"
    assert [f["format"] for f in meta["files"]] == ["joblib", "onnx"] and meta["files"][1]["check"]["ok"]
    rows = claims(120, seed=99, shift=0.1)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    with clock.step("8 predict outside Consortia (joblib + ONNX)"):
        outside = outside_consortia(tmp_path)
    assert (
        outside["consortia_modules"] == []
        and outside["estimator"] == "sklearn.ensemble._voting.VotingRegressor"
    )
    # the exported model predicts exactly what the platform's own model does; ONNX within float32
    from algorithms import codec
    from algorithms.collab_rf.estimators import ensemble_scores

    blob = tmp_path / "model.bin"
    consortia(home, "model", "get", model_id, "--out", str(blob), "--org", org2)
    platform_scores = ensemble_scores(
        codec.decode(blob.read_bytes())["estimators"], rows[meta["features"]].to_numpy(dtype=float)
    )
    np.testing.assert_allclose(outside["scores"], platform_scores, rtol=0, atol=1e-12)
    np.testing.assert_allclose(outside["onnx"], platform_scores, rtol=0, atol=ONNX_ATOL)
    assert (np.array(outside["onnx"]) > 0.5).tolist() == (platform_scores > 0.5).tolist()
    with clock.step("9 consortia model predict"):
        predicted = consortia(home, "model", "predict", str(export), "--csv", str(tmp_path / "rows.csv"))
    assert [r["positive"] for r in predicted["rows"]] == (platform_scores > 0.5).astype(int).tolist()
    assert predicted["model_digest"] == meta["model_digest"]
    # 7. an auditor (Org3, a member here) replays Org1's and Org2's tasks from their disclosures
    auditor = orgs[2]
    folder = tmp_path / "disclosures"
    folder.mkdir()
    for org in (org1, org2):
        with clock.step("10 audit disclose (2 organisations, 3 rounds each)"):
            disclosed = consortia(
                home, "audit", "disclose", pid, "--rounds", "all", "--to", auditor,
                "--out", str(folder / f"{org}.json"), "--org", org,
            )  # fmt: skip
        assert disclosed["rounds"] == [1, 2, 3] and disclosed["recipient"] == f"{auditor}MSP"
    for org in (org1, org2):
        with clock.step("11 audit replay (2 disclosures, 3 tasks each)"):
            replayed = consortia(home, "audit", "replay", str(folder / f"{org}.json"), "--org", auditor)
        assert replayed["ok"] and replayed["replayed_tasks"] == replayed["matched"] == 3, replayed
    with clock.step("12 audit replay-process"):
        whole = consortia(
            home, "audit", "replay-process", pid, "--disclosures", str(folder), "--org", auditor, code=1
        )
    # every disclosed record matched; the auditor's own tasks were not disclosed to it
    assert whole["records"] == whole["records_matched"] == 6
    assert whole["missing"] == [f"{pid}/{r}/{auditor}MSP" for r in (1, 2, 3)]
    print("\n" + clock.report())
