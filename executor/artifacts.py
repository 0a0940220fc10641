"""Content-addressed artifact store per organisation (docs/executor.md "Artifact store and messages").

Payloads (states, messages, models) live off chain; the ledger holds their digests. Each
organisation has its own store; bytes are addressed by ``sha256:<hex>`` of what is stored, and
every retrieval re-hashes what it read, so a store cannot hand out altered bytes unnoticed.

Messages are encrypted to their recipient organisation (:func:`ledger.envelope.seal` to its
key-agreement certificate). Two digests describe a message: the *payload digest* (of the
plaintext; what the task signs in its manifest and what the simulator records) and the *stored
digest* (of the sealed bytes; the content address). The seal's associated info binds the
ciphertext to (process, round, sender, recipient, payload digest), so a sealed message cannot be
replayed into another round or attributed to another sender.

*Private* artifacts (an organisation's states and plaintext models) are never stored in the
clear: :meth:`ArtifactStore.put_private` seals them to the owner organisation's own
key-agreement certificate (the same ECIES envelope as messages), under
``<root>/<org>/private/<hex[:2]>/<hex of the plaintext digest>``; only the owner's key opens them
(:meth:`ArtifactStore.get_private`), and the seal's info binds the blob to (owner, plaintext
digest), so a blob cannot be passed off as another artifact. The ledger keeps naming the
plaintext digest (what the task signs), so lineages and bit-identity checks are unchanged.

Every file is written 0600 and every directory of an organisation's store is 0700: nothing in
a store is readable by other users of the machine.

Locations are ``file://`` URLs of a store root (one machine) or, when the store has an
``endpoint``, the ``https://`` address of its organisation's artifact service
(``executor.artifact_service``, mutual TLS; fetched through ``executor.artifact_client``). :func:`store_at` opens the store a location
names, and :func:`fetch_verified` reads a digest from any object with ``get(digest) -> bytes``
(:class:`ArtifactSource`), re-hashing what it returns. This is the one store: the CLI and the
gateway use it too (``api.artifacts`` re-exports it), with one error hierarchy
(``executor.errors.ArtifactError``: :class:`ArtifactNotFound`, :class:`ArtifactCorrupted`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from executor.errors import ArtifactCorrupted, ArtifactNotFound
from ledger.envelope import DecryptionError, seal, unseal
from wire.canonical import is_digest, sha256_digest
from wire.timing import section

__all__ = [
    "ArtifactCorrupted",
    "ArtifactNotFound",
    "ArtifactRef",
    "ArtifactSource",
    "ArtifactStore",
    "MessageRef",
    "fetch_verified",
    "open_message",
    "sha256_digest",
    "store_at",
]


def _hex(digest: str) -> str:
    if not is_digest(digest):
        raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
    return digest[7:]


@runtime_checkable
class ArtifactSource(Protocol):
    """Anything that hands out artifacts by digest (an :class:`ArtifactStore`, a test double)."""

    def get(self, digest: str) -> bytes:
        """The artifact's bytes; raises :class:`ArtifactNotFound` (or a LookupError) if absent."""
        ...


@dataclass(frozen=True)
class ArtifactRef:
    digest: str  # sha256 of the stored bytes (content address)
    size: int
    producer: str  # MSP id of the storing organisation
    location: str  # where it can be fetched


@dataclass(frozen=True)
class MessageRef:
    sender: str
    recipient: str
    payload_digest: str  # sha256 of the plaintext payload (signed in the task manifest)
    stored: ArtifactRef  # the sealed bytes in the sender's store


FILE_MODE = 0o600
DIR_MODE = 0o700


def private_info(owner: str, payload_digest: str) -> bytes:
    """Associated data binding a sealed private artifact to its owner and plaintext digest."""
    return f"consortia-private|{owner}|{payload_digest}".encode()


def write_private_file(path: Path, data: bytes, top: Path) -> None:
    """Write ``data`` to ``path`` atomically, 0600, creating missing directories below ``top`` 0700."""
    write_private_stream(path, lambda f: f.write(data), top)


def write_private_stream(
    path: Path, write: Callable[[BinaryIO], object], top: Path, prefix: str = ".put-"
) -> None:
    """:func:`write_private_file` of whatever ``write`` writes into the (seekable) temporary file;
    if ``write`` raises, nothing is left behind."""
    if path.parent not in _MADE:
        make_private_dirs(path.parent, top)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)  # mkstemp creates 0600
    except FileNotFoundError:  # removed since it was made: make it again
        _MADE.discard(path.parent)
        make_private_dirs(path.parent, top)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(fd, "w+b") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_MADE: set[Path] = set()  # directories this process made (or found) private: not walked again per file


def make_private_dirs(d: Path, top: Path) -> None:
    """``mkdir -p d`` with every directory from ``top`` down to ``d`` at mode 0700."""
    d.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    p = d
    while True:
        if p.stat().st_mode & 0o777 != DIR_MODE:
            p.chmod(DIR_MODE)
        if p == top or p.parent == p or top not in p.parents:
            break
        p = p.parent
    if len(_MADE) > 100_000:
        _MADE.clear()
    _MADE.add(d)


def message_info(process_id: str, round: int, sender: str, recipient: str, payload_digest: str) -> bytes:
    """Associated data binding a sealed message to its place in the protocol."""
    return f"consortia-message|{process_id}|{round}|{sender}|{recipient}|{payload_digest}".encode()


class ArtifactStore:
    """The store of one organisation under ``root/<msp id>/`` (``create``: make its folders now)."""

    def __init__(
        self, root: str | os.PathLike, organisation: str, *, create: bool = True, endpoint: str | None = None
    ):
        if not organisation or "/" in organisation or organisation.startswith("."):
            raise ValueError(f"invalid organisation id {organisation!r}")
        self.root = Path(root)
        self.organisation = organisation
        self.home = self.root / organisation
        self.base = self.home / "sha256"
        self.private = self.home / "private"
        self.endpoint = endpoint  # https://host:port of the organisation's artifact service, if it serves
        self._uri: str | None = None
        if create:
            make_private_dirs(self.base, self.home)

    @classmethod
    def at(cls, directory: str | os.PathLike, *, create: bool = True) -> ArtifactStore:
        """The store whose organisation folder is ``directory`` (``<root>/<msp id>``, e.g.
        ``home.layout.Layout.artifacts(msp)``)."""
        d = Path(directory)
        return cls(d.parent, d.name, create=create)

    @property
    def location(self) -> str:
        """Where the others fetch from: the artifact service's endpoint, else this folder (``file://``)."""
        if self.endpoint:
            return self.endpoint
        if self._uri is None:  # resolved once (a path walk per artifact otherwise)
            self._uri = (self.root / self.organisation).resolve().as_uri()
        return self._uri

    def _path(self, digest: str) -> Path:
        h = _hex(digest)
        return self.base / h[:2] / h

    def put(self, data: bytes) -> ArtifactRef:
        """Store bytes (idempotent: the same bytes land at the same address once)."""
        digest = sha256_digest(data)
        path = self._path(digest)
        if not path.exists():
            write_private_file(path, data, self.home)
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
            raise ArtifactCorrupted(
                f"artifact {digest} in the store of {self.organisation} hashes to {sha256_digest(data)}"
            )
        return data

    def delete(self, digest: str) -> bool:
        """Remove the artifact ``digest`` (e.g. a model ciphertext replaced by a key rotation)."""
        try:
            self._path(digest).unlink()
            return True
        except FileNotFoundError:
            return False

    # ---- private artifacts (states, plaintext models): sealed to the owner organisation
    def private_path(self, payload_digest: str) -> Path:
        h = _hex(payload_digest)
        return self.private / h[:2] / h

    def put_private(
        self, payload: bytes, owner_certificate: x509.Certificate | ec.EllipticCurvePublicKey
    ) -> str:
        """Seal ``payload`` to this organisation's own key-agreement certificate and store it under
        its plaintext digest (idempotent). Returns the plaintext digest."""
        digest = sha256_digest(payload)
        path = self.private_path(digest)
        if not path.exists():
            with section("sealing"):
                sealed = seal(owner_certificate, payload, private_info(self.organisation, digest))
            write_private_file(path, sealed, self.home)
        return digest

    def has_private(self, payload_digest: str) -> bool:
        return self.private_path(payload_digest).exists()

    def get_private(self, payload_digest: str, owner_key: ec.EllipticCurvePrivateKey) -> bytes:
        """Open the private artifact ``payload_digest`` with the owner's key-agreement key.

        Raises ArtifactNotFound if absent, ArtifactCorrupted if the blob was altered or does not
        open to bytes with that digest (DecryptionError if the key is not the owner's)."""
        try:
            sealed = self.private_path(payload_digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(
                f"private artifact {payload_digest} not in the store of {self.organisation}"
            ) from None
        try:
            with section("sealing"):
                payload = unseal(owner_key, sealed, private_info(self.organisation, payload_digest))
        except DecryptionError as exc:
            raise ArtifactCorrupted(
                f"private artifact {payload_digest} of {self.organisation} does not open "
                f"with the key given (altered, or not the owner's key): {exc}"
            ) from None
        if sha256_digest(payload) != payload_digest:
            raise ArtifactCorrupted(
                f"private artifact {payload_digest} of {self.organisation} opens to bytes "
                f"with digest {sha256_digest(payload)}"
            )
        return payload

    @staticmethod
    def fetch(ref: ArtifactRef) -> bytes:
        """Fetch from the producer's store named by ``ref.location``; verified by digest. An
        ``https://`` location is the producer's artifact service (``executor.artifact_client``)."""
        if ref.location.startswith("https://"):
            from executor.artifact_client import source_for  # imports this module: late import

            return fetch_verified(source_for(ref.location, ref.producer), ref.digest)  # type: ignore[arg-type]
        if not ref.location.startswith("file://"):
            raise ArtifactNotFound(f"unsupported artifact location {ref.location!r}")
        root = Path(ref.location[len("file://") :]).parent
        return ArtifactStore(root, ref.producer, create=False).get(ref.digest)

    # ---- messages
    def put_message(
        self,
        payload: bytes,
        *,
        process_id: str,
        round: int,
        recipient: str,
        recipient_certificate: x509.Certificate | ec.EllipticCurvePublicKey,
    ) -> MessageRef:
        """Seal ``payload`` to ``recipient`` and store the sealed bytes."""
        payload_digest = sha256_digest(payload)
        info = message_info(process_id, round, self.organisation, recipient, payload_digest)
        with section("sealing"):
            sealed = seal(recipient_certificate, payload, info)
        return MessageRef(
            sender=self.organisation,
            recipient=recipient,
            payload_digest=payload_digest,
            stored=self.put(sealed),
        )


def open_message(
    ref: MessageRef, *, process_id: str, round: int, recipient: str, recipient_key: ec.EllipticCurvePrivateKey
) -> bytes:
    """Fetch, verify and decrypt a message addressed to ``recipient``.

    Raises ArtifactCorrupted if the stored bytes or the decrypted payload do not match their
    digests, DecryptionError if the key is not the recipient's (or the message was altered or
    moved to another round or sender)."""
    if ref.recipient != recipient:
        raise DecryptionError(
            f"message {ref.payload_digest} is addressed to {ref.recipient}, not {recipient}"
        )
    sealed = ArtifactStore.fetch(ref.stored)
    info = message_info(process_id, round, ref.sender, ref.recipient, ref.payload_digest)
    with section("sealing"):
        payload = unseal(recipient_key, sealed, info)
    if sha256_digest(payload) != ref.payload_digest:
        raise ArtifactCorrupted(
            f"message from {ref.sender} decrypts to bytes with digest "
            f"{sha256_digest(payload)}, not {ref.payload_digest}"
        )
    return payload


def store_at(location: str) -> ArtifactStore | None:
    """The store a ``file://`` location names (as records name it), or None for other schemes."""
    if not location.startswith("file://"):
        return None
    return ArtifactStore.at(location[len("file://") :], create=False)


def fetch_verified(source: ArtifactSource, digest: str) -> bytes:
    """Bytes of ``digest`` from ``source``, re-hashed here (a plugged-in source is never trusted):
    :class:`ArtifactNotFound` if absent (a source's LookupError / FileNotFoundError too),
    :class:`ArtifactCorrupted` if the bytes hash to another digest."""
    _hex(digest)
    try:
        data = source.get(digest)
    except (ArtifactNotFound, ArtifactCorrupted):
        raise
    except (LookupError, FileNotFoundError) as exc:
        raise ArtifactNotFound(f"no artifact {digest}: {exc}") from None
    actual = sha256_digest(data)
    if actual != digest:
        raise ArtifactCorrupted(f"artifact store returned bytes with digest {actual} for {digest}")
    return data
