"""audit.attestations: in-toto Statement v1 / SLSA Provenance v1 of execution records, in DSSE
envelopes signed by the executing organisation."""

from __future__ import annotations

import base64
import json

import pytest

from audit.attestations import (
    CHECKPOINT_BYPRODUCT,
    IN_TOTO_PAYLOAD,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    AttestationError,
    attest_execution,
    certificate_keyid,
    check_statement,
    execution_statement,
    open_envelope,
    pae,
    statement_checkpoint,
    strict_b64decode,
)
from chaincode.canonical import canonical_json


@pytest.fixture(scope="module")
def record(world) -> dict:
    return json.loads(
        world.ledger.evaluate(
            world.consortium.identity("Org2MSP"), "ExecutionRecord:get", "proc-0", "3", "Org2MSP"
        )
    )


def test_pae_is_the_dsse_v1_encoding():
    assert pae("application/vnd.in-toto+json", b"hello") == b"DSSEv1 28 application/vnd.in-toto+json 5 hello"


def test_statement_subjects_are_outputs_and_dependencies_are_inputs(record):
    st = execution_statement(record)
    res = record["result"]
    assert st["_type"] == STATEMENT_TYPE and st["predicateType"] == PREDICATE_TYPE
    subjects = {s["name"]: "sha256:" + s["digest"]["sha256"] for s in st["subject"]}
    assert subjects["proc-0/3/Org2MSP/state"] == res["outputs"]["state"]
    assert subjects["proc-0/3/Org2MSP/model"] == res["outputs"]["model"]["digest"]
    assert subjects["proc-0/3/Org2MSP/message/Org3MSP"] == res["outputs"]["messages"][0]["digest"]
    deps = {
        d["name"]: "sha256:" + d["digest"]["sha256"]
        for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]
    }
    assert (
        deps["image"] == res["image_digest"] and deps["data_commitment"] == res["inputs"]["data_commitment"]
    )
    assert (
        deps["state"] == res["inputs"]["state"]
        and deps["message/Org1MSP"] == res["inputs"]["messages"][0]["digest"]
    )
    run = st["predicate"]["runDetails"]
    assert run["metadata"]["invocationId"] == record["completed_tx_id"]
    result = next(b for b in run["byproducts"] if b["name"] == "execution-result")
    assert base64.b64decode(result["content"]) == canonical_json(res)


def test_envelope_signed_by_the_executing_organisation_verifies(record, world):
    ident = world.consortium.identity("Org2MSP")
    env = attest_execution(record, ident)
    assert env["payloadType"] == IN_TOTO_PAYLOAD
    certs = {certificate_keyid(ident.certificate_pem): ident.certificate_pem}
    statement, keyid = open_envelope(env, certs)
    assert keyid == certificate_keyid(ident.certificate_pem)
    assert check_statement(statement, record) is None  # no checkpoint was given to carry


def test_only_the_executing_organisation_may_attest(record, world):
    with pytest.raises(AttestationError, match="Org2MSP itself"):
        attest_execution(record, world.consortium.identity("Org1MSP"))


def test_changed_envelopes_are_refused(record, world):
    ident = world.consortium.identity("Org2MSP")
    certs = {certificate_keyid(ident.certificate_pem): ident.certificate_pem}
    env = attest_execution(record, ident)
    body = json.loads(base64.b64decode(env["payload"]))
    body["subject"][0]["digest"]["sha256"] = "0" * 64
    forged = {**env, "payload": base64.b64encode(canonical_json(body)).decode()}
    with pytest.raises(AttestationError, match="does not verify"):
        open_envelope(forged, certs)
    with pytest.raises(AttestationError, match="unknown key"):
        open_envelope(env, {})
    with pytest.raises(AttestationError, match="DSSE envelope"):
        open_envelope({"payload": env["payload"]}, certs)
    # a statement that verifies but says something else than the record
    resigned = attest_execution(record, ident)
    other = dict(record, result={**record["result"], "round": 2})
    with pytest.raises(AttestationError):
        check_statement(json.loads(base64.b64decode(resigned["payload"])), other)


def test_strict_base64_refuses_alternate_spellings():
    assert strict_b64decode("QQ==", "x") == b"A"
    with pytest.raises(AttestationError, match="canonical"):
        strict_b64decode("QR==", "x")  # decodes to b"A" too, but is not its canonical encoding
    with pytest.raises(AttestationError):
        strict_b64decode("not base64!", "x")


def test_task_signature_is_checked(record):
    bad = dict(record, result={**record["result"], "metrics": {"loss": 0.0, "epsilon_spent": 0.5}})
    with pytest.raises(AttestationError, match="task signature"):
        check_statement(execution_statement(bad), bad)


def test_records_without_result_are_not_attested(record):
    with pytest.raises(AttestationError, match="no result"):
        execution_statement(dict(record, result=None, status="running"))


def test_the_ledger_checkpoint_travels_as_a_byproduct(record, world):
    from ledger.checkpoint import checkpoint_of

    ident = world.consortium.identity("Org2MSP")
    cp = checkpoint_of(world.ledger, ident)
    env = attest_execution(record, ident, cp)
    statement, _ = open_envelope(env, {certificate_keyid(ident.certificate_pem): ident.certificate_pem})
    assert statement_checkpoint(statement) == cp.to_json() == check_statement(statement, record)
    [carried] = [
        b for b in statement["predicate"]["runDetails"]["byproducts"] if b["name"] == CHECKPOINT_BYPRODUCT
    ]
    for body, why in ((b"[1,2]", "not a JSON object"), (b'{"b":1, "a":2}', "not canonical JSON")):
        carried["content"] = base64.b64encode(body).decode()
        with pytest.raises(AttestationError, match=why):
            statement_checkpoint(statement)
