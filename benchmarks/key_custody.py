"""Whose private keys lie where: every private key in a member's view matched, by its public key,
against every certificate (issue 27: "every private key in each view belongs to that view's
organisation"), as tests/deploy and benchmarks.consortium check it.

A private key in member X's view (its host's folder: home, inbox, out, cache, logs) is X's when a
certificate of X's own (anywhere in X's view) carries its public key and no other member's package or
home holds a certificate or key with that public key."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----\r?\n[A-Za-z0-9+/=\r\n]+?\r?\n-----END \1-----")


def spki(key: PublicKeyTypes) -> bytes:
    """The DER SubjectPublicKeyInfo of ``key`` (what certificates and keys are matched by)."""
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def pem_blocks(folder: Path) -> tuple[list[tuple[Path, bytes]], set[bytes]]:
    """Every private key (file, public key) and every certificate's (or public key file's) public key in
    the files of ``folder``. A private key that cannot be read (e.g. encrypted) raises :class:`ValueError`
    naming its file: it could be anyone's."""
    keys, certs = [], set()
    for f in folder.rglob("*"):
        if not f.is_file() or f.is_symlink():
            continue
        data = f.read_bytes()
        for m in PEM_BLOCK.finditer(data):
            kind, block = m.group(1), m.group(0)
            if kind.endswith(b"PRIVATE KEY"):
                # PKCS#8, or SEC1 under a PKCS#8 label (Fabric CA's idemix revocation key)
                der = base64.b64decode(b"".join(block.splitlines()[1:-1]))
                try:
                    key = serialization.load_der_private_key(der, None)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{f}: a private key that cannot be read ({exc})") from None
                keys.append((f, spki(key.public_key())))
            elif kind == b"CERTIFICATE":
                certs.add(spki(x509.load_pem_x509_certificate(block).public_key()))
            elif kind == b"PUBLIC KEY":
                certs.add(spki(serialization.load_pem_public_key(block)))
    return keys, certs


def keys_outside_owner(
    views: Mapping[str, Path], package_keys: Mapping[str, list[bytes]]
) -> tuple[int, list[str]]:
    """Check every member's view (``views``: MSP id → its host's folder) against every member's package
    public keys (``package_keys``: MSP id → :meth:`network.package.OrganisationPackage.public_keys`).
    Returns the number of private keys checked and, for each one not its view's member's, why."""
    found = {msp: pem_blocks(folder) for msp, folder in views.items()}
    held = {msp: {pub for _, pub in keys} for msp, (keys, _) in found.items()}
    checked, wrong = 0, []
    for msp, (keys, certs) in found.items():
        others = {pub for m, pubs in package_keys.items() if m != msp for pub in pubs}
        others |= {pub for m, pubs in held.items() if m != msp for pub in pubs}
        for f, pub in keys:
            checked += 1
            if pub in others:
                wrong.append(f"{msp}: {f} is the private key of another member's certificate or key")
            elif pub not in certs:
                wrong.append(f"{msp}: {f} is a private key of no certificate in its view")
    return checked, wrong


__all__ = ["PEM_BLOCK", "keys_outside_owner", "pem_blocks", "spki"]
