"""The gateway's endpoints, journey by journey, with their refusals (organisation A cannot act as
B, non-members cannot read, malformed input is refused with a clear message and changes nothing)."""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest

from api.gateway import record
from exchange.errors import DecryptionError
from exchange.model_seal import model_aad, model_key_info
from exchange.sealing import decrypt_payload, unseal
from tests.api.world import IMAGE_DIGEST


def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def org1(gateways):
    return gateways["Org1MSP"][1]


@pytest.fixture
def org2(gateways):
    return gateways["Org2MSP"][1]


@pytest.fixture
def org4(gateways):
    return gateways["Org4MSP"][1]


def error(resp, status: int, code: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"code", "message", "details"} and body["message"]
    if code:
        assert body["code"] == code, body
    return body


# ---------------------------------------------------------------- authentication
def test_health_and_whoami(org1, gateways):
    h = org1.get("/api/v1/health").json()
    assert h["organisation"] == "Org1MSP" and h["last_indexed_block"] >= 0
    me = org1.get("/api/v1/whoami").json()
    assert me["organisation"] == "Org1MSP" and me["user"] == "User1"


def test_membership_history_needs_a_fabric_ledger(org1):
    body = error(org1.get("/api/v1/membership/history"), 404, "NOT_FOUND")
    assert "not a Fabric channel" in body["message"]  # the embedded ledger has no configuration blocks
    error(org1.get("/api/v1/membership/history", headers={"Authorization": ""}), 401, "UNAUTHENTICATED")


def test_requests_without_or_with_bad_tokens_are_refused(org1):
    error(org1.get("/api/v1/images", headers={"Authorization": ""}), 401, "UNAUTHENTICATED")
    error(org1.get("/api/v1/images", headers={"Authorization": "Bearer cst_Org1MSP_" + "A" * 43}), 401)
    error(org1.get("/api/v1/images", headers={"Authorization": "Basic abc"}), 401)


def test_token_of_another_organisation_cannot_act_here(gateways):
    _, org1, _ = gateways["Org1MSP"]
    _, _, org2_token = gateways["Org2MSP"]
    before = org1.get("/api/v1/images").json()["total"]
    body = {"name": f"x{uid()}", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST}
    r = org1.post("/api/v1/images", json=body, headers={"Authorization": f"Bearer {org2_token}"})
    error(r, 403, "WRONG_ORGANISATION")
    assert org1.get("/api/v1/images").json()["total"] == before


def test_acting_organisation_comes_from_the_token_not_the_body(org1):
    body = {
        "name": f"img{uid()}",
        "version": "1",
        "algorithm": "a",
        "digest": IMAGE_DIGEST,
        "owner": "Org2MSP",
    }
    error(org1.post("/api/v1/images", json=body), 422, "INVALID_REQUEST")  # no such field
    del body["owner"]
    rec = org1.post("/api/v1/images", json=body).json()
    assert rec["owner"] == "Org1MSP"


# ---------------------------------------------------------------- images
def test_image_journey_register_list_get_approve_revoke(org1, org2, gateways):
    name = f"img{uid()}"
    body = {
        "name": name,
        "version": "2.0",
        "algorithm": "collab-rf",
        "digest": IMAGE_DIGEST,
        "reference": "r",
    }
    r = org1.post("/api/v1/images", json=body)
    assert r.status_code == 201 and r.json()["id"] == f"{name}:2.0"
    iid = f"{name}:2.0"
    error(org1.post("/api/v1/images", json=body), 409, "ALREADY_EXISTS")
    listed = org2.get("/api/v1/images", params={"limit": 1000}).json()
    assert iid in [i["id"] for i in listed["items"]] and listed["limit"] == 1000
    page = org2.get("/api/v1/images", params={"limit": 1, "offset": 0}).json()
    assert len(page["items"]) == 1 and page["total"] >= 2
    error(org1.post(f"/api/v1/images/{iid}/approve", json={"digest": IMAGE_DIGEST}), 403, "FORBIDDEN")
    # approving is consent: a client identity's token is refused; Org2's admin approves
    assert (
        "only admin identities"
        in error(org2.post(f"/api/v1/images/{iid}/approve", json={"digest": IMAGE_DIGEST}), 403, "FORBIDDEN")[
            "message"
        ]
    )
    admin2 = {"Authorization": f"Bearer {gateways['Org2MSP'][0].tokens.issue('Admin')}"}
    error(
        org2.post(f"/api/v1/images/{iid}/approve", json={"digest": "sha256:" + "00" * 32}, headers=admin2),
        409,
        "IMAGE_DIGEST_MISMATCH",
    )
    body = {"digest": IMAGE_DIGEST, "datasets": ["adult"], "expires": "2999-01-01T00:00:00Z"}
    approval = org2.post(f"/api/v1/images/{iid}/approve", json=body, headers=admin2).json()
    assert approval["organisation"] == "Org2MSP" and approval["datasets"] == ["adult"]
    assert [a["organisation"] for a in org1.get(f"/api/v1/images/{iid}").json()["approvals"]] == ["Org2MSP"]
    revoked = org2.post(f"/api/v1/images/{iid}/revoke-approval", json={"reason": "changed"}, headers=admin2)
    assert revoked.status_code == 200 and revoked.json()["revoked_reason"] == "changed", revoked.text
    assert org1.get(f"/api/v1/images/{iid}").json()["approvals"][0]["revoked"] is not None
    error(org2.post(f"/api/v1/images/{iid}/revoke", json={"reason": "mine now"}), 403, "FORBIDDEN")
    assert org1.post(f"/api/v1/images/{iid}/revoke", json={"reason": "CVE"}).json()["status"] == "revoked"
    hist = org2.get(f"/api/v1/images/{iid}/history").json()
    assert [h["value"]["status"] for h in hist] == ["active", "revoked"]
    revoked = org1.get("/api/v1/images", params={"status": "revoked", "limit": 1000}).json()["items"]
    assert iid in [i["id"] for i in revoked]


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST},
        {"name": "ok", "version": "1", "algorithm": "a", "digest": "sha1:abc"},
        {"name": "ok", "version": "1", "algorithm": "a"},
        {"name": "bad name", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST},
        "not an object",
    ],
)
def test_malformed_image_is_refused_and_changes_nothing(org1, bad):
    before = org1.get("/api/v1/health").json()["block_height"]
    body = error(org1.post("/api/v1/images", json=bad), 422, "INVALID_REQUEST")
    assert body["details"]["errors"]
    assert org1.get("/api/v1/health").json()["block_height"] == before


def test_unknown_image_and_malformed_ids(org1):
    error(org1.get("/api/v1/images/nope:1"), 404, "NOT_FOUND")
    error(org1.get("/api/v1/images/bad%20id"), 422, "INVALID_REQUEST")
    error(org1.get("/api/v1/images", params={"limit": 0}), 422)


# ---------------------------------------------------------------- processes
def test_process_journey_create_start_watch_abort(org1, org2, org4, gateways):
    pid = f"p-{uid()}"
    body = {
        "id": pid,
        "image_id": "rf:1",
        "consortium": ["Org1MSP", "Org2MSP"],
        "topology": {"kind": "ring", "seed": 3},
        "rounds": 2,
        "hyperparameters": {"depth": 4, "gradient_clip": 1.0},
        "privacy_budget": {"mechanism": "gaussian", "epsilon": 1.0},
    }
    r = org1.post("/api/v1/processes", json=body)
    assert r.status_code == 201 and r.json()["status"] == "created" and r.json()["creator"] == "Org1MSP"
    assert pid in [p["id"] for p in org2.get("/api/v1/processes", params={"limit": 1000}).json()["items"]]
    assert pid not in [p["id"] for p in org4.get("/api/v1/processes", params={"limit": 1000}).json()["items"]]
    error(org4.get(f"/api/v1/processes/{pid}"), 403, "FORBIDDEN")
    error(org4.get(f"/api/v1/processes/{pid}/timeline"), 403, "FORBIDDEN")
    error(org4.post(f"/api/v1/processes/{pid}/start"), 403)
    refused = error(org2.post(f"/api/v1/processes/{pid}/start"), 409, "CONSENT_MISSING")
    assert "not accepted by ['Org1MSP', 'Org2MSP']" in refused["message"]
    error(org2.post(f"/api/v1/processes/{pid}/accept", json={}), 403, "FORBIDDEN")  # a client's token
    for client, msp in ((org1, "Org1MSP"), (org2, "Org2MSP")):  # each organisation's admin, at its gateway
        admin = {"Authorization": f"Bearer {gateways[msp][0].tokens.issue('Admin')}"}
        answer = client.post(f"/api/v1/processes/{pid}/accept", json={}, headers=admin)
        assert answer.status_code == 200 and answer.json()["decision"] == "accepted", answer.text
    answers = org1.get(f"/api/v1/processes/{pid}/acceptances").json()
    assert [a["organisation"] for a in answers] == ["Org1MSP", "Org2MSP"]
    error(org4.get(f"/api/v1/processes/{pid}/acceptances"), 403, "FORBIDDEN")
    assert org2.post(f"/api/v1/processes/{pid}/start").json()["status"] == "running"
    w = org1.get(f"/api/v1/processes/{pid}/watch", params={"after_block": -1, "wait": 0}).json()
    names = ["ProcessCreated", "ProcessAnswered", "ProcessAnswered", "ProcessStatus"]
    assert [e["name"] for e in w["events"]] == names and w["status"] == "running"
    last = w["events"][-1]["block"]
    assert (
        org1.get(f"/api/v1/processes/{pid}/watch", params={"after_block": last, "wait": 0}).json()["events"]
        == []
    )
    error(org2.post(f"/api/v1/processes/{pid}/abort", json={"reason": "no"}), 403, "FORBIDDEN")
    a = org1.post(f"/api/v1/processes/{pid}/abort", json={"reason": "test over"}).json()
    assert a["status"] == "aborted" and a["status_reason"] == "test over"
    w = org1.get(f"/api/v1/processes/{pid}/watch", params={"after_block": last, "wait": 0}).json()
    assert w["status"] == "aborted" and w["events"][0]["payload"]["status"] == "aborted"
    hist = org2.get(f"/api/v1/processes/{pid}/history").json()
    assert [h["value"]["status"] for h in hist] == ["created", "running", "aborted"]
    error(org1.post(f"/api/v1/processes/{pid}/start"), 409, "INVALID_STATE")


@pytest.mark.parametrize(
    "patch",
    [
        {"rounds": 0},
        {"rounds": "many"},
        {"consortium": []},
        {"consortium": ["not an msp!"]},
        {"topology": {"seed": 1}},
        {"privacy_budget": {"mechanism": "g", "epsilon": -1}},
        {"id": "has space"},
        {"creator": "Org2MSP"},
    ],
)
def test_malformed_process_is_refused_and_changes_nothing(org1, patch):
    pid = f"p-{uid()}"
    body = {
        "id": pid,
        "image_id": "rf:1",
        "consortium": ["Org1MSP"],
        "topology": {"kind": "ring"},
        "rounds": 2,
    }
    body.update(patch)
    before = org1.get("/api/v1/health").json()["block_height"]
    error(org1.post("/api/v1/processes", json=body), 422, "INVALID_REQUEST")
    assert org1.get("/api/v1/health").json()["block_height"] == before


def test_process_refusals_from_the_contract(org1):
    base = {"image_id": "rf:1", "topology": {"kind": "ring"}, "rounds": 1}
    error(org1.post("/api/v1/processes", json={**base, "id": f"p-{uid()}", "consortium": ["Org2MSP"]}), 403)
    error(
        org1.post(
            "/api/v1/processes",
            json={**base, "id": f"p-{uid()}", "consortium": ["Org1MSP"], "image_id": "missing:1"},
        ),
        404,
    )
    error(org1.post("/api/v1/processes", json={**base, "id": "proc-0", "consortium": ["Org1MSP"]}), 409)


def test_process_creation_goes_through_launch(org1, gateways, monkeypatch):
    """POST /processes creates through executor.process.launch (the CLI's and Python's path): the
    image digest the body pins is passed on, ``start`` starts it; a private process that does not clip
    is refused by the schema (which says so) before anything is written."""
    import executor.process

    calls = []
    real = executor.process.launch
    monkeypatch.setattr(
        executor.process, "launch", lambda c, spec, **kw: calls.append(kw) or real(c, spec, **kw)
    )
    base = {
        "image_id": "rf:1",
        "consortium": ["Org1MSP"],
        "topology": {"kind": "ring", "seed": 1},
        "rounds": 1,
    }
    pid = f"p-{uid()}"
    # starting needs the member's acceptance: a client identity does not give it (and nothing runs)
    r = org1.post("/api/v1/processes", json={**base, "id": pid, "start": True, "image_digest": IMAGE_DIGEST})
    assert r.status_code == 403 and "only admin identities may accept" in r.text, r.text
    assert org1.get(f"/api/v1/processes/{pid}").json()["status"] == "created"
    gw = gateways["Org1MSP"][0]
    admin = {"Authorization": f"Bearer {gw.tokens.issue('Admin')}"}
    pid = f"p-{uid()}"
    body = {**base, "id": pid, "start": True, "image_digest": IMAGE_DIGEST}
    r = org1.post("/api/v1/processes", json=body, headers=admin)
    assert r.status_code == 201 and r.json()["status"] == "running", r.text
    assert [sorted(kw) for kw in calls] == [["consent", "start"]] * 2 and calls[1]["start"] is True
    answers = org1.get(f"/api/v1/processes/{pid}/acceptances").json()
    assert [(a["organisation"], a["decision"], a["role"]) for a in answers] == [
        ("Org1MSP", "accepted", "admin")
    ]
    wrong = "sha256:" + "0" * 64
    error(org1.post("/api/v1/processes", json={**base, "id": f"p-{uid()}", "image_digest": wrong}), 409)
    before = org1.get("/api/v1/health").json()["block_height"]
    unclipped = {**base, "id": f"p-{uid()}", "privacy_budget": {"mechanism": "gaussian", "epsilon": 1.0}}
    assert "clip" in error(org1.post("/api/v1/processes", json=unclipped), 422, "INVALID_REQUEST")["message"]
    unclipped["hyperparameters"] = {"gradient_clip": True}
    error(org1.post("/api/v1/processes", json=unclipped), 422, "INVALID_REQUEST")
    assert org1.get("/api/v1/health").json()["block_height"] == before


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/images",
        "/api/v1/processes",
        "/api/v1/processes/proc-0/executions",
        "/api/v1/models",
        "/api/v1/whoami",
    ],
)
def test_every_router_refuses_undeclared_query_parameters(org1, path):
    body = error(org1.get(path, params={"stauts": "revoked"}), 422, "INVALID_REQUEST")
    assert body["details"]["errors"][0]["location"] == "query.stauts"


# ---------------------------------------------------------------- provenance
def test_executions_timeline_and_history(org1, org4):
    page = org1.get("/api/v1/processes/proc-0/executions").json()
    assert page["total"] == 9 and all(e["status"] == "completed" for e in page["items"])
    one = org1.get(
        "/api/v1/processes/proc-0/executions", params={"round": 2, "organisation": "Org3MSP"}
    ).json()
    assert [(e["round"], e["organisation"]) for e in one["items"]] == [(2, "Org3MSP")]
    rec = org1.get("/api/v1/processes/proc-0/executions/2/Org3MSP").json()
    assert rec == one["items"][0]  # one record type: the same answer from the ledger and from the index
    hist = org1.get("/api/v1/processes/proc-0/executions/2/Org3MSP/history").json()
    assert [h["value"]["status"] for h in hist] == ["running", "completed"]
    tl = org1.get("/api/v1/processes/proc-0/timeline").json()
    names = [e["name"] for e in tl["events"]]
    assert names[0] == "ProcessCreated" and names.count("TaskCompleted") == 9 and "ModelPublished" in names
    error(org4.get("/api/v1/processes/proc-0/executions"), 403)
    error(org4.get("/api/v1/processes/proc-0/executions/1/Org1MSP"), 403)
    error(org1.get("/api/v1/processes/proc-0/executions/9/Org1MSP"), 404)


def test_which_artifacts_each_run_and_each_organisation_published(org1, world):
    runs = org1.get("/api/v1/processes/proc-0/artifacts").json()
    assert len(runs) == 9
    for run in runs:
        rec = org1.get(f"/api/v1/processes/proc-0/executions/{run['round']}/{run['organisation']}").json()
        outs = rec["result"]["outputs"]
        expected = {outs["state"], *(m["digest"] for m in outs["messages"])} | (
            {outs["model"]["digest"]} if outs["model"] else set()
        )
        assert {a["digest"] for a in run["artifacts"]} == expected
    org2_only = org1.get("/api/v1/processes/proc-0/artifacts", params={"organisation": "Org2MSP"}).json()
    assert {r["organisation"] for r in org2_only} == {"Org2MSP"} and len(org2_only) == 3
    msg = next(a for a in runs[0]["artifacts"] if a["kind"] == "message")
    prov = org1.get(f"/api/v1/artifacts/{msg['digest']}").json()
    assert prov["produced_by"][0]["organisation"] == runs[0]["organisation"]
    assert prov["consumed_by"][0]["organisation"] == msg["recipient"] and prov["consumed_by"][0]["round"] == 2
    error(org1.get("/api/v1/artifacts/sha256:" + "0" * 64), 404)
    error(org1.get("/api/v1/artifacts/nonsense"), 422)


def test_attestation_only_for_own_executions(org1):
    env = org1.get("/api/v1/processes/proc-0/executions/3/Org1MSP/attestation").json()
    assert env["payloadType"] == "application/vnd.in-toto+json" and len(env["signatures"]) == 1
    error(org1.get("/api/v1/processes/proc-0/executions/3/Org2MSP/attestation"), 403, "FORBIDDEN")


def test_gateway_attestation_carries_the_chain_head(org1, world):
    import json

    from audit.attestations import statement_checkpoint
    from audit.checkpoints import check_checkpoint

    env = org1.get("/api/v1/processes/proc-0/executions/3/Org1MSP/attestation").json()
    statement = json.loads(base64.b64decode(env["payload"]))
    cas = {
        o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes()
        for o in world.consortium.organisations
    }
    cp, signer = check_checkpoint(statement_checkpoint(statement), cas)
    assert signer == "Org1MSP" and cp.block_number >= 1
    assert (
        world.ledger.block(world.consortium.identity("Org1"), cp.block_number).header_hash == cp.header_hash
    )


# ---------------------------------------------------------------- models
def test_models_list_get_lineage_verify(org1, org2, org4):
    ids = [m["id"] for m in org1.get("/api/v1/models").json()["items"]]
    assert {"proc-0:Org1MSP", "proc-0:Org2MSP", "proc-0:Org3MSP"} <= set(ids)
    assert org4.get("/api/v1/models").json()["total"] == 0
    m = org2.get("/api/v1/models/proc-0:Org1MSP").json()
    assert m["owner"] == "Org1MSP" and "wrapped_key" not in m
    lin = org1.get("/api/v1/models/proc-0:Org1MSP/lineage").json()
    assert lin["root"] == "proc-0/3/Org1MSP" and len(lin["nodes"]) == 6
    assert {(e["from"], e["to"]) for e in lin["edges"]} >= {("proc-0/2/Org3MSP", "proc-0/3/Org1MSP")}
    rep = org2.post("/api/v1/models/proc-0:Org1MSP/verify").json()
    assert rep["ok"] and rep["failures"] == 0 and len(rep["checks"]) > 10
    error(org4.get("/api/v1/models/proc-0:Org1MSP"), 403)
    error(org4.get("/api/v1/models/proc-0:Org1MSP/lineage"), 403)
    error(org4.post("/api/v1/models/proc-0:Org1MSP/verify"), 403)
    error(org1.get("/api/v1/models/nope"), 404)


def test_download_checks_access_and_digest(org1, org2, org4, world):
    r = org2.get("/api/v1/models/proc-0:Org1MSP/download")
    assert r.status_code == 200 and r.content == world.models["proc-0:Org1MSP"]
    assert r.headers["x-consortia-digest"] == "sha256:" + hashlib.sha256(r.content).hexdigest()
    error(org4.get("/api/v1/models/proc-0:Org1MSP/download"), 403)


def test_download_refuses_a_tampered_artifact(org1, world, gateways):
    model = org1.get("/api/v1/models/proc-0:Org3MSP").json()
    path = world.stores["Org3MSP"].path(model["ciphertext_digest"])  # the owner's store, behind its service
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        error(org1.get("/api/v1/models/proc-0:Org3MSP/download"), 502, "DIGEST_MISMATCH")
        path.unlink()
        error(org1.get("/api/v1/models/proc-0:Org3MSP/download"), 404, "ARTIFACT_MISSING")
    finally:
        path.write_bytes(original)
    assert org1.get("/api/v1/models/proc-0:Org3MSP/download").status_code == 200


def test_grant_and_revoke_model_access(org1, org2, org4, world):
    mid = "proc-0:Org1MSP"
    error(org2.post(f"/api/v1/models/{mid}/grant", json={"organisation": "Org4MSP"}), 403, "FORBIDDEN")
    error(org1.post(f"/api/v1/models/{mid}/grant", json={"organisation": "Org9MSP"}), 404)
    error(org1.post(f"/api/v1/models/{mid}/grant", json={"organisation": "bad msp!"}), 422)
    g = org1.post(f"/api/v1/models/{mid}/grant", json={"organisation": "Org4MSP"}).json()
    assert "Org4MSP" in g["access"]
    assert not world.stores["Org4MSP"].has(g["ciphertext_digest"])  # only the owner holds it ...
    r = org4.get(f"/api/v1/models/{mid}/download")
    assert r.status_code == 200 and r.content == world.models[mid]  # the sealed key opens for Org4
    assert world.stores["Org4MSP"].has(g["ciphertext_digest"])  # ... fetched from the owner's service
    assert mid in [m["id"] for m in org4.get("/api/v1/models").json()["items"]]
    error(org1.post(f"/api/v1/models/{mid}/grant", json={"organisation": "Org4MSP"}), 409)
    # Org4 keeps the sealed key it fetched while it had access
    before = world.clients["Org4MSP"].get_model(mid)
    old_key4 = unseal(
        world.consortium.encryption_key("Org4MSP"),
        base64.b64decode(before.wrapped_key),
        model_key_info(record(before)),
    )
    rv = org1.post(f"/api/v1/models/{mid}/revoke", json={"organisation": "Org4MSP"}).json()
    assert "Org4MSP" not in rv["access"]
    error(org4.get(f"/api/v1/models/{mid}/download"), 403)
    # the revocation rotated the data key: the stored ciphertext was replaced ...
    owner_store = world.stores["Org1MSP"]
    assert rv["ciphertext_digest"] != before.ciphertext_digest and rv["key_version"] == before.key_version + 1
    assert not owner_store.path(before.ciphertext_digest).exists()
    stored = owner_store.get(rv["ciphertext_digest"])
    assert owner_store.path(rv["ciphertext_digest"]).stat().st_mode & 0o777 == 0o600
    # ... so the revoked member's old key opens nothing that is stored, while the remaining members read it
    with pytest.raises(DecryptionError):
        decrypt_payload(old_key4, stored, model_aad(record(before)))
    for member in (org1, org2):
        r = member.get(f"/api/v1/models/{mid}/download")
        assert r.status_code == 200 and r.content == world.models[mid]
    import time  # the revoked model leaves Org4's index

    deadline = time.time() + 5
    while time.time() < deadline and mid in [m["id"] for m in org4.get("/api/v1/models").json()["items"]]:
        time.sleep(0.1)
    assert mid not in [m["id"] for m in org4.get("/api/v1/models").json()["items"]]
    hist = org2.get(f"/api/v1/models/{mid}/history").json()
    assert [sorted(h["value"]["access"]) for h in hist][-2:] == [
        ["Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP"],
        ["Org1MSP", "Org2MSP", "Org3MSP"],
    ]
    error(
        org1.post(f"/api/v1/models/{mid}/revoke", json={"organisation": "Org1MSP"}), 400, "INVALID_ARGUMENT"
    )


def test_failed_revocation_leaves_model_and_store_unchanged(gateways, world):
    """If the revocation is not committed, the new ciphertext is deleted and the old one stays."""
    from api.gateway import revoke_with_rotation
    from ledger.errors import MVCCConflict

    gw = gateways["Org1MSP"][0]
    mid = "proc-0:Org1MSP"
    owner = world.clients["Org1MSP"]
    before = owner.get_model(mid)
    files = {f for f in world.stores["Org1MSP"].root.rglob("*") if f.is_file()}

    class Refused:
        organisation = owner.organisation

        def __getattr__(self, name):
            return getattr(owner, name)

        def revoke_model(self, *a, **kw):
            raise MVCCConflict("tx1", "MVCC_READ_CONFLICT")

    with pytest.raises(MVCCConflict):
        revoke_with_rotation(gw, Refused(), mid, "Org2MSP")
    assert owner.get_model(mid) == before and "Org2MSP" in before.access
    assert {
        f for f in world.stores["Org1MSP"].root.rglob("*") if f.is_file()
    } == files  # new removed, old kept


def test_openapi_document_lists_every_journey(org1):
    doc = org1.get("/openapi.json").json()
    paths = set(doc["paths"])
    for p in (
        "/api/v1/images",
        "/api/v1/processes/{process_id}/watch",
        "/api/v1/models/{model_id}/lineage",
        "/api/v1/models/{model_id}/download",
        "/api/v1/artifacts/{digest}",
        "/api/v1/processes/{process_id}/executions/{round}/{organisation}/attestation",
    ):
        assert p in paths
    assert "ErrorBody" in doc["components"]["schemas"]
    assert doc["components"]["securitySchemes"]["ApiToken"]["scheme"] == "bearer"
    assert doc["paths"]["/api/v1/models"]["get"]["security"] == [{"ApiToken": []}]
    assert "security" not in doc["paths"]["/api/v1/health"]["get"]


def test_explorer_is_served_without_external_resources(org1):
    import re

    r = org1.get("/explorer/")
    assert r.status_code == 200 and 'src="explorer.js"' in r.text
    assert org1.get("/", follow_redirects=False).headers["location"] == "/explorer/"
    for asset in ("", "explorer.js", "explorer.css"):
        body = org1.get(f"/explorer/{asset}").text
        assert body
        # the only absolute URL is the SVG namespace name, which is never fetched
        urls = {
            u
            for u in re.findall(r"https?://[^\s\"')]+", body)
            if not u.startswith("http://www.w3.org/2000/svg")
        }
        assert not urls, urls


def test_gateway_opens_a_model_through_the_owners_https_service(tmp_path, world):
    """A gateway whose store reaches the owner's artifact service over HTTPS (as between hosts): the
    ciphertext is fetched, verified and kept in the gateway's own store; the record's location is not
    what is opened."""
    import os
    from types import SimpleNamespace

    from api.gateway.sealed_models import open_model_payload
    from exchange.locations import Locations
    from exchange.readers import StaticReaders
    from exchange.sealing import encrypt_payload, seal
    from exchange.service import ArtifactServer
    from exchange.store import ArtifactStore
    from exchange.tls import ClientTLS

    crypto = world.consortium
    payload = os.urandom(200_000)
    owner = ArtifactStore(tmp_path / "org1", "Org1MSP")
    rec = {
        "id": "p:Org1MSP",
        "process_id": "p",
        "owner": "Org1MSP",
        "digest": "sha256:" + hashlib.sha256(payload).hexdigest(),
    }
    key, ciphertext = encrypt_payload(payload, model_aad(rec))
    ct = owner.put(ciphertext).digest
    wrapped = seal(crypto.encryption_certificate("Org2MSP"), key, model_key_info(rec))
    srv = ArtifactServer(("127.0.1.1", 0), owner, crypto, StaticReaders({ct: ["Org2MSP"]})).start()
    locations = Locations(ClientTLS(crypto, "Org2MSP"), endpoints={"Org1MSP": srv.url})
    try:
        rec.update(
            ciphertext_digest=ct, location="file:///nowhere", wrapped_key=base64.b64encode(wrapped).decode()
        )
        store = ArtifactStore(tmp_path / "gw", "Org2MSP", locations=locations)
        gw = SimpleNamespace(consortium=crypto, msp_id="Org2MSP", artifacts=store)
        assert open_model_payload(gw, rec) == payload
        assert store.has(ct)  # kept in the gateway's own store
    finally:
        locations.close()
        srv.stop()
