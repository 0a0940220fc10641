"""Membership contract rules, through the Ledger interface (on both ledger hosts).

The suite never depends on a clean ledger: an organisation may already have a record (the key is
its MSP id), so versions are checked relative to what was there before."""

from __future__ import annotations

import json

import pytest

from chaincode.errors import InvalidArgument, NotFound
from ledger.client import ConsortiaClient

CA_DIGEST = "sha256:" + "cd" * 32


def _version(client: ConsortiaClient, msp: str) -> int:
    try:
        return client.get_member(msp).version
    except NotFound:
        return 0


def test_publish_takes_the_organisation_from_the_certificate(org1, uid):
    before = _version(org1, "Org1MSP")
    rec = org1.publish_membership(f"https://org1-{uid}.example.com:7443", CA_DIGEST)
    assert rec.msp_id == "Org1MSP" and rec.version == before + 1
    assert rec.artifact_endpoint == f"https://org1-{uid}.example.com:7443"
    assert rec.gateway_endpoint == "" and rec.tls_ca_digest == CA_DIGEST
    assert rec.published_by == "User1@org1.example.com" and rec.updated_at.endswith("Z")
    assert org1.get_member("Org1MSP") == rec


def test_replace_increments_the_version_and_keeps_history(org1, org2, uid):
    first = org1.publish_membership(f"https://a-{uid}.example.com:7443", CA_DIGEST)
    second = org1.publish_membership(
        f"https://b-{uid}.example.com:8443", "sha256:" + "ef" * 32, gateway_endpoint="https://127.0.1.1:9443"
    )
    assert second.version == first.version + 1 and second.created == first.created
    assert second.artifact_endpoint == f"https://b-{uid}.example.com:8443"
    assert second.gateway_endpoint == "https://127.0.1.1:9443"
    got = org2.get_member("Org1MSP")
    assert got.artifact_endpoint == second.artifact_endpoint and got.tx_id == second.tx_id
    history = org2.member_history("Org1MSP")
    assert [h.tx_id for h in history][-2:] == [first.tx_id, second.tx_id]
    assert history[-2].value is not None
    assert history[-2].value["artifact_endpoint"] == f"https://a-{uid}.example.com:7443"


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://org1.example.com:7443",
        "https://org1.example.com",
        "https://:7443",
        "https://org1.example.com:0",
        "https://org1.example.com:70000",
        "https://org1.example.com:7443/store",
        "https://user@org1.example.com:7443",
        "https://org1.example.com:7443?x=1",
        "https://org1.example.com:7443#x",
        "https://org1..example.com:7443",
        "https://-org1.example.com:7443",
        "https://300.1.1.1:7443",
        "https://[zz::1]:7443",
        "file:///srv/artifacts",
        "https://" + "a" * 250 + ".com:7443",
        "",
    ],
)
def test_invalid_endpoint_is_refused(org1, endpoint):
    with pytest.raises(InvalidArgument):
        org1.publish_membership(endpoint, CA_DIGEST)
    with pytest.raises(InvalidArgument):
        org1.publish_membership("https://org1.example.com:7443", CA_DIGEST, gateway_endpoint=endpoint or "x")


@pytest.mark.parametrize("endpoint", ["https://127.0.1.1:7443", "https://[::1]:7443", "https://localhost:1/"])
def test_valid_endpoint_forms(org1, endpoint):
    assert org1.publish_membership(endpoint, CA_DIGEST).artifact_endpoint == endpoint.rstrip("/")


@pytest.mark.parametrize("digest", ["", "sha256:xyz", "md5:" + "a" * 32, "sha256:" + "A" * 64])
def test_malformed_tls_ca_digest_is_refused(org1, digest):
    with pytest.raises(InvalidArgument, match="TLS CA digest"):
        org1.publish_membership("https://org1.example.com:7443", digest)


def test_organisation_cannot_be_claimed_in_arguments(ledger, consortium, org1, uid):
    before = _version(org1, "Org2MSP")
    spec = {
        "msp_id": "Org2MSP",
        "artifact_endpoint": f"https://evil-{uid}.example.com:1",
        "tls_ca_digest": CA_DIGEST,
    }
    with pytest.raises(InvalidArgument, match="unknown fields"):
        ledger.submit(consortium.identity("Org1"), "Membership:publish", json.dumps(spec))
    assert _version(org1, "Org2MSP") == before


def test_another_organisation_cannot_overwrite_a_record(org1, org2, uid):
    mine = org1.publish_membership(f"https://org1-{uid}.example.com:7443", CA_DIGEST)
    theirs = org2.publish_membership(f"https://org2-{uid}.example.com:7443", CA_DIGEST)
    assert theirs.msp_id == "Org2MSP"
    assert org2.get_member("Org1MSP") == mine


def test_get_unknown_and_list(org1, org2, org3, uid):
    with pytest.raises(NotFound, match="Org7MSP has published no membership record"):
        org1.get_member("Org7MSP")
    with pytest.raises(InvalidArgument):
        org1.get_member("not an msp/")
    for client in (org1, org2, org3):
        n = client.organisation[3]
        client.publish_membership(f"https://org{n}-{uid}.example.com:7443", CA_DIGEST)
    members = {m.msp_id: m for m in org1.list_members()}
    assert {"Org1MSP", "Org2MSP", "Org3MSP"} <= set(members)
    assert members["Org3MSP"].artifact_endpoint == f"https://org3-{uid}.example.com:7443"
    with pytest.raises(NotFound):
        org1.member_history("Org7MSP")
