"""Mutual TLS of the artifact service (docs/artifacts.md): which certificates each side presents,
which CAs each side trusts, and which organisation a client certificate speaks for.

Everything comes from the consortium's cryptogen tree (:mod:`ledger.identity`):

* the **server** presents its organisation's peer TLS certificate
  (``peers/peer0.<domain>/tls/server.{crt,key}``) and accepts a client certificate issued by any
  of the consortium's TLS CAs -- so that a member of another organisation reaches the service and
  gets a clear 403 rather than a dropped handshake (as the gateway does, ``api.mtls``);
* the **client** presents its user's TLS certificate (``users/<user>@<domain>/tls/client.{crt,key}``)
  and trusts only the TLS CA of the organisation it fetches from, checking the server's name
  ``peer0.<owner domain>`` (a SAN of the peer certificate) rather than the address it dials;
* :func:`certificate_organisation` maps a client certificate to its organisation by the TLS CA
  whose signature it carries (and its common name under that organisation's domain) -- never by
  anything the caller claims.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ledger.identity import Consortium


def tls_ca_path(consortium: Consortium, msp_id: str) -> Path:
    o = consortium.organisation(msp_id)
    return o.path / "tlsca" / f"tlsca.{o.domain}-cert.pem"


def server_name(consortium: Consortium, msp_id: str) -> str:
    """The name the client checks in the service's certificate: the organisation's peer."""
    return f"peer0.{consortium.organisation(msp_id).domain}"


def all_tls_cas_pem(consortium: Consortium) -> str:
    return "".join(tls_ca_path(consortium, o.msp_id).read_text() for o in consortium.organisations)


def server_context(consortium: Consortium, msp_id: str) -> ssl.SSLContext:
    """TLS context of ``msp_id``'s artifact service: its peer certificate, client certificates required."""
    o = consortium.organisation(msp_id)
    tls = o.path / "peers" / f"peer0.{o.domain}" / "tls"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls / "server.crt", tls / "server.key")
    ctx.load_verify_locations(cadata=all_tls_cas_pem(consortium))
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


@dataclass(frozen=True)
class ClientTLS:
    """The TLS identity an organisation fetches with (one of its users, ``User1`` by default): given
    explicitly to the :class:`exchange.locations.Locations` of whoever builds a store."""

    consortium: Consortium
    organisation: str
    user: str = "User1"

    def context(self, owner: str) -> ssl.SSLContext:
        """Context for fetching from ``owner``'s service: our client certificate, its TLS CA only."""
        o = self.consortium.organisation(self.organisation)
        tls = o.path / "users" / f"{self.user}@{o.domain}" / "tls"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(tls / "client.crt", tls / "client.key")
        ctx.load_verify_locations(cafile=tls_ca_path(self.consortium, owner))
        ctx.check_hostname = True
        return ctx

    def server_name(self, owner: str) -> str:
        return server_name(self.consortium, owner)


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    if cert.issuer != ca.subject:
        return False
    pub = ca.public_key()
    algorithm = cert.signature_hash_algorithm
    if not isinstance(pub, ec.EllipticCurvePublicKey) or algorithm is None:
        return False
    try:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
    except InvalidSignature:
        return False
    return True


class CertificateOrganisations:
    """Maps a DER client certificate to the MSP id of the organisation whose TLS CA issued it."""

    def __init__(self, consortium: Consortium):
        self._cas = {
            o.msp_id: (
                x509.load_pem_x509_certificate(tls_ca_path(consortium, o.msp_id).read_bytes()),
                o.domain,
            )
            for o in consortium.organisations
        }

    def organisation(self, der: bytes | None) -> str | None:
        """MSP id of the certificate's organisation, or None (unreadable, foreign, or a name outside
        the organisation's domain). The TLS handshake already checked the chain and validity."""
        if not der:
            return None
        try:
            cert = x509.load_der_x509_certificate(der)
            cn = str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
        except (ValueError, IndexError):
            return None
        for msp_id, (ca, domain) in self._cas.items():
            if _issued_by(cert, ca):
                return msp_id if cn.endswith(("@" + domain, "." + domain)) else None
        return None
