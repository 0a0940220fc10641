"""Signed checkpoints of a chain head: the anchor that makes truncation detectable.

A hash chain proves that no block was changed or removed *between* two blocks, but not that the
chain was not cut short: deleting the last blocks (and their derived rows) leaves a shorter
chain that verifies. A checkpoint records, at some moment, the head of the chain -- its block
number and header hash -- signed by a consortium identity (the orderer, or an organisation's
admin or client). Whoever keeps it outside the ledger file (an organisation's exported
checkpoint file, every audit bundle, every attestation) can later check that the chain still
reaches that block with that header hash (:mod:`audit.checkpoints`). This module makes, signs,
reads and writes checkpoints.

Wire format (canonical JSON, one object; a checkpoint file may hold one object, a JSON list, or
JSON lines)::

    {"format": "consortia-checkpoint/1", "channel", "block_number", "header_hash", "created",
     "signer": base64(SerializedIdentity), "signature": base64(ECDSA P-256 over the canonical
     JSON of every other field)}

Works on both hosts: only ``Ledger.block_height`` and ``Ledger.block`` are used.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chaincode.canonical import canonical_json
from ledger.errors import CheckpointInvalid
from ledger.identity import Identity, parse_serialized_identity
from ledger.interface import Ledger
from wire import bounded_json
from wire.bounded_json import JSONTooDeep

FORMAT = "consortia-checkpoint/1"
MEDIA_TYPE = "application/vnd.consortia.checkpoint+json"
_HASH = re.compile(r"[0-9a-f]{64}")
_FIELDS = {"format", "channel", "block_number", "header_hash", "created", "signer", "signature"}
MAX_CHECKPOINT_DEPTH = 2  #: a checkpoint file: a list of flat objects


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    channel: str
    block_number: int
    header_hash: str  # hex header hash of block ``block_number`` (the head when signed)
    created: float  # unix time of signing
    signer: bytes  # SerializedIdentity of the signer
    signature: bytes

    def signed_bytes(self) -> bytes:
        return canonical_json(
            {
                "format": FORMAT,
                "channel": self.channel,
                "block_number": self.block_number,
                "header_hash": self.header_hash,
                "created": self.created,
                "signer": base64.b64encode(self.signer).decode("ascii"),
            }
        )

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(self.signed_bytes())
        obj["signature"] = base64.b64encode(self.signature).decode("ascii")
        return obj

    @property
    def signer_msp_id(self) -> str:
        return parse_serialized_identity(self.signer)[0]

    @property
    def signer_certificate_pem(self) -> bytes:
        return parse_serialized_identity(self.signer)[1]

    @classmethod
    def from_json(cls, obj: Any) -> Checkpoint:
        if not isinstance(obj, dict) or set(obj) != _FIELDS or obj.get("format") != FORMAT:
            raise CheckpointInvalid(
                f"not a {FORMAT} checkpoint (fields {sorted(obj) if isinstance(obj, dict) else obj!r})"
            )
        n, h, ch, created = obj["block_number"], obj["header_hash"], obj["channel"], obj["created"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise CheckpointInvalid(f"checkpoint block_number must be a non-negative integer, not {n!r}")
        if not isinstance(h, str) or not _HASH.fullmatch(h):
            raise CheckpointInvalid("checkpoint header_hash must be 64 lowercase hex digits")
        if not isinstance(ch, str) or not ch:
            raise CheckpointInvalid("checkpoint channel must be a non-empty string")
        if not isinstance(created, (int, float)) or isinstance(created, bool) or not 0 <= created < 1e11:
            raise CheckpointInvalid("checkpoint created must be a unix time")
        try:
            signer = base64.b64decode(obj["signer"], validate=True)
            signature = base64.b64decode(obj["signature"], validate=True)
            parse_serialized_identity(signer)
        except (binascii.Error, ValueError, TypeError):
            raise CheckpointInvalid(
                "checkpoint signer or signature is not valid base64 / a SerializedIdentity"
            ) from None
        return cls(ch, n, h, created, signer, signature)


def sign_checkpoint(
    identity: Identity, channel: str, block_number: int, header_hash: str, created: float | None = None
) -> Checkpoint:
    unsigned = Checkpoint(
        channel,
        block_number,
        header_hash,
        time.time() if created is None else created,
        identity.serialized(),
        b"",
    )
    return dataclasses.replace(unsigned, signature=identity.sign(unsigned.signed_bytes()))


def checkpoint_of(ledger: Ledger, identity: Identity) -> Checkpoint:
    """A checkpoint of ``ledger``'s current head, signed by ``identity`` (either host)."""
    height = ledger.block_height(identity)
    head = ledger.block(identity, height - 1)
    return sign_checkpoint(identity, ledger.channel, head.number, head.header_hash)


# ---------------------------------------------------------------------------------- files


def load_checkpoints(path: str | os.PathLike[str]) -> list[Checkpoint]:
    """Every checkpoint in a file: one JSON object, a JSON list, or one object per line."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        obj = bounded_json.loads(text, f"checkpoint file {path}", MAX_CHECKPOINT_DEPTH)
        items: Iterable[Any] = obj if isinstance(obj, list) else [obj]
    except JSONTooDeep as exc:
        raise CheckpointInvalid(str(exc)) from None
    except ValueError:
        try:
            items = [
                bounded_json.loads(line, f"checkpoint file {path}", MAX_CHECKPOINT_DEPTH)
                for line in text.splitlines()
                if line.strip()
            ]
        except JSONTooDeep as exc:
            raise CheckpointInvalid(str(exc)) from None
        except ValueError:
            raise CheckpointInvalid(f"{path} is not a checkpoint file (JSON object, list or lines)") from None
    out = [Checkpoint.from_json(i) for i in items]
    if not out:
        raise CheckpointInvalid(f"{path} holds no checkpoint")
    return out


def append_checkpoint(path: str | os.PathLike[str], cp: Checkpoint) -> None:
    """Append one checkpoint as a JSON line (the file an organisation keeps outside the ledger)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("ab") as fh:
        fh.write(canonical_json(cp.to_json()) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
