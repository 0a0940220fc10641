"""Identity material in Fabric's ``cryptogen`` layout (the tree :class:`ledger.identity.Consortium`
reads): per organisation a CA and a TLS CA, MSP folders with NodeOUs on, peer/orderer, admin and
user certificates with their TLS pairs, and (Consortia) a key-agreement certificate per
organisation. ECDSA P-256 keys, SHA-256 signatures, ten years' validity."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)


def _name(cn: str, org: str | None = None, ou: str | None = None) -> x509.Name:
    attrs = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "California"),
        x509.NameAttribute(NameOID.LOCALITY_NAME, "San Francisco"),
    ]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def issue_ca(cn: str, org: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    name = _name(cn, org)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(
            x509.KeyUsage(True, True, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cn: str,
    ou: str | None,
    tls: bool = False,
    sans: Sequence[str] = (),
    key_agreement: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, None, ou))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if key_agreement:
        b = b.add_extension(
            x509.KeyUsage(False, False, False, False, True, False, False, False, False), critical=True
        )
    elif tls:
        b = b.add_extension(
            x509.KeyUsage(True, True, False, False, False, False, False, False, False), critical=True
        )
        b = b.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    else:
        b = b.add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )
    if sans:
        names: list[x509.GeneralName] = []
        for s in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                names.append(x509.DNSName(s))
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(ca_key, hashes.SHA256()), key


def sans_with(sans: Sequence[str], address: str | None) -> tuple[str, ...]:
    """``sans`` plus ``address`` (a host's own address, e.g. its place in the network) if new."""
    return (*sans, address) if address and address not in sans else tuple(sans)


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def nodeou_config(ca_file: str) -> bytes:
    """An MSP's ``config.yaml``: NodeOUs on, the four roles identified by their OU under the CA
    certificate ``cacerts/<ca_file>`` (what Fabric and :class:`ledger.identity.MembershipService`
    read a certificate's role from)."""
    lines = ["NodeOUs:", "  Enable: true"]
    for label, ou in (
        ("ClientOUIdentifier", "client"),
        ("PeerOUIdentifier", "peer"),
        ("AdminOUIdentifier", "admin"),
        ("OrdererOUIdentifier", "orderer"),
    ):
        lines += [
            f"  {label}:",
            f"    Certificate: cacerts/{ca_file}",
            f"    OrganizationalUnitIdentifier: {ou}",
        ]
    return ("\n".join(lines) + "\n").encode()


def _write_msp(
    msp: Path,
    ca_cert: x509.Certificate,
    ca_file: str,
    tlsca_cert: x509.Certificate,
    tlsca_file: str,
    sign_cert: x509.Certificate | None = None,
    sign_key: ec.EllipticCurvePrivateKey | None = None,
    sign_name: str = "",
) -> None:
    write_file(msp / "cacerts" / ca_file, cert_pem(ca_cert))
    write_file(msp / "tlscacerts" / tlsca_file, cert_pem(tlsca_cert))
    write_file(msp / "config.yaml", nodeou_config(ca_file))
    if sign_cert is not None and sign_key is not None:
        write_file(msp / "signcerts" / f"{sign_name}-cert.pem", cert_pem(sign_cert))
        write_file(msp / "keystore" / "priv_sk", key_pem(sign_key), private=True)


def generate_org(base: Path, domain: str, kind: str, peers: int, users: int, sans: Sequence[str]) -> None:
    """One organisation in cryptogen's layout (kind = 'peer' or 'orderer')."""
    ca_cert, ca_key = issue_ca(f"ca.{domain}", domain)
    tlsca_cert, tlsca_key = issue_ca(f"tlsca.{domain}", domain)
    ca_file, tlsca_file = f"ca.{domain}-cert.pem", f"tlsca.{domain}-cert.pem"
    write_file(base / "ca" / ca_file, cert_pem(ca_cert))
    write_file(base / "ca" / "priv_sk", key_pem(ca_key), private=True)
    write_file(base / "tlsca" / tlsca_file, cert_pem(tlsca_cert))
    write_file(base / "tlsca" / "priv_sk", key_pem(tlsca_key), private=True)
    _write_msp(base / "msp", ca_cert, ca_file, tlsca_cert, tlsca_file)

    def node(folder: str, host: str, role: str, tls_names: tuple[str, str]) -> None:
        cert, key = issue_leaf(ca_cert, ca_key, host, role)
        _write_msp(base / folder / host / "msp", ca_cert, ca_file, tlsca_cert, tlsca_file, cert, key, host)
        tcert, tkey = issue_leaf(
            tlsca_cert, tlsca_key, host, None, tls=True, sans=[host, host.split(".")[0], *sans]
        )
        write_file(base / folder / host / "tls" / "ca.crt", cert_pem(tlsca_cert))
        write_file(base / folder / host / "tls" / tls_names[0], cert_pem(tcert))
        write_file(base / folder / host / "tls" / tls_names[1], key_pem(tkey), private=True)

    if kind == "orderer":
        node("orderers", f"orderer.{domain}", "orderer", ("server.crt", "server.key"))
    else:
        for i in range(peers):
            node("peers", f"peer{i}.{domain}", "peer", ("server.crt", "server.key"))
        # Consortia: a key-agreement certificate for messages and model keys encrypted to this organisation.
        ecert, ekey = issue_leaf(ca_cert, ca_key, f"encryption.{domain}", None, key_agreement=True)
        write_file(base / "encryption" / "cert.pem", cert_pem(ecert))
        write_file(base / "encryption" / "key.pem", key_pem(ekey), private=True)
    node("users", f"Admin@{domain}", "admin", ("client.crt", "client.key"))
    for u in range(1, users + 1):
        node("users", f"User{u}@{domain}", "client", ("client.crt", "client.key"))
