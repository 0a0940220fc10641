"""Identities: cryptogen layout, NodeOUs, low-S signatures, SerializedIdentity, MSP validation."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from ledger.errors import AccessDenied
from ledger.identity import (
    P256_ORDER,
    Consortium,
    parse_serialized_identity,
    serialize_identity,
    sign,
    verify,
)


@pytest.fixture(scope="module")
def cons(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("c"), ["Org1", "Org2"])


def test_cryptogen_layout(cons):
    base = cons.root / "peerOrganizations" / "org1.example.com"
    for rel in [
        "ca/ca.org1.example.com-cert.pem",
        "tlsca/tlsca.org1.example.com-cert.pem",
        "msp/config.yaml",
        "msp/cacerts/ca.org1.example.com-cert.pem",
        "msp/tlscacerts/tlsca.org1.example.com-cert.pem",
        "peers/peer0.org1.example.com/msp/signcerts/peer0.org1.example.com-cert.pem",
        "peers/peer0.org1.example.com/msp/keystore/priv_sk",
        "peers/peer0.org1.example.com/tls/server.crt",
        "peers/peer0.org1.example.com/tls/server.key",
        "peers/peer0.org1.example.com/tls/ca.crt",
        "users/Admin@org1.example.com/msp/signcerts/Admin@org1.example.com-cert.pem",
        "users/User1@org1.example.com/tls/client.crt",
    ]:
        assert (base / rel).is_file(), rel
    assert (
        cons.root / "ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt"
    ).is_file()
    assert "OrganizationalUnitIdentifier: peer" in (base / "msp/config.yaml").read_text()
    assert oct((base / "users/User1@org1.example.com/msp/keystore/priv_sk").stat().st_mode & 0o777) == "0o600"


def test_roles_from_node_ous(cons):
    assert cons.identity("Org1").role == "client"
    assert cons.identity("Org1", "Admin").role == "admin"
    assert cons.peer_identity("Org2").role == "peer"
    assert cons.orderer_identity().role == "orderer"
    assert cons.identity("Org2MSP").msp_id == "Org2MSP"


def test_signatures_are_low_s_and_verify(cons):
    ident = cons.identity("Org1")
    for i in range(64):
        sig = ident.sign(b"msg%d" % i)
        _, s = decode_dss_signature(sig)
        assert s <= P256_ORDER // 2
        assert verify(ident.certificate.public_key(), b"msg%d" % i, sig)
    assert not verify(ident.certificate.public_key(), b"other", sig)
    r, s = decode_dss_signature(sig)
    assert not verify(ident.certificate.public_key(), b"msg63", encode_dss_signature(r, P256_ORDER - s))


def test_serialized_identity_matches_fabric_protobuf(cons):
    from fabric_protos.msp import identities_pb2  # the official bindings

    ident = cons.identity("Org1")
    ours = ident.serialized()
    official = identities_pb2.SerializedIdentity(
        mspid="Org1MSP", id_bytes=ident.certificate_pem
    ).SerializeToString()
    assert ours == official
    assert parse_serialized_identity(ours) == ("Org1MSP", ident.certificate_pem)
    with pytest.raises(ValueError):
        parse_serialized_identity(ours[:-5])


def test_membership_rejects_foreign_and_forged(cons, tmp_path):
    m = cons.membership()
    ident = cons.identity("Org1")
    assert m.verify_signature(ident.serialized(), b"x", ident.sign(b"x")) == ("Org1MSP", "client")
    with pytest.raises(AccessDenied, match="does not verify"):
        m.verify_signature(ident.serialized(), b"x", ident.sign(b"y"))
    # a certificate of Org1 presented under Org2's MSP id
    with pytest.raises(AccessDenied, match="not issued"):
        m.deserialize(serialize_identity("Org2MSP", ident.certificate_pem))
    # an identity from another consortium claiming to be Org1MSP: same names, different CA key
    other = Consortium.generate(tmp_path / "evil", ["Org1"])
    with pytest.raises(AccessDenied, match="does not verify against"):
        m.deserialize(other.identity("Org1").serialized())
    with pytest.raises(AccessDenied, match="unknown organisation"):
        m.deserialize(serialize_identity("Org7MSP", ident.certificate_pem))
    with pytest.raises(AccessDenied, match="malformed"):
        m.deserialize(b"\x0a\x03abc")


def test_encryption_certificates_are_checked(cons, tmp_path):
    cert = cons.encryption_certificate("Org1")
    key = cons.encryption_key("Org1")
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    other = Consortium.generate(tmp_path / "o", ["Org1"])
    target = cons.root / "peerOrganizations/org1.example.com/encryption/cert.pem"
    saved = target.read_bytes()
    try:
        target.write_bytes(
            (other.root / "peerOrganizations/org1.example.com/encryption/cert.pem").read_bytes()
        )
        with pytest.raises(AccessDenied):
            cons.encryption_certificate("Org1")
    finally:
        target.write_bytes(saved)


def test_sign_helper_uses_sha256(cons):
    key = ec.generate_private_key(ec.SECP256R1())
    sig = sign(key, b"data")
    key.public_key().verify(sig, b"data", ec.ECDSA(hashes.SHA256()))
