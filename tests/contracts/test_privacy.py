"""The ledger's privacy budget on Gaussian rounds and the consortium's cap (chaincode/privacy.py;
docs/ledger.md "Privacy budgets"), through the Ledger interface on every host.

The rounds' metrics are the ones DPSDA's Gaussian mode reports (``algorithms.dpsda.step_function.
gaussian_metrics`` of the process's own hyper-parameters), so the contract is tested on what an image
signs; the ledger's ε is compared with its own accountant and with the image's."""

from __future__ import annotations

import pytest

from algorithms.dpsda.framework import DPSDAConfig
from algorithms.dpsda.privacy import GaussianComposition
from algorithms.dpsda.step_function import gaussian_metrics
from chaincode.errors import BudgetExceeded, InvalidArgument, NotFound
from chaincode.limits import PRIVACY_CAP_DELTA, PRIVACY_CAP_EPSILON
from chaincode.privacy import gaussian_epsilon
from tests.contracts.helpers import complete, make_result, new_process, run_task
from tests.contracts.test_execution_record import _task

DELTA = 1e-5
POISSON = {
    "mechanism": "gaussian",
    "n_nodes": 2,
    "dimension": 4,
    "gradient_clip": 1.0,
    "batch_size": 20,
    "sampling": "poisson",
    "sampling_rate": 0.05,
    "noise_multiplier": 1.2,
    "privacy_delta": DELTA,
}
STREAM = {**{k: v for k, v in POISSON.items() if k != "sampling_rate"}, "sampling": "stream"}


def metrics_of(hyper: dict, rnd: int, rounds: int) -> dict[str, float]:
    """What the Gaussian mode's round ``rnd`` of ``rounds`` reports (a gradient in every round but the last)."""
    return gaussian_metrics(DPSDAConfig(**hyper), rnd < rounds, min(rnd, rounds - 1))


def gaussian_process(admins, org1, uid: str, hyper: dict, rounds: int, epsilon: float = 10.0) -> str:
    budget = {"mechanism": "gaussian", "epsilon": epsilon, "delta": DELTA}
    return new_process(admins, org1, uid, rounds=rounds, privacy_budget=budget, hyperparameters=hyper)


def refused(client, pid: str, rnd: int, metrics: dict, error: type[Exception], match: str) -> None:
    """The round's result with ``metrics`` is refused and the task stays running (nothing written)."""
    key = _task(client, pid, rnd)
    result = make_result(pid, rnd, client.organisation, metrics=metrics)
    with pytest.raises(error, match=match):
        complete(client, key, result)
    assert client.get_execution(pid, rnd, client.organisation).status == "running"


def test_a_sampled_gaussian_process_is_charged_by_the_ledgers_own_accountant(admins, org1, org2, uid):
    rounds = 4
    pid = gaussian_process(admins, org1, uid, POISSON, rounds)
    for rnd in range(1, rounds + 1):
        for client in (org1, org2):
            run_task(client, pid, rnd, metrics=metrics_of(POISSON, rnd, rounds))
        releases = min(rnd, rounds - 1)
        for org in ("Org1MSP", "Org2MSP"):
            rec = org1.get_execution(pid, rnd, org)
            priv = rec.privacy.json_object()  # as stored
            assert priv["mechanism"] == "gaussian" and priv["accounting"] == "rdp" and priv["delta"] == DELTA
            assert priv["noise_multiplier"] == 1.2 and priv["sampling_rate"] == 0.05
            assert priv["parallel_composition"] is False and priv["rigorous"] is True
            assert priv["network"]["releases"] == priv["node"]["releases"] == releases
            assert priv["spent"]["network"]["releases"] == (1 if rnd < rounds else 0)
            assert "epsilon_basic" not in priv["network"]  # a Gaussian release has no pure ε
            expected = gaussian_epsilon(1.2, 0.05, False, releases, DELTA)[2]
            assert rec.epsilon_total == priv["network"]["epsilon"] == expected
            # the image's accountant (fractional orders too) is at most as large, and close
            image = GaussianComposition(1.2, releases, 0.05).epsilon(DELTA)
            assert image <= expected * (1 + 1e-9) and expected <= 1.25 * image
    assert org1.complete_process(pid).status == "completed"


def test_a_stream_is_one_release_whatever_the_rounds(admins, org1, org2, uid):
    rounds = 3
    pid = gaussian_process(admins, org1, uid, STREAM, rounds, epsilon=5.0)
    for rnd in range(1, rounds + 1):
        for client in (org1, org2):
            run_task(client, pid, rnd, metrics=metrics_of(STREAM, rnd, rounds))
    priv = org1.get_execution(pid, rounds, "Org2MSP").privacy.json_object()
    assert priv["accounting"] == "gdp" and priv["parallel_composition"] is True
    assert priv["network"]["releases"] == 2
    # parallel composition: the run is one 1/z-GDP release, exactly as the image counts it
    one = GaussianComposition(1.2, 1, 1.0).epsilon(DELTA)
    assert priv["network"]["epsilon"] == pytest.approx(one, rel=1e-9)


def test_a_round_that_would_overspend_is_refused(admins, org1, org2, uid):
    hyper = {**POISSON, "noise_multiplier": 0.8, "sampling_rate": 0.5}
    rounds = 4
    after = [gaussian_epsilon(0.8, 0.5, False, r, DELTA)[2] for r in (1, 2)]
    budget = (after[0] + after[1]) / 2  # round 1 fits, round 2 would not
    pid = gaussian_process(admins, org1, uid, hyper, rounds, epsilon=budget)
    for client in (org1, org2):
        run_task(client, pid, 1, metrics=metrics_of(hyper, 1, rounds))
    refused(org1, pid, 2, metrics_of(hyper, 2, rounds), BudgetExceeded, "over the budget")
    assert org1.get_execution(pid, 1, "Org1MSP").epsilon_total == after[0]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"rho_spent": 0.5}, "1/\\(2z²\\)"),
        ({"rho_spent": 0.5, "rho_network_spent": 0.5}, "1/\\(2z²\\)"),
        ({"rho_network_spent": 0.0}, "rho_network_spent"),
        ({"privacy_delta": 1e-6}, "budget's δ"),
        ({"noise_multiplier": 2.0}, "rho_spent|hyper-parameters"),
        ({"sampling_rate": 0.1}, "hyper-parameters"),
        ({"parallel_composition": 1.0}, "sampling_rate 1"),
        ({"noise_multiplier": 0.0}, "positive finite"),
        ({"privacy_rigorous": 0.0}, "nominal"),
    ],
)
def test_inconsistent_gaussian_figures_are_refused(admins, org1, uid, change, match):
    pid = gaussian_process(admins, org1, uid, POISSON, 3)
    refused(org1, pid, 1, {**metrics_of(POISSON, 1, 3), **change}, InvalidArgument, match)


def test_a_stream_claim_on_a_sampled_process_and_a_change_of_noise_are_refused(admins, org1, org2, uid):
    pid = gaussian_process(admins, org1, uid, POISSON, 3)
    stream_claim = {**metrics_of(POISSON, 1, 3), "sampling_rate": 1.0, "parallel_composition": 1.0}
    refused(org1, pid, 1, stream_claim, InvalidArgument, "hyper-parameters")
    unnamed_rate = {k: v for k, v in POISSON.items() if k != "sampling_rate"}
    pid2 = gaussian_process(admins, org1, uid + "b", unnamed_rate, 3)  # only `sampling` says it is Poisson
    refused(org1, pid2, 1, stream_claim, InvalidArgument, "samples 'poisson'")
    # a process that does not name z: the organisation's rounds must keep the z of its first round
    free = {k: v for k, v in POISSON.items() if k != "noise_multiplier"}
    pid3 = gaussian_process(admins, org1, uid + "c", free, 3)
    for client in (org1, org2):
        run_task(client, pid3, 1, metrics=metrics_of(POISSON, 1, 3))
    louder = metrics_of({**POISSON, "noise_multiplier": 2.0}, 2, 3)
    refused(org1, pid3, 2, louder, InvalidArgument, "previous round")


def test_a_gaussian_round_needs_a_budget_with_a_delta(admins, org1, uid):
    pid = new_process(
        admins,
        org1,
        uid,
        rounds=2,
        privacy_budget={"mechanism": "gaussian", "epsilon": 5.0},
        hyperparameters=POISSON,
    )
    refused(org1, pid, 1, metrics_of(POISSON, 1, 2), InvalidArgument, "needs a delta")


@pytest.mark.parametrize(
    ("budget", "match"),
    [
        (
            {"mechanism": "gaussian", "epsilon": PRIVACY_CAP_EPSILON * 1.01, "delta": DELTA},
            "cap on rigorous ε",
        ),
        ({"mechanism": "laplace", "epsilon": 50.0}, "cap on rigorous ε"),
        ({"mechanism": "gaussian", "epsilon": 1.0, "delta": PRIVACY_CAP_DELTA * 10}, "cap δ"),
    ],
)
def test_a_budget_over_the_consortium_cap_is_refused_at_creation(admins, org1, uid, budget, match):
    with pytest.raises(InvalidArgument, match=match):
        new_process(
            admins, org1, uid, privacy_budget=budget, hyperparameters={"gradient_clip": 1.0}, start=False
        )
    with pytest.raises(NotFound):
        org1.get_process(f"proc-{uid}")


def test_a_budget_at_the_cap_is_accepted(admins, org1, uid):
    budget = {"mechanism": "gaussian", "epsilon": PRIVACY_CAP_EPSILON, "delta": PRIVACY_CAP_DELTA / 10}
    pid = new_process(
        admins, org1, uid, privacy_budget=budget, hyperparameters={"gradient_clip": 1.0}, start=False
    )
    assert org1.get_process(pid).privacy_budget.epsilon == PRIVACY_CAP_EPSILON


def test_what_a_process_privacy_amounts_to_rigorous_first(admins, org1, org2, uid):
    """``process_privacy``: with a budget, the largest ε the ledger charged a member, and the image's own
    figure labelled as not charged; without one, nothing guaranteed and a nominal figure labelled so."""
    rounds = 3
    pid = gaussian_process(admins, org1, uid, POISSON, rounds)
    for client in (org1, org2):
        run_task(client, pid, 1, metrics=metrics_of(POISSON, 1, rounds))
    run_task(org1, pid, 2, metrics=metrics_of(POISSON, 2, rounds))  # Org2 has not completed round 2
    status = org1.process_privacy(org1.get_process(pid))
    two = gaussian_epsilon(1.2, 0.05, False, 2, DELTA)[2]
    assert status.rigorous is True and status.epsilon_spent == two and status.epsilon_budget == 10.0
    assert status.delta == DELTA and status.scope == "network" and status.accounting == "rdp"
    assert (status.cap_epsilon, status.cap_delta) == (PRIVACY_CAP_EPSILON, PRIVACY_CAP_DELTA)
    assert status.reported_rigorous is True and status.reported_epsilon <= two * (1 + 1e-9)  # not charged
    # a process without a budget whose image reports a nominal ε (privacy_rigorous = 0)
    free = new_process(admins, org1, uid + "f", rounds=2)
    nominal = {"privacy_rigorous": 0, "epsilon_spent": 0.5, "epsilon_total": 0.5, "loss": 1.0}
    run_task(org1, free, 1, metrics=nominal)
    none = org1.process_privacy(org1.get_process(free))
    assert none.rigorous is False and none.epsilon_spent is None and none.epsilon_budget is None
    assert none.reported_epsilon == 0.5 and none.reported_rigorous is False
