"""The REST privacy budget carries the same fields as the chaincode and the CLI (chaincode.privacy):
accounting and scope are accepted, stored resolved on the process, and refused when unknown or unsound."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def org1(gateways):
    return gateways["Org1MSP"][1]


def body(budget: dict) -> dict:
    return {
        "id": f"p-{uuid.uuid4().hex[:10]}",
        "image_id": "rf:1",
        "consortium": ["Org1MSP", "Org2MSP"],
        "topology": {"kind": "ring", "seed": 3},
        "rounds": 2,
        "hyperparameters": {"depth": 4, "gradient_clip": 1.0},
        "privacy_budget": budget,
    }


@pytest.mark.parametrize(
    "budget, resolved",
    [
        (
            {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-5, "accounting": "zcdp", "scope": "node"},
            {"accounting": "zcdp", "scope": "node", "delta": 1e-5},
        ),
        (
            {"mechanism": "laplace", "epsilon": 1.0, "accounting": "basic"},
            {"accounting": "basic", "scope": "network"},
        ),
        (
            {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6},
            {"accounting": "zcdp", "scope": "network"},
        ),
    ],
)
def test_budget_accounting_and_scope_are_stored_resolved(org1, budget, resolved):
    b = body(budget)
    r = org1.post("/api/v1/processes", json=b)
    assert r.status_code == 201, r.text
    stored = org1.get(f"/api/v1/processes/{b['id']}").json()["privacy_budget"]
    assert stored["epsilon"] == budget["epsilon"] and stored["mechanism"] == budget["mechanism"]
    for k, v in resolved.items():
        assert stored[k] == v, stored


@pytest.mark.parametrize(
    "budget, status",
    [
        ({"mechanism": "gaussian", "epsilon": 1.0, "accounting": "renyi"}, 422),
        ({"mechanism": "gaussian", "epsilon": 1.0, "scope": "everyone"}, 422),
        ({"mechanism": "gaussian", "epsilon": 1.0, "accounting": "zcdp"}, 400),  # zCDP needs a delta
    ],
)
def test_unknown_or_unsound_budget_is_refused_and_creates_nothing(org1, budget, status):
    b = body(budget)
    r = org1.post("/api/v1/processes", json=b)
    assert r.status_code == status, r.text
    assert org1.get(f"/api/v1/processes/{b['id']}").status_code == 404


@pytest.mark.parametrize(
    "budget",
    [
        {"mechanism": "gaussian", "epsilon": 10.5, "delta": 1e-5},  # over the consortium's cap on ε
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-4},  # over the cap's δ
    ],
)
def test_a_budget_over_the_consortium_cap_is_refused(org1, budget):
    b = body(budget)
    r = org1.post("/api/v1/processes", json=b)
    assert r.status_code == 422 and "privacy_budget" in r.text, r.text
    assert org1.get(f"/api/v1/processes/{b['id']}").status_code == 404


def test_process_answers_show_the_ledgers_rigorous_epsilon(org1):
    # proc-0 (tests/api/world.py): 3 rounds, each member charged ε0 = 0.5 per round, node scope, budget 3
    expected = {
        "rigorous": True,
        "epsilon_spent": 1.5,
        "epsilon_budget": 3.0,
        "delta": None,
        "scope": "node",
        "accounting": "basic",
        "cap_epsilon": 10.0,
        "cap_delta": 1e-5,
        "reported_epsilon": None,
        "reported_rigorous": None,
    }
    assert org1.get("/api/v1/processes/proc-0").json()["privacy"] == expected
    listed = org1.get("/api/v1/processes", params={"limit": 200}).json()["items"]
    assert next(p for p in listed if p["id"] == "proc-0")["privacy"] == expected
    assert org1.get("/api/v1/processes/proc-0/timeline").json()["process"]["privacy"] == expected
    # a process without a budget guarantees nothing, and says so
    b = body(None)
    assert org1.post("/api/v1/processes", json=b).status_code == 201
    none = org1.get(f"/api/v1/processes/{b['id']}").json()["privacy"]
    assert none["rigorous"] is False and none["epsilon_spent"] is None and none["epsilon_budget"] is None
