"""One organisation of a consortium without a centre, on its own host: who it is and where it listens
(:class:`Organisation`, ``organisation.json``) and where its files live in its home
(:class:`OrganisationLayout`). Docs: docs/fabric.md "A consortium without a centre".

Every node of the organisation listens on its own address (``host``) on ports ``port_base + k``::

    +0 orderer            +3 orderer admin (osnadmin, mutual TLS)   +6 orderer operations
    +1 peer (Gateway)     +4 certificate authority (Fabric CA, TLS)  +7 peer operations
    +2 peer chaincode     +5 CA operations                           +8 chaincode service
                                                                     +9 artifact service

The home (``consortia org init --home DIR``)::

    organisation.json        this record (public: names, address, ports)
    crypto/                  its identities in cryptogen's layout (ledger.identity reads it), made by
                             its own Fabric CA; private keys 0600 in 0700 folders
      peerOrganizations/<domain>/{ca,tlsca,msp,peers,orderers,users,encryption,chaincode}/
    ca/                      its Fabric CA server (CA and TLS CA keys, registry) and registrar
    fabric/                  its nodes: config/, data/, logs/, state.json, chaincode/, the channel's
                             blocks and the members' public packages it was given (members/)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from network.config import NetworkError
from network.placement import check_address

ORGANISATION_FILE = "organisation.json"
PORTS = {
    "orderer": 0,
    "peer": 1,
    "peer_chaincode": 2,
    "orderer_admin": 3,
    "ca": 4,
    "ca_operations": 5,
    "orderer_operations": 6,
    "peer_operations": 7,
    "chaincode": 8,
    "artifacts": 9,
}


class OrganisationError(NetworkError):
    """An organisation's home is missing, incomplete, or cannot be made as asked."""


@dataclass(frozen=True)
class Organisation:
    """Who an organisation is and where its nodes listen (``organisation.json``; all public)."""

    name: str  # "Org2"
    host: str  # "127.0.2.1": every node of the organisation listens here
    port_base: int = 7050
    domain: str = ""  # default <name lowercased>.example.com
    users: int = 1  # client identities User1..UserN

    def __post_init__(self) -> None:
        if not self.name.isalnum() or self.name.endswith("MSP"):
            raise OrganisationError(
                f"organisation names are letters and digits without the MSP suffix, got {self.name!r}"
            )
        try:
            check_address(self.host, "--host")
        except ValueError as exc:
            raise OrganisationError(str(exc)) from None
        if not (1024 <= self.port_base <= 65525):
            raise OrganisationError(f"port base {self.port_base} is not between 1024 and 65525")
        if self.users < 1:
            raise OrganisationError("an organisation needs at least one user")
        if not self.domain:
            object.__setattr__(self, "domain", f"{self.name.lower()}.example.com")

    @property
    def msp_id(self) -> str:
        return f"{self.name}MSP"

    def port(self, what: str) -> int:
        """The port of ``what`` (a key of :data:`PORTS`)."""
        return self.port_base + PORTS[what]

    def address(self, what: str) -> str:
        """``host:port`` of ``what``."""
        return f"{self.host}:{self.port(what)}"

    @property
    def peer_name(self) -> str:
        return f"peer0.{self.domain}"

    @property
    def orderer_name(self) -> str:
        return f"orderer0.{self.domain}"

    def user_names(self) -> list[str]:
        return [f"User{u}" for u in range(1, self.users + 1)]

    def endpoints(self) -> dict[str, str]:
        """What the others reach: the public endpoints of the package."""
        return {
            "peer": self.address("peer"),
            "orderer": self.address("orderer"),
            "orderer_admin": self.address("orderer_admin"),
            "ca": f"https://{self.address('ca')}",
            "artifacts": f"https://{self.address('artifacts')}",
        }

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Organisation:
        try:
            return cls(
                name=str(data["name"]),
                host=str(data["host"]),
                port_base=int(str(data.get("port_base", 7050))),
                domain=str(data.get("domain") or ""),
                users=int(str(data.get("users", 1))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OrganisationError(f"not an organisation record: {exc}") from None


class OrganisationLayout:
    """Where an organisation's files live in its home ``root`` (module docstring)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()

    @property
    def record_file(self) -> Path:
        return self.root / ORGANISATION_FILE

    def organisation(self) -> Organisation:
        """The organisation of this home; :class:`OrganisationError` if it has none yet."""
        try:
            data = json.loads(self.record_file.read_text())
        except FileNotFoundError:
            raise OrganisationError(
                f"{self.root} is not an organisation's home (no {ORGANISATION_FILE}): "
                f"run 'consortia org init --org NAME --host ADDRESS --home {self.root}' on its host"
            ) from None
        except ValueError as exc:
            raise OrganisationError(f"{self.record_file} is not JSON: {exc}") from None
        return Organisation.from_json(data)

    # ---- identities (cryptogen's layout, read by ledger.identity)
    @property
    def crypto(self) -> Path:
        return self.root / "crypto"

    def org_dir(self, org: Organisation) -> Path:
        return self.crypto / "peerOrganizations" / org.domain

    def msp_dir(self, org: Organisation) -> Path:
        return self.org_dir(org) / "msp"

    def ca_cert(self, org: Organisation) -> Path:
        return self.org_dir(org) / "ca" / f"ca.{org.domain}-cert.pem"

    def tlsca_cert(self, org: Organisation) -> Path:
        return self.org_dir(org) / "tlsca" / f"tlsca.{org.domain}-cert.pem"

    def peer_dir(self, org: Organisation) -> Path:
        return self.org_dir(org) / "peers" / org.peer_name

    def orderer_dir(self, org: Organisation) -> Path:
        return self.org_dir(org) / "orderers" / org.orderer_name

    def user_dir(self, org: Organisation, user: str) -> Path:
        """``Admin`` or ``User1`` ...: ``users/<user>@<domain>``."""
        return self.org_dir(org) / "users" / f"{user}@{org.domain}"

    def encryption_dir(self, org: Organisation) -> Path:
        return self.org_dir(org) / "encryption"

    def chaincode_tls(self, org: Organisation) -> Path:
        """The chaincode service's server and its peer's client TLS pairs (from its own TLS CA)."""
        return self.org_dir(org) / "chaincode" / "tls"

    # ---- its certificate authority
    @property
    def ca_home(self) -> Path:
        return self.root / "ca"

    @property
    def ca_server(self) -> Path:
        return self.ca_home / "server"

    def registrar(self, ca_name: str) -> Path:
        """The registrar's client home at the CA ``ca_name`` (``ca`` or ``tlsca``)."""
        return self.ca_home / "registrar" / ca_name

    @property
    def crl(self) -> Path:
        """The CA's last certificate revocation list (``consortia org revoke``), public."""
        return self.ca_home / "crl.pem"

    # ---- its nodes
    @property
    def fabric(self) -> Path:
        return self.root / "fabric"

    @property
    def members(self) -> Path:
        """The members' public packages this organisation was given (``<MSP>.json``)."""
        return self.fabric / "members"

    def block(self, channel: str) -> Path:
        return self.fabric / "channel" / f"{channel}.block"


def private_dir(path: Path) -> Path:
    """``path`` made (with its parents) and set to 0700."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    """``data`` written to ``path`` with mode 0600 from the start (its folder 0700)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    path.chmod(0o600)


def write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
