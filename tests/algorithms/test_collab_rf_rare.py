"""Rare positives on real data (NASA PC1, 6.9 % positives): the paper's 0.5 cut keeps recall low
even where collaboration raises ROC AUC; the per-organisation validation threshold (with class
weighting) recovers balanced accuracy and recall."""

import numpy as np
import pytest

from algorithms.datasets.cache import DatasetUnavailable
from algorithms.datasets.pc1 import parse_arff
from tests.ci import skip_or_fail


def test_parse_arff_reads_numeric_rows_and_the_boolean_class():
    text = (
        "% comment\n@relation r\n@attribute a numeric\n@attribute b numeric\n@attribute defects {false,true}\n"
        "@data\n1.5,2,false\n\n3,4e-1,true\n"
    )
    X, y = parse_arff(text)
    assert np.array_equal(X, [[1.5, 2.0], [3.0, 0.4]]) and list(y) == [0, 1]
    with pytest.raises(DatasetUnavailable, match="class"):
        parse_arff("@data\n1,maybe\n")


@pytest.fixture(scope="module")
def pc1():
    from algorithms.datasets.pc1 import load_pc1

    try:
        return load_pc1()
    except DatasetUnavailable as exc:  # no registry access: cannot test real data
        skip_or_fail(str(exc))


def test_validation_threshold_recovers_recall_on_pc1(pc1):
    from benchmarks.collab_rf_rare import organisations, run, scores_of

    X, y = pc1
    assert X.shape == (1109, 21) and int(y.sum()) == 77
    orgs, Xte, yte = organisations(X, y, 5, seed=0)
    res = {}
    for name, opts in {
        "paper": {},
        "both": {"positive_weight": "balanced", "decision_threshold": "validation"},
    }.items():
        models = run(orgs, "full", opts, seed=0)
        res[name] = [scores_of(m, Xte, yte) for m in models.values()]
    mean = {
        n: {m: float(np.mean([r[m] for r in rs])) for m in ("auc", "bacc", "rec")} for n, rs in res.items()
    }
    assert all(r["threshold"] == 0.5 for r in res["paper"])
    assert mean["paper"]["rec"] < 0.35  # the 0.5 cut misses most defects ...
    assert mean["paper"]["auc"] > 0.75  # ... although the scores rank them well
    assert mean["both"]["rec"] > mean["paper"]["rec"] + 0.2
    assert mean["both"]["bacc"] > mean["paper"]["bacc"] + 0.05
