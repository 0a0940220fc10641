"""An execution record's confidential part (docs/confidentiality.md): the metrics, the data commitment,
the validation scores and the ε spending go into the members' implicit collections; the task key signs
the public result, which carries the salted ``confidential_sha256``. On both hosts: a two-member process
(Org1, Org2) in the three-organisation channel; the members read the values joined, Org3 is refused,
and neither the chain nor Org3's store or peer folder holds them in clear (Org1's does: the positive
control); anyone verifies the signatures of the public records."""

from __future__ import annotations

import base64
import secrets
import sqlite3
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from audit.signatures import check_record_signature
from chaincode.canonical import canonical_json
from chaincode.records import PREVIOUS_EXECUTION_PRIVATE, RESULT_CONFIDENTIAL, ExecutionPrivate
from executor.task_keys import TaskSignatureInvalid
from ledger.client import ConsortiaClient, ExecutionRecord, process_transient, split_result
from ledger.embedded import EmbeddedLedger
from ledger.embedded.store import private_store_path
from ledger.errors import BudgetExceeded, Forbidden, InvalidArgument, PrivateDataMismatch
from ledger.identity import sign
from tests.contracts.helpers import make_result, new_process, private_metrics
from tests.contracts.test_private_terms import _holding, _org_files
from tests.support.fabric import eventually

MEMBERS = ("Org1MSP", "Org2MSP")
BUDGET = {"mechanism": "laplace", "epsilon": 9.0}
HYPER = {"gradient_clip": 1.0}


def _complete(client: ConsortiaClient, pid: str, rnd: int, org: str, key, metrics: dict, commitment: str):
    """Complete ``org``'s task of round ``rnd`` the way the agent does: the public form signed, the
    confidential part in the transient map (a fresh salt)."""
    full = make_result(pid, rnd, org, metrics=metrics)
    full["inputs"]["data_commitment"] = commitment
    public, part = split_result(full, secrets.token_hex(32))
    return full, client.complete_task(public, sign(key, canonical_json(public)), part)


def _distinctive() -> tuple[float, str]:
    """A 17-significant-digit metric value and a data commitment no other test writes."""
    loss = 0.31415926535897931 + uuid.uuid4().int % 10**6 * 1e-13
    return loss, "sha256:" + secrets.token_hex(32)


def test_members_read_confidential_results_and_nobody_else_holds_them(
    host_name, ledger, org1, org2, org3, admins, uid
):
    pid = new_process(admins, org1, uid, MEMBERS, rounds=2, privacy_budget=BUDGET, hyperparameters=HYPER)
    clients = {"Org1MSP": org1, "Org2MSP": org2}
    keys = {o: ec.generate_private_key(ec.SECP256R1()) for o in MEMBERS}
    loss, commitment = _distinctive()
    fulls = {}
    for rnd in (1, 2):
        for org in MEMBERS:
            clients[org].create_task(pid, rnd, keys[org].public_key(), "sandbox")
            metrics = private_metrics(0.5, loss=loss if org == "Org1MSP" else 0.25)
            fulls[rnd, org], answer = _complete(clients[org], pid, rnd, org, keys[org], metrics, commitment)
            # the answer is the public record: the hashes, no value
            assert answer.private_sha256 is not None and answer.privacy is None
            assert answer.result is not None and answer.result.metrics == {}
            assert answer.result.confidential_sha256 is not None
    for member in (org1, org2):
        for rnd in (1, 2):
            read = eventually(lambda m=member, r=rnd: m.get_execution(pid, r, "Org1MSP"))
            assert read.result is not None and read.result.metrics == fulls[rnd, "Org1MSP"]["metrics"]
            assert read.result.inputs.data_commitment == commitment
            assert read.privacy is not None and read.epsilon_total > 0
            check_record_signature(read)  # the joined read verifies: the signature is over the public form
            altered = read.result.replace(metrics={**read.result.metrics, "loss": 0.0})
            with pytest.raises(TaskSignatureInvalid, match="confidential part does not verify"):
                check_record_signature(read.replace(result=altered))
        first, second = (member.get_execution(pid, r, "Org1MSP") for r in (1, 2))
        assert second.epsilon_total > first.epsilon_total  # round 2 continues round 1's private charge
        queried = member.query_executions(pid, round=2)
        assert {r.organisation: r.result.metrics["loss"] for r in queried if r.result} == {
            "Org1MSP": loss,
            "Org2MSP": 0.25,
        }
        assert member.process_privacy(member.get_process(pid)).epsilon_spent == pytest.approx(
            max(r.epsilon_total for r in queried)
        )
    with pytest.raises(Forbidden):
        org3.get_execution(pid, 1, "Org1MSP")
    # the public record (what every organisation's blocks and history carry) verifies on its own
    history = org1.execution_history(pid, 1, "Org1MSP")
    assert history[-1].value is not None
    public = history[-1].value
    assert public["result"]["metrics"] == fulls[1, "Org1MSP"]["metrics"]  # a member's history is joined
    stored = {k: v for k, v in public.items() if k not in ("epsilon_total", "privacy", "confidential_salt")}
    stored["result"] = {k: v for k, v in public["result"].items() if k not in ("metrics", "validation")}
    stored["result"]["inputs"] = {
        k: v for k, v in public["result"]["inputs"].items() if k != "data_commitment"
    }
    check_record_signature(stored)  # what a non-member holds: the signature verifies
    forged = {**stored, "result": {**stored["result"], "confidential_sha256": "sha256:" + "0" * 64}}
    with pytest.raises(TaskSignatureInvalid):
        check_record_signature(forged)
    # the bytes: Org3 holds no clear-text value anywhere; Org1's store or peer does
    if host_name == "embedded":
        ledger.close()  # the WAL is checkpointed: every byte is in the files searched
    org3_files, org1_files = _org_files(host_name, ledger, 3), _org_files(host_name, ledger, 1)
    for needle in (repr(loss).encode(), commitment.removeprefix("sha256:").encode()):
        assert _holding(org3_files, needle) == [], needle
        assert _holding(org1_files, needle), needle  # the positive control


def test_complete_task_refuses_a_confidential_part_that_does_not_match(org1, admins, uid):
    pid = new_process(admins, org1, uid, MEMBERS, rounds=1, privacy_budget=BUDGET, hyperparameters=HYPER)
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    public, part = split_result(make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5)), "1" * 64)
    raw, sig = canonical_json(public).decode(), base64.b64encode(sign(key, canonical_json(public))).decode()
    terms = process_transient(org1.get_process(pid)) or {}
    smaller = part.replace(metrics={**part.metrics, "epsilon_spent": 0.001})  # a smaller charge
    for wrong in (smaller, part.replace(salt="2" * 64)):
        with pytest.raises(PrivateDataMismatch, match="does not match its signed confidential_sha256"):
            org1.ledger.submit(
                org1.identity,
                "ExecutionRecord:complete_task",
                raw,
                sig,
                transient={**terms, RESULT_CONFIDENTIAL: wrong.canonical()},
                endorsing_organisations=list(MEMBERS),
            )
    with pytest.raises(InvalidArgument, match=RESULT_CONFIDENTIAL):
        org1.ledger.submit(org1.identity, "ExecutionRecord:complete_task", raw, sig, transient=terms or None)
    # the confidential fields in the arguments next to the hash are refused
    leaky = {**public, "metrics": part.metrics}
    with pytest.raises(InvalidArgument, match="they are confidential"):
        org1.ledger.submit(
            org1.identity,
            "ExecutionRecord:complete_task",
            canonical_json(leaky).decode(),
            base64.b64encode(sign(key, canonical_json(leaky))).decode(),
            transient={**terms, RESULT_CONFIDENTIAL: part.canonical()},
        )
    # who sends to whom: a recipient named in the arguments, or a part that does not list one per
    # message (each correctly hashed and signed), is refused
    full = make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5), recipients=("Org2MSP",))
    public, part = split_result(full, "3" * 64)
    clear_parts = part.replace(senders=None, recipients=None)
    named = {**public, "outputs": full["outputs"], "confidential_sha256": clear_parts.digest()}
    unmarked = {k: v for k, v in named.items() if k != "confidential_parties"}
    short = part.replace(recipients=[])
    shorted = {**public, "confidential_sha256": short.digest()}
    for body, given, needle in (
        (named, clear_parts, "names an output message's recipient: it is confidential"),
        (unmarked, clear_parts, "senders and recipients in clear"),
        (shorted, short, "must list recipients for the result's 1 output message"),
    ):
        with pytest.raises(InvalidArgument, match=needle):
            org1.ledger.submit(
                org1.identity,
                "ExecutionRecord:complete_task",
                canonical_json(body).decode(),
                base64.b64encode(sign(key, canonical_json(body))).decode(),
                transient={**terms, RESULT_CONFIDENTIAL: given.canonical()},
                endorsing_organisations=list(MEMBERS),
            )
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"
    org1.complete_task(public, sign(key, canonical_json(public)), part)
    assert org1.get_execution(pid, 1, "Org1MSP").result.metrics == part.metrics
    assert [m.recipient for m in org1.get_execution(pid, 1, "Org1MSP").result.outputs.messages] == ["Org2MSP"]


def test_a_result_signed_in_clear_is_refused_and_nothing_is_written(org1, org2, admins, uid):
    """A process with private terms takes a result only in its public form: the full result, correctly
    signed by the registered task key, is refused before anything is read or written (its metrics
    would be in every organisation's blocks), with or without a confidential part beside it."""
    pid = new_process(admins, org1, uid, MEMBERS, rounds=1, privacy_budget=BUDGET, hyperparameters=HYPER)
    assert org1.get_process(pid).private_sha256 is not None
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    before = org1.execution_history(pid, 1, "Org1MSP")
    clear = make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5))
    raw, sig = canonical_json(clear).decode(), base64.b64encode(sign(key, canonical_json(clear))).decode()
    _, part = split_result(clear, secrets.token_hex(32))
    terms = process_transient(org1.get_process(pid)) or {}
    for transient in (terms, {**terms, RESULT_CONFIDENTIAL: part.canonical()}):
        with pytest.raises(InvalidArgument, match="signed in clear") as refused:
            org1.ledger.submit(
                org1.identity,
                "ExecutionRecord:complete_task",
                raw,
                sig,
                transient=transient,
                endorsing_organisations=list(MEMBERS),
            )
        assert f"transient map under {RESULT_CONFIDENTIAL!r}" in str(refused.value)
        assert "'metrics'" in str(refused.value) and "inputs.data_commitment" in str(refused.value)
    with pytest.raises(InvalidArgument, match="signed in clear"):  # the client sends what it is given
        org1.complete_task(clear, sign(key, canonical_json(clear)))
    # nothing written: the record is still the running one, with no private part, on both members
    assert org1.execution_history(pid, 1, "Org1MSP") == before
    for member in (org1, org2):
        rec = eventually(lambda m=member: m.get_execution(pid, 1, "Org1MSP"))
        assert (rec.status, rec.result, rec.private_sha256) == ("running", None, None)
    # the same task then completes in the public form
    _complete(org1, pid, 1, "Org1MSP", key, private_metrics(0.5), clear["inputs"]["data_commitment"])
    assert org2.get_execution(pid, 1, "Org1MSP").result.metrics == clear["metrics"]


def test_budget_exceeded_still_refuses_an_over_budget_confidential_round(org1, org2, admins, uid):
    budget = {"mechanism": "laplace", "epsilon": 1.5}
    pid = new_process(admins, org1, uid, MEMBERS, rounds=2, privacy_budget=budget, hyperparameters=HYPER)
    keys = {o: ec.generate_private_key(ec.SECP256R1()) for o in MEMBERS}
    for org, client in (("Org1MSP", org1), ("Org2MSP", org2)):
        client.create_task(pid, 1, keys[org].public_key(), "sandbox")
        _complete(client, pid, 1, org, keys[org], private_metrics(0.5), "sha256:" + "a" * 64)
    org1.create_task(pid, 2, keys["Org1MSP"].public_key(), "sandbox")
    with pytest.raises(BudgetExceeded):  # round 1's private charge (ε 1.0 network) + round 2's > 1.5
        _complete(org1, pid, 2, "Org1MSP", keys["Org1MSP"], private_metrics(0.5), "sha256:" + "a" * 64)
    # the previous round's private part is checked against its hash: an altered one is refused
    public, part = split_result(make_result(pid, 2, "Org1MSP", metrics=private_metrics(0.01)), "3" * 64)
    previous = org1.get_execution(pid, 1, "Org1MSP").private_part()
    cheaper = previous.replace(epsilon_total=0.0, privacy=None)
    with pytest.raises(PrivateDataMismatch, match="does not match its on-chain hash"):
        org1.ledger.submit(
            org1.identity,
            "ExecutionRecord:complete_task",
            canonical_json(public).decode(),
            base64.b64encode(sign(keys["Org1MSP"], canonical_json(public))).decode(),
            transient={
                **(process_transient(org1.get_process(pid)) or {}),
                RESULT_CONFIDENTIAL: part.canonical(),
                PREVIOUS_EXECUTION_PRIVATE: cheaper.canonical(),
            },
            endorsing_organisations=list(MEMBERS),
        )
    assert org1.get_execution(pid, 2, "Org1MSP").status == "running"


def test_an_altered_copy_of_a_confidential_part_is_detected(embedded_consortium, tmp_path, uid):
    """Embedded host: Org2's stored copy of Org1's record is rewritten in its private store; Org2's read
    names the record and the hash, while Org1's copy still reads."""
    with EmbeddedLedger(tmp_path / "l.db", embedded_consortium, batch_timeout=0.002) as led:
        org1, org2 = (ConsortiaClient(led, embedded_consortium.identity(o)) for o in ("Org1", "Org2"))
        admins = {m: ConsortiaClient(led, embedded_consortium.identity(m[:-3], "Admin")) for m in MEMBERS}
        pid = new_process(admins, org1, uid, MEMBERS, rounds=1, hyperparameters={"lr": 0.05})
        key = ec.generate_private_key(ec.SECP256R1())
        org1.create_task(pid, 1, key.public_key(), "sandbox")
        _complete(org1, pid, 1, "Org1MSP", key, {"loss": 0.5}, "sha256:" + "b" * 64)
        store = sqlite3.connect(private_store_path(led.path, "Org2MSP"))
        try:
            rows = store.execute("SELECT key, value FROM private_writes").fetchall()
            (key_hash, value), *_ = [(k, v) for k, v in rows if b'"epsilon_total"' in v]
            copy = ExecutionPrivate.from_json(value)
            altered = copy.replace(result=copy.result.replace(metrics={"loss": 0.05}))
            changed = store.execute(
                "UPDATE private_writes SET value = ? WHERE key = ?", (altered.canonical(), key_hash)
            )
            assert changed.rowcount == 1
            store.commit()
        finally:
            store.close()
        with pytest.raises(PrivateDataMismatch, match="private copy of the execution record of Org1MSP"):
            org2.get_execution(pid, 1, "Org1MSP")
        with pytest.raises(PrivateDataMismatch):
            org2.query_executions(pid)
        mine: ExecutionRecord = org1.get_execution(pid, 1, "Org1MSP")
        assert mine.result is not None and mine.result.metrics == {"loss": 0.5}
