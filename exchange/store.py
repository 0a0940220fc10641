"""Content-addressed artifact store per organisation (docs/executor.md "Artifact store and messages").

Payloads (states, messages, models) live off chain; the ledger holds their digests. Each organisation has
its own store under ``<root>/<msp id>/``; bytes are addressed by ``sha256:<hex>`` of what is stored, and
every retrieval re-hashes what it read, so a store cannot hand out altered bytes unnoticed. Every file is
written 0600 and every directory 0700 (:mod:`exchange.files`).

Messages are sealed to their recipient organisation (:func:`exchange.sealing.seal` to its key-agreement
certificate). Two digests describe a message: the *payload digest* (of the plaintext; what the task signs
in its manifest and what the simulator records) and the *stored digest* (of the sealed bytes; the content
address). The seal's info binds the ciphertext to (process, round, sender, recipient, payload digest), so
a sealed message cannot be replayed into another round or attributed to another sender.

*Private* artifacts (an organisation's states and plaintext models) are never stored in the clear:
:meth:`ArtifactStore.put_private` seals them to the owner organisation's own key-agreement certificate,
under ``<root>/<org>/private/<hex[:2]>/<hex of the plaintext digest>``; only the owner's key opens them
(:meth:`ArtifactStore.get_private`), and the seal's info binds the blob to (owner, plaintext digest). The
ledger keeps naming the plaintext digest (what the task signs), so lineages and bit-identity checks hold.

A store only ever opens its own organisation's files. Another organisation's artifacts come from that
organisation's service, found by the :class:`exchange.locations.Locations` the store was built with
(:meth:`ArtifactStore.fetch`, :meth:`ArtifactStore.fetch_into`, :meth:`ArtifactStore.receive_message`);
the ``location`` a reference carries is informative only and is never opened. :func:`fetch_verified`
reads a digest from any object with ``get(digest) -> bytes`` (:class:`ArtifactSource`), re-hashing it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives.asymmetric import ec

from exchange.errors import (
    ArtifactCorrupted,
    ArtifactNotFound,
    ArtifactTooLarge,
    DecryptionError,
    LocationUnknown,
)
from exchange.files import make_private_dirs, write_private_file
from exchange.locations import Locations, Peer
from exchange.sealing import MAX_SEAL_OVERHEAD, Recipient, seal, unseal
from wire.canonical import is_digest, sha256_digest


def _hex(digest: str) -> str:
    if not is_digest(digest):
        raise ValueError(f"{digest!r} is not a digest sha256:<64 hex>")
    return digest[7:]


def _file(folder: Path, digest: str) -> Path:
    """Where the artifact ``digest`` lies under ``folder``: ``digest`` is ``sha256:<64 hex>``, checked
    by :func:`_hex` when it comes from a caller, or computed here by :func:`sha256_digest`."""
    return folder / digest[7:9] / digest[7:]


@runtime_checkable
class ArtifactSource(Protocol):
    """Anything that hands out artifacts by digest (an :class:`ArtifactStore`, a peer, a test double)."""

    def get(self, digest: str) -> bytes:
        """The artifact's bytes; raises :class:`ArtifactNotFound` (or a LookupError) if absent."""
        ...


@dataclass(frozen=True)
class ArtifactRef:
    digest: str  # sha256 of the stored bytes (content address)
    size: int
    producer: str  # MSP id of the storing organisation
    location: str  # the producer's artifact endpoint when it serves one (informative; never opened)


@dataclass(frozen=True)
class MessageRef:
    sender: str
    recipient: str
    payload_digest: str  # sha256 of the plaintext payload (signed in the task manifest)
    stored: ArtifactRef  # the sealed bytes in the sender's store


def private_info(owner: str, payload_digest: str) -> bytes:
    """Associated data binding a sealed private artifact to its owner and plaintext digest."""
    return f"consortia-private|{owner}|{payload_digest}".encode()


def message_info(process_id: str, round: int, sender: str, recipient: str, payload_digest: str) -> bytes:
    """Associated data binding a sealed message to its place in the protocol."""
    return f"consortia-message|{process_id}|{round}|{sender}|{recipient}|{payload_digest}".encode()


class ArtifactStore:
    """The store of one organisation under ``root/<msp id>/`` (``create``: make its folders now).

    ``endpoint``: the ``https://`` address of the organisation's artifact service, if it serves (its
    :attr:`location`); ``locations``: how it reaches the other organisations' services (None: it reads
    its own artifacts only). Its sealing and unsealing report into :mod:`wire.timing` (``sealing``, timed
    by :mod:`exchange.sealing` itself)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        organisation: str,
        *,
        create: bool = True,
        endpoint: str | None = None,
        locations: Locations | None = None,
    ):
        if not organisation or "/" in organisation or organisation.startswith("."):
            raise ValueError(f"invalid organisation id {organisation!r}")
        self.root = Path(root)
        self.organisation = organisation
        self.home = self.root / organisation
        self.base = self.home / "sha256"
        self.private = self.home / "private"
        self.endpoint = endpoint
        self.locations = locations
        if create:
            make_private_dirs(self.base, self.home)

    @classmethod
    def at(
        cls, directory: str | os.PathLike[str], *, create: bool = True, locations: Locations | None = None
    ) -> ArtifactStore:
        """The store whose organisation folder is ``directory`` (``<root>/<msp id>``)."""
        d = Path(directory)
        return cls(d.parent, d.name, create=create, locations=locations)

    @property
    def location(self) -> str:
        """Where the others fetch from: the artifact service's endpoint ("" when it serves none)."""
        return self.endpoint or ""

    def path(self, digest: str) -> Path:
        """Where the artifact ``digest`` lies in this store."""
        _hex(digest)
        return _file(self.base, digest)

    def put(self, data: bytes) -> ArtifactRef:
        """Store bytes (idempotent: the same bytes land at the same address once)."""
        digest = sha256_digest(data)
        path = _file(self.base, digest)
        if not path.exists():
            write_private_file(path, data, self.home)
        return ArtifactRef(digest=digest, size=len(data), producer=self.organisation, location=self.location)

    def has(self, digest: str) -> bool:
        return self.path(digest).exists()

    def get(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, verified against it."""
        try:
            data = self.path(digest).read_bytes()
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
            self.path(digest).unlink()
            return True
        except FileNotFoundError:
            return False

    # ---- private artifacts (states, plaintext models): sealed to the owner organisation
    def private_path(self, payload_digest: str) -> Path:
        _hex(payload_digest)
        return _file(self.private, payload_digest)

    def put_private(self, payload: bytes, owner_certificate: Recipient) -> str:
        """Seal ``payload`` to this organisation's own key-agreement certificate and store it under
        its plaintext digest (idempotent). Returns the plaintext digest."""
        digest = sha256_digest(payload)
        path = _file(self.private, digest)
        if not path.exists():
            sealed = seal(owner_certificate, payload, private_info(self.organisation, digest))
            write_private_file(path, sealed, self.home)
        return digest

    def has_private(self, payload_digest: str) -> bool:
        return self.private_path(payload_digest).exists()

    def get_private(self, payload_digest: str, owner_key: ec.EllipticCurvePrivateKey) -> bytes:
        """Open the private artifact ``payload_digest`` with the owner's key-agreement key.

        :class:`ArtifactNotFound` if absent, :class:`ArtifactCorrupted` if the blob was altered, does not
        open with that key (not the owner's), or opens to bytes with another digest."""
        try:
            sealed = self.private_path(payload_digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(
                f"private artifact {payload_digest} not in the store of {self.organisation}"
            ) from None
        try:
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

    # ---- another organisation's artifacts: through its service, never its files
    def close(self) -> None:
        """Close the connections kept alive to the other organisations' services."""
        if self.locations is not None:
            self.locations.close()

    def _locations(self, owner: str) -> Locations:
        if self.locations is None:
            raise LocationUnknown(
                f"the store of {self.organisation} was given no locations: it cannot reach {owner}"
            )
        return self.locations

    def _peer(self, owner: str) -> Peer:
        return self._locations(owner).peer(owner)

    def fetch(self, owner: str, digest: str) -> bytes:
        """The bytes of ``digest`` held by ``owner``: from this store if it is ours or was fetched
        before, else from ``owner``'s service (verified; held in memory)."""
        if owner == self.organisation or self.has(digest):
            return self.get(digest)
        return fetch_verified(self._peer(owner), digest)

    def fetch_into(self, owner: str, digest: str, size: int | None = None) -> Path:
        """``owner``'s artifact ``digest`` streamed into this store (bounded memory; verified before it
        lands) unless it is here already (re-hashed whenever it is read); its path. ``size``: the
        bytes it has, as a signed record says (more is :class:`ArtifactTooLarge`, nothing kept)."""
        if self.has(digest):
            return self.path(digest)
        if owner == self.organisation:
            raise ArtifactNotFound(f"artifact {digest} not in the store of {self.organisation}")
        return self._peer(owner).fetch_to(digest, self.path(digest), self.home, size)

    # ---- messages
    def put_message(
        self,
        payload: bytes,
        *,
        process_id: str,
        round: int,
        recipient: str,
        recipient_certificate: Recipient,
    ) -> MessageRef:
        """Seal ``payload`` to ``recipient`` and store the sealed bytes."""
        payload_digest = sha256_digest(payload)
        info = message_info(process_id, round, self.organisation, recipient, payload_digest)
        sealed = seal(recipient_certificate, payload, info)
        return MessageRef(
            sender=self.organisation,
            recipient=recipient,
            payload_digest=payload_digest,
            stored=self.put(sealed),
        )

    def receive_message(
        self,
        sender: str,
        *,
        process_id: str,
        round: int,
        payload_digest: str,
        recipient_key: ec.EllipticCurvePrivateKey,
        payload_size: int | None = None,
        max_bytes: int | None = None,
    ) -> bytes:
        """The payload of ``sender``'s message to this organisation in ``round`` whose digest the ledger
        names (``payload_digest``, signed by the sender's task; ``payload_size``, its size in the same
        signed record, if known): the sender's service says where it lies (its message index, naming the
        stored digest and size), hands out the sealed bytes -- at most the size the entry names, itself
        at most ``payload_size`` + :data:`exchange.sealing.MAX_SEAL_OVERHEAD` -- (verified against the
        stored digest), and they are opened with ``recipient_key``. A sender out of reach is waited for
        (:meth:`exchange.locations.Locations.reach`).

        ``max_bytes``: the most sealed bytes this recipient takes (what the image declares): a message
        indexed larger is refused before anything is fetched.

        :class:`ArtifactCorrupted` if the sender indexes another message, or the bytes do not match
        their digests; :class:`ArtifactTooLarge` if it serves more than its entry names (or the entry
        more than the signed size allows, or more than this node fetches at all); :class:`DecryptionError`
        if they do not open."""

        def ask(peer: Peer) -> tuple[str, bytes]:
            entry = peer.message_entry(process_id, round, self.organisation)
            if entry.get("payload_digest") != payload_digest:
                raise ArtifactCorrupted(
                    f"{sender} indexes message {entry.get('payload_digest')}, the ledger names {payload_digest}"
                )
            try:
                stored, size = str(entry["stored"]["digest"]), entry["stored"]["size"]
            except (KeyError, TypeError):
                raise ArtifactCorrupted(f"{sender}'s index entry names no stored digest and size") from None
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ArtifactCorrupted(f"{sender}'s index entry names no valid size for {stored}: {size!r}")
            if payload_size is not None and size > payload_size + MAX_SEAL_OVERHEAD:
                raise ArtifactTooLarge(
                    sender,
                    stored,
                    payload_size + MAX_SEAL_OVERHEAD,
                    size,
                    "a sealed message of the signed size has",
                )
            if max_bytes is not None and size > max_bytes:
                raise ArtifactTooLarge(sender, stored, max_bytes, size, "its image declares for a message")
            return stored, peer.get(stored, size)

        stored, sealed = self._locations(sender).reach(sender, ask)
        ref = MessageRef(
            sender, self.organisation, payload_digest, ArtifactRef(stored, len(sealed), sender, "")
        )
        return open_sealed_message(
            sealed, ref, process_id=process_id, round=round, recipient_key=recipient_key
        )


def open_sealed_message(
    sealed: bytes,
    ref: MessageRef,
    *,
    process_id: str,
    round: int,
    recipient_key: ec.EllipticCurvePrivateKey,
) -> bytes:
    """The payload of the sealed message ``ref`` (its sealed bytes ``sealed``), opened with the
    recipient's key: :class:`DecryptionError` if the key is not the recipient's or the message was altered
    or moved to another round or sender; :class:`ArtifactCorrupted` if it opens to bytes whose digest is
    not ``ref.payload_digest``."""
    info = message_info(process_id, round, ref.sender, ref.recipient, ref.payload_digest)
    payload = unseal(recipient_key, sealed, info)
    if sha256_digest(payload) != ref.payload_digest:
        raise ArtifactCorrupted(
            f"message from {ref.sender} decrypts to bytes with digest "
            f"{sha256_digest(payload)}, not {ref.payload_digest}"
        )
    return payload


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
