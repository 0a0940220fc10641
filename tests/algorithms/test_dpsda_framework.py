"""Configuration, blocks, step size and the node kernels of the DPSDA framework."""

import math

import numpy as np
import pytest

from algorithms.dpsda.framework import (
    DPSDAConfig,
    gradient_data_index,
    gradient_noise,
    initial_decision,
    perturb,
    primal,
    scaled_block_gradient,
    step_size,
    stream_batch,
)
from algorithms.step import TaskContext

NAMES = tuple(f"node{i + 1}" for i in range(7))


def ctx(i=0, rnd=1, seed=0):
    return TaskContext(process_seed=seed, round=rnd, rounds=10, organisation=NAMES[i], consortium=NAMES)


def test_blocks_partition_the_coordinates():
    cfg = DPSDAConfig()
    assert cfg.block_size == 3
    covered = np.concatenate([np.arange(21)[cfg.block(i)] for i in range(7)])
    assert np.array_equal(covered, np.arange(21))
    with pytest.raises(ValueError):
        cfg.block(7)


def test_step_size_is_one_over_sqrt_t():
    assert step_size(1) == 1.0 and step_size(4) == 0.5 and step_size(100) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        step_size(0)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"variant": "X"}, "variant"),
        ({"dimension": 20}, "equal blocks"),
        ({"laplace_scale": -1.0}, "laplace_scale"),
        ({"lower": 2.0, "upper": 1.0}, "exceeds"),
        ({"grad_noise": "sometimes"}, "grad_noise"),
        ({"gradient_clip": 0.0}, "gradient_clip"),
        ({"loss": "hinge"}, "unknown loss"),
        ({"batch_size": 0}, "batch_size"),
        ({"variant": "PS", "weights": "metropolis"}, "Metropolis"),
        ({"sensitivity": 0.0}, "sensitivity"),
        ({"domain": "sphere"}, "domain"),
        ({"domain": "block_ball"}, "radius"),
        ({"radius": 1.0}, "block_ball"),
        ({"domain": "block_ball", "radius": -1.0}, "radius"),
    ],
)
def test_config_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        DPSDAConfig(**bad)


def test_lookahead_shifts_the_gradient_data_by_one():
    assert gradient_data_index(DPSDAConfig(), 5) == 5
    assert gradient_data_index(DPSDAConfig(lookahead=True), 5) == 6


def test_stream_batch_and_bounds():
    cfg = DPSDAConfig(batch_size=2)
    a, b = np.arange(42.0).reshape(2, 21).repeat(3, axis=0), np.arange(6.0)
    fa, fb = stream_batch(cfg, a, b, 2)
    assert np.array_equal(fb, [2.0, 3.0])
    with pytest.raises(ValueError, match="rows"):
        stream_batch(cfg, a, b, 4)


def test_initial_decision_is_shared_and_uniform():
    cfg = DPSDAConfig()
    x = initial_decision(cfg, ctx(0))
    assert np.array_equal(x, initial_decision(cfg, ctx(5, rnd=3)))
    assert np.all((0 <= x) & (x < 1))
    assert np.array_equal(initial_decision(DPSDAConfig(initial_decision="zero"), ctx()), np.zeros(21))


def test_gradient_noise_modes():
    fresh = DPSDAConfig(grad_noise="fresh")
    assert not np.array_equal(gradient_noise(fresh, ctx(0, 1)), gradient_noise(fresh, ctx(0, 2)))
    assert not np.array_equal(gradient_noise(fresh, ctx(0, 1)), gradient_noise(fresh, ctx(1, 1)))
    frozen = DPSDAConfig(grad_noise="frozen", laplace_scale=1.0)
    z = gradient_noise(frozen, ctx(0, 1))
    assert np.array_equal(z, gradient_noise(frozen, ctx(4, 9)))  # once per run, all nodes
    assert 0 < np.abs(z).max() < 0.1
    assert np.array_equal(gradient_noise(DPSDAConfig(grad_noise="frozen"), ctx()), np.zeros(3))  # σ = 0: none
    assert np.array_equal(gradient_noise(DPSDAConfig(grad_noise="none"), ctx()), np.zeros(3))


def test_scaled_block_gradient_is_n_times_the_block_and_clipped():
    cfg = DPSDAConfig(grad_noise="none")
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(1, 21)), np.array([0.3])
    x = rng.normal(size=21)
    full = (a[0] @ x - b[0]) * a[0]
    g = scaled_block_gradient(cfg, x, a, b, 1, ctx(2))
    np.testing.assert_allclose(g, 7 * full[6:9], rtol=1e-14)
    clipped = DPSDAConfig(grad_noise="none", gradient_clip=1e-3)
    gc = scaled_block_gradient(clipped, x, a, b, 1, ctx(2))
    assert np.linalg.norm(gc) == pytest.approx(7e-3)
    np.testing.assert_allclose(gc / np.linalg.norm(gc), g / np.linalg.norm(g))


def test_perturb_and_primal():
    cfg = DPSDAConfig(laplace_scale=2.0)
    z = np.ones(21)
    h = perturb(cfg, z, ctx(3))
    assert not np.array_equal(h, z)
    assert np.array_equal(h, perturb(cfg, z, ctx(3)))  # deterministic given the context
    assert np.array_equal(perturb(DPSDAConfig(), z, ctx(3)), z)  # σ = 0
    y = primal(DPSDAConfig(variant="PS"), np.full(21, -8.0), 2.0, 4)  # clip(−½·(−8)/2) = 2
    assert np.allclose(y, 2.0)
    assert np.allclose(primal(cfg, np.full(21, -100.0), 1.0, 1), 5.0)
    assert math.isclose(float(primal(cfg, np.full(21, 1.0), 1.0, 4)[0]), -0.5)


def test_block_ball_domain_projects_each_node_block():
    cfg = DPSDAConfig(domain="block_ball", radius=1.5)
    y = primal(cfg, np.full(21, -10.0), 1.0, 1)
    norms = np.linalg.norm(y.reshape(7, 3), axis=1)
    np.testing.assert_allclose(norms, 1.5)
    assert cfg.projection.contains(y, 1e-12)
