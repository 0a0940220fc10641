"""The gateway's OpenAPI document tells the truth (issue 14, item 11).

``test_openapi_all_checks`` is a schemathesis run, in-process against the ASGI app (no server), with
every built-in check (server errors, status codes and content types and headers and bodies as
declared, positive data accepted, negative data rejected, missing headers, unsupported methods with
``Allow``, ignored auth, ...), over the examples, coverage and fuzzing phases of every operation;
bounded by ``MAX_EXAMPLES`` generated requests per operation and phase. The seed is fixed (14);
``CONSORTIA_SCHEMATHESIS_SEED`` explores others."""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks

from tests.api.conftest import make_gateway

MAX_EXAMPLES = 12


@pytest.fixture(scope="module")
def gateway_app(world, tmp_path_factory):
    from api.gateway import create_app

    gw = make_gateway(world, "Org1MSP", tmp_path_factory.mktemp("gw-openapi"))
    token = gw.tokens.issue("User1")
    gw.refresh()
    yield create_app(gw, start=False), token
    gw.index.close()


@pytest.fixture(scope="module")
def api_schema(gateway_app):
    app, _ = gateway_app
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_openapi_all_checks(api_schema, gateway_app):
    """Every operation, every phase (examples, coverage, fuzzing; valid and invalid data), every
    built-in check of schemathesis; failures of all operations are collected, then reported together."""
    from schemathesis.generation.hypothesis.builder import (
        HypothesisTestConfig,
        HypothesisTestMode,
        create_test,
    )

    load_all_checks()
    checks = CHECKS.get_all()
    _, token = gateway_app
    headers = {"Authorization": f"Bearer {token}"}
    operations = [r.ok() for r in api_schema.get_all_operations()]
    assert len(operations) >= 25
    modes = [HypothesisTestMode.EXAMPLES, HypothesisTestMode.COVERAGE, HypothesisTestMode.FUZZING]
    failures: list[str] = []
    calls = 0

    # POST /processes: whether a topology fits the consortium (a random_link's `links` below its size)
    # and which hyper-parameters the named image accepts are cross-field and image-dependent rules that
    # JSON Schema cannot state (api/schema_rules.py states the rest); such a request is refused with a
    # typed 400/422 before anything is written (tests/api/test_process_validation.py). There, and only
    # there, "schema-valid data is accepted" does not hold; every other check still runs on it.
    # POST /replays: a disclosure file's integrity (its sealed bytes hash to the digest it names, the
    # ledger records that digest, the bundle opens with the gateway's key) is cryptographic, not a schema
    # rule: a schema-valid file made up by the fuzzer is refused with a typed 400 (tests/e2e/test_replay.py).
    cross_field = {("POST", "/api/v1/processes"), ("POST", "/api/v1/replays")}
    without_acceptance = [c for c in checks if c.__name__ != "positive_data_acceptance"]
    assert len(without_acceptance) == len(checks) - 1

    def run(case):
        nonlocal calls
        calls += 1
        if case.path.endswith("/watch"):
            case.query = {**(case.query or {}), "wait": 0}  # long polls would only slow the run down
        if (case.method.upper(), case.path) in cross_field:
            response = case.call_and_validate(headers=headers, checks=without_acceptance)
            if response.status_code in (400, 422):
                body = response.json()  # a typed error body, never a half-done write or a bare status
                assert isinstance(body.get("code"), str) and body.get("message"), response.text
            return
        case.call_and_validate(headers=headers, checks=checks)

    for op in operations:
        test = create_test(
            operation=op,
            test_func=run,
            config=HypothesisTestConfig(
                project=api_schema.config,
                modes=modes,
                seed=int(os.environ.get("CONSORTIA_SCHEMATHESIS_SEED", "14")),
                settings=settings(
                    max_examples=MAX_EXAMPLES,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                ),
            ),
        )
        try:
            test()
        except (Exception, BaseExceptionGroup) as exc:  # collect every operation's failures, report together
            failures.append(f"{op.method.upper()} {op.path}: {str(exc)[:1500]}")
    assert not failures, f"{len(failures)} of {len(operations)} operations fail:\n" + "\n".join(failures)
    assert calls >= len(operations) * MAX_EXAMPLES


def test_every_operation_declares_the_error_statuses_it_can_return(gateway_app):
    """Every operation that reaches the ledger declares 400/404/503 (and writes 409), with the error body."""
    app, _ = gateway_app
    doc = app.openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            if path != "/api/v1/health":
                assert {"401", "403", "422", "503"} <= codes, (method, path, codes)
            if "{" in path and "/artifacts/{digest}" not in path:
                assert {"400", "404"} <= codes, (method, path, codes)
            if method == "post" and not path.endswith("/verify"):
                assert "409" in codes, (method, path, codes)
            for code in codes - {"200", "201"}:
                schema_ref = op["responses"][code]["content"]["application/json"]["schema"]
                assert schema_ref == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)
    assert "502" in doc["paths"]["/api/v1/models/{model_id}/download"]["get"]["responses"]


def test_msp_ids_have_patterns_in_the_document(gateway_app):
    app, _ = gateway_app
    doc = app.openapi()
    from api.schemas import MSP

    consortium = doc["components"]["schemas"]["ProcessIn"]["properties"]["consortium"]
    assert consortium["items"]["pattern"] == MSP and consortium.get("uniqueItems") is True
    assert doc["components"]["schemas"]["AccessIn"]["properties"]["organisation"]["pattern"] == MSP
    params = doc["paths"]["/api/v1/processes/{process_id}/executions/{round}/{organisation}"]["get"][
        "parameters"
    ]
    assert next(p for p in params if p["name"] == "organisation")["schema"]["pattern"] == MSP


def test_method_not_allowed_names_the_allowed_methods(gateways):
    _, client, _ = gateways["Org1MSP"]
    r = client.delete("/api/v1/images")
    assert r.status_code == 405
    assert set(r.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    assert r.json()["code"] == "METHOD_NOT_ALLOWED"


def test_the_document_states_each_topology_kinds_parameters_and_sizes(gateway_app):
    from api.schema_rules import TOPOLOGY_SIZES

    app, _ = gateway_app
    schemas = app.openapi()["components"]["schemas"]
    assert TOPOLOGY_SIZES["cycle_with_inverse_chord"][:5] == [2, 3, 5, 7, 11]
    assert TOPOLOGY_SIZES["dpsda_graphs"] == [7] and "ring" not in TOPOLOGY_SIZES
    from api.schemas import TopologyIn

    served = json.dumps(schemas["ProcessIn"], sort_keys=True)  # the document a client reads
    assert '{"const": "dpsda_graphs"}' in served and '{"maxItems": 7, "minItems": 7}' in served
    topology = json.dumps(TopologyIn.model_json_schema(), sort_keys=True)
    assert (
        '"links": {"minimum": 1, "type": "integer"}' in topology
        and '"additionalProperties": false' in topology
    )
