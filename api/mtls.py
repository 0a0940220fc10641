"""Mutual TLS as an alternative to API tokens (``consortia serve --tls-cert --tls-key --mtls``).

The TLS layer checks that the client holds a certificate issued by one of the consortium's TLS CAs
(all of them are trusted at the handshake, so that a client of another organisation reaches the
application and gets a clear 403 rather than a dropped connection). uvicorn does not hand the peer
certificate to the application, so :class:`PeerCertificateProtocol` (its h11 protocol plus one
step) records each connection's certificate under the connection's (host, port), which is the
ASGI scope's ``client``; :func:`client_certificate_owner` then maps the certificate to a user of
the gateway's organisation: issued by that organisation's TLS CA, ``CN = <user>@<org domain>``.
"""

from __future__ import annotations

import ssl
import threading
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.tokens import AuthenticationError, TokenOwner, WrongOrganisation
from audit.signatures import CertificateInvalid, check_certificate
from ledger.identity import Consortium

_PEERS: dict[tuple[str, int], bytes] = {}
_LOCK = threading.Lock()


class PeerCertificateProtocol(H11Protocol):
    """uvicorn's h11 protocol, remembering the TLS peer certificate of each connection."""

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if der and self.client:
            with _LOCK:
                _PEERS[tuple(self.client)] = der  # type: ignore[index]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client:
            with _LOCK:
                _PEERS.pop(tuple(self.client), None)  # type: ignore[arg-type]
        super().connection_lost(exc)


def peer_certificate(client: tuple[str, int] | None) -> bytes | None:
    """DER certificate the TLS client at ``client`` (ASGI scope) presented, if any."""
    if client is None:
        return None
    with _LOCK:
        return _PEERS.get((client[0], client[1]))


def tls_ca_pem(consortium: Consortium, msp_id: str) -> bytes:
    o = consortium.organisation(msp_id)
    return (o.path / "tlsca" / f"tlsca.{o.domain}-cert.pem").read_bytes()


def write_client_ca_bundle(consortium: Consortium, path) -> str:
    """All organisations' TLS CA certificates in one PEM file, for ``ssl_ca_certs``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(tls_ca_pem(consortium, o.msp_id) for o in consortium.organisations))
    return str(path)


def client_certificate_owner(der: bytes, consortium: Consortium, msp_id: str) -> TokenOwner:
    """The user of ``msp_id`` a TLS client certificate authenticates (401/403 otherwise)."""
    try:
        cert = x509.load_der_x509_certificate(der)
        pem = cert.public_bytes(Encoding.PEM)
        cn = str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
    except (ValueError, IndexError):
        raise AuthenticationError("client certificate is not readable") from None
    org = consortium.organisation(msp_id)
    try:
        check_certificate(pem, tls_ca_pem(consortium, msp_id), "client certificate")
    except CertificateInvalid:
        for other in consortium.organisations:
            if other.msp_id != msp_id:
                try:
                    check_certificate(pem, tls_ca_pem(consortium, other.msp_id), "client certificate")
                    raise WrongOrganisation(
                        f"this is the gateway of {msp_id}; a client certificate of "
                        f"{other.msp_id} cannot act here"
                    )
                except CertificateInvalid:
                    pass
        raise AuthenticationError("client certificate is not issued by a TLS CA of this consortium") from None
    user, _, domain = cn.partition("@")
    if domain != org.domain or not user:
        raise AuthenticationError(f"client certificate {cn!r} does not name a user of {org.domain}")
    return TokenOwner(msp_id, user, "mtls:" + format(cert.serial_number, "x")[:12], "")


def ssl_options(consortium: Consortium, home, require: bool) -> dict[str, Any]:
    """uvicorn keyword arguments for client-certificate authentication."""
    return {
        "http": PeerCertificateProtocol,
        "ssl_cert_reqs": ssl.CERT_REQUIRED if require else ssl.CERT_OPTIONAL,
        "ssl_ca_certs": write_client_ca_bundle(consortium, home / "client-cas.pem"),
    }
