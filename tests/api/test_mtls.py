"""Mutual TLS: a user's TLS client certificate authenticates like a token; another
organisation's certificate is refused with 403, no certificate and no token with 401."""

from __future__ import annotations

import httpx
import pytest

from api.mtls import client_certificate_owner, ssl_options
from api.tokens import AuthenticationError, WrongOrganisation
from tests.api.conftest import make_gateway
from tests.api.live import LiveServer


def tls_dir(world, org: str, who: str):
    o = world.consortium.organisation(org)
    return (
        o.path / ("peers" if who.startswith("peer") else "users") / f"{who}.{o.domain}" / "tls"
        if who.startswith("peer")
        else o.path / "users" / f"{who}@{o.domain}" / "tls"
    )


@pytest.fixture(scope="module")
def live(world, tmp_path_factory):
    from api.gateway import create_app

    home = tmp_path_factory.mktemp("gw-mtls")
    gw = make_gateway(world, "Org1MSP", home)
    gw.mtls = True
    server_tls = tls_dir(world, "Org1MSP", "peer0")
    config = {
        "ssl_certfile": str(server_tls / "server.crt"),
        "ssl_keyfile": str(server_tls / "server.key"),
        **ssl_options(world.consortium, home, require=False),
    }
    with LiveServer(create_app(gw), **config) as server:
        yield server, gw, server_tls / "ca.crt"
    gw.index.close()


def client(world, live, org: str | None, user: str = "User1") -> httpx.Client:
    server, _, ca = live
    cert = None
    if org is not None:
        d = tls_dir(world, org, user)
        cert = (str(d / "client.crt"), str(d / "client.key"))
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(*cert)
    return httpx.Client(base_url=server.url, verify=ctx, timeout=20)


def test_client_certificate_of_a_user_authenticates(world, live):
    with client(world, live, "Org1MSP") as c:
        r = c.get("/api/v1/whoami")
        assert r.status_code == 200, r.text
        me = r.json()
        assert me == {"organisation": "Org1MSP", "user": "User1", "token_id": me["token_id"]}
        assert me["token_id"].startswith("mtls:")
        assert c.get("/api/v1/models/proc-0:Org1MSP/lineage").json()["root"] == "proc-0/3/Org1MSP"
    with client(world, live, "Org1MSP", "Admin") as c:
        assert c.get("/api/v1/whoami").json()["user"] == "Admin"


def test_other_organisation_and_no_certificate_are_refused(world, live):
    with client(world, live, "Org2MSP") as c:
        r = c.get("/api/v1/whoami")
        assert r.status_code == 403 and r.json()["code"] == "WRONG_ORGANISATION"
    with client(world, live, None) as c:
        assert c.get("/api/v1/whoami").status_code == 401
        token = live[1].tokens.issue("User1")  # tokens still work over TLS
        assert c.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_certificate_mapping_rules(world, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from ledger.identity import Consortium

    der = lambda p: x509.load_pem_x509_certificate(p.read_bytes()).public_bytes(Encoding.DER)  # noqa: E731
    peer = der(tls_dir(world, "Org1MSP", "peer0") / "server.crt")
    with pytest.raises(AuthenticationError, match="does not name a user"):
        client_certificate_owner(peer, world.consortium, "Org1MSP")
    with pytest.raises(WrongOrganisation):
        client_certificate_owner(
            der(tls_dir(world, "Org3MSP", "User1") / "client.crt"), world.consortium, "Org1MSP"
        )
    other = Consortium.generate(tmp_path / "x", ["Org1"])
    stranger = other.organisation("Org1MSP").path / "users" / "User1@org1.example.com" / "tls" / "client.crt"
    with pytest.raises(AuthenticationError, match="not issued"):
        client_certificate_owner(der(stranger), world.consortium, "Org1MSP")
    with pytest.raises(AuthenticationError):
        client_certificate_owner(b"junk", world.consortium, "Org1MSP")
