"""A consortium without a centre, on real Fabric and real Fabric CA (issue 27, items 1 and 2; docs/fabric.md
"A consortium without a centre").

Each member on a host of its own (a bubblewrap view of its own folder, its own 127.0.N.1): its own Fabric
CA issues its identities (``consortia org init``), it exports its public package, and only packages and
the genesis block cross between members. Any member creates the channel from the packages; each member
starts its own orderer and peer and joins them with its own admin, approves the chaincode definition with
its own admin, and someone commits it once a majority approved. Then a real transaction (each member's
membership record) is endorsed by a majority and ordered.

* raft, two members (first: it tears down before the BFT consortium starts);
* SmartBFT, four members: every private key stays in its owner's home (matched by public key against
  every certificate), a block carries the signatures of 2f + 1 = 3 consenters, and with one orderer
  stopped the channel still orders."""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path

import pytest

from benchmarks.deployment import listening
from benchmarks.key_custody import pem_blocks
from tests.ci import require_program, skip_or_fail

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(1800)]
BFT_ORGS = ("Org1", "Org2", "Org3", "Org4")


def _members(root: Path, orgs: tuple[str, ...], first: int):
    from benchmarks.members import Members
    from network.config import DEFAULT_HOME, NetworkError
    from network.processes import ensure_fabric

    require_program("bwrap", "hosts of their own")
    try:
        ensure_fabric(DEFAULT_HOME, ("core", "tools", "ca"))
    except NetworkError as exc:
        skip_or_fail(f"Hyperledger Fabric and Fabric CA not available: {exc}")
    return Members(root, orgs, first=first)


def _publish_membership(host, gateway_port: int = 1, deadline_s: int = 120) -> dict:
    """The member's own membership record, submitted from its own host with its own identity: endorsed
    by a majority of the members' peers (the channel's Endorsement policy), ordered by the channel's
    orderers. Retried while the peers' gossip has not yet met the others (discovery finds no majority)."""
    code = f"""
import json, time
from exchange.locations import publish_own_membership
from home.ledger import open_ledger
from home.settings import load
from ledger.client import ConsortiaClient
from ledger.errors import LedgerError
from ledger.identity import Consortium
s = load({str(host.home)!r})
cons = Consortium(s.crypto)
led = open_ledger(s, cons)
client = ConsortiaClient(led, cons.identity({host.msp!r}))
deadline, tries = time.monotonic() + {deadline_s}, 0
try:
    while True:
        tries += 1
        try:
            rec = publish_own_membership(client, cons, s.node_setting("artifact_endpoint"), "https://{host.address}:{gateway_port}")
            break
        except LedgerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    members = sorted(m.msp_id for m in client.list_members())
    print(json.dumps({{"msp": rec.msp_id, "version": rec.version, "tries": tries, "members": members}}))
finally:
    led.close()
"""
    got = host.python(code, timeout=deadline_s + 60)
    assert got.returncode == 0, got.stderr[-3000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


def _commit_everything(members, approvers_first: list[str], committer: str, late: list[str]) -> dict:
    """Approve with ``approvers_first`` (a majority), commit by ``committer``, then the ``late`` approve."""
    for org in approvers_first:
        members.approve(org)
    committed = members.hosts[committer].network("chaincode", "commit")["committed"]
    for org in late:
        members.approve(org)
    return committed


def test_raft_consortium_of_two_members_from_their_packages(tmp_path):
    members = _members(tmp_path, ("Org1", "Org2"), first=5)
    try:
        exported = members.init()
        assert set(exported) == {"Org1MSP", "Org2MSP"}
        made = members.create_channel("Org2", consensus="raft")
        assert made["consensus"] == "raft" and made["members"] == ["Org1MSP", "Org2MSP"]
        assert made["policies"]["Channel/Admins"] == "MAJORITY Admins"
        members.start_and_join()
        for h in members.hosts.values():
            assert h.network("node", "status")["channels"] == {"consortia": ["orderer", "peer"]}
        committed = _commit_everything(members, ["Org1", "Org2"], "Org1", [])
        assert committed["approvals"] == {"Org1MSP": True, "Org2MSP": True}
        members.join_homes()
        for h in members.hosts.values():
            got = _publish_membership(h)
            assert got["msp"] == h.msp and got["version"] >= 1
        assert got["members"] == ["Org1MSP", "Org2MSP"]
        print("raft timings", json.dumps(members.timings))
    finally:
        members.close()


@pytest.fixture(scope="module")
def bft(tmp_path_factory):
    members = _members(tmp_path_factory.mktemp("members"), BFT_ORGS, first=1)
    try:
        members.exported = members.init()
        yield members
    finally:
        print("bft timings", json.dumps(members.timings))
        members.close()


def test_each_member_issues_its_own_identities_with_its_own_ca(bft):
    from network.package import OrganisationPackage

    cas = set()
    for org, h in bft.hosts.items():
        pkg = OrganisationPackage.read(h.package)  # digest, format and every certificate checked
        assert pkg.digest == bft.exported[h.msp]["digest"]
        assert pkg.host == h.address and pkg.endpoints["ca"] == f"https://{h.address}:{h.port_base + 4}"
        cas.add(pkg.ca_cert)
        state = h.run("org", "ca", "status", "--home", str(h.home))
        assert state["running"] is True
        pids = h.nodes().pids()
        assert {a for a, _ in listening([pids["ca"]])} == {h.address}  # TLS on its own address only
        assert h.run("org", "ca", "stop", "--home", str(h.home))["running"] is False
    assert len(cas) == len(BFT_ORGS)  # four CAs, one per member
    h = bft.hosts["Org2"]
    assert h.run("org", "ca", "start", "--home", str(h.home))["running"] is True
    h.run("org", "ca", "stop", "--home", str(h.home))


def test_no_private_key_leaves_its_home(bft):
    from network.package import OrganisationPackage

    packages = {h.msp: OrganisationPackage.read(h.package) for h in bft.hosts.values()}
    handed = [f for h in bft.hosts.values() for f in (*h.inbox.iterdir(), *h.out.iterdir())]
    for f in handed:  # everything that crossed between members
        assert b"PRIVATE KEY" not in f.read_bytes(), f
    for org, h in bft.hosts.items():
        keys, own_certs = pem_blocks(h.home)
        assert len(keys) >= 12, (org, len(keys))  # peer, orderer, admin, user, key agreement, TLS, CAs
        assert stat.S_IMODE(h.home.stat().st_mode) == 0o700
        others = {pk for m, p in packages.items() if m != h.msp for pk in p.public_keys()}
        for f, public in keys:
            assert public in own_certs, f"{f}: a private key with no certificate of {org}"
            assert public not in others, f"{f}: the private key of another member's certificate"
            if "crypto" in f.parts or "ca" in f.relative_to(h.home).parts[:1]:
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
                assert stat.S_IMODE(f.parent.stat().st_mode) == 0o700, f.parent
        for other in bft.hosts.values():  # no other member's key, by public key, anywhere in this home
            if other is not h:
                other_keys = {pub for _, pub in pem_blocks(other.home / "crypto")[0]}
                assert not other_keys & {pub for _, pub in keys}
        for pub in packages[h.msp].public_keys():  # its own package: public keys only, whose keys it keeps
            assert pub in own_certs


def test_channel_from_packages_only_is_bft_among_four_orderers(bft, tmp_path):
    made = bft.create_channel("Org1")
    assert made["consensus"] == "bft"
    assert made["members"] == list(f"{o}MSP" for o in BFT_ORGS)
    assert made["orderer_organisations"] == made["application_organisations"] == made["members"]
    assert [c["msp_id"] for c in made["consenters"]] == made["members"]
    assert {c["address"] for c in made["consenters"]} == {
        f"{h.address}:{h.port_base}" for h in bft.hosts.values()
    }
    assert made["capabilities"]["Channel"] == ["V3_0"]
    for path in ("Channel/Admins", "Channel/Application/Admins", "Channel/Orderer/Admins"):
        assert made["policies"][path] == "MAJORITY Admins"
    assert made["policies"]["Channel/Application/LifecycleEndorsement"] == "MAJORITY Endorsement"
    # another member checks the block it was sent against the packages it has
    org3 = bft.hosts["Org3"]
    block = str(org3.inbox / "consortia.block")
    pkgs = [a for p in sorted(org3.inbox.glob("*.pkg")) for a in ("--package", str(p))]
    assert org3.network("channel", "inspect", "--block", block, *pkgs)["checked_against"] == made["members"]
    refused = org3.network("channel", "inspect", "--block", block, *pkgs[:-2], code=1)
    assert "does not match the packages" in refused["message"] and "Org4MSP" in refused["message"]
    # a package changed on the way is refused by its digest
    tampered = json.loads(bft.hosts["Org4"].package.read_text())
    tampered["endpoints"]["orderer"] = f"{bft.hosts['Org4'].address}:1"
    bad = org3.inbox / "tampered.pkg"
    bad.write_text(json.dumps(tampered))
    refused = org3.network(
        "channel", "create", "--package", str(bad), "--out", str(org3.out / "x.block"), code=1
    )
    assert "digest" in refused["message"]
    bad.unlink()
    # a well-formed package under Org3's own name that is not the one its home holds: refused at join
    from network.package import OrganisationPackage

    own = OrganisationPackage.read(org3.package)
    forged = dataclasses.replace(own, endpoints={**own.endpoints, "artifacts": f"https://{org3.address}:1"})
    OrganisationPackage.read(forged.write(org3.inbox / "forged.pkg"))  # its own digest: a valid package
    refused = org3.network(
        "channel", "join", "--block", block, "--package", str(org3.inbox / "forged.pkg"), code=1
    )
    assert "is not this home's own" in refused["message"]
    (org3.inbox / "forged.pkg").unlink()


def test_each_member_joins_its_own_orderer_and_peer(bft):
    bft.start_and_join()
    for org, h in bft.hosts.items():
        status = h.network("node", "status")
        assert status["channels"] == {"consortia": ["orderer", "peer"]}
        pids = h.nodes().pids()
        served = listening([pids["orderer"], pids["peer"]])
        assert {a for a, _ in served} == {h.address}, (org, served)
        assert {p for _, p in served} >= {h.port_base, h.port_base + 1, h.port_base + 3}


def test_chaincode_committed_once_a_majority_of_members_approved(bft):
    bft.approve("Org1")
    refused = bft.hosts["Org1"].network("chaincode", "commit", code=1)
    assert "approved by 1 of 4 members" in refused["message"] and "needs a majority, 3" in refused["message"]
    committed = _commit_everything(bft, ["Org2", "Org3"], "Org2", ["Org4"])
    assert committed["sequence"] == 1
    assert committed["approvals"] == {"Org1MSP": True, "Org2MSP": True, "Org3MSP": True, "Org4MSP": False}
    status = bft.hosts["Org4"].network("chaincode", "status")
    assert status["committed"]["sequence"] == 1 and all(status["approvals"].values())


def test_a_transaction_is_endorsed_by_a_majority_and_ordered_by_the_consenters(bft):
    bft.join_homes()
    for h in bft.hosts.values():
        got = _publish_membership(h)
        assert got["msp"] == h.msp
    assert got["members"] == [f"{o}MSP" for o in BFT_ORGS]
    org1 = bft.hosts["Org1"]
    fetched = org1.network("channel", "fetch", "--out", str(org1.root / "newest.block"))
    assert fetched["block"] >= 8
    assert len(set(fetched["signers"])) >= 3, fetched  # 2f + 1 consenters signed it
    # one orderer down (f = 1): the others still order
    org4 = bft.hosts["Org4"]
    org4.network("node", "stop", "orderer")
    again = _publish_membership(org1, gateway_port=2)  # a changed record: a new transaction
    assert again["msp"] == "Org1MSP" and again["version"] == 2
    org4.network("node", "start", "orderer")
