"""The step function: ``simulate`` reproduces the direct matrix form (bit for bit under the pinned numeric
profile, to rounding on a machine's own kernels)."""

import math

import numpy as np
import pytest

from algorithms import numeric_profile
from algorithms.dpsda import DPSDA, DPSDAConfig, run_dpsda
from algorithms.dpsda.experiments import OnlineStream, synthetic_olr
from algorithms.dpsda.privacy import sensitivity_bound
from algorithms.simulator import simulate
from algorithms.step import Algorithm, LocalDataset
from algorithms.topologies.periodic import dpsda_digraphs, dpsda_graphs
from algorithms.topologies.static import ring

NAMES = ("Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP", "Org5MSP", "Org6MSP", "Org7MSP")


def _simulate(params, stream, topo, rounds, seed, batch=1):
    datasets = {
        o: LocalDataset(stream.features[: rounds * batch], stream.labels[: rounds * batch], name=o)
        for o in NAMES
    }
    decisions, estimates = [], []

    def collect(rnd, results):
        decisions.append(np.concatenate([np.asarray(results[o].model["decision_block"]) for o in NAMES]))
        estimates.append(np.stack([np.asarray(results[o].model["estimate"]) for o in NAMES]))

    res = simulate(DPSDA(**params), datasets, rounds, seed, topology=topo, consortium=NAMES, on_round=collect)
    return res, np.array(decisions), estimates


def _assert_same(actual, expected):
    """The step function and the matrix form are two implementations of the seed's recursion (Alg. 1/2):
    under the pinned numeric profile (the suite's default, ``algorithms.numeric_profile``) they agree
    bit for bit; under a machine's own kernels (``CONSORTIA_NUMERIC_PROFILE=host``, the CI's second
    setting) BLAS may sum their matrix products in another order, so they agree to rounding."""
    if numeric_profile.selected() is not None:
        assert np.array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "params, topo",
    [
        ({"variant": "C", "laplace_scale": 2.0}, dpsda_graphs()),
        ({"variant": "PS", "laplace_scale": 1.0}, dpsda_digraphs()),
        ({"variant": "C", "laplace_scale": 5.0, "lookahead": True, "grad_noise": "frozen"}, dpsda_graphs()),
        ({"variant": "PS", "laplace_scale": 0.0, "lookahead": True, "gradient_clip": 0.3}, dpsda_digraphs()),
        ({"variant": "C", "laplace_scale": 1.0, "weights": "metropolis"}, ring(7)),
        ({"variant": "PS", "laplace_scale": 1.0, "domain": "block_ball", "radius": 2.0}, dpsda_digraphs()),
    ],
)
def test_simulate_reproduces_the_matrix_form_exactly(params, topo):
    T, seed = 40, 11
    stream = synthetic_olr(4, horizon=T)
    res, decisions, estimates = _simulate(params, stream, topo, T, seed)
    tr = run_dpsda(DPSDAConfig(**params), stream.features, stream.labels, topo, T, seed, consortium=NAMES)
    _assert_same(decisions, tr.decisions)  # every round
    _assert_same(estimates[-1], tr.estimates)
    final = {o: res.state(o) for o in NAMES}
    _assert_same(np.stack([np.asarray(final[o]["z"]) for o in NAMES]), tr.duals)
    if params["variant"] == "PS":
        _assert_same([final[o]["w"] for o in NAMES], tr.push_sum_weights[-1])


def test_reproduction_with_batches_of_logistic_losses():
    rng = np.random.default_rng(0)
    T, B = 25, 4
    feats = rng.normal(size=(T * B, 14))
    labels = np.where(feats[:, 0] + 0.3 * rng.normal(size=T * B) > 0, 1.0, -1.0)
    params = {
        "variant": "PS",
        "dimension": 14,
        "lower": -1.0,
        "upper": 1.0,
        "laplace_scale": 0.5,
        "loss": "logistic",
        "batch_size": B,
    }
    _, decisions, _ = _simulate(params, OnlineStream(feats, labels), dpsda_digraphs(), T, 3, batch=B)
    tr = run_dpsda(DPSDAConfig(**params), feats, labels, dpsda_digraphs(), T, 3, consortium=NAMES)
    _assert_same(decisions, tr.decisions)


def test_epsilon_metrics_per_round():
    stream = synthetic_olr(0, horizon=12)
    res, _, _ = _simulate({"variant": "C", "laplace_scale": 2.0}, stream, dpsda_graphs(), 12, 0)
    for rnd, metrics in enumerate(res.metrics, start=1):
        for o in NAMES:
            expected = 0.5 if rnd < 12 else 0.0  # nothing is released in the last round
            assert metrics[o]["epsilon_spent"] == expected
            assert metrics[o]["epsilon_total"] == pytest.approx(0.5 * min(rnd, 11))
    assert res.metrics[0][NAMES[0]]["privacy_rigorous"] == 0.0  # unclipped: Δ = 1 is nominal
    assert res.metrics[0][NAMES[0]]["epsilon_network_spent"] == 7 * 0.5
    res0, _, _ = _simulate({"variant": "PS"}, stream, dpsda_digraphs(), 12, 0)
    for metrics in res0.metrics:  # σ = 0: no finite ε to report
        assert "epsilon_spent" not in metrics[NAMES[0]] and "epsilon_total" not in metrics[NAMES[0]]
        assert all(math.isfinite(v) for v in metrics[NAMES[0]].values())


def test_messages_follow_the_topology_and_carry_no_plain_dual():
    stream = synthetic_olr(0, horizon=6)
    res, _, _ = _simulate({"variant": "PS", "laplace_scale": 1.0}, stream, dpsda_digraphs(), 6, 0)
    g1 = dpsda_digraphs().adjacency(1)
    sent = {(NAMES.index(s), NAMES.index(r)) for s, r in res.message_digests[0]}
    assert sent == {tuple(map(int, e)) for e in np.argwhere(g1)}
    assert res.message_digests[-1] == {}


def test_algorithm_protocol_and_params_roundtrip():
    algo = DPSDA(variant="PS", laplace_scale=2.0)
    assert isinstance(algo, Algorithm) and algo.name == "dpsda-ps"
    assert DPSDA(**algo.params()).config == algo.config


def test_wrong_consortium_or_short_stream_is_rejected():
    stream = synthetic_olr(0, horizon=10)
    with pytest.raises(ValueError, match="configured for 7 nodes"):
        simulate(
            DPSDA(),
            {o: LocalDataset(stream.features, stream.labels) for o in NAMES[:5]},
            10,
            0,
            topology=ring(5),
        )
    with pytest.raises(ValueError, match="rows"):
        simulate(
            DPSDA(),
            {o: LocalDataset(stream.features, stream.labels) for o in NAMES},
            11,
            0,
            topology=dpsda_graphs(),
        )


def test_clipped_run_charges_the_proven_sensitivity_per_node_and_network():
    stream = synthetic_olr(0, horizon=6)
    res, _, _ = _simulate(
        {"variant": "C", "laplace_scale": 4.0, "gradient_clip": 0.25}, stream, dpsda_graphs(), 6, 0
    )
    delta = sensitivity_bound(7, 0.25, 3)
    eps0 = delta / 4.0
    for rnd, metrics in enumerate(res.metrics, start=1):
        m = metrics[NAMES[3]]
        spent = eps0 if rnd < 6 else 0.0
        assert m["privacy_rigorous"] == 1.0 and m["sensitivity"] == delta and m["gradient_clip"] == 0.25
        assert m["epsilon_spent"] == spent and m["epsilon_network_spent"] == 7 * spent
        assert m["rho_spent"] == pytest.approx(spent**2 / 2) and m["rho_network_spent"] == pytest.approx(
            7 * spent**2 / 2
        )
        assert m["epsilon_total"] == pytest.approx(eps0 * min(rnd, 5))
