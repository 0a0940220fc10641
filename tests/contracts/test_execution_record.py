"""ExecutionRecord contract rules, through the Ledger interface."""

from __future__ import annotations

import base64
import json
import math

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from chaincode.canonical import canonical_json
from chaincode.errors import (
    AlreadyExists,
    BudgetExceeded,
    Forbidden,
    ImageMismatch,
    InvalidArgument,
    InvalidState,
    NotFound,
    SignatureInvalid,
)
from chaincode.records import RESULT_CONFIDENTIAL
from ledger.client import process_transient
from ledger.identity import P256_ORDER, sign
from tests.contracts.helpers import (
    complete,
    digest_of,
    make_result,
    new_process,
    private_metrics,
    public_result,
    run_task,
)


def _task(client, pid, rnd, runtime="sandbox"):
    key = ec.generate_private_key(ec.SECP256R1())
    client.create_task(pid, rnd, key.public_key(), runtime)
    return key


def test_create_complete_and_read_back(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    rec = org1.get_execution(pid, 1, "Org1MSP")
    assert rec.status == "running" and rec.runtime == "sandbox" and "BEGIN PUBLIC KEY" in rec.public_key
    result = make_result(pid, 1, "Org1MSP", recipients=("Org2MSP",))
    done = complete(org1, key, result)  # the answer is the public record: no confidential value
    assert done.status == "completed" and done.result.metrics == {} and done.private_sha256 is not None
    assert [m.recipient for m in done.result.outputs.messages] == [None]  # who it goes to: private too
    read = org1.get_execution(pid, 1, "Org1MSP").result  # the member's read joins them back
    joined = read.json_object()
    assert {
        k: v for k, v in joined.items() if k not in ("confidential_sha256", "confidential_parties")
    } == result
    assert org2.get_execution(pid, 1, "Org1MSP").result.outputs.messages[0].recipient == "Org2MSP"


def test_inbox_gives_each_member_only_its_own_messages(admins, org1, org2, org3, uid):
    """``inbox`` answers, per organisation of a round, its status, its state digest (once completed)
    and only the messages addressed to the caller -- what the next task needs, not the records."""
    pid = new_process(admins, org1, uid, consortium=("Org1MSP", "Org2MSP", "Org3MSP"))
    run_task(org1, pid, 1, recipients=("Org2MSP", "Org3MSP"))
    _task(org2, pid, 1)  # registered, still running
    by_org = {e.organisation: e for e in org2.round_inbox(pid, 1)}
    assert sorted(by_org) == ["Org1MSP", "Org2MSP"]
    mine = by_org["Org1MSP"]
    assert (mine.status, mine.state) == ("completed", digest_of("state-Org1MSP-1"))
    assert [m.recipient for m in mine.messages] == ["Org2MSP"]
    assert mine.messages[0].digest == digest_of("msg-Org1MSP-Org2MSP-1")
    assert (by_org["Org2MSP"].status, by_org["Org2MSP"].state, by_org["Org2MSP"].messages) == (
        "running",
        None,
        (),
    )
    assert [m.recipient for m in org3.round_inbox(pid, 1)[0].messages] == ["Org3MSP"]
    assert org1.round_inbox(pid, 2) == []
    outsider = new_process(admins, org2, uid + "x", consortium=("Org2MSP", "Org3MSP"))
    with pytest.raises(Forbidden):
        org1.round_inbox(outsider, 1)
    with pytest.raises(InvalidArgument, match="round"):
        org1.ledger.evaluate(org1.identity, "ExecutionRecord:inbox", pid, "zero")


def test_create_task_refusals(admins, org1, org2, org3, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    with pytest.raises(Forbidden, match="not a member"):
        _task(org3, pid, 1)
    with pytest.raises(InvalidState, match="round 1 not completed"):
        _task(org1, pid, 2)
    with pytest.raises(InvalidState, match="has 2 rounds"):
        _task(org1, pid, 3)
    _task(org1, pid, 1)
    with pytest.raises(AlreadyExists):
        _task(org1, pid, 1)
    with pytest.raises(InvalidArgument, match="P-256|PEM"):
        org2.create_task(pid, 1, "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "sandbox")
    with pytest.raises(InvalidArgument, match="runtime"):
        org2.create_task(pid, 1, ec.generate_private_key(ec.SECP256R1()).public_key(), "bare-metal")
    not_started = new_process(admins, org1, uid + "b", start=False)
    with pytest.raises(InvalidState, match="closed"):
        _task(org1, not_started, 1)


def test_result_only_from_the_executing_organisation(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    result = make_result(pid, 1, "Org1MSP")
    with pytest.raises(Forbidden, match="executing organisation"):
        complete(org2, key, result)
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"


def test_result_signed_by_unregistered_key_is_refused(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    _task(org1, pid, 1)
    other = ec.generate_private_key(ec.SECP256R1())
    result = make_result(pid, 1, "Org1MSP")
    with pytest.raises(SignatureInvalid, match="not signed by the key registered"):
        complete(org1, other, result)


def test_altered_result_is_refused(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    public, part = public_result(make_result(pid, 1, "Org1MSP"))
    sig = sign(key, canonical_json(public))
    public["outputs"]["state"] = digest_of("another state")
    with pytest.raises(SignatureInvalid):
        org1.complete_task(public, sig, part)


def test_malformed_and_high_s_signatures_are_refused(admins, org1, ledger, consortium, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    public, part = public_result(make_result(pid, 1, "Org1MSP"))
    r, s = decode_dss_signature(key.sign(canonical_json(public), ec.ECDSA(hashes.SHA256())))
    high_s = encode_dss_signature(r, s if s > P256_ORDER // 2 else P256_ORDER - s)
    with pytest.raises(SignatureInvalid, match="low-S"):
        org1.complete_task(public, high_s, part)
    with pytest.raises(SignatureInvalid, match="malformed"):
        ledger.submit(
            consortium.identity("Org1"),
            "ExecutionRecord:complete_task",
            canonical_json(public).decode(),
            "!!notbase64",
            transient={
                **(process_transient(org1.get_process(pid)) or {}),
                RESULT_CONFIDENTIAL: part.canonical(),
            },
        )


def test_replayed_result_is_refused(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    public, part = public_result(make_result(pid, 1, "Org1MSP"))
    sig = sign(key, canonical_json(public))
    org1.complete_task(public, sig, part)
    with pytest.raises(InvalidState, match="accepted only once"):
        org1.complete_task(public, sig, part)


def test_wrong_image_digest_is_refused(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    result = make_result(pid, 1, "Org1MSP", image_digest="sha256:" + "99" * 32)
    with pytest.raises(ImageMismatch, match="pins"):
        complete(org1, key, result)


def test_result_for_a_closed_round_is_refused(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    org1.abort_process(pid, "stop")
    result = make_result(pid, 1, "Org1MSP")
    with pytest.raises(InvalidState, match="closed"):
        complete(org1, key, result)


def test_result_runtime_must_match_registration(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1, runtime="container")
    result = make_result(pid, 1, "Org1MSP", runtime="sandbox")
    with pytest.raises(InvalidArgument, match="runtime"):
        complete(org1, key, result)


def test_result_without_registered_task(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    key = ec.generate_private_key(ec.SECP256R1())
    result = make_result(pid, 1, "Org1MSP")
    with pytest.raises(NotFound, match="no task registered"):
        complete(org1, key, result)


def test_privacy_budget_is_enforced(admins, org1, org2, uid):
    # basic composition, node scope: the organisation's own Σ ε0 is capped
    pid = new_process(
        admins,
        org1,
        uid,
        rounds=3,
        privacy_budget={"mechanism": "laplace", "epsilon": 1.0, "scope": "node"},
        hyperparameters={"gradient_clip": 1.0},
    )
    key = _task(org1, pid, 1)
    no_eps = make_result(pid, 1, "Org1MSP", metrics={"privacy_rigorous": 1})
    with pytest.raises(InvalidArgument, match="epsilon_spent"):
        complete(org1, key, no_eps)
    ok = make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.4))
    complete(org1, key, ok)
    assert org1.get_execution(pid, 1, "Org1MSP").epsilon_total == pytest.approx(0.4)
    run_task(org2, pid, 1, metrics=private_metrics(0.4))
    key2 = _task(org1, pid, 2)
    r2 = make_result(pid, 2, "Org1MSP", metrics=private_metrics(0.5))
    complete(org1, key2, r2)  # continues round 1's private charge
    assert org1.get_execution(pid, 2, "Org1MSP").epsilon_total == pytest.approx(0.9)
    run_task(org2, pid, 2, metrics=private_metrics(0.4))
    key3 = _task(org1, pid, 3)
    r3 = make_result(pid, 3, "Org1MSP", metrics=private_metrics(0.2))
    with pytest.raises(BudgetExceeded, match="over the budget"):
        complete(org1, key3, r3)
    assert org1.get_execution(pid, 3, "Org1MSP").status == "running"
    failed = org1.fail_task(pid, 3, "privacy budget exhausted", {"epsilon_total": 1.1})
    assert failed.status == "failed" and failed.failure_reason == "privacy budget exhausted"
    assert org1.fail_process(pid, "privacy budget of Org1MSP exhausted in round 3").status == "failed"


def test_nominal_epsilon_is_refused_on_a_private_process(admins, org1, uid):
    pid = new_process(
        admins,
        org1,
        uid,
        privacy_budget={"mechanism": "laplace", "epsilon": 10.0},
        hyperparameters={"gradient_clip": 1.0},
    )
    key = _task(org1, pid, 1)
    for metrics in (
        private_metrics(0.1, privacy_rigorous=0),
        {**private_metrics(0.1)} | {"privacy_rigorous": 0.5},
        {k: v for k, v in private_metrics(0.1).items() if k != "privacy_rigorous"},
    ):
        nominal = make_result(pid, 1, "Org1MSP", metrics=metrics)
        with pytest.raises(InvalidArgument, match="nominal"):
            complete(org1, key, nominal)
    below = make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.1, epsilon_network_spent=0.05))
    with pytest.raises(InvalidArgument, match="below the node charge"):
        complete(org1, key, below)
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"


def test_network_zcdp_budget_records_both_observers_and_the_accounting(admins, org1, org2, uid):
    """Scope network, zCDP at δ = 1e-5: the network total (2 releases per round) is capped, the node
    total is recorded beside it, and each record names the accounting and sensitivity it used."""
    delta = 1e-5
    pid = new_process(
        admins,
        org1,
        uid,
        rounds=3,
        hyperparameters={"gradient_clip": 0.5},
        privacy_budget={"mechanism": "laplace", "epsilon": 2.0, "delta": delta},
    )
    eps0 = 0.1

    def zcdp(rho):
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))

    for rnd in (1, 2):
        for client in (org1, org2):
            run_task(client, pid, rnd, metrics=private_metrics(eps0, sensitivity=3.0, gradient_clip=0.5))
        rec = org1.get_execution(pid, rnd, "Org1MSP")
        priv = rec.privacy.json_object()  # the block as stored
        assert priv["accounting"] == "zcdp" and priv["scope"] == "network" and priv["rigorous"] is True
        assert priv["sensitivity"] == 3.0 and priv["gradient_clip"] == 0.5 and priv["delta"] == delta
        assert priv["node"]["epsilon_basic"] == pytest.approx(rnd * eps0)
        assert priv["node"]["rho"] == pytest.approx(rnd * eps0**2 / 2)
        assert priv["network"]["rho"] == pytest.approx(2 * rnd * eps0**2 / 2)
        net = min(2 * rnd * eps0, zcdp(2 * rnd * eps0**2 / 2))
        assert priv["network"]["epsilon"] == pytest.approx(net)
        assert priv["node"]["epsilon"] == pytest.approx(min(rnd * eps0, zcdp(rnd * eps0**2 / 2)))
        assert rec.epsilon_total == pytest.approx(net)  # the capped figure is the network one
    # a budget between a round's node charge (1.0) and its network charge (2 × 1.0) refuses the round
    pid2 = new_process(
        admins,
        org1,
        uid + "n",
        rounds=2,
        hyperparameters={"gradient_clip": 0.5},
        privacy_budget={"mechanism": "laplace", "epsilon": 1.5},
    )
    key = _task(org1, pid2, 1)
    r1 = make_result(pid2, 1, "Org1MSP", metrics=private_metrics(1.0))
    with pytest.raises(BudgetExceeded, match="network"):
        complete(org1, key, r1)
    assert org1.get_execution(pid2, 1, "Org1MSP").status == "running"


def test_fail_task_records_refusal_without_a_key(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid)
    rec = org2.fail_task(pid, 1, "image digest mismatch", {"local": "sha256:" + "12" * 32})
    assert (
        rec.status == "failed" and rec.public_key == "" and rec.failure_details["local"].startswith("sha256:")
    )
    with pytest.raises(InvalidState, match="already failed"):
        org2.fail_task(pid, 1, "again")
    with pytest.raises(AlreadyExists):
        _task(org2, pid, 1)


def test_query_by_round_and_organisation(admins, org1, org2, org3, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    run_task(org1, pid, 1)
    run_task(org2, pid, 1)
    run_task(org2, pid, 2)
    assert len(org1.query_executions(pid)) == 3
    assert {(r.round, r.organisation) for r in org1.query_executions(pid, round=1)} == {
        (1, "Org1MSP"),
        (1, "Org2MSP"),
    }
    assert [r.round for r in org1.query_executions(pid, organisation="Org2MSP")] == [1, 2]
    with pytest.raises(Forbidden):
        org3.query_executions(pid)
    with pytest.raises(Forbidden):
        org3.get_execution(pid, 1, "Org1MSP")


def test_history_of_a_record(admins, org1, uid):
    pid = new_process(admins, org1, uid)
    run_task(org1, pid, 1)
    hist = org1.execution_history(pid, 1, "Org1MSP")
    assert [h.value["status"] for h in hist] == ["running", "completed"]
    with pytest.raises(NotFound):
        org1.execution_history(pid, 2, "Org1MSP")
    with pytest.raises(InvalidArgument, match="round"):
        org1.ledger.evaluate(org1.identity, "ExecutionRecord:get", pid, "one", "Org1MSP")


def test_result_must_be_well_formed(admins, org1, ledger, consortium, uid):
    pid = new_process(admins, org1, uid)
    key = _task(org1, pid, 1)
    result = make_result(pid, 1, "Org1MSP")
    del result["outputs"]["state"]
    with pytest.raises(InvalidArgument, match="outputs"):
        complete(org1, key, result)
    result = make_result(pid, 1, "Org1MSP")
    result["inputs"]["messages"] = [{"sender": "Org2MSP", "digest": "nope"}]
    with pytest.raises(InvalidArgument, match="digest"):
        complete(org1, key, result)
    good = digest_of("a message")
    for side, messages, needle in (
        ("inputs", {"sender": "Org2MSP"}, "result.inputs.messages must be a list"),
        ("inputs", [{"digest": good}], "each input message needs a sender"),
        ("inputs", [{"sender": "Org2MSP", "digest": "nope"}], "input message digest"),
        ("outputs", None, "result.outputs.messages must be a list"),
        ("outputs", [{"sender": "Org2MSP", "digest": good}], "each output message needs a recipient"),
        ("outputs", [{"recipient": "Org2MSP"}], "output message digest"),
    ):
        result = make_result(pid, 1, "Org1MSP")
        result[side]["messages"] = messages
        with pytest.raises(InvalidArgument, match=needle):
            complete(org1, key, result)
    bad = json.dumps({"process_id": pid})
    with pytest.raises(InvalidArgument):
        ledger.submit(
            consortium.identity("Org1"), "ExecutionRecord:complete_task", bad, base64.b64encode(b"x").decode()
        )


def test_an_organisation_acts_at_once_on_another_organisations_commit(admins, org1, org2, uid):
    """Org1 starts a process and Org2 registers its task straight away, through its own peer. On a
    real network Org2's peer may not have committed the start block yet; the client waits until it
    has (read-your-writes across peers) instead of endorsing against the older state, which would
    refuse the task with 'the process is created'. Repeated, because the lag is a race."""
    for i in range(6):
        pid = new_process(admins, org1, f"{uid}{i}", rounds=1)
        key = ec.generate_private_key(ec.SECP256R1())
        rec = org2.create_task(pid, 1, key.public_key(), "sandbox")
        assert (rec.process_id, rec.round, rec.organisation, rec.status) == (pid, 1, "Org2MSP", "running")


SCORES = {"metric": "balanced_accuracy", "collaborative": 0.8, "isolated": 0.9, "rows": 12}


def test_validation_scores_are_signed_in_the_last_round_of_a_process_with_a_slice_only(
    admins, org1, org2, uid
):
    """A process that declares a validation slice needs each member's scores in its last round's signed
    result (what collaboration bought it, docs/models.md), and takes them nowhere else; they are read back as
    the member's gain, and a malformed block is refused naming the field."""
    pid = new_process(admins, org1, uid, validation_fraction=0.2)
    assert org1.get_process(pid).validation_fraction == 0.2
    key = _task(org1, pid, 1)
    early = make_result(pid, 1, "Org1MSP", validation=SCORES)
    with pytest.raises(InvalidArgument, match="only in the last round"):
        complete(org1, key, early)
    first = make_result(pid, 1, "Org1MSP")
    complete(org1, key, first)
    run_task(org2, pid, 1)
    key = _task(org1, pid, 2)
    missing = make_result(pid, 2, "Org1MSP", model_digest=digest_of("m1"))
    with pytest.raises(InvalidArgument, match="must carry its validation scores"):
        complete(org1, key, missing)
    for bad, message in (
        ({**SCORES, "rows": 0}, "result.validation.rows must be a positive integer"),
        ({**SCORES, "collaborative": "high"}, "result.validation.collaborative must be a finite number"),
        ({**SCORES, "metric": "Bad Name"}, "result.validation.metric must be a lower-case name"),
        ({k: v for k, v in SCORES.items() if k != "isolated"}, r"lacks required fields \['isolated'\]"),
        ({**SCORES, "extra": 1}, r"has unknown fields \['extra'\]"),
    ):
        with pytest.raises(InvalidArgument, match=message):  # checked before anything else is read
            org2.complete_task(make_result(pid, 2, "Org2MSP", validation=bad), b"")
    last = make_result(
        pid, 2, "Org1MSP", model_digest=digest_of("m1"), validation={**SCORES, "isolated": 0.7}
    )
    complete(org1, key, last)
    run_task(org2, pid, 2, model_digest=digest_of("m2"), validation=SCORES)
    process = org1.get_process(pid)
    gains = {g.organisation: g for g in org1.process_gains(process)}
    assert gains["Org1MSP"].gain == pytest.approx(0.1) and gains["Org1MSP"].negative is False
    assert gains["Org2MSP"].gain == pytest.approx(-0.1) and gains["Org2MSP"].negative is True
    assert (gains["Org2MSP"].metric, gains["Org2MSP"].rows) == ("balanced_accuracy", 12)
    assert org1.get_execution(pid, 2, "Org2MSP").result.json_object()["validation"] == SCORES


def test_a_process_without_a_slice_refuses_validation_scores(admins, org1, uid):
    pid = new_process(admins, org1, uid, consortium=("Org1MSP",), rounds=1)
    assert org1.get_process(pid).validation_fraction == 0 and org1.process_gains(org1.get_process(pid)) == ()
    key = _task(org1, pid, 1)
    scored = make_result(pid, 1, "Org1MSP", model_digest=digest_of("m"), validation=SCORES)
    with pytest.raises(InvalidArgument, match="only in the last round of a process with a validation slice"):
        complete(org1, key, scored)
    plain = make_result(pid, 1, "Org1MSP", model_digest=digest_of("m"))
    assert complete(org1, key, plain).status == "completed"
