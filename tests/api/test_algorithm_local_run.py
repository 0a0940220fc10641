"""``consortia simulate``'s reading of local files and topology text (api.algorithm_kit.local_run): files
are read as ``consortia data import`` reads them (the arrays a task reads), one organisation per file
stem in name order; ``algorithm check --data`` runs on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from api.algorithm_kit.contract import check_folder
from api.algorithm_kit.local_run import LocalRunError, read_organisations, topology_record
from api.algorithm_kit.scaffold import new_folder
from executor.images.declarations import ImageDeclaration


def test_topology_text_is_a_process_topology_record():
    assert topology_record("ring", 4) == {"kind": "ring", "seed": 4}
    assert topology_record("random_link, links=2", 1) == {"kind": "random_link", "seed": 1, "links": 2}
    assert topology_record("erdos_renyi,p=0.5", 0)["p"] == 0.5
    with pytest.raises(LocalRunError, match="is not k=v"):
        topology_record("ring,links", 0)


def test_files_are_read_as_data_import_reads_them_and_a_check_runs_on_them(tmp_path):
    folder = new_folder("local-lr", "sklearn", tmp_path).folder
    decl = ImageDeclaration.from_folder(folder)
    data = tmp_path / "data"
    data.mkdir()
    for i, org in enumerate(("Org2MSP", "Org1MSP", "Org3MSP")):
        X = np.random.default_rng(i).normal(size=(40, 3))
        frame = pd.DataFrame(X, columns=["a", "b", "c"])
        frame["y"] = (X[:, 0] > 0).astype(int)
        frame.to_csv(data / f"{org}.csv", index=False)
    rows = read_organisations(data, "y", decl)
    assert list(rows) == ["Org1MSP", "Org2MSP", "Org3MSP"]
    one = rows["Org1MSP"]
    assert one.features.dtype == np.float64 and one.features.shape == (40, 3)
    assert one.labels.dtype == np.int64 and one.name == "default"
    with pytest.raises(LocalRunError, match="no label column 'label'"):  # the image declares a label
        read_organisations(data, "label", decl)
    report = check_folder(folder, data=rows, rounds=2)
    assert report.ok, [c for c in report.checks if not c.ok]
    pd.DataFrame({"a": [1.0], "y": [7]}).to_parquet(data / "Org1MSP.parquet")
    with pytest.raises(LocalRunError, match="two files for one organisation"):
        read_organisations(data, "y", decl)


def test_a_label_free_declaration_reads_files_without_labels(tmp_path):
    folder = new_folder("local-free", "sklearn", tmp_path).folder
    decl = ImageDeclaration("m:M", folder, "free", "numeric", False)
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(data / "Org1MSP.csv", index=False)
    rows = read_organisations(data, "label", decl)
    assert rows["Org1MSP"].labels is None and rows["Org1MSP"].features.shape == (2, 2)
