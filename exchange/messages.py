"""The message index: where a sender's sealed message for one recipient lies in the sender's own store
(docs/executor.md "Artifact store and messages").

A message is stored content-addressed (sealed to its recipient) in the sender's store; the ledger records
only the digest of its plaintext. The index entry, one small file per (process, round, recipient) in the
sender's store, names the stored bytes::

    <store root>/<sender>/messages/<process id, '/' -> '_'>/<round:06d>/<recipient>.json
    {"payload_digest": "sha256:...", "stored": {digest, size, producer, location}}

The sender's node writes it when it publishes a round's outputs (:func:`write_entry`); the sender's
service reads it to answer the recipient (``GET /messages/...``, :mod:`exchange.service`); an auditor
holding the stores reads it too (:func:`locate`). Every function takes the sender's own store: an entry is
never read from another organisation's store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exchange.errors import ArtifactCorrupted, ArtifactNotFound
from exchange.files import write_private_file
from exchange.store import ArtifactRef, ArtifactStore, MessageRef


def entry_path(store: ArtifactStore, process_id: str, rnd: int, recipient: str) -> Path:
    """The index file of ``store``'s organisation's message to ``recipient`` in round ``rnd``."""
    return store.home / "messages" / process_id.replace("/", "_") / f"{rnd:06d}" / f"{recipient}.json"


def write_entry(store: ArtifactStore, process_id: str, rnd: int, ref: MessageRef) -> None:
    """Index ``ref`` (a message ``store``'s organisation sent) for its recipient (0600, atomic)."""
    if ref.sender != store.organisation:
        raise ValueError(f"a message of {ref.sender} is not indexed in the store of {store.organisation}")
    entry = {"payload_digest": ref.payload_digest, "stored": ref.stored.__dict__}
    write_private_file(
        entry_path(store, process_id, rnd, ref.recipient),
        json.dumps(entry, sort_keys=True).encode(),
        store.home,
    )


def read_entry(store: ArtifactStore, process_id: str, rnd: int, recipient: str) -> dict[str, Any] | None:
    """The raw index entry, or None if ``store`` has none."""
    try:
        entry = json.loads(entry_path(store, process_id, rnd, recipient).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        raise ArtifactCorrupted(
            f"the message index of {store.organisation} for round {rnd} and {recipient} is not JSON"
        ) from None
    if not isinstance(entry, dict):
        raise ArtifactCorrupted(f"the message index of {store.organisation} for round {rnd} is not an object")
    return entry


def locate(
    store: ArtifactStore,
    process_id: str,
    rnd: int,
    recipient: str,
    payload_digest: str,
    entry: dict[str, Any] | None = None,
) -> MessageRef:
    """The stored message the ledger names (``payload_digest``) that ``store``'s organisation sent to
    ``recipient``: :class:`ArtifactNotFound` if its store does not index it, :class:`ArtifactCorrupted`
    if it indexes another message. ``entry``: the index entry if already read."""
    if entry is None:
        entry = read_entry(store, process_id, rnd, recipient)
    if entry is None:
        raise ArtifactNotFound(f"message of {store.organisation} for round {rnd} is not in its store")
    if entry.get("payload_digest") != payload_digest:
        raise ArtifactCorrupted(
            f"store of {store.organisation} indexes message {entry.get('payload_digest')}, "
            f"the ledger names {payload_digest}"
        )
    try:
        stored = ArtifactRef(**entry["stored"])
    except (KeyError, TypeError):
        raise ArtifactCorrupted(f"the index entry of {store.organisation} names no stored artifact") from None
    return MessageRef(store.organisation, recipient, payload_digest, stored)
