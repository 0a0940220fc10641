"""The Gaussian mode of DPSDA (docs/dpsda.md "The Gaussian mode"): per-example clipping, Gaussian noise where
the data enters, example-level sensitivity on adjacent inputs, Poisson sampling from a secret key, the step
function equal to the matrix form bit for bit, and the privacy metrics of every round."""

import math

import numpy as np
import pytest

from algorithms.dpsda import DPSDA, DPSDAConfig, run_dpsda
from algorithms.dpsda.experiments import accuracy
from algorithms.dpsda.framework import SAMPLING_KEY, poisson_mask
from algorithms.dpsda.privacy import GaussianComposition, noise_multiplier_for
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs

NAMES = ("Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP", "Org5MSP", "Org6MSP", "Org7MSP")
KEY = np.array([11, 22, 33, 44], dtype=np.uint32)
N_NODES, DIM = 7, 14


def _logistic_rows(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, DIM))
    labels = np.where(features[:, 0] + features[:, 7] + 0.3 * rng.normal(size=rows) > 0, 1.0, -1.0)
    return features, labels


def _regression_rows(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares rows with targets ±50: in the box [−1, 1] every residual a^T x − b has the sign of −b and
    |·| ≥ 50 − ‖a‖₁, so every example's block gradient is far above L̂ and clipped to norm L̂ exactly."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, DIM))
    assert np.abs(features).sum(axis=1).max() < 40
    return features, np.where(rng.random(rows) < 0.5, 50.0, -50.0)


def _config(**overrides) -> DPSDAConfig:
    params = {
        "variant": "C",
        "dimension": DIM,
        "lower": -1.0,
        "upper": 1.0,
        "loss": "logistic",
        "mechanism": "gaussian",
        "gradient_clip": 0.5,
        "noise_multiplier": 1.0,
        "batch_size": 4,
    }
    params.update(overrides)
    return DPSDAConfig(**params)


def _block_gaps(h: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """‖Δ of node i's block in its own release‖₂ / n for every node (the n·ĝ_i scaling removed)."""
    d = DIM // N_NODES
    return (
        np.array(
            [np.linalg.norm(h[i, i * d : (i + 1) * d] - h2[i, i * d : (i + 1) * d]) for i in range(N_NODES)]
        )
        / N_NODES
    )


@pytest.mark.parametrize("variant, topo", [("C", dpsda_graphs()), ("PS", dpsda_digraphs())])
def test_stream_sensitivity_on_adjacent_rows(variant, topo):
    """F ~ F′: one row of f_{t0} replaced (the paper's adjacency at example level). Same noise seed: the releases
    H(1..t0) are identical, and H(t0+1), the first to differ, differs only in each node's own block, by
    ≤ 2L̂/b per block and ≤ Δ₂ = √n·2L̂/b over the network (eq. (G2)). Every example's block gradient is
    clipped and the replaced row (−a, same target) points the other way: the bound is nearly attained, and a
    wrong Δ₂ (no factor 2, no √n, batch-level clipping) would fail."""
    T, b, t0, clip = 20, 4, 9, 0.5
    features, labels = _regression_rows(T * b, 3)
    f2, l2 = features.copy(), labels.copy()
    row = (t0 - 1) * b + 2
    f2[row] = -features[row]
    cfg = _config(variant=variant, gradient_clip=clip, batch_size=b, loss="squared")
    tr = run_dpsda(cfg, features, labels, topo, T, seed=5, record=True)
    tr2 = run_dpsda(cfg, f2, l2, topo, T, seed=5, record=True)
    for k in range(t0):
        np.testing.assert_array_equal(tr.messages[k], tr2.messages[k])
    h, h2 = tr.messages[t0], tr2.messages[t0]
    d = DIM // N_NODES
    for i in range(N_NODES):  # only the own block moves: the rest of h_i is a function of released messages
        outside = np.ones(DIM, dtype=bool)
        outside[i * d : (i + 1) * d] = False
        np.testing.assert_array_equal(h[i, outside], h2[i, outside])
    gaps = _block_gaps(h, h2)
    delta2 = cfg.gaussian_sensitivity
    assert delta2 == pytest.approx(math.sqrt(N_NODES) * 2 * clip / b)
    assert np.all(gaps <= 2 * clip / b * (1 + 1e-12))
    assert np.linalg.norm(gaps) <= delta2 * (1 + 1e-12)
    assert np.linalg.norm(gaps) >= 0.95 * delta2  # not vacuous


def test_poisson_sensitivity_on_a_removed_example():
    """D′ = D without its last example (add/remove adjacency). Row k's inclusion does not depend on the rows after
    it, so D′'s samples are D's minus that example; the releases agree until the first step that samples it,
    and then differ by ≤ Δ₂ = √n·L̂/b (the removed example's clipped block gradients, of norm L̂ each)."""
    N, T, q, clip, b = 40, 25, 0.2, 0.5, 8
    features, labels = _regression_rows(N, 4)
    for t in range(1, T):
        np.testing.assert_array_equal(poisson_mask(KEY, t, N - 1, q), poisson_mask(KEY, t, N, q)[:-1])
    first = next(t for t in range(1, T) if poisson_mask(KEY, t, N, q)[-1])
    assert first < T - 2
    cfg = _config(
        variant="PS", gradient_clip=clip, batch_size=b, sampling="poisson", sampling_rate=q, loss="squared"
    )
    tr = run_dpsda(cfg, features, labels, dpsda_digraphs(), T, seed=2, record=True, sampling_key=KEY)
    tr2 = run_dpsda(
        cfg, features[:-1], labels[:-1], dpsda_digraphs(), T, seed=2, record=True, sampling_key=KEY
    )
    for k in range(first):
        np.testing.assert_array_equal(tr.messages[k], tr2.messages[k])
    gaps = _block_gaps(tr.messages[first], tr2.messages[first])
    delta2 = cfg.gaussian_sensitivity
    assert delta2 == pytest.approx(math.sqrt(N_NODES) * clip / b)
    assert np.linalg.norm(gaps) <= delta2 * (1 + 1e-12)
    assert np.linalg.norm(gaps) >= 0.99 * delta2


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_estimates_are_post_processing_of_the_releases(mechanism):
    """In the Gaussian mode a node's dual — hence its estimate, its played block and every later gradient
    point — is exactly what it releases next: h_i(k+1) = z_i(k+1). In the paper's Laplace form it is not
    (h = z + η), which is why every later Laplace release counts again."""
    T = 12
    features, labels = _logistic_rows(T * 4, 6)
    if mechanism == "gaussian":
        cfg = _config()
    else:
        cfg = DPSDAConfig(
            dimension=DIM, lower=-1.0, upper=1.0, loss="logistic", batch_size=4, laplace_scale=1.0
        )
    tr = run_dpsda(cfg, features, labels, dpsda_graphs(), T, seed=1, record=True)
    same = [np.array_equal(tr.dual_history[k], tr.messages[k + 1]) for k in range(T - 2)]
    assert all(same) if mechanism == "gaussian" else not any(same)


def test_gaussian_noise_has_the_calibrated_std():
    """With zero features (gradient 0) and no gradient noise, what a node adds is n·ξ, ξ ~ N(0, s² I_d),
    s = z·Δ₂."""
    T, b = 60, 5
    cfg = _config(noise_multiplier=3.0, gradient_clip=2.0, batch_size=b, grad_noise="none")
    features = np.zeros((T * b, DIM))
    labels = np.ones(T * b)
    tr = run_dpsda(cfg, features, labels, dpsda_graphs(), T, seed=0, record=True)
    s = cfg.gaussian_noise_std
    assert s == pytest.approx(3.0 * math.sqrt(7) * 2 * 2.0 / b)
    from algorithms.dpsda.matrix_form import weight_matrix
    from algorithms.dpsda.weights import mix

    d = DIM // N_NODES
    draws = []
    for k in range(1, T - 1):
        added = tr.dual_history[k] - mix(weight_matrix(cfg, dpsda_graphs().adjacency(k + 1)), tr.messages[k])
        draws += [added[i, i * d : (i + 1) * d] / N_NODES for i in range(N_NODES)]
    draws = np.concatenate(draws)
    assert abs(draws.mean()) < 0.1 * s
    assert draws.std() == pytest.approx(s, rel=0.08)


def _simulate(cfg_params: dict, features, labels, topo, rounds, seed, key=None):
    extras = {} if key is None else {SAMPLING_KEY: key}
    datasets = {o: LocalDataset(features, labels, name=o, extras=extras) for o in NAMES}
    decisions = []

    def collect(rnd, results):
        decisions.append(np.concatenate([np.asarray(results[o].model["decision_block"]) for o in NAMES]))

    res = simulate(
        DPSDA(**cfg_params), datasets, rounds, seed, topology=topo, consortium=NAMES, on_round=collect
    )
    return res, np.array(decisions)


@pytest.mark.parametrize(
    "params, topo, rows, key",
    [
        ({"variant": "C"}, dpsda_graphs(), 30 * 4, None),
        ({"variant": "PS", "lookahead": True, "grad_noise": "frozen"}, dpsda_digraphs(), 31 * 4, None),
        ({"variant": "PS", "sampling": "poisson", "sampling_rate": 0.1}, dpsda_digraphs(), 90, KEY),
        (
            {"variant": "C", "sampling": "poisson", "sampling_rate": 0.3, "noise_multiplier": 0.0},
            dpsda_graphs(),
            50,
            KEY,
        ),
    ],
)
def test_simulate_reproduces_the_matrix_form_exactly(params, topo, rows, key):
    T, seed = 30, 7
    features, labels = _logistic_rows(rows, 8)
    full = {
        "dimension": DIM,
        "lower": -1.0,
        "upper": 1.0,
        "loss": "logistic",
        "mechanism": "gaussian",
        "gradient_clip": 0.5,
        "noise_multiplier": 1.2,
        "batch_size": 4,
        **params,
    }
    res, decisions = _simulate(full, features, labels, topo, T, seed, key)
    tr = run_dpsda(DPSDAConfig(**full), features, labels, topo, T, seed, consortium=NAMES, sampling_key=key)
    assert np.array_equal(decisions, tr.decisions)
    assert np.array_equal(np.stack([np.asarray(res.state(o)["z"]) for o in NAMES]), tr.duals)


@pytest.mark.parametrize("sampling", ["stream", "poisson"])
def test_metrics_of_every_round(sampling):
    T = 10
    extra = {"sampling": "poisson", "sampling_rate": 0.25} if sampling == "poisson" else {}
    params = {
        "dimension": DIM,
        "lower": -1.0,
        "upper": 1.0,
        "loss": "logistic",
        "mechanism": "gaussian",
        "gradient_clip": 0.5,
        "noise_multiplier": 0.8,
        "batch_size": 4,
        **extra,
    }
    cfg = DPSDAConfig(**params)
    features, labels = _logistic_rows(T * 4, 9)
    res, _ = _simulate(params, features, labels, dpsda_graphs(), T, 0, KEY if sampling == "poisson" else None)
    for rnd, metrics in enumerate(res.metrics, start=1):
        m = metrics[NAMES[2]]
        released = rnd < T
        assert m["privacy_rigorous"] == 1.0 and m["gradient_clip"] == 0.5
        assert m["noise_multiplier"] == 0.8 and m["sensitivity"] == cfg.gaussian_sensitivity
        assert m["noise_std"] == pytest.approx(0.8 * cfg.gaussian_sensitivity)
        assert m["sampling_rate"] == (0.25 if sampling == "poisson" else 1.0)
        assert m["parallel_composition"] == (1.0 if sampling == "stream" else 0.0)
        assert m["rho_spent"] == m["rho_network_spent"] == (1 / (2 * 0.8**2) if released else 0.0)
        expected = cfg.gaussian_composition(min(rnd, T - 1)).epsilon(1e-5)
        assert m["epsilon_network_total"] == m["epsilon_total"] == expected and m["privacy_delta"] == 1e-5
        for name in ("epsilon_spent", "epsilon_network_spent", "estimate_loss", "laplace_scale"):
            assert name not in m
    totals = [metrics[NAMES[2]]["epsilon_network_total"] for metrics in res.metrics]
    if sampling == "stream":  # every row enters one step: the run costs one step's release
        assert len(set(totals)) == 1 and totals[0] == GaussianComposition(0.8, 1).epsilon(1e-5)
    else:  # the steps compose: strictly growing until the last release
        assert all(a < b for a, b in zip(totals[: T - 1], totals[1 : T - 1])) and totals[-1] == totals[-2]
    res0, _ = _simulate(
        {**params, "noise_multiplier": 0.0},
        features,
        labels,
        dpsda_graphs(),
        4,
        0,
        KEY if sampling == "poisson" else None,
    )
    assert "rho_spent" not in res0.metrics[0][NAMES[0]] and "epsilon_total" not in res0.metrics[0][NAMES[0]]


def test_a_private_run_learns_at_a_rigorous_single_digit_epsilon():
    """Poisson sampling, z calibrated to a rigorous network ε = 2 at δ = 1e-5: the model still separates
    a linearly separable task (and the calibration is what the run reports)."""
    N, T, q = 3000, 120, 0.05
    features, labels = _logistic_rows(N, 10)
    z = noise_multiplier_for(2.0, 1e-5, T - 1, q)
    cfg = _config(
        variant="PS",
        sampling="poisson",
        sampling_rate=q,
        batch_size=int(q * N),
        noise_multiplier=z,
        gradient_clip=1.0,
    )
    tr = run_dpsda(cfg, features, labels, dpsda_digraphs(), T, seed=3, sampling_key=KEY)
    assert tr.gaussian is not None and tr.gaussian.epsilon(1e-5) <= 2.0
    test_x, test_y = _logistic_rows(2000, 11)
    assert accuracy(tr.decisions[-1], test_x, test_y) > 0.85
    assert np.all(np.isnan(tr.epsilon_per_round))


def test_configuration_is_validated():
    with pytest.raises(ValueError, match="needs gradient_clip"):
        DPSDAConfig(mechanism="gaussian", noise_multiplier=1.0)
    with pytest.raises(ValueError, match="belong to the Laplace"):
        DPSDAConfig(mechanism="gaussian", gradient_clip=1.0, laplace_scale=1.0)
    with pytest.raises(ValueError, match="Gaussian mode"):
        DPSDAConfig(noise_multiplier=1.0)
    with pytest.raises(ValueError, match="Gaussian mode"):
        DPSDAConfig(sampling="poisson", sampling_rate=0.1)
    with pytest.raises(ValueError, match="sampling_rate"):
        DPSDAConfig(mechanism="gaussian", gradient_clip=1.0, sampling="poisson")
    with pytest.raises(ValueError, match="Poisson sampling only"):
        DPSDAConfig(mechanism="gaussian", gradient_clip=1.0, sampling_rate=0.1)
    with pytest.raises(ValueError, match="mechanism"):
        DPSDAConfig(mechanism="exponential")
    with pytest.raises(ValueError, match="privacy_delta"):
        DPSDAConfig(mechanism="gaussian", gradient_clip=1.0, privacy_delta=0.0)
    features, labels = _logistic_rows(50, 0)
    cfg = _config(sampling="poisson", sampling_rate=0.1)
    with pytest.raises(ValueError, match="secret sampling key"):
        run_dpsda(cfg, features, labels, dpsda_graphs(), 5, seed=0)
    with pytest.raises(ValueError, match="secret sampling key"):
        _simulate(cfg.params(), features, labels, dpsda_graphs(), 5, 0)
    with pytest.raises(ValueError, match="integer words"):
        run_dpsda(cfg, features, labels, dpsda_graphs(), 5, seed=0, sampling_key=np.array([1, 2]))
