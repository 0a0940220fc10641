"""Consent before computation (issue 33 item 1; docs/consent.md), on both ledger hosts: a process starts
only when every member accepted its terms; a member's task is registered only with its approval of the
process's exact image digest, for the process's dataset, unrevoked and unexpired."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from chaincode.errors import ConsentMissing, Forbidden, InvalidArgument, InvalidState
from tests.contracts.helpers import IMAGE_DIGEST, consent, new_process, run_task

OTHER_DIGEST = "sha256:" + "cd" * 32


def _process(org1, uid, *, dataset="", consortium=("Org1MSP", "Org2MSP"), image_digest=IMAGE_DIGEST):
    image = org1.register_image(f"img-{uid}", "1", "collab-rf", image_digest)
    pid = f"proc-{uid}"
    org1.create_process(
        pid, image.id, list(consortium), {"kind": "ring", "seed": 7}, 1, {"n_new": 5}, dataset=dataset
    )
    return image, pid


def test_start_waits_for_every_members_acceptance_of_the_recorded_terms(admins, org1, org2, uid):
    _, pid = _process(org1, uid)
    with pytest.raises(ConsentMissing, match=r"not accepted by \['Org1MSP', 'Org2MSP'\]"):
        org1.start_process(pid)
    terms = org1.get_process(pid).terms_digest()
    assert admins["Org1MSP"].accept_process(pid, terms).terms_digest == terms
    with pytest.raises(ConsentMissing, match=r"not accepted by \['Org2MSP'\]"):
        org2.start_process(pid)
    # an acceptance binds the terms it read: a digest of other terms is refused
    with pytest.raises(ConsentMissing, match="read the process again"):
        admins["Org2MSP"].accept_process(pid, "sha256:" + "00" * 32)
    # a client identity does not consent for its organisation
    with pytest.raises(Forbidden, match="only admin identities may accept"):
        org2.accept_process(pid, terms)
    answer = admins["Org2MSP"].accept_process(pid, terms)
    assert (answer.organisation, answer.decision, answer.role) == ("Org2MSP", "accepted", "admin")
    assert [a.organisation for a in org1.process_acceptances(pid)] == ["Org1MSP", "Org2MSP"]
    assert org2.start_process(pid).status == "running"
    with pytest.raises(InvalidState, match="only before it starts"):
        admins["Org2MSP"].decline_process(pid, "too late")


def test_the_terms_digest_covers_every_term():
    from chaincode.records import ProcessRecord

    base = {
        "id": "p",
        "image_id": "i:1",
        "image_digest": IMAGE_DIGEST,
        "algorithm": "a",
        "consortium": ["Org1MSP", "Org2MSP"],
        "topology": {"kind": "ring", "seed": 1},
        "hyperparameters": {"n_new": 5},
        "rounds": 3,
        "privacy_budget": None,
        "dataset": "adult",
        "creator": "Org1MSP",
        "created": "2026-01-01T00:00:00.000000Z",
        "status": "created",
        "status_reason": "",
        "updated": "",
        "tx_id": "t",
    }
    digest = ProcessRecord.model_validate(base).terms_digest()
    budget = {"mechanism": "laplace", "epsilon": 1, "accounting": "basic", "scope": "node"}
    for change in (
        {"image_digest": OTHER_DIGEST},
        {"hyperparameters": {"n_new": 6}},
        {"topology": {"kind": "ring", "seed": 2}},
        {"rounds": 4},
        {"privacy_budget": budget},
        {"dataset": "spam"},
        {"consortium": ["Org1MSP", "Org3MSP"]},
        {"validation_fraction": 0.2},
    ):
        assert ProcessRecord.model_validate({**base, **change}).terms_digest() != digest, change
    sliced = ProcessRecord.model_validate({**base, "validation_fraction": 0.2}).terms_digest()
    assert ProcessRecord.model_validate({**base, "validation_fraction": 0.3}).terms_digest() != sliced
    # what is not a term (status, time) does not change it
    assert ProcessRecord.model_validate({**base, "status": "running", "tx_id": "u"}).terms_digest() == digest


def test_a_member_that_declines_ends_the_process(admins, org1, org2, uid):
    _, pid = _process(org1, uid)
    admins["Org1MSP"].accept_process(pid)
    with pytest.raises(InvalidArgument, match="needs a reason"):
        admins["Org2MSP"].decline_process(pid, "")
    answer = admins["Org2MSP"].decline_process(pid, "dataset adult is not for this")
    assert answer.decision == "declined" and answer.reason == "dataset adult is not for this"
    process = org1.get_process(pid)
    assert process.status == "declined" and process.status_by == "Org2MSP"
    assert process.status_reason == "declined by Org2MSP: dataset adult is not for this"
    with pytest.raises(InvalidState):
        org1.start_process(pid)
    with pytest.raises(InvalidState, match="only before it starts"):
        admins["Org2MSP"].accept_process(pid)


def test_create_task_needs_the_organisations_approval_of_that_exact_digest(admins, org1, org2, uid):
    # Org2 approved another image (another digest); the process pins this one
    other = org1.register_image(f"other-{uid}", "1", "collab-rf", OTHER_DIGEST)
    admins["Org2MSP"].approve_image(other.id, OTHER_DIGEST)
    image, pid = _process(org1, uid, dataset="adult")
    admins["Org1MSP"].accept_process(pid)
    admins["Org2MSP"].accept_process(pid)
    org1.start_process(pid)
    run_task(org1, pid, 1)  # the owner's registration is its approval for its own data
    with pytest.raises(ConsentMissing, match=f"Org2MSP has not approved image {image.id}"):
        run_task(org2, pid, 1)
    # approved for another dataset only
    admins["Org2MSP"].approve_image(image.id, IMAGE_DIGEST, datasets=["spam"])
    with pytest.raises(ConsentMissing, match=r"for datasets \['spam'\], not for 'adult'"):
        run_task(org2, pid, 1)
    # approved, then revoked
    admins["Org2MSP"].approve_image(image.id, IMAGE_DIGEST, datasets=["adult"])
    admins["Org2MSP"].revoke_image_approval(image.id, "changed our mind")
    with pytest.raises(ConsentMissing, match="was revoked"):
        run_task(org2, pid, 1)
    # a refusal leaves nothing behind: a task can still be refused on the ledger with the reason
    assert org2.fail_task(pid, 1, "not approved here").status == "failed"


def test_an_expired_approval_covers_nothing(admins, org1, org2, uid):
    image, pid = _process(org1, uid)
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    admins["Org2MSP"].approve_image(image.id, IMAGE_DIGEST, expires=soon)
    consent(admins, pid, ("Org1MSP", "Org2MSP"))  # (its approval stands, so consent adds none)
    org1.start_process(pid)
    time.sleep(2.0)  # past the expiry (the check is against the transaction's time)
    with pytest.raises(ConsentMissing, match="expired at"):
        run_task(org2, pid, 1)


def test_an_organisation_names_the_roles_that_consent_for_it(admins, org1, org3, uid):
    _, pid = _process(org1, uid, consortium=("Org1MSP", "Org3MSP"))
    spec = {"artifact_endpoint": "https://org3.example:7443", "tls_ca_digest": IMAGE_DIGEST}
    with pytest.raises(Forbidden, match="only an admin"):
        org3.ledger.submit(
            org3.identity, "Membership:publish", json.dumps({**spec, "consent_roles": ["client"]})
        )
    admins["Org3MSP"].ledger.submit(
        admins["Org3MSP"].identity, "Membership:publish", json.dumps({**spec, "consent_roles": ["client"]})
    )
    try:
        # a later publication without consent_roles (the node agent's) keeps them
        org3.ledger.submit(org3.identity, "Membership:publish", json.dumps(spec))
        assert org3.get_member("Org3MSP").consent_roles == ("client",)
        answer = org3.accept_process(pid)
        assert answer.role == "client"
    finally:
        admins["Org3MSP"].ledger.submit(
            admins["Org3MSP"].identity, "Membership:publish", json.dumps({**spec, "consent_roles": []})
        )
    with pytest.raises(Forbidden, match="only admin identities"):
        org3.decline_process(pid, "admin only again")


def test_new_process_helper_consents_for_every_member(admins, org1, uid):
    pid = new_process(admins, org1, uid, consortium=("Org1MSP", "Org2MSP", "Org3MSP"))
    assert org1.get_process(pid).status == "running"
    assert [a.decision for a in org1.process_acceptances(pid)] == ["accepted"] * 3
