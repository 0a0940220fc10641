"""Experiment set-ups and centralised baselines (ALGORITHMS.md §4.6)."""

import numpy as np
import pytest

from algorithms.dpsda.experiments import (accuracy, centralised_dual_averaging, centralised_projected_sgd,
                                          classification_stream, synthetic_olr)
from algorithms.dpsda.losses import LogisticLoss, SquaredLoss
from algorithms.dpsda.projection import BoxProjection


def test_synthetic_olr_follows_the_code_setup():
    s = synthetic_olr(3)
    assert s.features.shape == (500, 21) and s.labels.shape == (500,)
    assert s.features.min() >= -0.5 and s.features.max() <= 0.5
    resid = s.labels - s.features @ s.truth
    assert resid.std() == pytest.approx(0.04, rel=0.15)
    assert np.array_equal(synthetic_olr(3).features, s.features)
    assert not np.array_equal(synthetic_olr(4).features, s.features)


def test_classification_stream_is_a_seeded_permutation():
    x = np.arange(10.0)[:, None]
    y = np.where(np.arange(10) % 2 == 0, 1.0, -1.0)
    s = classification_stream(x, y, horizon=3, batch_size=4, seed=0)
    assert s.features.shape == (12, 1)
    assert sorted(s.features[:10, 0]) == list(range(10))            # first pass is a permutation
    np.testing.assert_array_equal(y[s.features[:, 0].astype(int)], s.labels)


def test_centralised_baselines_learn_a_separable_problem():
    rng = np.random.default_rng(0)
    w = rng.normal(size=10)
    x = rng.normal(size=(4000, 10))
    y = np.where(x @ w > 0, 1.0, -1.0)
    s = classification_stream(x, y, 400, 10, seed=1)
    box = BoxProjection(-3.0, 3.0)
    for method in (centralised_projected_sgd, centralised_dual_averaging):
        xs = method(LogisticLoss(), s, 400, 10, box)
        assert np.all(np.abs(xs) <= 3.0)
        assert accuracy(xs[-1], x, y) > 0.95
        assert accuracy(xs[0], x, y) == accuracy(np.zeros(10), x, y)


def test_psgd_on_olr_approaches_the_truth():
    s = synthetic_olr(0, horizon=500)
    xs = centralised_projected_sgd(SquaredLoss(), s, 500, 1, BoxProjection(-5.0, 5.0))
    assert np.linalg.norm(xs[-1] - s.truth) < np.linalg.norm(s.truth)
