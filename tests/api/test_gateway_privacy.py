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
