"""Content-addressed artifact store per organisation (DESIGN.md "Artifact reference").

Payloads (states, messages, models) live off chain; the ledger holds their digests. Each
organisation has its own store; bytes are addressed by ``sha256:<hex>`` of what is stored, and
every retrieval re-hashes what it read, so a store cannot hand out altered bytes unnoticed.

Messages are encrypted to their recipient organisation (:func:`ledger.envelope.seal` to its
key-agreement certificate). Two digests describe a message: the *payload digest* (of the
plaintext; what the task signs in its manifest and what the simulator records) and the *stored
digest* (of the sealed bytes; the content address). The seal's associated info binds the
ciphertext to (process, round, sender, recipient, payload digest), so a sealed message cannot be
replayed into another round or attributed to another sender.

Locations are ``file://`` URLs of a store root (one machine); a remote store would serve the
same ``<root>/<org>/sha256/<hex>`` layout over HTTP.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from executor.errors import ArtifactCorrupted, ArtifactNotFound
from ledger.envelope import DecryptionError, seal, unseal


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hex(digest: str) -> str:
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise ValueError(f"not a sha256 digest: {digest!r}")
    h = digest[7:]
    int(h, 16)
    return h


@dataclass(frozen=True)
class ArtifactRef:
    digest: str        # sha256 of the stored bytes (content address)
    size: int
    producer: str      # MSP id of the storing organisation
    location: str      # where it can be fetched


@dataclass(frozen=True)
class MessageRef:
    sender: str
    recipient: str
    payload_digest: str    # sha256 of the plaintext payload (signed in the task manifest)
    stored: ArtifactRef    # the sealed bytes in the sender's store


def message_info(process_id: str, round: int, sender: str, recipient: str, payload_digest: str) -> bytes:
    """Associated data binding a sealed message to its place in the protocol."""
    return f"consortia-message|{process_id}|{round}|{sender}|{recipient}|{payload_digest}".encode()


class ArtifactStore:
    """The store of one organisation under ``root/<msp id>/``."""

    def __init__(self, root: str | os.PathLike, organisation: str):
        if not organisation or "/" in organisation or organisation.startswith("."):
            raise ValueError(f"invalid organisation id {organisation!r}")
        self.root = Path(root)
        self.organisation = organisation
        self.base = self.root / organisation / "sha256"
        self.base.mkdir(parents=True, exist_ok=True)

    @property
    def location(self) -> str:
        return (self.root / self.organisation).resolve().as_uri()

    def _path(self, digest: str) -> Path:
        h = _hex(digest)
        return self.base / h[:2] / h

    def put(self, data: bytes) -> ArtifactRef:
        """Store bytes (idempotent: the same bytes land at the same address once)."""
        digest = sha256_digest(data)
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o444)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        return ArtifactRef(digest=digest, size=len(data), producer=self.organisation, location=self.location)

    def has(self, digest: str) -> bool:
        return self._path(digest).exists()

    def get(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, verified against it."""
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(f"artifact {digest} not in the store of {self.organisation}") from None
        if sha256_digest(data) != digest:
            raise ArtifactCorrupted(f"artifact {digest} in the store of {self.organisation} "
                                    f"hashes to {sha256_digest(data)}")
        return data

    @staticmethod
    def fetch(ref: ArtifactRef) -> bytes:
        """Fetch from the producer's store named by ``ref.location``; verified by digest."""
        if not ref.location.startswith("file://"):
            raise ArtifactNotFound(f"unsupported artifact location {ref.location!r}")
        root = Path(ref.location[len("file://"):]).parent
        return ArtifactStore(root, ref.producer).get(ref.digest)

    # ---- messages
    def put_message(self, payload: bytes, *, process_id: str, round: int, recipient: str,
                    recipient_certificate: x509.Certificate | ec.EllipticCurvePublicKey) -> MessageRef:
        """Seal ``payload`` to ``recipient`` and store the sealed bytes."""
        payload_digest = sha256_digest(payload)
        info = message_info(process_id, round, self.organisation, recipient, payload_digest)
        sealed = seal(recipient_certificate, payload, info)
        return MessageRef(sender=self.organisation, recipient=recipient,
                          payload_digest=payload_digest, stored=self.put(sealed))


def open_message(ref: MessageRef, *, process_id: str, round: int, recipient: str,
                 recipient_key: ec.EllipticCurvePrivateKey) -> bytes:
    """Fetch, verify and decrypt a message addressed to ``recipient``.

    Raises ArtifactCorrupted if the stored bytes or the decrypted payload do not match their
    digests, DecryptionError if the key is not the recipient's (or the message was altered or
    moved to another round or sender)."""
    if ref.recipient != recipient:
        raise DecryptionError(f"message {ref.payload_digest} is addressed to {ref.recipient}, not {recipient}")
    sealed = ArtifactStore.fetch(ref.stored)
    info = message_info(process_id, round, ref.sender, ref.recipient, ref.payload_digest)
    payload = unseal(recipient_key, sealed, info)
    if sha256_digest(payload) != ref.payload_digest:
        raise ArtifactCorrupted(f"message from {ref.sender} decrypts to bytes with digest "
                                f"{sha256_digest(payload)}, not {ref.payload_digest}")
    return payload
