"""Identities of a consortium: X.509 certificates per organisation in Fabric's ``cryptogen``
directory layout, ECDSA P-256 signing with SHA-256 and low-S, Fabric's SerializedIdentity, and
MSP validation (certificate chains to the organisation CA, NodeOU role).

The same directory serves the embedded ledger and a real Fabric network (``fabric-network/``):

    <root>/peerOrganizations/<domain>/{ca,tlsca,msp}/...
    <root>/peerOrganizations/<domain>/peers/peer0.<domain>/{msp,tls}/...
    <root>/peerOrganizations/<domain>/users/{Admin,User1}@<domain>/{msp,tls}/...
    <root>/peerOrganizations/<domain>/encryption/{cert.pem,key.pem}   (Consortia: key agreement)
    <root>/ordererOrganizations/<orderer domain>/...                  (absent without a centre)

MSP ids are ``<Name>MSP`` (``Org1MSP``) and domains ``<name lowercased>.<base domain>``. A consortium
without a centre (docs/fabric.md "A consortium without a centre") has no orderer organisation: each
member runs its own orderer, and ``consortium.json`` names no ``orderer_domain``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.x509.oid import NameOID
from fabric_protos.msp.identities_pb2 import SerializedIdentity
from google.protobuf.message import DecodeError

from ledger.cryptogen import generate_org, sans_with
from ledger.errors import AccessDenied
from wire.memo import Memo, read_file

P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_HALF_ORDER = P256_ORDER // 2
ROLES = ("client", "admin", "peer", "orderer")


# --------------------------------------------------------------------------- signatures


def sign(private_key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """DER ECDSA signature over SHA-256(data), normalised to low S (Fabric rejects s > n/2)."""
    der = private_key.sign(data, ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    if s > _HALF_ORDER:
        s = P256_ORDER - s
    return encode_dss_signature(r, s)


def verify(public_key: ec.EllipticCurvePublicKey, data: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is a valid low-S ECDSA P-256/SHA-256 signature of ``data``."""
    try:
        r, s = decode_dss_signature(signature)
    except (ValueError, TypeError):
        return False
    if not (0 < s <= _HALF_ORDER) or not (0 < r < P256_ORDER):
        return False
    try:
        public_key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


def public_key_pem(key: ec.EllipticCurvePublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def load_public_key_pem(pem: str | bytes) -> ec.EllipticCurvePublicKey:
    key = serialization.load_pem_public_key(pem.encode() if isinstance(pem, str) else pem)
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("expected an ECDSA P-256 public key")
    return key


# --------------------------------------------------------------------------- SerializedIdentity


def serialize_identity(msp_id: str, certificate_pem: bytes) -> bytes:
    """``msp.SerializedIdentity{mspid=1, id_bytes=2}`` protobuf bytes (the official Fabric message)."""
    return bytes(SerializedIdentity(mspid=msp_id, id_bytes=certificate_pem).SerializeToString())


def parse_serialized_identity(data: bytes) -> tuple[str, bytes]:
    """Inverse of :func:`serialize_identity`: (mspid, PEM certificate bytes). Bytes that are not a
    well-formed ``SerializedIdentity`` (truncated or over-long fields, a bad varint, field number 0,
    invalid UTF-8 in ``mspid``) or that lack ``mspid`` or ``id_bytes`` are a ``ValueError``."""
    try:
        identity = SerializedIdentity.FromString(data)
    except DecodeError:
        raise ValueError(
            f"malformed SerializedIdentity ({len(data)} bytes): not protobuf wire format"
        ) from None
    if not identity.mspid or not identity.id_bytes:
        raise ValueError("SerializedIdentity lacks mspid or id_bytes")
    return str(identity.mspid), bytes(identity.id_bytes)


def certificate_role(cert: x509.Certificate) -> str | None:
    """The NodeOU role of a certificate (its OU among client/admin/peer/orderer), if any."""
    for attr in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME):
        if attr.value in ROLES:
            return str(attr.value)
    return None


# --------------------------------------------------------------------------- identities


@dataclass(frozen=True)
class Identity:
    """A signing identity: an organisation's MSP id, an X.509 certificate and its private key."""

    msp_id: str
    certificate_pem: bytes
    private_key: ec.EllipticCurvePrivateKey

    @cached_property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.certificate_pem)

    @property
    def name(self) -> str:
        return str(self.certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)

    @property
    def role(self) -> str | None:
        return certificate_role(self.certificate)

    def serialized(self) -> bytes:
        return serialize_identity(self.msp_id, self.certificate_pem)

    def sign(self, data: bytes) -> bytes:
        return sign(self.private_key, data)

    def __repr__(self) -> str:  # never show the key
        return f"Identity({self.msp_id}, {self.name}, role={self.role})"

    @classmethod
    def from_msp_dir(cls, msp_id: str, msp_dir: str | os.PathLike[str]) -> Identity:
        msp_dir = Path(msp_dir)
        cert_file = next((msp_dir / "signcerts").glob("*.pem"), None)
        if cert_file is None:  # e.g. another organisation in a `consortia join` home: public part only
            raise FileNotFoundError(f"no signing identity at {msp_dir} (no signcerts/*.pem)")
        cert = cert_file.read_bytes()
        key = serialization.load_pem_private_key((msp_dir / "keystore" / "priv_sk").read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(msp_id, cert, key)


# --------------------------------------------------------------------------- MSP validation


class MembershipService:
    """Validates serialized identities against the organisations' CAs (Fabric's channel MSP).

    Checks: known MSP id, certificate signed by that organisation's CA, within its validity
    period, and carrying a NodeOU role. ``deserialize`` returns the validated certificate.
    """

    def __init__(self, ca_certificates: dict[str, x509.Certificate]):
        self._cas = dict(ca_certificates)
        # serialized identity -> (msp id, certificate, role, public key); chain checks are done once
        self._validated: dict[bytes, tuple[str, x509.Certificate, str, ec.EllipticCurvePublicKey]] = {}

    @property
    def ca_certificates(self) -> dict[str, x509.Certificate]:
        return dict(self._cas)

    @property
    def msp_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._cas))

    def deserialize(
        self, serialized: bytes, *, at: dt.datetime | None = None
    ) -> tuple[str, x509.Certificate, str]:
        hit = self._validated.get(serialized)
        if hit is not None:
            msp_id, cert, cached_role, _ = hit
            now = at or dt.datetime.now(dt.UTC)
            if not (cert.not_valid_before_utc <= now <= cert.not_valid_after_utc):
                raise AccessDenied(f"certificate of {msp_id} is expired or not yet valid")
            return msp_id, cert, cached_role
        try:
            msp_id, pem = parse_serialized_identity(serialized)
            cert = x509.load_pem_x509_certificate(pem)
        except ValueError as exc:
            raise AccessDenied(f"malformed identity: {exc}") from None
        ca = self._cas.get(msp_id)
        if ca is None:
            raise AccessDenied(f"identity of unknown organisation {msp_id!r}: not a member of this channel")
        if cert.issuer != ca.subject:
            raise AccessDenied(f"certificate of {msp_id} is not issued by the {msp_id} CA")
        try:
            pub = ca.public_key()
            algorithm = cert.signature_hash_algorithm
            if not isinstance(pub, ec.EllipticCurvePublicKey) or algorithm is None:
                raise TypeError("not an ECDSA certificate")
            pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
        except (InvalidSignature, TypeError):
            raise AccessDenied(f"certificate of {msp_id} does not verify against the {msp_id} CA") from None
        now = at or dt.datetime.now(dt.UTC)
        if not (cert.not_valid_before_utc <= now <= cert.not_valid_after_utc):
            raise AccessDenied(f"certificate of {msp_id} is expired or not yet valid")
        role = certificate_role(cert)
        if role is None:
            raise AccessDenied(f"certificate of {msp_id} carries no NodeOU role")
        pub = cert.public_key()
        if not isinstance(pub, ec.EllipticCurvePublicKey) or pub.curve.name != "secp256r1":
            raise AccessDenied(f"certificate of {msp_id} does not hold a P-256 key")
        if len(self._validated) > 10_000:
            self._validated.clear()
        self._validated[serialized] = (msp_id, cert, role, pub)
        return msp_id, cert, role

    def verify_signature(
        self, serialized: bytes, data: bytes, signature: bytes, *, at: dt.datetime | None = None
    ) -> tuple[str, str]:
        """Validate the identity and its signature over ``data``; return (msp id, role).
        ``at``: the time the certificate must be valid at (default now; a replay passes the
        block's timestamp)."""
        msp_id, _, role = self.deserialize(serialized, at=at)
        pub = self._validated[serialized][3]
        if not verify(pub, data, signature):
            raise AccessDenied(f"signature of {msp_id} identity does not verify")
        return msp_id, role


@dataclass(frozen=True)
class Organisation:
    name: str  # "Org1"
    msp_id: str  # "Org1MSP"
    domain: str  # "org1.example.com"
    path: Path  # .../peerOrganizations/org1.example.com


_PARSED: Memo[bytes, x509.Certificate] = Memo(1024)  # PEM bytes -> certificate (parsing is pure)
_CHECKED_ENCRYPTION: Memo[tuple[bytes, bytes], x509.Certificate] = Memo(1024)  # (cert, CA) PEM -> checked
_PRIVATE_KEYS: Memo[bytes, ec.EllipticCurvePrivateKey] = Memo(1024)  # PEM bytes -> key


def _pem_certificate(pem: bytes) -> x509.Certificate:
    """The certificate of ``pem``, parsed once per exact bytes."""
    return _PARSED.get_or_make(pem, lambda: x509.load_pem_x509_certificate(pem))


def _pem_private_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


class Consortium:
    """The identity material of a consortium, read from (or generated into) a cryptogen tree."""

    MANIFEST = "consortium.json"

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        try:
            meta = json.loads((self.root / self.MANIFEST).read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no consortium at {self.root} (missing {self.MANIFEST})") from None
        self.base_domain: str = meta["base_domain"]
        self.organisations: tuple[Organisation, ...] = tuple(
            Organisation(o["name"], o["msp_id"], o["domain"], self.root / "peerOrganizations" / o["domain"])
            for o in meta["organisations"]
        )
        self.orderer_domain: str | None = meta.get("orderer_domain")  # None: no orderer organisation

    # ---- generation
    @classmethod
    def generate(
        cls,
        root: str | os.PathLike[str],
        organisations: Iterable[str] = ("Org1", "Org2", "Org3"),
        base_domain: str = "example.com",
        users: int = 1,
        sans: Sequence[str] = ("127.0.0.1", "localhost"),
        hosts: Mapping[str, str] | None = None,
    ) -> Consortium:
        """Write CAs, TLS CAs, peer, admin and user identities (NodeOUs on) for each organisation,
        plus an orderer organisation, in cryptogen's layout. ``hosts``: an address per organisation
        name (and ``"orderer"``) added to the SANs of its TLS certificates (the network's placement)."""
        placed = dict(hosts or {})
        root = Path(root)
        orgs = []
        for name in organisations:
            if not name.isalnum():
                raise ValueError(f"organisation names must be alphanumeric, got {name!r}")
            domain = f"{name.lower()}.{base_domain}"
            generate_org(
                root / "peerOrganizations" / domain,
                domain,
                "peer",
                1,
                users,
                sans_with(sans, placed.get(name)),
            )
            orgs.append({"name": name, "msp_id": f"{name}MSP", "domain": domain})
        generate_org(
            root / "ordererOrganizations" / base_domain,
            base_domain,
            "orderer",
            0,
            0,
            sans_with(sans, placed.get("orderer")),
        )
        manifest = {"base_domain": base_domain, "orderer_domain": base_domain, "organisations": orgs}
        (root / cls.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        return cls(root)

    # ---- lookup
    @property
    def msp_ids(self) -> tuple[str, ...]:
        return tuple(o.msp_id for o in self.organisations)

    def organisation(self, msp_id_or_name: str) -> Organisation:
        for o in self.organisations:
            if msp_id_or_name in (o.msp_id, o.name, o.domain):
                return o
        raise KeyError(f"no organisation {msp_id_or_name!r} in consortium {self.root}")

    def _user_dir(self, org: Organisation, user: str) -> Path:
        return org.path / "users" / f"{user}@{org.domain}"

    def identity(self, org: str, user: str = "User1") -> Identity:
        """A client (``User1``) or admin (``Admin``) signing identity of an organisation."""
        o = self.organisation(org)
        return Identity.from_msp_dir(o.msp_id, self._user_dir(o, user) / "msp")

    def peer_identity(self, org: str, index: int = 0) -> Identity:
        o = self.organisation(org)
        return Identity.from_msp_dir(o.msp_id, o.path / "peers" / f"peer{index}.{o.domain}" / "msp")

    def _orderer_domain(self) -> str:
        if self.orderer_domain is None:
            raise FileNotFoundError(
                f"the consortium at {self.root} has no orderer organisation: each member runs its own orderer"
            )
        return self.orderer_domain

    def orderer_identity(self) -> Identity:
        d = self._orderer_domain()
        return Identity.from_msp_dir(
            "OrdererMSP", self.root / "ordererOrganizations" / d / "orderers" / f"orderer.{d}" / "msp"
        )

    def orderer_certificate(self) -> x509.Certificate:
        """The orderer's signing certificate (public; no private key needed)."""
        d = self._orderer_domain()
        signcerts = self.root / "ordererOrganizations" / d / "orderers" / f"orderer.{d}" / "msp" / "signcerts"
        return x509.load_pem_x509_certificate(next(signcerts.glob("*.pem")).read_bytes())

    def ca_certificate(self, org: str) -> x509.Certificate:
        o = self.organisation(org)
        return _pem_certificate((o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes())

    def encryption_certificate(self, org: str) -> x509.Certificate:
        """The organisation's key-agreement certificate (validated against its CA).

        The files are looked at on every call (a replaced certificate is seen at once: ``read_file``
        reads them again when ``stat`` says they changed); parsing and the CA's signature check are
        done once per exact (certificate, CA) bytes: every sealed message and model needs its
        recipient's certificate."""
        o = self.organisation(org)
        pem = read_file(o.path / "encryption" / "cert.pem")
        ca_pem = read_file(o.path / "ca" / f"ca.{o.domain}-cert.pem")
        known = _CHECKED_ENCRYPTION.get((pem, ca_pem))
        if known is not None:
            return known
        cert = x509.load_pem_x509_certificate(pem)
        pub = _pem_certificate(ca_pem).public_key()
        assert isinstance(pub, ec.EllipticCurvePublicKey)
        try:
            pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise AccessDenied(f"encryption certificate of {o.msp_id} is not signed by its CA") from None
        _CHECKED_ENCRYPTION.remember((pem, ca_pem), cert)
        return cert

    def encryption_certificates(self, orgs: Iterable[str]) -> dict[str, x509.Certificate]:
        """:meth:`encryption_certificate` of each of ``orgs`` (a round's or a model's recipients, in one call)."""
        return {org: self.encryption_certificate(org) for org in orgs}

    def encryption_key(self, org: str) -> ec.EllipticCurvePrivateKey:
        """The organisation's key-agreement private key (only on that organisation's machines)."""
        o = self.organisation(org)
        pem = read_file(o.path / "encryption" / "key.pem")
        key = _PRIVATE_KEYS.get(pem)  # parsed once per exact bytes, as the certificate above
        return key if key is not None else _PRIVATE_KEYS.remember(pem, _pem_private_key(pem))

    def membership(self) -> MembershipService:
        cas = {o.msp_id: self.ca_certificate(o.msp_id) for o in self.organisations}
        d = self.orderer_domain
        if d is not None:
            cas["OrdererMSP"] = x509.load_pem_x509_certificate(
                (self.root / "ordererOrganizations" / d / "ca" / f"ca.{d}-cert.pem").read_bytes()
            )
        return MembershipService(cas)
