"""Image contract rules, through the Ledger interface."""

from __future__ import annotations

import json

import pytest

from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from ledger.errors import AccessDenied
from tests.contracts.helpers import IMAGE_DIGEST


def test_register_sets_owner_from_certificate(org1, uid):
    img = org1.register_image(
        f"ggm-{uid}", "1.0", "collabdict-ggm", IMAGE_DIGEST, reference="localhost/ggm:1.0"
    )
    assert img.owner == "Org1MSP"
    assert img.registered_by == "User1@org1.example.com"
    assert img.status == "active" and img.digest == IMAGE_DIGEST
    got = org1.get_image(img.id)
    assert got.id == f"ggm-{uid}:1.0" and got.owner == "Org1MSP" and got.tx_id == img.tx_id


def test_owner_cannot_be_claimed_in_arguments(ledger, consortium, uid):
    spec = {"name": f"x-{uid}", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST, "owner": "Org2MSP"}
    with pytest.raises(InvalidArgument, match="unknown fields"):
        ledger.submit(consortium.identity("Org1"), "Image:register", json.dumps(spec))


@pytest.mark.parametrize("digest", ["sha256:xyz", "md5:" + "a" * 32, "sha256:" + "A" * 64, ""])
def test_malformed_digest_is_refused(org1, uid, digest):
    with pytest.raises(InvalidArgument):
        org1.register_image(f"bad-{uid}", "1", "a", digest)


def test_duplicate_registration_is_refused_and_changes_nothing(org1, org2, uid):
    first = org1.register_image(f"dup-{uid}", "1", "a", IMAGE_DIGEST)
    with pytest.raises(AlreadyExists):
        org2.register_image(f"dup-{uid}", "1", "a", "sha256:" + "cd" * 32)
    assert org2.get_image(first.id).owner == "Org1MSP"
    assert org2.get_image(first.id).digest == IMAGE_DIGEST


def test_list_and_get_unknown(org1, org2, uid):
    org1.register_image(f"l1-{uid}", "1", "a", IMAGE_DIGEST)
    org2.register_image(f"l2-{uid}", "1", "a", IMAGE_DIGEST)
    ids = {i.id for i in org1.list_images()}
    assert {f"l1-{uid}:1", f"l2-{uid}:1"} <= ids
    with pytest.raises(NotFound):
        org1.get_image(f"nope-{uid}:1")


def test_revoke_only_by_owner_and_once(org1, org2, uid):
    img = org1.register_image(f"rv-{uid}", "1", "a", IMAGE_DIGEST)
    with pytest.raises(Forbidden, match="owned by Org1MSP"):
        org2.revoke_image(img.id, "not mine")
    assert org1.get_image(img.id).status == "active"
    rec = org1.revoke_image(img.id, "CVE in base image")
    assert rec.status == "revoked" and rec.revoked_reason == "CVE in base image"
    with pytest.raises(InvalidState):
        org1.revoke_image(img.id)


def test_approvals_by_other_organisations(admins, org1, org2, org3, uid):
    img = org1.register_image(f"ap-{uid}", "1", "a", IMAGE_DIGEST)
    with pytest.raises(Forbidden, match="its registration is its approval"):
        admins["Org1MSP"].approve_image(img.id, IMAGE_DIGEST)
    with pytest.raises(Forbidden, match="only admin identities may approve images"):
        org2.approve_image(img.id, IMAGE_DIGEST)  # a client identity does not consent for Org2
    with pytest.raises(ImageMismatch):
        admins["Org2MSP"].approve_image(img.id, "sha256:" + "00" * 32)
    admins["Org2MSP"].approve_image(img.id, IMAGE_DIGEST)
    admins["Org3MSP"].approve_image(img.id, IMAGE_DIGEST, datasets=["adult"], expires="2999-01-01T00:00:00Z")
    got = org1.get_image(img.id)
    assert [a.organisation for a in got.approvals] == ["Org2MSP", "Org3MSP"]
    assert all(a.digest == IMAGE_DIGEST for a in got.approvals)
    org3_approval = got.approvals[1]
    assert org3_approval.datasets == ("adult",) and org3_approval.expires == "2999-01-01T00:00:00.000000Z"
    # approving again replaces the approval (every version stays in the key's history)
    again = admins["Org2MSP"].approve_image(img.id, IMAGE_DIGEST, datasets=["spam", "adult"])
    assert again.datasets == ("adult", "spam")
    assert org1.get_image(img.id).approvals[0].datasets == ("adult", "spam")


def test_approval_options_are_checked(admins, org1, uid):
    img = org1.register_image(f"ao-{uid}", "1", "a", IMAGE_DIGEST)
    org2 = admins["Org2MSP"]
    for options, message in (
        ({"datasets": []}, "non-empty list"),
        ({"datasets": ["../etc"]}, "dataset names"),
        ({"expires": "tomorrow"}, "not an ISO-8601 time"),
        ({"expires": "2999-01-01T00:00:00"}, "time zone"),
        ({"expires": "2001-01-01T00:00:00Z"}, "is not after now"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            org2.approve_image(img.id, IMAGE_DIGEST, **options)
    with pytest.raises(InvalidArgument, match="unknown fields"):
        org2.ledger.submit(org2.identity, "Image:approve", img.id, IMAGE_DIGEST, '{"everything": true}')
    assert org1.get_image(img.id).approvals == ()


def test_an_approval_is_revoked_by_its_organisation_only(admins, org1, org2, uid):
    img = org1.register_image(f"rv-ap-{uid}", "1", "a", IMAGE_DIGEST)
    with pytest.raises(NotFound, match="no approval"):
        admins["Org2MSP"].revoke_image_approval(img.id)
    admins["Org2MSP"].approve_image(img.id, IMAGE_DIGEST)
    with pytest.raises(Forbidden, match="only admin"):
        org2.revoke_image_approval(img.id, "client")
    revoked = admins["Org2MSP"].revoke_image_approval(img.id, "found a leak")
    assert revoked.revoked is not None and revoked.revoked_reason == "found a leak"
    assert org1.get_image(img.id).approvals[0].revoked == revoked.revoked  # still on the ledger, marked
    with pytest.raises(InvalidState, match="already revoked"):
        admins["Org2MSP"].revoke_image_approval(img.id)
    assert admins["Org2MSP"].approve_image(img.id, IMAGE_DIGEST).revoked is None  # approved anew


def test_revoked_image_cannot_be_approved(admins, org1, uid):
    img = org1.register_image(f"ra-{uid}", "1", "a", IMAGE_DIGEST)
    org1.revoke_image(img.id)
    with pytest.raises(InvalidState):
        admins["Org2MSP"].approve_image(img.id, IMAGE_DIGEST)


def test_history_lists_every_version(org1, uid):
    img = org1.register_image(f"h-{uid}", "1", "a", IMAGE_DIGEST)
    org1.revoke_image(img.id, "old")
    hist = org1.image_history(img.id)
    assert [h.value["status"] for h in hist] == ["active", "revoked"]
    assert hist[0].tx_id == img.tx_id and hist[0].tx_id != hist[1].tx_id
    with pytest.raises(NotFound):
        org1.image_history(f"none-{uid}:1")


def test_identity_outside_the_channel_is_refused(ledger, outsider, uid):
    spec = {"name": f"o-{uid}", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST}
    with pytest.raises(AccessDenied):
        ledger.submit(outsider, "Image:register", json.dumps(spec))
    with pytest.raises(AccessDenied):
        ledger.evaluate(outsider, "Image:list")


def test_peer_identity_cannot_invoke(ledger, consortium, uid):
    """Proposals are admitted by the channel's Writers policy (admin | client), as on Fabric."""
    spec = {"name": f"p-{uid}", "version": "1", "algorithm": "a", "digest": IMAGE_DIGEST}
    with pytest.raises(AccessDenied):
        ledger.submit(consortium.peer_identity("Org1"), "Image:register", json.dumps(spec))
    with pytest.raises(AccessDenied):
        ledger.evaluate(consortium.peer_identity("Org1"), "Image:list")


def test_unknown_function_and_bad_arguments(ledger, consortium):
    with pytest.raises(NotFound, match="no chaincode function"):
        ledger.evaluate(consortium.identity("Org1"), "Image:steal")
    with pytest.raises(InvalidArgument, match="arguments"):
        ledger.evaluate(consortium.identity("Org1"), "Image:get")
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        ledger.submit(consortium.identity("Org1"), "Image:register", "{not json")
