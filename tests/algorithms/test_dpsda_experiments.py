"""Experiment set-ups and centralised baselines (seed 002 §6; docs/dpsda.md)."""

import numpy as np
import pytest

from algorithms.dpsda.experiments import (
    accuracy,
    centralised_dual_averaging,
    centralised_projected_sgd,
    classification_stream,
    private_feature_mean,
    synthetic_olr,
)
from algorithms.dpsda.losses import LogisticLoss, SquaredLoss
from algorithms.dpsda.projection import BoxProjection
from tests.ci import skip_or_fail


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
    assert sorted(s.features[:10, 0]) == list(range(10))  # first pass is a permutation
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


# -- OBC: accuracy versus ε (does not rise as σ grows) -------------------------------------------------


def _gaussian_task(seed, m=112, n=6000, separation=5.0):
    """Nearly separable two-class Gaussian data (Bayes accuracy Φ(2.5) ≈ 0.994), m = n·d with d = 16."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(m)
    u /= np.linalg.norm(u)
    y = rng.choice([-1.0, 1.0], n)
    x = rng.standard_normal((n, m)) + (separation / 2) * y[:, None] * u
    return x[:4000], y[:4000], x[4000:], y[4000:]


def test_obc_accuracy_decreases_with_the_noise_and_matches_centralised_sgd():
    from algorithms.dpsda import DPSDAConfig, run_dpsda
    from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs

    T, B, sigmas = 300, 10, (0.0, 1.0, 2.0, 5.0)
    box = BoxProjection(-1.0, 1.0)
    acc: dict = {}
    for seed in range(10):
        xtr, ytr, xte, yte = _gaussian_task(seed)
        stream = classification_stream(xtr, ytr, T, B, seed)
        acc.setdefault("psgd", []).append(
            accuracy(centralised_projected_sgd(LogisticLoss(), stream, T, B, box)[-1], xte, yte)
        )
        for variant, topo in (("C", dpsda_graphs()), ("PS", dpsda_digraphs())):
            for sigma in sigmas:
                cfg = DPSDAConfig(
                    variant=variant,
                    dimension=112,
                    lower=-1.0,
                    upper=1.0,
                    laplace_scale=sigma,
                    loss="logistic",
                    batch_size=B,
                )
                x = run_dpsda(cfg, stream.features, stream.labels, topo, T, seed=seed).decisions[-1]
                acc.setdefault((variant, sigma), []).append((accuracy(x, xtr, ytr), accuracy(x, xte, yte)))
    psgd = np.mean(acc["psgd"])
    assert psgd > 0.98
    for variant in ("C", "PS"):
        train = [np.mean([a[0] for a in acc[(variant, s)]]) for s in sigmas]
        test = [np.mean([a[1] for a in acc[(variant, s)]]) for s in sigmas]
        assert all(a >= b for a, b in zip(train, train[1:])), (variant, train)
        assert all(a >= b for a, b in zip(test, test[1:])), (variant, test)
        assert test[0] >= psgd - 0.02, (variant, test[0], psgd)
        assert test[-1] < test[0] - 0.05  # the noise really costs accuracy


def test_dpsda_on_real_mnist_zero_versus_one():
    from algorithms.datasets import mnist
    from algorithms.dpsda import DPSDAConfig, run_dpsda
    from algorithms.topologies.periodic import dpsda_digraphs

    try:
        task = mnist.binary_task(0, 1)
    except mnist.DatasetUnavailable as exc:
        skip_or_fail(f"MNIST unavailable: {exc}")
    mean = task.train_features.mean(axis=0)
    xtr, xte = task.train_features - mean, task.test_features - mean
    stream = classification_stream(xtr, task.train_labels, 150, 10, seed=0)
    box = BoxProjection(-1.0, 1.0)
    psgd = accuracy(
        centralised_projected_sgd(LogisticLoss(), stream, 150, 10, box)[-1], xte, task.test_labels
    )
    cfg = DPSDAConfig(variant="PS", dimension=784, lower=-1.0, upper=1.0, loss="logistic", batch_size=10)
    x = run_dpsda(cfg, stream.features, stream.labels, dpsda_digraphs(), 150, seed=0).decisions[-1]
    acc = accuracy(x, xte, task.test_labels)
    assert acc > 0.98 and acc >= psgd - 0.02


def test_private_feature_mean_has_the_gaussian_mechanism_noise():
    """Sum clipped to [0, 1]^m plus N(0, (√m/μ)² I) (ℓ2 sensitivity √m of the sum), divided by N."""
    rng = np.random.default_rng(0)
    features = rng.random((400, 16))
    features[0] = 7.0  # clipped to 1: one row moves the sum by at most √m
    exact = np.clip(features, 0.0, 1.0).mean(axis=0)
    draws = np.array([private_feature_mean(features, 0.5, np.random.default_rng(s)) for s in range(300)])
    errors = (draws - exact) * 400  # the noise on the sum
    assert abs(errors.mean()) < 0.2 * (4 / 0.5)
    assert errors.std() == pytest.approx(np.sqrt(16) / 0.5, rel=0.05)
    with pytest.raises(ValueError):
        private_feature_mean(features, 0.0, rng)
    with pytest.raises(ValueError):
        private_feature_mean(features[:0], 1.0, rng)
