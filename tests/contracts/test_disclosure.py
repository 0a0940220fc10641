"""The Disclosure contract on every ledger host: an organisation records its own disclosure of its
completed tasks to an auditor once; the auditor -- here Org3, not in the process -- reads that
disclosure and exactly the disclosed records, nothing else of the process."""

from __future__ import annotations

import pytest

from audit.signatures import check_record_signature
from chaincode.errors import AlreadyExists, Forbidden, InvalidArgument, InvalidState, NotFound
from tests.contracts.helpers import digest_of, new_process, run_task


def test_record_read_and_refusals(admins, org1, org2, org3, uid):
    pid = new_process(admins, org1, uid, rounds=3)
    for rnd in (1, 2):
        run_task(org1, pid, rnd, recipients=("Org2MSP",))
        run_task(org2, pid, rnd, recipients=("Org1MSP",))
    bundle = digest_of(f"bundle-{uid}")
    rec = org1.record_disclosure(pid, [2, 1], "Org3MSP", bundle)
    assert (rec.process_id, rec.organisation, rec.rounds, rec.recipient, rec.bundle_digest) == (
        pid,
        "Org1MSP",
        (1, 2),
        "Org3MSP",
        bundle,
    )
    assert rec.disclosed_by and rec.created and rec.tx_id

    # the recipient, not a member: the disclosure and exactly the disclosed records, as signed
    seen = org3.disclosed_records(pid, bundle)
    assert seen.disclosure == rec and seen.process.id == pid
    assert [(r.organisation, r.round) for r in seen.executions] == [("Org1MSP", 1), ("Org1MSP", 2)]
    for r in seen.executions:
        check_record_signature(r)
    assert [d.bundle_digest for d in org3.list_disclosures(pid)] == [bundle]
    with pytest.raises(Forbidden):
        org3.get_execution(pid, 1, "Org2MSP")
    with pytest.raises(Forbidden):
        org3.get_process(pid)
    # members see it too
    assert org2.get_disclosure(pid, bundle) == rec

    with pytest.raises(AlreadyExists):
        org1.record_disclosure(pid, [1], "Org3MSP", bundle)
    with pytest.raises(InvalidState):  # round 3 is not completed
        org1.record_disclosure(pid, [3], "Org3MSP", digest_of(f"b3-{uid}"))
    with pytest.raises(InvalidArgument):
        org1.record_disclosure(pid, [4], "Org3MSP", digest_of(f"b4-{uid}"))
    with pytest.raises(InvalidArgument):
        org1.record_disclosure(pid, [1, 1], "Org3MSP", digest_of(f"b5-{uid}"))
    with pytest.raises(InvalidArgument):
        org1.record_disclosure(pid, [1], "Org1MSP", digest_of(f"b6-{uid}"))
    with pytest.raises(InvalidArgument):
        org1.record_disclosure(pid, [1], "Org3MSP", "sha256:nope")
    with pytest.raises(Forbidden):  # not a member: no task of its own to disclose
        org3.record_disclosure(pid, [1], "Org2MSP", digest_of(f"b7-{uid}"))

    # Org2's disclosure to Org1 is not Org3's to read
    other = digest_of(f"other-{uid}")
    org2.record_disclosure(pid, [1], "Org1MSP", other)
    with pytest.raises(NotFound):
        org3.disclosed_records(pid, other)
    assert [d.bundle_digest for d in org3.list_disclosures(pid)] == [bundle]
    assert {d.bundle_digest for d in org1.list_disclosures(pid)} == {bundle, other}
