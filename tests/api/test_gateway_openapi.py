"""Property-based run of the gateway's OpenAPI document (schemathesis) against a live gateway:
whatever the generated request, the gateway never answers with a 5xx (bounded: a few dozen
examples per operation)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.api.conftest import make_gateway
from tests.api.live import LiveServer

MAX_EXAMPLES = 20


@pytest.fixture(scope="module")
def live_gateway(world, tmp_path_factory):
    from api.gateway import create_app
    gw = make_gateway(world, "Org1MSP", tmp_path_factory.mktemp("gw-openapi"))
    token = gw.tokens.issue("User1")
    with LiveServer(create_app(gw)) as server:
        yield server, token
    gw.index.close()


@pytest.fixture(scope="module")
def api_schema(live_gateway):
    server, _ = live_gateway
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


def test_no_server_errors(api_schema, live_gateway):
    """Every operation of the OpenAPI document, ``MAX_EXAMPLES`` generated requests each (valid and
    invalid bodies, parameters, ids); the gateway must answer each with a status below 500."""
    from hypothesis import given
    server, token = live_gateway
    headers = {"Authorization": f"Bearer {token}"}
    operations = [r.ok() for r in api_schema.get_all_operations()]
    assert len(operations) >= 25
    failures: list[str] = []
    for op in operations:
        @given(case=op.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            if case.path.endswith("/watch"):
                case.query = {**(case.query or {}), "wait": 0}   # long polls would only slow the run down
            case.call_and_validate(base_url=server.url, headers=headers, checks=[not_a_server_error], timeout=30)
        try:
            run()
        except Exception as exc:   # collect every operation's failure, then report them together
            failures.append(f"{op.method.upper()} {op.path}: {str(exc)[:500]}")
    assert not failures, "\n".join(failures)
