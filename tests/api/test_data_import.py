"""``consortia data import``: a CSV/Parquet file becomes an organisation's dataset, checked against
what the image declares, reported by row and column, all or nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from algorithms.task_runtime import load_dataset
from api.cli import app
from executor.data_import import DataImportError, import_dataset
from executor.images.declarations import declaration

RF = "algorithms.collab_rf.algorithm:CollaborativeRandomForest"
runner = CliRunner()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "home"
    assert runner.invoke(app, ["init", "--orgs", "Org1,Org2", "--home", str(root)]).exit_code == 0
    r = runner.invoke(
        app,
        [
            "image",
            "register",
            "rf",
            "1",
            "--digest",
            "sha256:" + "ef" * 32,
            "--algorithm",
            RF,
            "--home",
            str(root),
        ],
    )
    assert r.exit_code == 0
    return root


def _frame(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "amount": rng.normal(size=n).round(4),
            "hour": rng.integers(0, 24, n),
            "is_fraud": rng.integers(0, 2, n),
        }
    )


def test_csv_and_parquet_import_through_the_cli(home, tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "claims.csv", index=False)
    r = runner.invoke(
        app,
        [
            "data",
            "import",
            str(tmp_path / "claims.csv"),
            "--dataset",
            "claims",
            "--label",
            "is_fraud",
            "--image",
            "rf:1",
            "--org",
            "Org2",
            "--home",
            str(home),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["organisation"] == "Org2MSP" and out["rows"] == 30 and out["features"] == ["amount", "hour"]
    folder = home / "data" / "Org2MSP" / "claims"
    data = load_dataset(folder / "dataset.npz")
    np.testing.assert_allclose(data.features, df[["amount", "hour"]].to_numpy(dtype=float))
    assert data.labels.dtype == np.int64 and data.labels.tolist() == df["is_fraud"].tolist()
    schema = json.loads((folder / "schema.json").read_text())
    assert (
        schema["features"] == ["amount", "hour"]
        and schema["label"] == "is_fraud"
        and schema["classes"] == [0, 1]
    )
    df.to_parquet(tmp_path / "claims.parquet")
    r = runner.invoke(
        app,
        [
            "data",
            "import",
            str(tmp_path / "claims.parquet"),
            "--dataset",
            "claims-pq",
            "--label",
            "is_fraud",
            "--home",
            str(home),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    assert np.array_equal(
        load_dataset(home / "data" / "Org1MSP" / "claims-pq" / "dataset.npz").features, data.features
    )
    listed = json.loads(
        runner.invoke(app, ["data", "list", "--org", "Org2", "--home", str(home), "--json"]).stdout
    )
    assert [d["dataset"] for d in listed] == ["claims"]
    # the same name again is refused unless --replace
    r = runner.invoke(
        app,
        [
            "data",
            "import",
            str(tmp_path / "claims.csv"),
            "--dataset",
            "claims",
            "--label",
            "is_fraud",
            "--org",
            "Org2",
            "--home",
            str(home),
        ],
    )
    assert r.exit_code == 2 and "--replace" in r.stderr


def test_bad_rows_are_named_and_nothing_is_written(home, tmp_path):
    (tmp_path / "bad.csv").write_text("amount,hour,is_fraud\n1.5,3,0\nabc,4,1\n2.0,,0\n3.0,5,2\n1e999,1,1\n")
    r = runner.invoke(
        app,
        [
            "data",
            "import",
            str(tmp_path / "bad.csv"),
            "--dataset",
            "bad",
            "--label",
            "is_fraud",
            "--image",
            "rf:1",
            "--home",
            str(home),
        ],
    )
    assert r.exit_code == 2 and r.stdout == ""
    err = r.stderr
    assert "row 2: feature 'amount' is 'abc', not a finite number" in err
    assert "row 3: feature 'hour' is empty" in err
    assert "row 4: label 'is_fraud' is '2', outside the classes [0, 1]" in err
    assert "row 5: feature 'amount' is '1e999'" in err and "nothing was written" in err
    assert not (home / "data" / "Org1MSP" / "bad").exists()
    assert not [p for p in (home / "data" / "Org1MSP").iterdir() if p.name.startswith(".")]  # no temp left
    for args, needle, code in [
        (["--label", "nope"], "no label column 'nope'", 2),
        ([], "needs a label column", 2),
    ]:
        _frame().to_csv(tmp_path / "ok.csv", index=False)
        r = runner.invoke(
            app,
            [
                "data",
                "import",
                str(tmp_path / "ok.csv"),
                "--dataset",
                "x",
                "--image",
                "rf:1",
                *args,
                "--home",
                str(home),
            ],
        )
        assert r.exit_code == code and needle in r.stderr
    r = runner.invoke(
        app, ["data", "import", str(tmp_path / "missing.csv"), "--dataset", "x", "--home", str(home)]
    )
    assert r.exit_code == 3 and "no such file" in r.stderr
    (tmp_path / "t.txt").write_text("a,b\n1,2\n")
    r = runner.invoke(app, ["data", "import", str(tmp_path / "t.txt"), "--dataset", "x", "--home", str(home)])
    assert r.exit_code == 2 and "not a CSV or Parquet" in r.stderr


def test_a_failed_replace_keeps_the_old_dataset(tmp_path):
    _frame().to_csv(tmp_path / "a.csv", index=False)
    first = import_dataset(tmp_path / "data", "d", tmp_path / "a.csv", "is_fraud", declaration(RF))
    before = (first.path / "dataset.npz").read_bytes()
    (tmp_path / "b.csv").write_text("amount,hour,is_fraud\n1,2,7\n")
    with pytest.raises(DataImportError, match="outside the classes"):
        import_dataset(tmp_path / "data", "d", tmp_path / "b.csv", "is_fraud", declaration(RF), replace=True)
    assert (first.path / "dataset.npz").read_bytes() == before
    _frame(seed=1).to_csv(tmp_path / "c.csv", index=False)
    again = import_dataset(
        tmp_path / "data", "d", tmp_path / "c.csv", "is_fraud", declaration(RF), replace=True
    )
    assert (again.path / "dataset.npz").read_bytes() != before
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["d"]
