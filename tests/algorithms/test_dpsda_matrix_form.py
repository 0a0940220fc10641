"""DPSDA-C / DPSDA-PS in matrix form: push-sum invariants, circulation, sublinear regret, privacy–utility
ordering and the sensitivity bound (seed 002: push-sum and circulation invariants, sublinear regret,
privacy–utility ordering; docs/dpsda.md)."""

import numpy as np
import pytest

from algorithms.dpsda.experiments import synthetic_olr
from algorithms.dpsda.framework import DPSDAConfig, scaled_block_gradient
from algorithms.dpsda.matrix_form import default_consortium, run_dpsda
from algorithms.dpsda.privacy import sensitivity_bound
from algorithms.dpsda.regret import least_squares_comparator, loglog_slope, olr_regret
from algorithms.dpsda.weights import circulation_weights, metropolis_weights, mix, push_sum_weights
from algorithms.step import TaskContext
from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs
from algorithms.topologies.static import ring

SIGMAS = (0.0, 1.0, 2.0, 5.0)
SEEDS = range(1, 7)
GRID = (50, 100, 200, 300, 400, 500)


def test_push_sum_invariants_without_gradients():
    """σ = 0, no gradients: Σ_i w_i = n, Σ_i z_i conserved, z_i/w_i → average of z_i(0)."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(7, 5))
    total, avg = z.sum(axis=0), z.mean(axis=0)
    w = np.ones(7)
    topo = dpsda_digraphs()
    for k in range(1, 401):
        W = push_sum_weights(topo.adjacency(k))
        w, z = mix(W, w), mix(W, z)
        assert w.sum() == pytest.approx(7.0, abs=1e-12)
        np.testing.assert_allclose(z.sum(axis=0), total, atol=1e-12)
    np.testing.assert_allclose(z / w[:, None], np.tile(avg, (7, 1)), atol=1e-9)
    assert np.all(w > 0)


def test_circulation_with_symmetric_weights_conserves_the_mean():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(7, 4))
    mean = z.mean(axis=0)
    for k in range(1, 200):
        z = mix(metropolis_weights(dpsda_graphs().adjacency(k)), z)
        np.testing.assert_allclose(z.mean(axis=0), mean, atol=1e-13)
    np.testing.assert_allclose(z, np.tile(mean, (7, 1)), atol=1e-8)


def test_uniform_circulation_conserves_the_pi_weighted_sum_on_a_fixed_graph():
    """Detailed balance π_i a_ij = π_j a_ji with π_i ∝ deg_i + 1 (DPSDA-C's uniform weights 1/(deg_i + 1)); the plain mean is not conserved."""
    a = dpsda_graphs().adjacency(1)
    W = circulation_weights(a)
    pi = (a.sum(axis=1) + 1) / (a.sum() + 7)
    np.testing.assert_allclose(pi[:, None] * W, (pi[:, None] * W).T, atol=1e-15)
    z = np.random.default_rng(2).normal(size=(7, 3))
    z1 = mix(W, z)
    np.testing.assert_allclose(pi @ z1, pi @ z, atol=1e-13)
    assert not np.allclose(z1.mean(axis=0), z.mean(axis=0))


def test_dpsda_c_mean_evolves_as_dpcda():
    """Symmetric weights, σ > 0, gradients: z̄(t+1) = z̄(t) + η̄(t) + Σ_i E_i ĝ_i(t) (the circulation property of DPSDA-C)."""
    stream = synthetic_olr(3, horizon=40)
    cfg = DPSDAConfig(variant="C", weights="metropolis", laplace_scale=1.0, grad_noise="none")
    tr = run_dpsda(cfg, stream.features, stream.labels, ring(7), 40, seed=4, record=True)
    names = default_consortium(7)
    prev_y = np.zeros((7, 21))
    for k in range(1, 40):
        g = np.zeros(21)
        for i in range(7):
            c = TaskContext(process_seed=4, round=k, rounds=40, organisation=names[i], consortium=names)
            g[cfg.block(i)] = scaled_block_gradient(cfg, prev_y[i], stream.features, stream.labels, k, c) / 7
        h_bar = tr.messages[k - 1].mean(axis=0)  # z̄(t) + η̄(t)
        np.testing.assert_allclose(tr.dual_history[k - 1].mean(axis=0), h_bar + g, atol=1e-10)
        prev_y = tr.estimate_history[k - 1]


def test_push_sum_weights_in_a_run_sum_to_n():
    stream = synthetic_olr(0, horizon=60)
    tr = run_dpsda(
        DPSDAConfig(variant="PS", laplace_scale=1.0),
        stream.features,
        stream.labels,
        dpsda_digraphs(),
        60,
        seed=0,
    )
    np.testing.assert_allclose(tr.push_sum_weights.sum(axis=1), 7.0, atol=1e-12)
    assert not np.allclose(tr.push_sum_weights, 1.0)  # the weights do move


@pytest.fixture(scope="module")
def regret_runs():
    """R(T) for T = 1..500, correct protocol, both variants, σ ∈ {0,1,2,5}, seeds 1..6."""
    out = {}
    for seed in SEEDS:
        stream = synthetic_olr(seed)
        comp = least_squares_comparator(stream.features, stream.labels, 500)
        for variant, topo in (("C", dpsda_graphs()), ("PS", dpsda_digraphs())):
            for sigma in SIGMAS:
                tr = run_dpsda(
                    DPSDAConfig(variant=variant, laplace_scale=sigma),
                    stream.features,
                    stream.labels,
                    topo,
                    500,
                    seed=seed,
                )
                out[(variant, sigma, seed)] = olr_regret(tr.decisions, stream.features, stream.labels, comp)[
                    0
                ]
    return out


def test_sublinear_regret(regret_runs):
    strictly_decreasing = 0
    for key, r in regret_runs.items():
        assert r[499] / 500 < r[99] / 100, key
        avg = [r[t - 1] / t for t in GRID]
        strictly_decreasing += all(x > y for x, y in zip(avg, avg[1:]))
        assert loglog_slope(r) < 0.85, (key, loglog_slope(r))
    assert strictly_decreasing >= 0.9 * len(regret_runs)


def test_regret_increases_with_the_noise_scale(regret_runs):
    for variant in ("C", "PS"):
        means = [np.mean([regret_runs[(variant, s, seed)][499] / 500 for seed in SEEDS]) for s in SIGMAS]
        assert all(a < b for a, b in zip(means, means[1:])), (variant, means)
        per_seed = sum(
            all(
                regret_runs[(variant, a, seed)][499] < regret_runs[(variant, b, seed)][499]
                for a, b in zip(SIGMAS, SIGMAS[1:])
            )
            for seed in SEEDS
        )
        assert per_seed >= len(SEEDS) - 1


@pytest.mark.parametrize("variant, topo", [("C", dpsda_graphs()), ("PS", dpsda_digraphs())])
def test_per_step_sensitivity_on_adjacent_sequences(variant, topo):
    """F ~ F′ differ in f_{t0}; same noise seed; the released messages first differ at step t0+1 and by at
    most Δ = 2 n L̂ √d in ℓ1 per node (the sensitivity bound)."""
    stream = synthetic_olr(5, horizon=30)
    a2, b2 = stream.features.copy(), stream.labels.copy()
    t0 = 12
    a2[t0 - 1] = 0.5 - np.random.default_rng(99).random(21)
    b2[t0 - 1] = -3.0
    clip = 0.5
    cfg = DPSDAConfig(variant=variant, laplace_scale=2.0, gradient_clip=clip, grad_noise="fresh")
    tr = run_dpsda(cfg, stream.features, stream.labels, topo, 30, seed=8, record=True)
    tr2 = run_dpsda(cfg, a2, b2, topo, 30, seed=8, record=True)
    delta = sensitivity_bound(7, clip, 3)
    for k in range(1, t0 + 1):  # messages H(1..t0) are identical
        np.testing.assert_array_equal(tr.messages[k - 1], tr2.messages[k - 1])
    gap = np.abs(tr.messages[t0] - tr2.messages[t0]).sum(axis=1)  # H(t0+1): first differing release
    assert np.all(gap <= delta + 1e-12)
    assert gap.max() > 0.05 * delta  # the check is not vacuous


def test_epsilon_accounting_in_a_run():
    stream = synthetic_olr(0, horizon=20)
    tr = run_dpsda(DPSDAConfig(laplace_scale=5.0), stream.features, stream.labels, dpsda_graphs(), 20, seed=0)
    assert np.allclose(tr.epsilon_per_round[:19], 0.2) and tr.epsilon_per_round[19] == 0.0
    assert tr.epsilon_total == pytest.approx(19 * 0.2)


def test_lookahead_and_noise_modes_change_the_run_and_seeds_reproduce():
    stream = synthetic_olr(2, horizon=50)
    base = DPSDAConfig(laplace_scale=1.0)
    runs = {}
    for name, cfg in {
        "base": base,
        "look": DPSDAConfig(laplace_scale=1.0, lookahead=True),
        "frozen": DPSDAConfig(laplace_scale=1.0, grad_noise="frozen"),
    }.items():
        runs[name] = run_dpsda(cfg, stream.features, stream.labels, dpsda_graphs(), 50, seed=1).decisions
    again = run_dpsda(base, stream.features, stream.labels, dpsda_graphs(), 50, seed=1).decisions
    other = run_dpsda(base, stream.features, stream.labels, dpsda_graphs(), 50, seed=2).decisions
    assert np.array_equal(runs["base"], again)
    assert not np.array_equal(runs["base"], other)
    assert not np.array_equal(runs["base"], runs["look"])
    assert not np.array_equal(runs["base"], runs["frozen"])
    assert np.all(np.abs(runs["base"]) <= 5.0)


def test_validation():
    stream = synthetic_olr(0, horizon=10)
    with pytest.raises(ValueError, match="rows"):
        run_dpsda(DPSDAConfig(), stream.features, stream.labels, dpsda_graphs(), 11, seed=0)
    with pytest.raises(ValueError, match="nodes"):
        run_dpsda(DPSDAConfig(), stream.features, stream.labels, ring(5), 10, seed=0)
    with pytest.raises(ValueError, match="undirected"):
        run_dpsda(DPSDAConfig(variant="C"), stream.features, stream.labels, dpsda_digraphs(), 10, seed=0)
    with pytest.raises(ValueError, match="shape"):
        run_dpsda(DPSDAConfig(), stream.features[:, :20], stream.labels, dpsda_graphs(), 10, seed=0)


def test_played_decisions_stay_in_a_product_domain():
    stream = synthetic_olr(6, horizon=80)
    cfg = DPSDAConfig(variant="PS", laplace_scale=2.0, domain="block_ball", radius=1.0)
    tr = run_dpsda(cfg, stream.features, stream.labels, dpsda_digraphs(), 80, seed=6)
    norms = np.linalg.norm(tr.decisions[1:].reshape(79, 7, 3), axis=2)
    assert np.all(norms <= 1.0 + 1e-12) and norms.max() > 0.99  # feasible, and the constraint binds
