"""Tests for algorithms.collabdict.vae_model (eqs. 21–32, 39)."""

import numpy as np
import pytest
import torch

from algorithms.collabdict import vae_model as vm


@pytest.fixture
def nets():
    rng = np.random.default_rng(0)
    theta = vm.init_decoder(2, 8, 3, rng)
    phi = vm.init_encoder(3, 8, 2, rng)
    for k in theta:
        theta[k] = theta[k] + 0.1 * rng.standard_normal(theta[k].shape)
    for k in phi:
        phi[k] = phi[k] + 0.1 * rng.standard_normal(phi[k].shape)
    X = rng.standard_normal((6, 3))
    return theta, phi, X, rng


def test_elbo_equals_analytic_kl_plus_mc_likelihood(nets):
    theta, phi, X, rng = nets
    V = rng.standard_normal((5, 6, 2))
    value = vm.elbo(theta, phi, X, V)
    th = {k: torch.tensor(v) for k, v in theta.items()}
    ph = {k: torch.tensor(v) for k, v in phi.items()}
    Xt = torch.tensor(X)
    m, h = vm.encode(ph, Xt)
    q = torch.distributions.Normal(m, h)
    p = torch.distributions.Normal(torch.zeros_like(m), torch.ones_like(h))
    kl = torch.distributions.kl_divergence(q, p).sum()
    Z = h * torch.tensor(V) + m
    mu, sigma = vm.decode(th, Z)
    ll = torch.distributions.Normal(mu, sigma).log_prob(Xt).sum(-1).mean(0).sum()
    assert value == pytest.approx(float(-kl + ll), rel=1e-12)


def test_gradients_match_finite_differences(nets):
    theta, phi, X, rng = nets
    V = rng.standard_normal((2, 6, 2))
    for wrt, params in (("theta", theta), ("phi", phi)):
        _, g = vm.elbo_gradients(theta, phi, X, V, wrt)
        for key in list(params)[:3]:
            idx = (0,) * params[key].ndim
            bumped = {k: v.copy() for k, v in params.items()}
            bumped[key][idx] += 1e-6
            args = (bumped, phi) if wrt == "theta" else (theta, bumped)
            fd = (vm.elbo(*args, X, V) - vm.elbo(theta, phi, X, V)) / 1e-6
            assert g[key][idx] == pytest.approx(fd, rel=1e-4, abs=1e-6)


def test_score_is_deterministic_and_positive_for_far_points(nets):
    theta, phi, X, _ = nets
    a = vm.reconstruction_score(theta, phi, X, 16, np.random.default_rng(1))
    b = vm.reconstruction_score(theta, phi, X, 16, np.random.default_rng(1))
    assert np.array_equal(a, b)
    far = vm.reconstruction_score(theta, phi, X + 50, 16, np.random.default_rng(1))
    assert np.all(far > a)
    with pytest.raises(ValueError):
        vm.reconstruction_score(theta, phi, X, 0, np.random.default_rng(1))


def test_flatten_roundtrip_and_adam():
    p = {
        "V1": np.arange(6.0).reshape(2, 3),
        "c1": np.ones(2),
        "V2": np.zeros((1, 2)),
        "c2": np.zeros(1),
        "V3": np.zeros((1, 2)),
        "c3": np.zeros(1),
    }
    v = vm.flatten(p, vm.ENCODER_KEYS)
    back = vm.unflatten(v, p, vm.ENCODER_KEYS)
    assert all(np.array_equal(back[k], p[k]) for k in p)
    opt = vm.AdamAscent(0.1)
    x, st = opt.update(np.zeros(2), np.array([1.0, -2.0]), opt.initial_state(2))
    assert np.allclose(x, [0.1, -0.1])  # first Adam step moves by lr·sign(g)
    assert st["t"] == 1
    with pytest.raises(ValueError):
        vm.AdamAscent(0.0)
