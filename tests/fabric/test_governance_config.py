"""The configuration updates of ``consortia governance`` computed without a network (network/governance.py):
real ``configtxgen``/``configtxlator`` on a genesis block made from packages, signatures made in memory
with locally issued identities, and the policy evaluation that ``status`` and ``submit`` rely on."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from tests.ci import skip_or_fail


class Org:
    """An organisation's CA, TLS CA, its package and its admin (all made in memory)."""

    def __init__(self, n: int):
        from ledger.cryptogen import cert_pem, issue_ca, issue_leaf, nodeou_config
        from ledger.identity import Identity
        from network.package import OrganisationPackage

        self.name, self.msp = f"Org{n}", f"Org{n}MSP"
        domain, host = f"org{n}.example.com", f"127.0.{n}.1"
        self.ca, self.ca_key = issue_ca(f"ca.{domain}", domain)
        tlsca, tlsca_key = issue_ca(f"tlsca.{domain}", domain)

        def leaf(cn: str, ou: str, tls: bool = False) -> tuple[str, object]:
            cert, key = issue_leaf(
                tlsca if tls else self.ca, tlsca_key if tls else self.ca_key, cn, ou, tls, [host]
            )
            return cert_pem(cert).decode(), key

        admin, admin_key = leaf(f"Admin@{domain}", "admin")
        user, user_key = leaf(f"User1@{domain}", "client")
        self.admin = Identity(self.msp, admin.encode(), admin_key)  # type: ignore[arg-type]
        self.user = Identity(self.msp, user.encode(), user_key)  # type: ignore[arg-type]
        self.package = OrganisationPackage(
            organisation=self.name,
            msp_id=self.msp,
            domain=domain,
            host=host,
            endpoints={
                "peer": f"{host}:7051",
                "orderer": f"{host}:7050",
                "orderer_admin": f"{host}:7053",
                "ca": f"https://{host}:7054",
                "artifacts": f"https://{host}:7059",
            },
            ca_cert=cert_pem(self.ca).decode(),
            tlsca_cert=cert_pem(tlsca).decode(),
            node_ous=nodeou_config(f"ca.{domain}-cert.pem").decode(),
            certificates={
                "admin": admin,
                "peer": leaf(f"peer0.{domain}", "peer")[0],
                "peer_tls": leaf(f"peer0.{domain}", "peer", tls=True)[0],
                "orderer": leaf(f"orderer.{domain}", "orderer")[0],
                "orderer_tls": leaf(f"orderer.{domain}", "orderer", tls=True)[0],
                "encryption": leaf(f"encryption.{domain}", "keyagreement")[0],
            },
        )

    def crl(self, *revoked: x509.Certificate) -> str:
        now = dt.datetime.now(dt.UTC)
        b = x509.CertificateRevocationListBuilder().issuer_name(self.ca.subject)
        b = b.last_update(now).next_update(now + dt.timedelta(days=1))
        for cert in revoked:
            b = b.add_revoked_certificate(
                x509.RevokedCertificateBuilder()
                .serial_number(cert.serial_number)
                .revocation_date(now)
                .build()
            )
        from cryptography.hazmat.primitives import serialization

        return b.sign(self.ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture(scope="module")
def tx():
    from network.config import DEFAULT_HOME, NetworkError
    from network.governance import Configtxlator
    from network.processes import ensure_fabric

    try:
        ensure_fabric(DEFAULT_HOME, ("tools",))
    except NetworkError as exc:
        skip_or_fail(f"the Fabric tools (configtxgen, configtxlator) are not available: {exc}")
    return Configtxlator(DEFAULT_HOME)


@pytest.fixture(scope="module")
def orgs():
    return [Org(n) for n in range(1, 6)]


def _channel(tx, orgs, consensus: str, tmp_path):
    from network.channel import create_channel

    block = tmp_path / f"{consensus}.block"
    create_channel([o.package for o in orgs], block, "consortia", consensus, fabric_home=tx.home)
    return block.read_bytes()


def _proposal(tx, base: bytes, updated, action: str, subject: str):
    from network.governance import ConfigUpdateProposal, config_of_block

    config = config_of_block(tx, base)
    update = tx.compute_update("consortia", config, updated)
    return ConfigUpdateProposal("consortia", action, subject, "test", base, update)


@pytest.mark.parametrize("consensus", ["bft", "raft"])
def test_add_org_update_adds_member_consenter_and_policies(tx, orgs, consensus, tmp_path):
    from network.governance import (
        add_organisation,
        apply_update,
        config_of_block,
        required_policies,
        update_changes,
    )

    founders = orgs[:4]
    base = _channel(tx, founders, consensus, tmp_path)
    config = config_of_block(tx, base)
    updated = add_organisation(config, orgs[4].package, tx)
    proposal = _proposal(tx, base, updated, "add-org", "Org5MSP")
    update = tx.decode("common.ConfigUpdate", proposal.update)
    assert update["channel_id"] == "consortia"
    # the configuration after the update (the write set applied) is the one proposed
    after = apply_update(config, update)
    groups = after["channel_group"]["groups"]
    assert sorted(groups["Application"]["groups"]) == [o.msp for o in orgs]
    assert sorted(groups["Orderer"]["groups"]) == [o.msp for o in orgs]
    new_app = groups["Application"]["groups"]["Org5MSP"]
    assert new_app["values"]["AnchorPeers"]["value"]["anchor_peers"] == [{"host": "127.0.5.1", "port": 7051}]
    msp = new_app["values"]["MSP"]["value"]["config"]
    assert base64.b64decode(msp["root_certs"][0]).decode() == orgs[4].package.ca_cert
    assert groups["Orderer"]["groups"]["Org5MSP"]["values"]["Endpoints"]["value"]["addresses"] == [
        "127.0.5.1:7050"
    ]
    if consensus == "bft":
        mapping = groups["Orderer"]["values"]["Orderers"]["value"]["consenter_mapping"]
        new = [c for c in mapping if c["msp_id"] == "Org5MSP"]
        assert len(mapping) == 5 and len(new) == 1 and new[0]["id"] == 5
        assert base64.b64decode(new[0]["identity"]).decode() == orgs[4].package.certificates["orderer"]
        # the block validation policy follows the consenters: a quorum of 4 of the 5 (f = 1)
        validation = groups["Orderer"]["policies"]["BlockValidation"]["policy"]["value"]
        assert validation["rule"]["n_out_of"]["n"] == 4 and len(validation["identities"]) == 5
        # ... computed as configtxgen computes it (the genesis block's, for the four founders)
        import json

        from network.governance import rewrite_block_validation

        again = json.loads(json.dumps(config))
        rewrite_block_validation(again)
        assert again == config
    else:
        consenters = groups["Orderer"]["values"]["ConsensusType"]["value"]["metadata"]["consenters"]
        assert [f"{c['host']}:{c['port']}" for c in consenters][-1] == "127.0.5.1:7050"
    endorsement = groups["Application"]["policies"]["Endorsement"]["policy"]["value"]
    # peers of any two of the five (network.files.channel_policies; a process's records need its own
    # members' majority by key-level policies)
    assert endorsement["rule"]["n_out_of"]["n"] == 2 and len(endorsement["identities"]) == 5
    assert {i["principal"]["msp_identifier"] for i in endorsement["identities"]} == {o.msp for o in orgs}
    writers = after["channel_group"]["policies"]["Writers"]["policy"]["value"]["identities"]
    assert {"msp_identifier": "Org5MSP", "role": "ORDERER"} in [i["principal"] for i in writers]
    # the policies it must meet: the Application's, the Orderer's and the channel's Admins
    assert required_policies(update, config) == [
        "/Channel/Admins",
        "/Channel/Application/Admins",
        "/Channel/Orderer/Admins",
    ]
    changes = update_changes(tx, proposal, config)
    assert changes["added"] == ["Org5MSP"] and changes["removed"] == []
    assert changes["consenters_added"] == ["127.0.5.1:7050"]
    # configtxlator takes the edited configuration back (a round trip)
    assert tx.decode("common.Config", tx.encode("common.Config", updated)) == updated


def test_signatures_meet_majority_admins_only_with_three_of_four(tx, orgs, tmp_path):
    from network.governance import (
        ConfigSignatureFile,
        GovernanceError,
        add_organisation,
        config_of_block,
        sign_update,
        update_status,
    )

    base = _channel(tx, orgs[:4], "bft", tmp_path)
    proposal = _proposal(
        tx, base, add_organisation(config_of_block(tx, base), orgs[4].package, tx), "add-org", "Org5MSP"
    )
    two = [sign_update(proposal, o.admin) for o in orgs[1:3]]
    status = update_status(proposal, two, tx)
    assert not status.ready and status.signed == ["Org2MSP", "Org3MSP"]
    assert "not yet by Org1MSP, Org4MSP" in status.missing
    assert status.policies["/Channel/Application/Admins"]["detail"].startswith("MAJORITY Admins: 2 of 4")
    three = [*two, sign_update(proposal, orgs[3].admin)]
    status = update_status(proposal, three, tx)
    assert status.ready and status.signed == ["Org2MSP", "Org3MSP", "Org4MSP"] and not status.missing
    # a client is not an admin; the newcomer's admin is no member yet; a forged signature fails
    with pytest.raises(GovernanceError, match="not an admin"):
        sign_update(proposal, orgs[0].user)
    outsider = sign_update(proposal, orgs[4].admin)
    forged = ConfigSignatureFile(proposal.digest, "Org1MSP", two[0].signature_header, two[0].signature)
    status = update_status(proposal, [*two, outsider, forged], tx)
    assert not status.ready and status.signed == ["Org2MSP", "Org3MSP"]
    assert "not a member" in status.invalid["Org5MSP"] and "Org2MSP" in status.invalid["Org1MSP"]
    # a signature of another update is refused
    other = _proposal(
        tx, base, add_organisation(config_of_block(tx, base), orgs[4].package, tx), "add-org", "x"
    )
    other.update = other.update + b"\x00"  # another digest
    with pytest.raises(GovernanceError, match="not of"):
        update_status(proposal, [sign_update(other, orgs[1].admin)], tx)


def test_remove_org_and_revoke_need_the_right_admins(tx, orgs, tmp_path):
    from network.governance import (
        add_crl,
        config_of_block,
        remove_organisation,
        required_policies,
        sign_update,
        update_changes,
        update_status,
    )

    base = _channel(tx, orgs[:4], "bft", tmp_path)
    config = config_of_block(tx, base)
    removal = _proposal(tx, base, remove_organisation(config, "Org4MSP"), "remove-org", "Org4MSP")
    changes = update_changes(tx, removal, config)
    assert changes["removed"] == ["Org4MSP"] and changes["consenters_removed"] == ["127.0.4.1:7050"]
    assert not update_status(removal, [sign_update(removal, orgs[0].admin)], tx).ready
    assert update_status(removal, [sign_update(removal, o.admin) for o in orgs[:3]], tx).ready
    # a CRL of Org2's own CA: Org2's admin alone changes Org2's MSP
    crl = orgs[1].crl(orgs[1].user.certificate)
    revoke = _proposal(tx, base, add_crl(config, "Org2MSP", crl), "revoke", "Org2MSP")
    update = tx.decode("common.ConfigUpdate", revoke.update)
    assert required_policies(update, config) == [
        "/Channel/Application/Org2MSP/Admins",
        "/Channel/Orderer/Org2MSP/Admins",
    ]
    assert update_changes(tx, revoke, config)["revoked_certificates"] == {"Org2MSP": 1}
    assert not update_status(revoke, [sign_update(revoke, orgs[0].admin)], tx).ready
    assert update_status(revoke, [sign_update(revoke, orgs[1].admin)], tx).ready
    # a CRL of another CA is refused
    from network.governance import GovernanceError

    with pytest.raises(GovernanceError, match="not by Org3MSP's CA"):
        add_crl(config, "Org3MSP", crl)
