"""The message index: where a sender's sealed message for one recipient lies in the sender's store
(docs/executor.md "Artifact store and messages").

A message is stored content-addressed (sealed to its recipient) in the sender's store; the ledger
records only the digest of its plaintext. The index entry, one small file per (process, round,
recipient) in the sender's store, names the stored bytes::

    <store root>/<sender>/messages/<process id, '/' -> '_'>/<round:06d>/<recipient>.json
    {"payload_digest": "sha256:...", "stored": {digest, size, producer, location}}

The node agent writes it when it publishes a round's outputs (:func:`write_entry`) and reads it
to gather a round's inputs (:func:`locate`); lineage verification reads it too (:func:`read_entry`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from executor.artifacts import ArtifactRef, MessageRef, write_private_file
from executor.errors import ExecutorError


def entry_path(store_root: str | Path, sender: str, process_id: str, rnd: int, recipient: str) -> Path:
    """The index file of ``sender``'s message to ``recipient`` in round ``rnd`` of ``process_id``."""
    return (
        Path(store_root)
        / sender
        / "messages"
        / process_id.replace("/", "_")
        / f"{rnd:06d}"
        / f"{recipient}.json"
    )


def write_entry(store_root: str | Path, process_id: str, rnd: int, ref: MessageRef) -> None:
    """Index ``ref`` (stored in its sender's store) for its recipient (0600, atomic)."""
    write_private_file(
        entry_path(store_root, ref.sender, process_id, rnd, ref.recipient),
        json.dumps(
            {"payload_digest": ref.payload_digest, "stored": ref.stored.__dict__}, sort_keys=True
        ).encode(),
        Path(store_root) / ref.sender,
    )


def read_entry(
    store_root: str | Path, sender: str, process_id: str, rnd: int, recipient: str
) -> dict[str, Any] | None:
    """The raw index entry, or None if the sender's store has none."""
    try:
        return json.loads(entry_path(store_root, sender, process_id, rnd, recipient).read_text())
    except FileNotFoundError:
        return None


def locate(
    store_root: str | Path,
    sender: str,
    process_id: str,
    rnd: int,
    recipient: str,
    payload_digest: str,
    entry: dict[str, Any] | None = None,
) -> MessageRef:
    """The stored message the ledger names (``payload_digest``); :class:`ExecutorError` if the sender's
    store does not index it, or indexes another message. ``entry``: the index entry if already read."""
    if entry is None:
        entry = read_entry(store_root, sender, process_id, rnd, recipient)
    if entry is None:
        raise ExecutorError(f"message of {sender} for round {rnd} is not in its store")
    if entry.get("payload_digest") != payload_digest:
        raise ExecutorError(
            f"store of {sender} indexes message {entry.get('payload_digest')}, "
            f"the ledger names {payload_digest}"
        )
    return MessageRef(sender, recipient, payload_digest, ArtifactRef(**entry["stored"]))
