import time

import numpy as np
import pytest

from algorithms.datasets import creditcard as cc


def test_almost_equal_cuts_follow_the_legacy_stream():
    rs = np.random.RandomState(0)
    cuts = cc.almost_equal_cuts(1000, 4, 0.5, rs)
    base = np.linspace(0, 1000, 5).astype(np.int32)
    moves = np.random.RandomState(0).randint(-125, 125, size=3)
    assert cuts[0] == 0 and cuts[-1] == 1000
    assert np.array_equal(cuts[1:-1], base[1:-1] + moves)


def test_split_of_synthetic_rows_partitions_each_class_and_merges_tests():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.arange(5000.0), rng.normal(size=(5000, 29))])
    y = (rng.random(5000) < 0.05).astype(np.int8)
    s = cc.split_nodes(X, y, n_agents=4, offset=0.0)
    assert len(s.nodes) == 4
    rows = np.concatenate([np.concatenate([n.X_train, n.X_test]) for n in s.nodes])
    assert len(rows) == 5000 and rows.shape[1] == 29           # Time dropped; offset 0: a partition
    assert int(sum(n.y_train.sum() + n.y_test.sum() for n in s.nodes)) == int(y.sum())
    assert len(s.y_test) == sum(len(n.y_test) for n in s.nodes)
    with pytest.raises(ValueError, match="offset"):
        cc.split_nodes(X, y, offset=1.5)


@pytest.fixture(scope="module")
def real():
    try:
        return cc.load_creditcard()
    except cc.DatasetUnavailable as exc:       # no registry access: cannot test real data
        pytest.skip(str(exc))


def test_real_data_loads_fast_from_cache(real):
    X, y = real
    assert X.shape == (284_807, 30) and int(y.sum()) == 492
    t0 = time.perf_counter()
    X2, y2 = cc.load_creditcard()
    assert time.perf_counter() - t0 < 1.0
    assert np.array_equal(X2, X)


def test_real_split_reproduces_paper_table1_exactly(real):
    s = cc.split_nodes(*real)
    assert [(a, b) for _, a, b in s.table1()] == list(cc.PAPER_TABLE1_TRAIN)
    assert (len(s.y_test), int(s.y_test.sum())) == cc.PAPER_TEST
    assert s.table1()[2][2] == 0                                  # Node02 has no frauds
    total = sum(a for _, a, _ in s.table1()) + len(s.y_test)
    assert total == 284_810                                       # overlapping cuts: 3 duplicated rows
