"""Mutual TLS of the artifact service: the caller's organisation comes from the TLS CA that issued its
certificate; no certificate, or one of another CA, gets no answer."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

import pytest

from exchange.tls import CertificateOrganisations, ClientTLS, server_name, tls_ca_path
from ledger.identity import Consortium


def test_certificates_map_to_their_organisation(consortium, tmp_path):
    orgs = CertificateOrganisations(consortium)
    for name in ("Org1", "Org4"):
        o = consortium.organisation(name)
        pem = (o.path / "users" / f"User1@{o.domain}" / "tls" / "client.crt").read_bytes()
        assert orgs.organisation(ssl.PEM_cert_to_DER_cert(pem.decode())) == o.msp_id
    assert orgs.organisation(None) is None and orgs.organisation(b"junk") is None
    foreign = Consortium.generate(tmp_path / "foreign", ["Org2"])  # the same names, other CAs
    o = foreign.organisation("Org2")
    pem = (o.path / "users" / f"User1@{o.domain}" / "tls" / "client.crt").read_bytes()
    assert orgs.organisation(ssl.PEM_cert_to_DER_cert(pem.decode())) is None


def test_the_client_trusts_only_the_owners_ca_and_checks_its_peer_name(consortium):
    tls = ClientTLS(consortium, "Org2MSP")
    assert tls.server_name("Org1MSP") == server_name(consortium, "Org1MSP") == "peer0.org1.example.com"
    ctx = tls.context("Org1MSP")
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    names = [dict(rdn[0] for rdn in ca["subject"])["commonName"] for ca in ctx.get_ca_certs()]
    assert names == ["tlsca.org1.example.com"]  # the owner's TLS CA only
    assert tls_ca_path(consortium, "Org1MSP").is_file()


def _raw_get(url, ca, cert=None):
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(cert / "client.crt", cert / "client.key")
    return urllib.request.urlopen(url, context=ctx).read()


def test_no_or_foreign_client_certificate_gets_no_answer(served, consortium, tmp_path):
    srv, _, message, _ = served
    ca = tls_ca_path(consortium, "Org1MSP")
    url = f"{srv.url}/artifacts/{message}"
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _raw_get(url, ca)  # no client certificate
    foreign = Consortium.generate(tmp_path / "foreign", ["Org2"])  # the same names, other CAs
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _raw_get(url, ca, foreign.organisation("Org2").path / "users" / "User1@org2.example.com" / "tls")
    assert _raw_get(
        url, ca, consortium.organisation("Org2").path / "users" / "User1@org2.example.com" / "tls"
    )
