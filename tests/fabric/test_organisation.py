"""An organisation's own identities from its own Fabric CA (``consortia org init``), its public package
(``consortia org export``), the genesis block made from packages, and ``consortia join --package``:
what each refuses and that a failure leaves nothing half-made (real Fabric CA 1.5.21; no nodes but the
CAs run)."""

from __future__ import annotations

import json
import shutil
import socket
import stat

import pytest

from tests.ci import skip_or_fail

pytestmark = pytest.mark.fabric
ADDRESSES = {"Org1": "127.0.21.1", "Org2": "127.0.22.1"}


def _free_base() -> int:
    from benchmarks.members import PORT_BASES, ports_free

    return next(b for b in PORT_BASES if all(ports_free(a, b) for a in ADDRESSES.values()))


@pytest.fixture(scope="module")
def orgs(tmp_path_factory):
    """Org1 and Org2, each made by its own CA in a home of its own; their CAs stopped afterwards."""
    from network.ca import init_organisation
    from network.config import DEFAULT_HOME, NetworkError
    from network.member import MemberNodes
    from network.organisation import Organisation
    from network.package import export_package
    from network.processes import ensure_fabric

    try:
        ensure_fabric(DEFAULT_HOME, ("core", "tools", "ca"))
    except NetworkError as exc:
        skip_or_fail(f"Hyperledger Fabric and Fabric CA not available: {exc}")
    root = tmp_path_factory.mktemp("orgs")
    base = _free_base()
    made = {}
    try:
        for name, host in ADDRESSES.items():
            nodes = init_organisation(root / name, Organisation(name, host, port_base=base))
            nodes.stop("ca")
            made[name] = {
                "home": root / name,
                "package": export_package(root / name).write(root / f"{name}.pkg"),
            }
        yield made
    finally:
        for name in ADDRESSES:
            if (root / name / "organisation.json").is_file():
                MemberNodes(root / name).down()


def test_the_identities_are_in_the_layout_the_code_reads(orgs):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    from ledger.identity import Identity, certificate_role
    from network.organisation import OrganisationLayout

    lay = OrganisationLayout(orgs["Org1"]["home"])
    o = lay.organisation()
    ca = x509.load_pem_x509_certificate(lay.ca_cert(o).read_bytes())
    for user, role in (("Admin", "admin"), ("User1", "client")):
        ident = Identity.from_msp_dir(o.msp_id, lay.user_dir(o, user) / "msp")
        assert ident.role == role and ident.name == f"{user}@{o.domain}"
        assert ident.certificate.issuer == ca.subject
        assert ident.sign(b"x")  # its private key, 0600 in a 0700 folder
        key = lay.user_dir(o, user) / "msp" / "keystore" / "priv_sk"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    for folder, role in ((lay.peer_dir(o), "peer"), (lay.orderer_dir(o), "orderer")):
        cert = x509.load_pem_x509_certificate(next((folder / "msp" / "signcerts").glob("*.pem")).read_bytes())
        assert certificate_role(cert) == role
        tls = x509.load_pem_x509_certificate((folder / "tls" / "server.crt").read_bytes())
        sans = tls.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert o.host in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        assert (folder / "tls" / "ca.crt").read_bytes() == lay.tlsca_cert(o).read_bytes()
    enc = x509.load_pem_x509_certificate((lay.encryption_dir(o) / "cert.pem").read_bytes())
    assert enc.extensions.get_extension_for_class(x509.KeyUsage).value.key_agreement
    ous = [a.value for a in enc.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
    assert certificate_role(enc) is None and ous == ["keyagreement"]  # never a Fabric signer
    assert (lay.msp_dir(o) / "config.yaml").read_text().startswith("NodeOUs:\n  Enable: true")
    assert not list(lay.org_dir(o).rglob("ca/priv_sk"))  # the CA keys stay in the CA server's home


def test_init_refuses_a_home_that_holds_an_organisation(orgs):
    from network.ca import init_organisation
    from network.organisation import Organisation, OrganisationError

    with pytest.raises(OrganisationError, match="already holds an organisation"):
        init_organisation(orgs["Org1"]["home"], Organisation("Org1", ADDRESSES["Org1"]))


def test_a_failed_init_leaves_nothing_and_can_be_retried(orgs, tmp_path):
    from network.ca import init_organisation
    from network.config import NetworkError
    from network.member import MemberNodes
    from network.organisation import Organisation

    host, base = "127.0.23.1", _free_base()
    home = tmp_path / "home"
    with socket.socket() as taken:  # the CA's port is taken: its server cannot start
        taken.bind((host, base + 4))
        taken.listen()
        with pytest.raises(NetworkError, match="ca"):
            init_organisation(home, Organisation("Org3", host, port_base=base))
    assert sorted(p.name for p in home.iterdir()) in ([], ["fabric"])  # at most its logs
    assert not (home / "fabric" / "state.json").exists()
    nodes = init_organisation(home, Organisation("Org3", host, port_base=base))
    try:
        assert nodes.running()["ca"]
    finally:
        MemberNodes(home).down()


def test_a_package_is_public_and_checked(orgs, tmp_path):
    from network.package import OrganisationPackage, PackageError

    good = json.loads(orgs["Org1"]["package"].read_text())
    assert "PRIVATE KEY" not in json.dumps(good)
    assert OrganisationPackage.from_json(good).digest == good["digest"]

    def refused(change, match: str, redigest: bool = True) -> None:
        bad = json.loads(json.dumps(good))
        change(bad)
        if redigest:
            body = {k: v for k, v in bad.items() if k != "digest"}
            from wire.canonical import canonical_json, sha256_digest

            bad["digest"] = sha256_digest(canonical_json(body))
        with pytest.raises(PackageError, match=match):
            OrganisationPackage.from_json(bad)

    other = json.loads(orgs["Org2"]["package"].read_text())
    key = orgs["Org1"]["home"] / "crypto/peerOrganizations/org1.example.com/users/Admin@org1.example.com"
    admin_key = (key / "msp" / "keystore" / "priv_sk").read_text()
    refused(lambda b: b["endpoints"].update(peer="127.0.21.1:1"), "digest", redigest=False)
    refused(lambda b: b["certificates"].update(admin=admin_key), "private key")
    refused(lambda b: b["certificates"].update(peer=other["certificates"]["peer"]), "not issued by")
    refused(lambda b: b["certificates"].update(peer=good["certificates"]["admin"]), "not 'peer'")
    refused(lambda b: b["certificates"].update(encryption=good["certificates"]["admin"]), "keyagreement")
    refused(lambda b: b["certificates"].update(peer_tls=other["certificates"]["peer_tls"]), "not issued by")
    refused(lambda b: b["endpoints"].update(orderer="127.0.22.1:7050"), "not on 127.0.21.1")
    refused(lambda b: b["msp"].update(ca=other["msp"]["ca"]), "not issued by")
    refused(lambda b: b.update(extra=1), "unknown members")
    refused(lambda b: b.update(format="x"), "is not a")


def test_channel_from_packages_refuses_bft_below_four_and_duplicates(orgs, tmp_path):
    from network.channel import ChannelError, create_channel
    from network.package import read_packages

    pkgs = read_packages([orgs["Org1"]["package"], orgs["Org2"]["package"]])
    with pytest.raises(ChannelError, match="BFT ordering among 2 members"):
        create_channel(pkgs, tmp_path / "a.block", consensus="bft")
    with pytest.raises(ChannelError, match="two packages of one member"):
        create_channel([pkgs[0], pkgs[0]], tmp_path / "b.block")
    config = create_channel(pkgs, tmp_path / "c.block")  # raft below four
    assert config.consensus == "raft" and len(config.consenters) == 2
    assert config.policies["Channel/Admins"] == "MAJORITY Admins"
    assert not (tmp_path / "a.block").exists() and not (tmp_path / "b.block").exists()


def test_join_from_packages_is_all_or_nothing_and_can_be_retried(orgs, tmp_path):
    from home.errors import HomeError
    from home.member import join_with_packages
    from home.settings import load
    from ledger.fabric.gateway import FabricLedger
    from ledger.identity import Consortium

    home = tmp_path / "Org1"
    shutil.copytree(orgs["Org1"]["home"], home, ignore=shutil.ignore_patterns("fabric"))
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    broken = tmp_path / "broken.pkg"
    data = json.loads(orgs["Org2"]["package"].read_text())
    data["digest"] = "sha256:" + "0" * 64
    broken.write_text(json.dumps(data))
    with pytest.raises(HomeError, match="digest"):
        join_with_packages(home, [broken])
    with pytest.raises(HomeError, match="other members' packages"):
        join_with_packages(home, [orgs["Org1"]["package"]])
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == before  # nothing written

    settings = join_with_packages(home, [orgs["Org2"]["package"], orgs["Org1"]["package"]])
    assert settings.organisations == ("Org1MSP", "Org2MSP")
    assert settings.node_setting("listen") == f"{ADDRESSES['Org1']}:{_port(orgs, 'Org1', 9)}"
    cons = Consortium(settings.crypto)
    assert cons.orderer_domain is None and set(cons.membership().msp_ids) == {"Org1MSP", "Org2MSP"}
    cons.encryption_certificate("Org2MSP")  # checked against Org2's CA from its package
    assert not list((settings.crypto / "peerOrganizations" / "org2.example.com").rglob("*key*"))
    profile = json.loads(settings.ledger_profile.read_text())
    assert not any(p["tls_ca_file"].startswith("/") for p in profile["peers"])  # relative to itself
    FabricLedger.from_profile(settings.ledger_profile).close()  # its TLS root is found from there
    with pytest.raises(HomeError, match="already holds a consortium"):
        join_with_packages(home, [orgs["Org2"]["package"]])
    assert load(home).organisations == ("Org1MSP", "Org2MSP")
    assert (
        join_with_packages(home, [orgs["Org2"]["package"]], force=True).organisations
        == settings.organisations
    )


def _port(orgs, name: str, k: int) -> int:
    return json.loads((orgs[name]["home"] / "organisation.json").read_text())["port_base"] + k
