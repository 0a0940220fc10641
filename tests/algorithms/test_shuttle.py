"""Tests for algorithms.datasets.shuttle (the real ODDS shuttle from the river wheel; docs/datasets.md)."""

import numpy as np
import pytest

from algorithms.datasets import shuttle as sh


@pytest.fixture(scope="module")
def data():
    return sh.load_shuttle()


def test_shuttle_has_the_odds_shape_and_anomaly_count(data):
    X, y = data
    assert X.shape == (49_097, 9) and X.dtype == np.float64
    assert int(y.sum()) == 3_511 and set(np.unique(y)) == {0, 1}
    assert np.isfinite(X).all()


def test_uneven_split_is_disjoint_stratified_and_uneven(data):
    _, y = data
    splits = sh.uneven_split(y, 5, seed=0, skew=2.0)
    all_rows = np.concatenate([np.r_[s.train, s.test] for s in splits])
    assert len(all_rows) == len(np.unique(all_rows)) == len(y)
    sizes = [len(s.train) + len(s.test) for s in splits]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 8 * sizes[-1]
    for s in splits:
        for part in (s.train, s.test):
            rate = y[part].mean()
            assert 0.05 < rate < 0.1
    again = sh.uneven_split(y, 5, seed=0, skew=2.0)
    assert all(np.array_equal(a.train, b.train) for a, b in zip(splits, again))


def test_uneven_split_subsample_and_validation(data):
    _, y = data
    splits = sh.uneven_split(y, 4, seed=1, max_rows=4000)
    total = sum(len(s.train) + len(s.test) for s in splits)
    assert 3900 <= total <= 4100
    with pytest.raises(ValueError):
        sh.uneven_split(y, 3, seed=0, test_fraction=1.5)
    with pytest.raises(ValueError):
        sh.uneven_proportions(3, 0.5)


def test_signed_log_is_odd_and_monotone():
    x = np.array([-1000.0, -1.0, 0.0, 1.0, 1000.0])
    t = sh.signed_log(x)
    assert np.allclose(t, -t[::-1]) and np.all(np.diff(t) > 0) and t[2] == 0
