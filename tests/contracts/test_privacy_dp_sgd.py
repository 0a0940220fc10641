"""The ledger's privacy budget enforces the ε of the showcase's DP-SGD (examples/dfedavg): its rounds
report k sampled-Gaussian releases each (``gaussian_releases``), the contract recomputes ε with its own
accountant, equal to the example's, and refuses the round that would exceed the process's budget
(chaincode/privacy.py; docs/ledger.md "Privacy budgets")."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from chaincode.errors import BudgetExceeded, InvalidArgument
from chaincode.privacy import gaussian_epsilon
from consortia_sdk import LocalDataset, simulate
from tests.contracts.helpers import new_process, run_task
from tests.contracts.test_privacy import refused

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dfedavg" / "dfedavg.py"
DELTA = 1e-5
ORGS = ["Org1MSP", "Org2MSP"]


def dfedavg():
    if "dfedavg" not in sys.modules:
        spec = importlib.util.spec_from_file_location("dfedavg", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["dfedavg"] = module
        spec.loader.exec_module(module)
    return sys.modules["dfedavg"]


@pytest.fixture(scope="module")
def dp_run():
    """The example's DP-SGD hyper-parameters and the metrics its 3 rounds report (tiny data)."""
    rng = np.random.default_rng(0)
    data = {}
    for org in ORGS:
        x = rng.random((40, 8), dtype=np.float32)
        data[org] = LocalDataset(x, (x[:, 0] > 0.5).astype(np.int64))
    algo = dfedavg().DecentralisedFedAvg(
        hidden=4, classes=2, batch_size=8, dp=True, sampling_rate=0.25, noise_multiplier=1.2
    )
    sim = simulate(algo, data, 3, 7, {"kind": "complete", "seed": 7}, ORGS)
    return algo.params(), sim.metrics


def dp_process(admins, org1, uid, hyper, epsilon):
    budget = {"mechanism": "gaussian", "epsilon": epsilon, "delta": DELTA}
    return new_process(admins, org1, uid, rounds=3, privacy_budget=budget, hyperparameters=hyper)


def test_the_ledger_charges_the_examples_epsilon(admins, org1, org2, uid, dp_run):
    hyper, metrics = dp_run
    pid = dp_process(admins, org1, uid, hyper, 10.0)
    steps = int(metrics[0]["Org1MSP"]["gaussian_releases"])
    assert steps == 4
    for rnd in (1, 2, 3):
        for client in (org1, org2):
            run_task(client, pid, rnd, metrics=metrics[rnd - 1][client.organisation])
        rec = org1.get_execution(pid, rnd, "Org1MSP")
        releases = steps * min(rnd, 2)
        assert rec.privacy.network.releases == releases
        assert rec.epsilon_total == gaussian_epsilon(1.2, 0.25, False, releases, DELTA)[2]
        assert rec.epsilon_total == pytest.approx(metrics[rnd - 1]["Org1MSP"]["epsilon_total"], rel=1e-12)


def test_a_dp_sgd_round_over_the_budget_is_refused(admins, org1, org2, uid, dp_run):
    hyper, metrics = dp_run
    first, second = (metrics[r]["Org1MSP"]["epsilon_total"] for r in (0, 1))
    pid = dp_process(admins, org1, uid, hyper, (first + second) / 2)  # round 1 fits, round 2 would not
    for client in (org1, org2):
        run_task(client, pid, 1, metrics=metrics[0][client.organisation])
    refused(org1, pid, 2, metrics[1]["Org1MSP"], BudgetExceeded, "over the budget")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"gaussian_releases": 3}, "for 3 release"),
        ({"gaussian_releases": 2.5}, "non-negative integer"),
        ({"gaussian_releases": -1}, "non-negative integer"),
        ({"gaussian_releases": 0}, "for 0 release"),
    ],
)
def test_a_release_count_that_disagrees_with_rho_is_refused(admins, org1, uid, dp_run, change, match):
    hyper, metrics = dp_run
    pid = dp_process(admins, org1, uid, hyper, 10.0)
    refused(org1, pid, 1, {**metrics[0]["Org1MSP"], **change}, InvalidArgument, match)
