"""An organisation's public package (``consortia org export``): everything the others need from it,
and nothing private (docs/fabric.md "The public package").

One JSON file::

    {
      "format": "consortia-organisation-package/1",
      "organisation": {"name": "Org2", "msp_id": "Org2MSP", "domain": "org2.example.com",
                       "host": "127.0.2.1"},
      "endpoints": {"peer": "127.0.2.1:7051", "orderer": "127.0.2.1:7050",
                    "orderer_admin": "127.0.2.1:7053", "ca": "https://127.0.2.1:7054",
                    "artifacts": "https://127.0.2.1:7059"},
      "msp": {"ca": PEM, "tlsca": PEM, "config.yaml": "NodeOUs: ..."},
      "certificates": {"admin": PEM, "peer": PEM, "peer_tls": PEM, "orderer": PEM,
                       "orderer_tls": PEM, "encryption": PEM},
      "digest": "sha256:<hex>"
    }

``digest`` is the SHA-256 of the canonical JSON (sorted keys, no whitespace, UTF-8:
:func:`wire.canonical.canonical_json`) of the package without its ``digest`` member. The
organisation tells the others the digest by a channel they trust (read aloud, signed mail); each
checks the file it received against it. Reading a package (:meth:`OrganisationPackage.from_json`)
checks its format and digest, that it holds no private key, and that every certificate is what it
claims: the CA and TLS CA self-signed CAs, the admin, peer and orderer certificates issued by the CA
with their NodeOU role, the TLS certificates issued by the TLS CA and naming the organisation's
address, the key-agreement certificate issued by the CA for key agreement."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ledger.cryptogen import nodeou_config
from ledger.identity import certificate_role
from network.config import NetworkError
from network.organisation import Organisation, OrganisationLayout
from wire.canonical import canonical_json, sha256_digest

FORMAT = "consortia-organisation-package/1"
CERTIFICATES = ("admin", "peer", "peer_tls", "orderer", "orderer_tls", "encryption")
ENDPOINTS = ("peer", "orderer", "orderer_admin", "ca", "artifacts")
KEY_AGREEMENT_OU = "keyagreement"  #: the OU (Fabric CA identity type) of the key-agreement certificate


class PackageError(NetworkError):
    """A package that cannot be used: unreadable, another format, a wrong digest, a private key in it,
    or a certificate that is not what the package says it is."""


@dataclass(frozen=True)
class OrganisationPackage:
    """One organisation's public package (module docstring)."""

    organisation: str
    msp_id: str
    domain: str
    host: str
    endpoints: dict[str, str]
    ca_cert: str
    tlsca_cert: str
    node_ous: str  # msp/config.yaml
    certificates: dict[str, str]
    digest: str = field(default="")

    # ---- the file
    def body(self) -> dict[str, Any]:
        """The package without its digest: what the digest is computed over."""
        return {
            "format": FORMAT,
            "organisation": {
                "name": self.organisation,
                "msp_id": self.msp_id,
                "domain": self.domain,
                "host": self.host,
            },
            "endpoints": dict(self.endpoints),
            "msp": {"ca": self.ca_cert, "tlsca": self.tlsca_cert, "config.yaml": self.node_ous},
            "certificates": dict(self.certificates),
        }

    def computed_digest(self) -> str:
        return sha256_digest(canonical_json(self.body()))

    def to_json(self) -> dict[str, Any]:
        return {**self.body(), "digest": self.computed_digest()}

    def write(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, out)
        return out

    @classmethod
    def from_json(cls, data: Any, source: str = "package") -> OrganisationPackage:
        """A package from its JSON, checked (module docstring); :class:`PackageError` otherwise."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise PackageError(f"{source} is not a {FORMAT} (format {got!r})")
        if "PRIVATE KEY" in json.dumps(data):
            raise PackageError(f"{source} holds a private key: a package is public, refuse it")
        try:
            org, msp, certs = data["organisation"], data["msp"], data["certificates"]
            pkg = cls(
                organisation=str(org["name"]),
                msp_id=str(org["msp_id"]),
                domain=str(org["domain"]),
                host=str(org["host"]),
                endpoints={k: str(data["endpoints"][k]) for k in ENDPOINTS},
                ca_cert=str(msp["ca"]),
                tlsca_cert=str(msp["tlsca"]),
                node_ous=str(msp["config.yaml"]),
                certificates={k: str(certs[k]) for k in CERTIFICATES},
                digest=str(data.get("digest", "")),
            )
        except (KeyError, TypeError) as exc:
            raise PackageError(f"{source} lacks {exc}") from None
        unknown = set(data) - {"format", "organisation", "endpoints", "msp", "certificates", "digest"}
        if unknown:
            raise PackageError(f"{source} has unknown members: {sorted(unknown)}")
        if pkg.digest != pkg.computed_digest():
            raise PackageError(
                f"{source}: its digest {pkg.digest or '(none)'} is not the digest of its content "
                f"{pkg.computed_digest()}: the file was changed"
            )
        pkg.check()
        return pkg

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> OrganisationPackage:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise PackageError(f"no package at {path}") from None
        except (OSError, ValueError) as exc:
            raise PackageError(f"{path} is not a package (not JSON: {exc})") from None
        return cls.from_json(data, str(path))

    # ---- the checks
    def check(self) -> None:
        """Every certificate is what the package says (module docstring)."""
        try:
            Organisation(self.organisation, self.host, domain=self.domain)
        except NetworkError as exc:
            raise PackageError(f"package of {self.msp_id}: {exc}") from None
        if self.msp_id != f"{self.organisation}MSP":
            raise PackageError(f"package of {self.organisation} names MSP id {self.msp_id}")
        ca = _ca(self.ca_cert, f"{self.msp_id} CA")
        tlsca = _ca(self.tlsca_cert, f"{self.msp_id} TLS CA")
        if self.node_ous != nodeou_config(f"ca.{self.domain}-cert.pem").decode():
            raise PackageError(f"{self.msp_id}'s config.yaml is not the NodeOU configuration of its CA")
        roles = {"admin": "admin", "peer": "peer", "orderer": "orderer", "encryption": KEY_AGREEMENT_OU}
        for what, role in roles.items():
            cert = _issued(self.certificates[what], ca, f"{self.msp_id} {what} certificate")
            ous = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
            if role not in ous or (what != "encryption" and certificate_role(cert) != role):
                raise PackageError(f"{self.msp_id} {what} certificate has OU {ous}, not {role!r}")
        enc = _issued(self.certificates["encryption"], ca, f"{self.msp_id} encryption certificate")
        try:
            if not enc.extensions.get_extension_for_class(x509.KeyUsage).value.key_agreement:
                raise PackageError(f"{self.msp_id}'s encryption certificate is not for key agreement")
        except x509.ExtensionNotFound:
            raise PackageError(f"{self.msp_id}'s encryption certificate has no key usage") from None
        for what in ("peer_tls", "orderer_tls"):
            cert = _issued(self.certificates[what], tlsca, f"{self.msp_id} {what} certificate")
            try:
                sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
            except x509.ExtensionNotFound:
                ips = set()
            if self.host not in ips:
                raise PackageError(f"{self.msp_id} {what} certificate does not name {self.host}")
        for what in ENDPOINTS:
            if _endpoint_host(self.endpoints[what]) != self.host:
                raise PackageError(
                    f"{self.msp_id}'s {what} endpoint {self.endpoints[what]} is not on {self.host}"
                )

    def public_keys(self) -> list[bytes]:
        """The DER public keys of every certificate of the package (to match against private keys)."""
        from cryptography.hazmat.primitives import serialization

        pems = [self.ca_cert, self.tlsca_cert, *self.certificates.values()]
        return [
            x509.load_pem_x509_certificate(p.encode())
            .public_key()
            .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
            for p in pems
        ]


def _endpoint_host(endpoint: str) -> str:
    """The host of ``host:port`` or ``https://host:port``."""
    return (
        endpoint.partition("://")[2].rpartition(":")[0] if "://" in endpoint else endpoint.rpartition(":")[0]
    )


def _load(pem: str, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError as exc:
        raise PackageError(f"{what} is not a PEM certificate: {exc}") from None


def _verify(cert: x509.Certificate, issuer: x509.Certificate, what: str) -> None:
    pub, algorithm = issuer.public_key(), cert.signature_hash_algorithm
    if not isinstance(pub, ec.EllipticCurvePublicKey) or algorithm is None:
        raise PackageError(f"{what}: its issuer is not an ECDSA CA")
    try:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
    except InvalidSignature:
        raise PackageError(f"{what} is not signed by its CA") from None


def _ca(pem: str, what: str) -> x509.Certificate:
    cert = _load(pem, what)
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca or cert.issuer != cert.subject:
        raise PackageError(f"{what} is not a self-signed CA certificate")
    _verify(cert, cert, what)
    return cert


def _issued(pem: str, ca: x509.Certificate, what: str) -> x509.Certificate:
    cert = _load(pem, what)
    if cert.issuer != ca.subject:
        raise PackageError(f"{what} is not issued by {ca.subject.rfc4514_string()}")
    _verify(cert, ca, what)
    return cert


def export_package(home: str | os.PathLike[str]) -> OrganisationPackage:
    """The public package of the organisation whose home is ``home`` (made by ``consortia org init``):
    certificates, its NodeOU configuration and its endpoints, read from its home; never a key."""
    layout = OrganisationLayout(home)
    org = layout.organisation()

    def cert(path: Path) -> str:
        try:
            return path.read_text()
        except FileNotFoundError:
            raise PackageError(f"{path} missing: the home's identities are incomplete (org init)") from None

    def signcert(msp: Path) -> str:
        found = sorted((msp / "signcerts").glob("*.pem"))
        if len(found) != 1:
            raise PackageError(f"{msp / 'signcerts'} holds {len(found)} certificates, not one")
        return cert(found[0])

    pkg = OrganisationPackage(
        organisation=org.name,
        msp_id=org.msp_id,
        domain=org.domain,
        host=org.host,
        endpoints=org.endpoints(),
        ca_cert=cert(layout.ca_cert(org)),
        tlsca_cert=cert(layout.tlsca_cert(org)),
        node_ous=cert(layout.msp_dir(org) / "config.yaml"),
        certificates={
            "admin": signcert(layout.user_dir(org, "Admin") / "msp"),
            "peer": signcert(layout.peer_dir(org) / "msp"),
            "peer_tls": cert(layout.peer_dir(org) / "tls" / "server.crt"),
            "orderer": signcert(layout.orderer_dir(org) / "msp"),
            "orderer_tls": cert(layout.orderer_dir(org) / "tls" / "server.crt"),
            "encryption": cert(layout.encryption_dir(org) / "cert.pem"),
        },
    )
    pkg = OrganisationPackage.from_json(pkg.to_json(), f"the package of {org.msp_id}")  # its own checks
    return pkg


def read_packages(paths: Iterable[str | os.PathLike[str]]) -> list[OrganisationPackage]:
    """Packages read and checked, sorted by MSP id; two packages of one organisation are refused."""
    out: dict[str, OrganisationPackage] = {}
    for path in paths:
        pkg = OrganisationPackage.read(path)
        if pkg.msp_id in out and out[pkg.msp_id].digest != pkg.digest:
            raise PackageError(f"two different packages of {pkg.msp_id} (the second: {path})")
        out[pkg.msp_id] = pkg
    return [out[m] for m in sorted(out)]
