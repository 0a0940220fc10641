"""A process is endorsed by its members (key-level policies; docs/ledger.md "Who endorses what"),
on every ledger host: the policy is set when the process is created, records endorsed by a majority
of its members commit, records endorsed by non-members or a minority are refused at validation, and
nothing of a refused transaction reaches the ledger."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from chaincode.errors import NotFound
from ledger.errors import EndorsementPolicyFailure
from tests.contracts.helpers import consent, new_process, run_task

ALL3 = ("Org1MSP", "Org2MSP", "Org3MSP")


def _task_spec(pid: str, rnd: int) -> str:
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return json.dumps({"process_id": pid, "round": rnd, "public_key": pem, "runtime": "sandbox"})


def test_the_members_majority_policy_is_set_when_the_process_is_created(admins, org1, org2, uid):
    pair = new_process(admins, org1, uid, start=False)
    trio = new_process(admins, org1, uid + "3", consortium=ALL3, start=False)
    endorsement = org2.process_endorsement(pair)
    assert (endorsement.organisations, endorsement.required) == (("Org1MSP", "Org2MSP"), 2)
    endorsement = org2.process_endorsement(trio)
    assert (endorsement.organisations, endorsement.required) == (ALL3, 2)


def test_records_endorsed_by_a_majority_of_members_commit(ledger, consortium, admins, org1, org3, uid):
    pid = new_process(admins, org1, uid, consortium=ALL3)
    # Org3's record, endorsed by Org1's and Org3's peers: two of the three members
    ledger.submit(
        consortium.identity("Org3"),
        "ExecutionRecord:create_task",
        _task_spec(pid, 1),
        endorsing_organisations=["Org3MSP", "Org1MSP"],
    )
    assert org1.get_execution(pid, 1, "Org3MSP").status == "running"
    run_task(org1, pid, 1)  # the host's own plan (the Gateway's, on Fabric) finds members' peers too


@pytest.mark.parametrize("endorsers", [["Org3MSP"], ["Org1MSP", "Org3MSP"], ["Org1MSP"]])
def test_a_record_endorsed_by_non_members_or_a_minority_is_refused(
    ledger, consortium, admins, org1, uid, endorsers
):
    """A two-member process (Org1, Org2) needs both members' peers: Org3 is no member, and Org1
    alone is a minority. Each is refused at validation; the ledger keeps nothing of it."""
    pid = new_process(admins, org1, uid)
    height = ledger.block_height(consortium.identity("Org1"))
    with pytest.raises(EndorsementPolicyFailure) as refused:
        ledger.submit(
            consortium.identity("Org1"),
            "ExecutionRecord:create_task",
            _task_spec(pid, 1),
            endorsing_organisations=endorsers,
        )
    assert refused.value.validation_code == "ENDORSEMENT_POLICY_FAILURE"
    assert ledger.block_height(consortium.identity("Org1")) > height  # it was ordered, and invalidated
    with pytest.raises(NotFound):
        org1.get_execution(pid, 1, "Org1MSP")
    assert org1.process_progress(pid).completed_tasks == 0
    run_task(org1, pid, 1)  # the same record, endorsed by the members, then commits
    assert org1.get_execution(pid, 1, "Org1MSP").status == "completed"


def test_a_status_change_needs_the_members_too(ledger, consortium, admins, org1, uid):
    """The process record itself carries the policy: a non-member's peer cannot endorse its start."""
    pid = new_process(admins, org1, uid, start=False)
    consent(admins, pid, ("Org1MSP", "Org2MSP"))
    with pytest.raises(EndorsementPolicyFailure):
        ledger.submit(
            consortium.identity("Org1"),
            "LearningProcess:start",
            pid,
            endorsing_organisations=["Org1MSP", "Org3MSP"],
        )
    assert org1.get_process(pid).status == "created"
    org1.start_process(pid)
    assert org1.get_process(pid).status == "running"


@pytest.fixture
def colluders_chaincode(host_name, monkeypatch):
    """Peers that run chaincode other than the contracts: the ``KV:*`` probe writes any key it is
    given, touching nothing else. The Fabric test network serves it beside the contracts; on the
    embedded host its endorsers simulate with it (the same dispatcher)."""
    if host_name == "embedded":
        import types

        from tests.support import probe_contract

        monkeypatch.setattr(
            "ledger.embedded.endorsement.dispatch", types.SimpleNamespace(invoke=probe_contract.invoke)
        )


def test_a_not_yet_written_record_forged_by_two_non_members_is_refused(
    ledger, consortium, admins, org1, org2, uid, colluders_chaincode
):
    """Two colluding organisations whose peers run other chaincode write a record of a process
    they are not members of, for a round nobody reached yet, without writing its guard. Every key
    the process will write exists from its creation with the members' policy, so the forgery is
    an update judged by that policy and is refused; nothing of it is committed."""
    from chaincode.stub import create_composite_key

    pid = new_process(admins, org1, uid, consortium=("Org1MSP",), rounds=3)
    forged = json.dumps({"process_id": pid, "round": 2, "organisation": "Org1MSP", "status": "completed"})
    for key in (
        create_composite_key("Execution", [pid, "000002", "Org1MSP"]),
        create_composite_key("ProcessAcceptance", [pid, "Org1MSP"]),
    ):
        with pytest.raises(EndorsementPolicyFailure) as refused:
            ledger.submit(
                consortium.identity("Org2"),
                "KV:put",
                key,
                forged,
                endorsing_organisations=["Org2MSP", "Org3MSP"],
            )
        assert refused.value.validation_code == "ENDORSEMENT_POLICY_FAILURE"
    with pytest.raises(NotFound):
        org1.get_execution(pid, 2, "Org1MSP")
    assert org1.process_progress(pid).completed_tasks == 0
    assert org1.process_acceptances(pid)[0].organisation == "Org1MSP"  # new_process accepted it
    run_task(org1, pid, 1)
    run_task(org1, pid, 2)  # the member writes the record the forgery aimed at
    assert org1.get_execution(pid, 2, "Org1MSP").status == "completed"
    assert [v.value["status"] for v in org1.execution_history(pid, 2, "Org1MSP") if v.value] == [
        "running",
        "completed",
    ]
