"""Fixtures of the audit tests: a completed audited process among Org1..Org3 on an embedded ledger
(the API tests' world, built through the typed client the way node agents do it), and a consortium
for ledger files of their own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ledger.identity import Consortium
from tests.api.world import World, build_world


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> Iterator[World]:
    w = build_world(tmp_path_factory.mktemp("audit-world"))
    yield w
    w.ledger.close()


@pytest.fixture(scope="module")
def ledger_view(world) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(process, execution records, model of Org2, image) of ``proc-0`` as the ledger stores them."""

    def ev(fn: str, *a: str) -> Any:
        return json.loads(world.ledger.evaluate(world.consortium.identity("Org1MSP"), fn, *a))

    process = ev("LearningProcess:get", "proc-0")
    process.pop("current_round", None)
    executions = ev("ExecutionRecord:query", json.dumps({"process_id": "proc-0"}))
    model = ev("Model:get", "proc-0:Org2MSP")
    model.pop("wrapped_key", None)
    return process, executions, model, ev("Image:get", process["image_id"])


@pytest.fixture(scope="module")
def consortium(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])
