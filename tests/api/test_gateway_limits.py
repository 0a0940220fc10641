"""Input limits at the gateway (issue 14, item 8; docs/limits.md): what the contracts would refuse is
refused by the request schemas first (422, nothing written), oversized bodies are refused before
they are read (413), and records are serialised without recursion."""

from __future__ import annotations

import json
import uuid

import pytest

from chaincode.canonical import canonical_json
from chaincode.limits import MAX_FIELD_DEPTH, MAX_HYPERPARAMETERS_BYTES
from tests.api.test_gateway import error


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
def clients(gateways):
    return {msp: client for msp, (_, client, _) in gateways.items()}


def _body(**patch):
    body = {
        "id": f"lim-{uuid.uuid4().hex[:10]}",
        "image_id": "rf:1",
        "consortium": ["Org1MSP", "Org2MSP"],
        "topology": {"kind": "ring", "seed": 3},
        "rounds": 2,
    }
    body.update(patch)
    return body


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"hyperparameters": nested(900)}, "nested 900 levels deep, over the limit of 31"),
        ({"hyperparameters": nested(MAX_FIELD_DEPTH + 1)}, "nested 32 levels deep, over the limit of 31"),
        (
            {"hyperparameters": {f"k{i}": "x" * 1000 for i in range(70)}},
            f"over the limit of {MAX_HYPERPARAMETERS_BYTES}",
        ),
        ({"topology": {"kind": "ring", "extra": nested(40)}}, "over the limit of 31"),
        ({"topology": {"kind": "ring", "edges": ["x" * 1000] * 20}}, "over the limit of 16384"),
        ({"description": "d" * 2049}, "at most 2048 characters"),
        ({"consortium": ["Org1MSP", "Org1MSP"]}, "twice"),
    ],
)
def test_oversized_or_too_deep_process_is_refused_and_changes_nothing(clients, patch, message):
    org1 = clients["Org1MSP"]
    before = org1.get("/api/v1/health").json()["block_height"]
    body = error(org1.post("/api/v1/processes", json=_body(**patch)), 422, "INVALID_REQUEST")
    assert message in body["message"]
    assert org1.get("/api/v1/health").json()["block_height"] == before


def test_nan_in_hyperparameters_is_refused(clients):
    org1 = clients["Org1MSP"]
    text = json.dumps(_body(hyperparameters={"lr": float("nan")}))  # Python writes the literal NaN
    r = org1.post("/api/v1/processes", content=text, headers={"Content-Type": "application/json"})
    assert "finite" in error(r, 422, "INVALID_REQUEST")["message"]


def test_request_body_over_the_limit_is_refused_before_it_is_read(clients):
    org1 = clients["Org1MSP"]
    huge = json.dumps(_body(description="d" * (20 * 1024 * 1024)))
    body = error(
        org1.post("/api/v1/processes", content=huge, headers={"Content-Type": "application/json"}),
        413,
        "REQUEST_TOO_LARGE",
    )
    assert body["details"]["limit"] == 1024 * 1024

    def chunks():  # no Content-Length: the body is counted as it arrives
        for i in range(0, len(huge), 1 << 18):
            yield huge[i : i + (1 << 18)].encode()

    error(
        org1.post("/api/v1/processes", content=chunks(), headers={"Content-Type": "application/json"}),
        413,
        "REQUEST_TOO_LARGE",
    )


def test_deepest_accepted_process_is_served_to_every_member(clients):
    """Hyper-parameters at the depth limit are committed, and every member's list and record
    answers stay 200 (the 900-level request of the issue made them 500 for every member)."""
    org1, org2 = clients["Org1MSP"], clients["Org2MSP"]
    body = _body(hyperparameters=nested(MAX_FIELD_DEPTH))
    r = org1.post("/api/v1/processes", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["hyperparameters"] == nested(MAX_FIELD_DEPTH)
    for client in (org1, org2):
        listed = client.get("/api/v1/processes", params={"limit": 1000})
        assert listed.status_code == 200 and body["id"] in [p["id"] for p in listed.json()["items"]]
        assert client.get(f"/api/v1/processes/{body['id']}").status_code == 200


def test_record_and_canonical_json_do_not_recurse():
    """``record()`` (typed record -> dict) and canonical JSON handle values far deeper than the
    interpreter's recursion limit (a record already on a ledger cannot be refused any more)."""
    from api.gateway import record
    from ledger.client import ProcessRecord

    deep = nested(5000)
    rec = ProcessRecord(
        id="p",
        image_id="i:1",
        image_digest="sha256:" + "0" * 64,
        algorithm="a",
        consortium=("Org1MSP",),
        topology={"kind": "ring"},
        hyperparameters=deep,
        rounds=1,
        privacy_budget=None,
        creator="Org1MSP",
        created="t",
        status="created",
        status_reason="",
        updated="t",
        tx_id="x",
        more=[deep],  # a key this version does not know
    )
    d = record(rec)
    # nothing nested is copied (the record's own top-level dict is what validation made of ``deep``)
    assert d["hyperparameters"] is rec.hyperparameters and rec.hyperparameters["a"] is deep["a"]
    assert d["more"][0] is deep
    text = canonical_json({"b": deep, "a": [1.5, "é", None, True]})
    assert text.startswith(b'{"a":[1.5,"\xc3\xa9",null,true],"b":{"a":{"a":') and text.endswith(b"}" * 5001)
    assert len(text) == len(canonical_json({"b": {}, "a": [1.5, "é", None, True]})) + 6 * 4999


def test_a_process_committed_before_the_limits_is_still_listed(world, tmp_path):
    """A process with hyper-parameters 900 levels deep already on a ledger (committed before the
    contracts had limits) is listed and served: deeper than pydantic serialises (256 levels), the
    answer is encoded by the depth-safe path, with the same content."""
    from fastapi.testclient import TestClient

    from api.gateway import create_app
    from tests.api.conftest import make_gateway

    gw = make_gateway(world, "Org1MSP", tmp_path / "gw")
    token = gw.tokens.issue("User1")
    gw.refresh()
    legacy = {
        "id": "legacy-deep",
        "image_id": "rf:1",
        "image_digest": "sha256:" + "cd" * 32,
        "algorithm": "collab-rf",
        "consortium": ["Org1MSP", "Org2MSP"],
        "topology": {"kind": "ring", "seed": 1},
        "hyperparameters": nested(900),
        "rounds": 2,
        "privacy_budget": None,
        "dataset": "",
        "description": "",
        "creator": "Org1MSP",
        "created_by": "User1",
        "created": "2026-01-01T00:00:00.000000Z",
        "status": "created",
        "status_reason": "",
        "updated": "2026-01-01T00:00:00.000000Z",
        "tx_id": "ab" * 32,
    }
    with gw.index.transaction() as index:
        index._put_process(legacy, gw.index.last_block)
    with TestClient(create_app(gw, start=False), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        r = client.get("/api/v1/processes", params={"limit": 1000})
        assert r.status_code == 200, r.text
        listed = next(p for p in r.json()["items"] if p["id"] == "legacy-deep")
        assert listed["hyperparameters"] == nested(900) and listed["current_round"] is None
        shallow = [p for p in r.json()["items"] if p["id"] != "legacy-deep"]
        assert shallow and all(p["status"] for p in shallow)
    gw.index.close()


def test_depth_safe_encoding_equals_pydantic_where_pydantic_can():
    from pydantic import TypeAdapter

    from api import schemas as S
    from api.responses import encode

    model = {
        "id": "m",
        "process_id": "p",
        "owner": "Org1MSP",
        "digest": "sha256:" + "0" * 64,
        "size": 3,
        "ciphertext_digest": "sha256:" + "1" * 64,
        "access": ["Org1MSP"],
        "created": "t",
        "tx_id": "x",
        "wrapped_key": "c2VjcmV0",
        "estimators": [nested(5)],
    }
    adapter = TypeAdapter(S.Page[S.ModelOut])
    page = {"items": [model], "total": 1, "limit": 1, "offset": 0}
    assert json.loads(encode(adapter, page)) == json.loads(adapter.dump_json(adapter.validate_python(page)))
    deep = {**page, "items": [{**model, "estimators": [nested(900)]}]}
    out = json.loads(encode(adapter, deep))
    assert out["items"][0]["estimators"] == [nested(900)] and "wrapped_key" not in out["items"][0]
    assert out["items"][0]["location"] == "" and out["items"][0]["round"] == 0  # defaults, as pydantic writes
