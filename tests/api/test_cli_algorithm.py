"""Your own algorithm, from a directory outside the repository (issue 29 items 2 and 5):
``consortia algorithm new`` for both templates, then its own test, ``consortia algorithm check`` and
``consortia simulate`` on local CSV/Parquet files, each a separate ``consortia`` process as a user runs
them; ``new`` refuses a bad name or an existing folder (exit 2, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from api.cli import app

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ORGS = ("Org1MSP", "Org2MSP", "Org3MSP")


def consortia(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def write_data(folder: Path) -> None:
    folder.mkdir()
    for i, org in enumerate(ORGS):
        rng = np.random.default_rng(i)
        X = rng.normal(size=(60, 3))
        frame = pd.DataFrame(X, columns=["amount", "age", "score"])
        frame["label"] = (X @ np.array([1.5, -2.0, 1.0]) + 0.2 > 0).astype(int)
        if i < 2:
            frame.to_csv(folder / f"{org}.csv", index=False)
        else:
            frame.to_parquet(folder / f"{org}.parquet", index=False)


@pytest.mark.parametrize("template", ["sklearn", "torch"])
def test_new_then_its_own_test_check_and_simulate_outside_the_repository(tmp_path, template):
    work = tmp_path / "work"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    made = consortia("algorithm", "new", f"my-{template}", "--template", template, "-o", "json", cwd=work)
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    folder = work / f"my-{template}"
    module = f"my_{template}"
    assert (
        info["folder"] == str(folder.resolve()) and info["algorithm"] == f"{module}:My{template.capitalize()}"
    )
    meta = json.loads((folder / "image.json").read_text())
    assert meta["sdk"] == info["sdk"] and meta["base"] == ("torch" if template == "torch" else "python")
    assert set(meta["parameters"]) and meta["input"]["label"] is True
    assert {p.name for p in folder.iterdir()} == {
        "image.json",
        f"{module}.py",
        "requirements.txt",
        "README.md",
        "tests",
    }
    assert all(line.startswith("#") for line in (folder / "requirements.txt").read_text().splitlines())

    own = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=folder,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert own.returncode == 0 and "3 passed" in own.stdout, own.stdout + own.stderr

    checked = consortia("algorithm", "check", str(folder), "--rounds", "2", "-o", "json", cwd=work)
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["ok"], report
    assert {c["check"] for c in report["checks"]} >= {
        "identical runs",
        "no clock",
        "seeded randomness",
        "no network",
    }

    write_data(work / "data")
    args = ["simulate", str(folder), "--data", "data", "--topology", "ring", "--rounds", "3", "--seed", "5"]
    ran = consortia(*args, "-o", "json", cwd=work)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert (
        out["consortium"] == list(ORGS)
        and out["rounds"] == 3
        and out["topology"] == {"kind": "ring", "seed": 5}
    )
    assert out["numeric_profile"]["name"] == "x86-64-v2"
    assert all(out["metrics"][o]["train_accuracy"] > 0.8 for o in ORGS), out["metrics"]
    assert set(out["models"]) == set(ORGS) and all(d.startswith("sha256:") for d in out["models"].values())
    if template == "sklearn":  # the same run in another process, as a table: the same digests
        table = consortia(*args, cwd=work)
        assert table.returncode == 0 and all(d in table.stdout for d in out["models"].values())
        assert "train_accuracy" in table.stdout and "round 3 of 3 organisations" in table.stdout


def test_new_refuses_a_bad_name_an_unknown_template_and_an_existing_folder(tmp_path):
    runner = CliRunner()
    for args, message in (
        (["algorithm", "new", "My Model", "--template", "sklearn"], "must be lower-case"),
        (["algorithm", "new", "numpy", "--template", "sklearn"], "hides the installed module"),
        (["algorithm", "new", "fine", "--template", "keras"], "unknown template 'keras'"),
    ):
        r = runner.invoke(app, [*args, "--dir", str(tmp_path)])
        assert r.exit_code == 2 and message in r.stderr, (args, r.stderr)
    assert list(tmp_path.iterdir()) == []
    assert (
        runner.invoke(
            app, ["algorithm", "new", "fine", "--template", "sklearn", "--dir", str(tmp_path)]
        ).exit_code
        == 0
    )
    again = runner.invoke(app, ["algorithm", "new", "fine", "--template", "torch", "--dir", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    assert "consortia_sdk" in (tmp_path / "fine" / "fine.py").read_text()  # the first one, kept


def test_check_and_simulate_refuse_what_is_not_a_folder_or_bad_input(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["algorithm", "check", str(tmp_path), "-o", "json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["ok"] is False
    runner.invoke(app, ["algorithm", "new", "lr", "--template", "sklearn", "--dir", str(tmp_path)])
    r = runner.invoke(
        app,
        [
            "simulate",
            str(tmp_path / "lr"),
            "--data",
            str(tmp_path / "nodata"),
            "--topology",
            "ring",
            "--rounds",
            "1",
        ],
    )
    assert r.exit_code == 2 and "no .csv or .parquet file" in r.stderr
