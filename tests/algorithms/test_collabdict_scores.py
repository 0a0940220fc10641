"""Tests for algorithms.collabdict.scores (seed 000 eqs. 18–20: the score identity and outlier AUC)."""

import numpy as np
from sklearn.metrics import roc_auc_score

from algorithms.collabdict.ggm import GGMHyperParameters, fit_centralised
from algorithms.collabdict.mixture import MixtureParameters, responsibilities
from algorithms.collabdict.scores import ggm_anomaly_score, mixture_log_density
from tests.algorithms.conftest import make_mixture


def test_score_identity_and_upper_bound():
    rng = np.random.default_rng(0)
    K, M = 3, 2
    p = MixtureParameters(
        rng.normal(0, 2, (K, M)), np.stack([np.eye(M) * (k + 1) for k in range(K)]), np.ones(K, bool)
    )
    pi = np.array([0.2, 0.5, 0.3])
    X = rng.normal(0, 3, (200, M))
    a = ggm_anomaly_score(X, pi, p)
    logp = mixture_log_density(X, pi, p)
    r, _ = responsibilities(X, pi, p)
    kl = np.sum(r * (np.log(r) - np.log(pi)), axis=1)
    assert np.allclose(a, -logp - kl, atol=1e-9)
    assert np.all(a <= -logp + 1e-9)


def test_single_component_score_is_negative_log_density():
    p = MixtureParameters(np.zeros((1, 2)), np.eye(2)[None], np.ones(1, bool))
    X = np.random.default_rng(1).standard_normal((10, 2))
    assert np.allclose(
        ggm_anomaly_score(X, np.ones(1), p), -mixture_log_density(X, np.ones(1), p), atol=1e-12
    )


def test_score_detects_shifted_outliers():
    Xs = make_mixture(S=3, M=3, K=2, seed=2, base=150)
    fit = fit_centralised(Xs, 15, seed=0, hyper=GGMHyperParameters(n_components=2, tau=0.0))
    rng = np.random.default_rng(5)
    normal = Xs[0][:100]
    outliers = normal[:20] + 6.0 * rng.choice([-1, 1], size=(20, 3))
    X = np.concatenate([normal, outliers])
    y = np.r_[np.zeros(100), np.ones(20)]
    a = ggm_anomaly_score(X, fit.pis[-1][0], fit.params[-1])
    assert roc_auc_score(y, a) > 0.95
