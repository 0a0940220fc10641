"""The showcase algorithm's contract: determinism, FedAvg on the complete graph, the RDP accountant,
per-example clipping (seconds, tiny synthetic data)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the folder, as the image imports it

from dfedavg import (  # noqa: E402
    RDP_ORDERS,
    DecentralisedFedAvg,
    dp_sgd_epsilon,
    rdp_to_epsilon,
    sampled_gaussian_rdp,
)

from consortia_sdk import LocalDataset, decode, simulate  # noqa: E402

ORGS = ["Org1MSP", "Org2MSP", "Org3MSP"]
TINY = {"hidden": 8, "batch_size": 8}


def tiny_data(n: int = 40, seed: int = 0) -> dict[str, LocalDataset]:
    rng = np.random.default_rng(seed)
    out = {}
    for i, org in enumerate(ORGS):
        x = rng.random((n, 16), dtype=np.float32)
        y = (x[:, 0] + 0.1 * i > 0.5).astype(np.int64) + 2 * (x[:, 1] > 0.5)
        out[org] = LocalDataset(x, y, name=org)
    return out


def test_two_simulations_give_identical_bytes():
    for params in (TINY, {**TINY, "optimizer": "adam"}, {**TINY, "dp": True, "sampling_rate": 0.2}):
        runs = [
            simulate(DecentralisedFedAvg(**params), tiny_data(), 3, 5, {"kind": "ring", "seed": 5}, ORGS)
            for _ in range(2)
        ]
        assert runs[0].models == runs[1].models and runs[0].states == runs[1].states
        assert runs[0].message_digests == runs[1].message_digests
    other = simulate(DecentralisedFedAvg(**TINY), tiny_data(), 3, 6, {"kind": "ring", "seed": 5}, ORGS)
    assert other.models != runs[0].models  # the seed matters


def test_parameters_rebuild_the_object():
    algo = DecentralisedFedAvg(**TINY, optimizer="adam", dp=True)
    assert DecentralisedFedAvg(**algo.params()) == algo
    with pytest.raises(ValueError, match="optimizer"):
        DecentralisedFedAvg(optimizer="lbfgs")


def test_complete_graph_averaging_is_fedavg_for_one_round():
    """One local update then the average on the complete graph equals McMahan et al.'s server step
    w = Σ_k (n_k/n) w_k of the organisations' locally trained models (equal data: the plain mean)."""
    data = tiny_data()
    algo = DecentralisedFedAvg(**TINY)
    sim = simulate(algo, data, 2, 3, {"kind": "complete", "seed": 3}, ORGS)
    alone = simulate(algo, data, 2, 3, {"kind": "none"}, ORGS)  # the same local updates, no averaging
    locals_ = [decode(alone.models[o]) for o in ORGS]
    for org in ORGS:
        model = decode(sim.models[org])
        for key, value in model.items():
            expected = sum(np.asarray(m[key], dtype=np.float64) for m in locals_) / 3
            np.testing.assert_array_equal(value, expected.astype(np.float32))
    # unequal data: weights n_k / n
    data["Org1MSP"] = LocalDataset(data["Org1MSP"].features[:10], data["Org1MSP"].labels[:10])
    sim = simulate(algo, data, 2, 3, {"kind": "complete", "seed": 3}, ORGS)
    alone = simulate(algo, data, 2, 3, {"kind": "none"}, ORGS)
    n = np.array([10, 40, 40]) / 90
    model = decode(sim.models["Org2MSP"])
    for key, value in model.items():
        expected = sum(w * np.asarray(decode(alone.models[o])[key], np.float64) for w, o in zip(n, ORGS))
        np.testing.assert_array_equal(value, expected.astype(np.float32))


def test_rdp_of_the_full_batch_gaussian_is_alpha_over_two_sigma_squared():
    for sigma in (0.7, 1.0, 3.0):
        assert sampled_gaussian_rdp(1.0, sigma) == tuple(a / (2 * sigma**2) for a in RDP_ORDERS)


def test_sampled_rdp_binomial_sum_matches_closed_forms():
    # order 2: A_2 = (1-q)^2 + 2q(1-q) + q^2 e^{1/σ²}  (Mironov, Talwar & Zhang 2019, §3.3)
    q, s = 0.01, 1.1
    eps2 = sampled_gaussian_rdp(q, s)[0]
    assert math.isclose(eps2, math.log(1 - q * q + q * q * math.exp(1 / s**2)), rel_tol=1e-12)
    # subsampling never raises the divergence, and q -> 1 approaches the Gaussian mechanism
    assert all(a <= b for a, b in zip(sampled_gaussian_rdp(q, s), sampled_gaussian_rdp(1.0, s)))
    near = sampled_gaussian_rdp(1 - 1e-9, s)
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(near, sampled_gaussian_rdp(1.0, s)))


def test_epsilon_conversion_known_values():
    # Abadi et al. 2016's MNIST setting q = 0.01, σ = 4, 10 000 steps: ε ≈ 1.2 at δ = 1e-5 (moments
    # accountant, Fig. 2 / §5.3 report 1.26 with their bound); the RDP figure is at most that
    eps = dp_sgd_epsilon(0.01, 4.0, 10_000, 1e-5)
    assert 0.8 < eps < 1.3
    # Gaussian mechanism, one release, σ = 1: RDP conversion, checked by hand for α = 2 as an upper bound
    curve = sampled_gaussian_rdp(1.0, 1.0)
    bound_at_2 = 1.0 + math.log(0.5) - (math.log(1e-5) + math.log(2))
    assert rdp_to_epsilon(curve, 1e-5) <= bound_at_2
    # monotone in the number of steps; zero steps, zero ε
    assert dp_sgd_epsilon(0.05, 1.0, 0, 1e-5) == 0.0
    assert dp_sgd_epsilon(0.05, 1.0, 50, 1e-5) < dp_sgd_epsilon(0.05, 1.0, 100, 1e-5)


def test_dp_mode_clips_every_per_example_gradient():
    algo = DecentralisedFedAvg(**TINY, dp=True, gradient_clip=0.05)
    torch.manual_seed(0)
    module = algo._module(16)
    data = tiny_data()["Org1MSP"]
    x, y = algo._tensors(data)
    x = x * 50  # large inputs: unclipped gradients are far above C
    clipped = algo.clipped_gradients(module, x, y)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in clipped.values()))
    assert norms.shape == (len(y),)
    assert bool(torch.all(norms <= 0.05 * (1 + 1e-5)))
    assert bool(torch.all(norms >= 0.05 * (1 - 1e-5)))  # these all exceeded C, so they sit at C
    # and the per-example gradient equals autograd's on that single example, scaled
    loss = torch.nn.functional.cross_entropy(module(x[:1]), y[:1])
    single = torch.autograd.grad(loss, list(module.parameters()))
    total = torch.sqrt(sum(g.pow(2).sum() for g in single))
    for g, (name, _) in zip(single, module.named_parameters()):
        torch.testing.assert_close(clipped[name][0], g * (0.05 / total))


def test_dp_rounds_report_what_the_ledger_charges():
    algo = DecentralisedFedAvg(**TINY, dp=True, sampling_rate=0.25, noise_multiplier=1.5)
    sim = simulate(algo, tiny_data(), 3, 1, {"kind": "complete", "seed": 1}, ORGS)
    steps = algo.steps_per_round
    assert steps == 4
    for rnd, metrics in enumerate(sim.metrics, start=1):
        m = metrics["Org1MSP"]
        released = steps if rnd < 3 else 0
        assert m["gaussian_releases"] == released and m["privacy_rigorous"] == 1
        assert math.isclose(m["rho_spent"], released / (2 * 1.5**2))
        assert m["epsilon_total"] == dp_sgd_epsilon(0.25, 1.5, steps * min(rnd, 2), 1e-5)
